#!/usr/bin/env bash
# Runs the libFuzzer target of the trace reader: tests/fuzz/run.sh BUILD SECONDS [FLAGS...]
# (extra libFuzzer flags, e.g. -max_len=4096 -jobs=2, override the defaults below)
# The corpus (build/fuzz/corpus-reader) is seeded with the reference traces (v2 and v3) and
# tests/fuzz/seeds/ (small traces: a v3 one with two domains); findings go to
# BUILD/fuzz/artifacts/. Exit status 0 = no finding.
set -u
BUILD=${1:-build}
SECONDS_TO_RUN=${2:-600}
shift 2 2>/dev/null || shift $#
cd "$(dirname "$0")/../.." || exit 2
FUZZER=${FUZZER:-$BUILD/fuzz/fuzz_reader}  # FUZZER=path runs another build of it
if [ ! -x "$FUZZER" ]; then
	echo "run.sh: $FUZZER is not built (make $FUZZER)" >&2
	exit 2
fi
CORPUS=$BUILD/fuzz/corpus-reader
ARTIFACTS=$BUILD/fuzz/artifacts/
mkdir -p "$CORPUS" "$ARTIFACTS"
cp -n tests/data/memtrace/*.ctf tests/data/memtrace/v3/*.ctf tests/data/memtrace/malformed/*.ctf \
	tests/fuzz/regressions/*.ctf tests/fuzz/seeds/*.ctf \
	"$CORPUS"/ 2>/dev/null
# 64 KiB inputs hold several packets of the small reference traces; larger seeds are still
# used, cut to that size. -timeout catches hangs, -rss_limit_mb runaway memory.
exec "$FUZZER" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$ARTIFACTS" "$@" "$CORPUS"
