#!/usr/bin/env bash
# The main job on the bundled demo (`make demo`, as root): the demo server (tests/targets/
# demo_server.c, a toy server with a leaking cache) is started, then memtraced attaches to it
# as to any running service (-p PID), writing a trace and a heap snapshot every second; when
# the server ends, the first and the last snapshots are compared (memtrace-diff: the leak
# first), the trace is reported, and one page to open in a browser is written (memtrace-html).
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${DEMO_SECONDS:-6}
out_dir=$BUILD/demo
rm -rf "$out_dir/snapshots"
mkdir -p "$out_dir/snapshots"
trace=$out_dir/demo_server.ctf

if [ "$(id -u)" != 0 ]; then
	echo "make demo: memtraced attaches BPF probes and needs root (try: sudo make demo)" >&2
	exit 1
fi
"$BUILD"/tests/targets/demo_server "$SECONDS_TO_RUN" >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
echo "== demo_server $SECONDS_TO_RUN started: PID $pid"
echo "== memtraced -p $pid --snapshot-dir $out_dir/snapshots --snapshot-interval 1 -o $trace"
"$BUILD"/bin/memtraced --no-status -p "$pid" --snapshot-dir "$out_dir/snapshots" \
	--snapshot-interval 1 -o "$trace"
wait "$pid" 2>/dev/null || true
trap - EXIT
echo
# the first and the last snapshot, by their sequence number (memtrace-PID-SEQ.ctf)
mapfile -t snaps < <(ls "$out_dir"/snapshots/*.ctf | sort -t- -k3 -n)
if [ "${#snaps[@]}" -ge 2 ]; then
	echo "== memtrace-diff ${snaps[0]} ${snaps[-1]}   (what grew between the first and the last snapshot)"
	"$BUILD"/bin/memtrace-diff --top 3 "${snaps[0]}" "${snaps[-1]}"
	echo
fi
echo "== memtrace-report --top 3 $trace"
"$BUILD"/bin/memtrace-report --top 3 "$trace"
echo
"$BUILD"/bin/memtrace-html "$trace" -o "$out_dir/report.html"
echo "Open $(realpath "$out_dir/report.html") in a browser: the heap over time (click a moment),"
echo "what was live then (the peak first), the top sites, a search box."
echo "The trace is $trace (memtrace-report, memtrace-flamegraph, memtrace-timeline,"
echo "memtrace_viewer read it); the snapshots are in $out_dir/snapshots."
