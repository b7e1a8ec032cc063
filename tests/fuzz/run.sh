#!/usr/bin/env bash
# Runs the libFuzzer targets one after the other: tests/fuzz/run.sh BUILD SECONDS [FLAGS...]
# SECONDS per target; extra libFuzzer flags (e.g. -jobs=2) override the defaults below;
# FUZZ_TARGETS="elf unwind" runs only those (default: every BUILD/fuzz/fuzz_X).
#   reader      the trace reader; seeds: the reference traces
#   elf         the target's ELF files: allocator discovery, ld.so's search, probe sites;
#               seeds: the test workloads, without their DWARF (it is not read there)
#   unwind      a stack copy unwound against tests/targets/stacks_deep; seed: a real sample
#   unwind_elf  the same with the object in the input (its .eh_frame, DWARF, symbols fuzzed)
#   maps        the target's /proc/PID/maps and a JIT's perf map as the unwinder reads them;
#               seed: a node-like maps text with a perf map (tests/fuzz/regressions/maps/)
#   protocol    the daemon's checks of the parser's replies (PR_LOCS, PR_UNWIND); seeds: kept
#               well-formed replies (tests/fuzz/regressions/protocol/)
# Every target also starts from its kept findings (tests/fuzz/regressions/X/). Corpora go to
# BUILD/fuzz/corpus-X, findings to BUILD/fuzz/artifacts/X-*, logs to BUILD/fuzz/X.log.
# Prints one line per target (executions, coverage, finding or not); exit status 0 = no finding.
set -u
BUILD=${1:-build}
SECONDS_TO_RUN=${2:-600}
shift 2 2>/dev/null || shift $#
cd "$(dirname "$0")/../.." || exit 2
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0

seed() {
	local name=$1 corpus=$2
	mkdir -p "$corpus"
	cp -n tests/fuzz/regressions/"$name"/* "$corpus"/ 2>/dev/null
	case $name in
	reader)
		cp -n tests/data/memtrace/*.ctf tests/data/memtrace/v3/*.ctf tests/data/memtrace/malformed/*.ctf \
			tests/fuzz/regressions/*.ctf tests/fuzz/seeds/*.ctf "$corpus"/ 2>/dev/null ;;
	elf)
		for t in "$BUILD"/tests/targets/*; do
			[ -f "$corpus/$(basename "$t")" ] ||
				objcopy --strip-debug "$t" "$corpus/$(basename "$t")" 2>/dev/null
		done ;;
	unwind|unwind_elf)
		local sample=$BUILD/fuzz/stacks_deep.sample
		[ -s "$sample" ] || "$BUILD"/tests/unit/test_unwind_object --write-seed "$sample" >/dev/null ||
			echo "run.sh: could not capture a sample of stacks_deep (seeds without it)" >&2
		if [ "$name" = unwind ]; then
			cp -n "$sample" "$corpus"/ 2>/dev/null
		elif [ -s "$sample" ]; then
			python3 - "$BUILD/tests/targets/stacks_deep" "$sample" "$corpus/stacks_deep.in" <<-'EOF'
			import struct, sys
			elf = open(sys.argv[1], 'rb').read()
			open(sys.argv[3], 'wb').write(struct.pack('<I', len(elf)) + elf + open(sys.argv[2], 'rb').read())
			EOF
		fi ;;
	esac
}

names=${FUZZ_TARGETS:-$(for f in "$BUILD"/fuzz/fuzz_*; do [ -x "$f" ] && basename "$f" | sed 's/^fuzz_//'; done)}
[ -n "$names" ] || { echo "run.sh: no fuzz target built in $BUILD/fuzz (make fuzz)" >&2; exit 2; }
status=0
for name in $names; do
	fuzzer=$BUILD/fuzz/fuzz_$name corpus=$BUILD/fuzz/corpus-$name log=$BUILD/fuzz/$name.log
	artifacts=$BUILD/fuzz/artifacts/$name-
	[ -x "$fuzzer" ] || { echo "run.sh: $fuzzer is not built (make $fuzzer)" >&2; status=2; continue; }
	mkdir -p "$BUILD/fuzz/artifacts"
	seed "$name" "$corpus"
	# 64 KiB inputs hold the seeds (larger ones are used cut to that size). -timeout catches
	# hangs, -rss_limit_mb runaway memory.
	"$fuzzer" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$artifacts" "$@" "$corpus" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	if [ "$rc" -eq 0 ]; then
		echo "fuzz_$name: ${runs:-?} runs in ${SECONDS_TO_RUN}s, $cov, no finding"
	else
		status=1
		echo "fuzz_$name: FINDING after ${runs:-?} runs (status $rc): $(grep -m1 -E 'ERROR|runtime error|invariant' "$log")"
		grep 'Test unit written to' "$log" | sed 's/^/    /'
	fi
done
exit $status
