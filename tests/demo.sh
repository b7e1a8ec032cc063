#!/usr/bin/env bash
# The main job on the bundled demo (`make demo`, as root): trace the demo workload
# (tests/targets/demo_server.c, a toy server with a leaking cache) for a few seconds with
# memtraced, then print the report of the trace.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${DEMO_SECONDS:-4}
out_dir=$BUILD/demo
mkdir -p "$out_dir"
trace=$out_dir/demo_server.ctf

if [ "$(id -u)" != 0 ]; then
	echo "make demo: memtraced attaches BPF probes and needs root (try: sudo make demo)" >&2
	exit 1
fi
echo "== memtraced --rate 1e-3 -o $trace -- $BUILD/tests/targets/demo_server $SECONDS_TO_RUN"
"$BUILD"/bin/memtraced --rate 1e-3 -o "$trace" -- "$BUILD"/tests/targets/demo_server "$SECONDS_TO_RUN"
echo
if [ -x "$BUILD"/bin/memtrace-report ]; then
	echo "== memtrace-report $trace"
	"$BUILD"/bin/memtrace-report "$trace"
else
	echo "== memtrace-dump --summary-only $trace (memtrace-report is not built)"
	"$BUILD"/bin/memtrace-dump --summary-only "$trace"
fi
echo
echo "The trace is $trace: memtrace-dump, memtrace-report, memtrace-flamegraph read it, and so"
echo "does memtrace_viewer."
