#!/usr/bin/env bash
# `sudo make demo` stays true (issue 22): tests/demo.sh attaches to the running demo server with
# snapshots, compares the first and the last snapshot (the leaking session_cache grew), reports
# the trace and writes report.html.
source "$(dirname "$0")/lib/test.sh"
unset MEMTRACED_INJECT # the demo runs as a user runs it: the default mode

if ! bpf_ready; then
	skip demo_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
out=$(DEMO_SECONDS=4 bash "$TOP/tests/demo.sh" "$BUILD" 2>&1); rc=$?
printf '%s\n' "$out" | sed 's/^/# /' | head -60
if [ $rc = 0 ]; then pass demo_runs; else fail demo_runs "exit $rc: $(printf '%s' "$out" | tail -3 | tr '\n' ' ')"; fi
if printf '%s\n' "$out" | grep -q '^== memtrace-diff' &&
	printf '%s\n' "$out" | sed -n '/^== memtrace-diff/,/^== memtrace-report/p' | grep -q 'session_cache'
then pass demo_diff_shows_the_leak
else fail demo_diff_shows_the_leak "$(printf '%s\n' "$out" | sed -n '/^== memtrace-diff/,/^== memtrace-report/p' | head -12 | tr '\n' '|')"; fi
if [ -s "$TOP/$BUILD/demo/report.html" ] && printf '%s\n' "$out" | grep -q "^Open .*report.html in a browser"
then pass demo_writes_report_html
else fail demo_writes_report_html "no report.html"; fi
