#!/usr/bin/env bash
# The heap at its worst (issue 22): tests/targets/peak_phases.c builds 64 MiB of 64-byte blocks
# in build_peak(), holds them 0.4 s, frees them, then keeps 8 MiB from small_phase() to the
# end. memtrace-report's header gives the peak within 10% of the truth and at the right moment
# (within 10% of the run's length); --by peak ranks build_peak first and the table at the end
# does not show it; memtrace-flamegraph --at peak and memtrace-pprof --at peak hold the same
# bytes. Then Debian's python3 building ~100 MB of objects and dropping them: the peak within
# 25% of the highest anonymous memory /proc/PID/smaps_rollup shows in an untraced run.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
REPORT=$BIN/memtrace-report
T=$TARGETS/peak_phases
for f in "$MT" "$REPORT" "$T"; do
	if [ ! -e "$f" ]; then
		fail peak_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip peak_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

"$MT" --rate 1e-3 -o "$TMP/p.ctf" -- "$T" >"$TMP/p.out" 2>"$TMP/p.err"
read -r tb tp te < <(sed -n 's/^truth peak_bytes=\([0-9]*\) peak_us=\([0-9]*\) end_us=\([0-9]*\)$/\1 \2 \3/p' "$TMP/p.out")
start=$("$BIN/memtrace-dump" "$TMP/p.ctf" 2>/dev/null | sed -n 's/^info start_time_us=//p')
"$REPORT" --raw --top 5 --group function "$TMP/p.ctf" >"$TMP/p.report" 2>&1
read -r pb ps < <(sed -n 's/^peak: live \([0-9]*\) at \([0-9.]*\) s since start.*/\1 \2/p' "$TMP/p.report")
echo "# truth: ${tb:-?} bytes at $(awk -v t="${tp:-0}" -v s="${start:-0}" 'BEGIN { printf "%.3f", (t - s) / 1e6 }') s of $(awk -v t="${te:-0}" -v s="${start:-0}" 'BEGIN { printf "%.3f", (t - s) / 1e6 }') s; report: ${pb:-?} bytes at ${ps:-?} s"
if [ -n "${tb:-}" ] && [ -n "${pb:-}" ] && awk -v a="$pb" -v b="$tb" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.1 * b) }'
then pass peak_bytes_within_10pct
else fail peak_bytes_within_10pct "report ${pb:-none}, truth ${tb:-none}: $(head -3 "$TMP/p.report" | tr '\n' ' ')"; fi
if [ -n "${ps:-}" ] && [ -n "${start:-}" ] && awk -v p="$ps" -v t="$tp" -v e="$te" -v s="$start" \
	'BEGIN { want = (t - s) / 1e6; len = (e - s) / 1e6; d = p - want; if (d < 0) d = -d; exit !(d <= 0.1 * len) }'
then pass peak_moment_within_10pct_of_the_run
else fail peak_moment_within_10pct_of_the_run "report ${ps:-none} s, truth peak_us ${tp:-?} start ${start:-?}"; fi
# the three tables: allocated, at the peak, at the end
first_row() { # TITLE-WORDS: the first row's site after the table's title
	awk -v t="$1" 'index($0, t) { on = 1; next } on && /^ +1\. / { print; exit }' "$TMP/p.report"
}
if first_row "bytes live at the peak" | grep -q 'build_peak'; then pass peak_table_ranks_build_peak_first
else fail peak_table_ranks_build_peak_first "$(first_row 'bytes live at the peak')"; fi
if "$REPORT" --by peak --top 1 --group function "$TMP/p.ctf" 2>/dev/null | grep -E '^ +1\. ' | grep -q build_peak
then pass peak_by_peak_option
else fail peak_by_peak_option "$("$REPORT" --by peak --top 1 "$TMP/p.ctf" 2>&1 | head -8 | tr '\n' ' ')"; fi
if awk '/bytes live at the end/ { on = 1; next } on' "$TMP/p.report" | grep -q 'build_peak'
then fail peak_not_in_the_end_table "$(awk '/bytes live at the end/ { on = 1; next } on' "$TMP/p.report" | grep build_peak | head -2)"
else pass peak_not_in_the_end_table; fi
fg=$("$BIN/memtrace-flamegraph" --at peak --folded "$TMP/p.ctf" 2>/dev/null | awk '{ s += $NF } END { printf "%.0f", s }')
if [ -n "${pb:-}" ] && awk -v a="${fg:-0}" -v b="$pb" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.005 * b) }'
then pass peak_flamegraph_at_peak_holds_the_peak
else fail peak_flamegraph_at_peak_holds_the_peak "flame graph ${fg:-none} bytes, peak ${pb:-none}"; fi
if "$BIN/memtrace-pprof" --at peak "$TMP/p.ctf" -o "$TMP/p.pb.gz" 2>"$TMP/pp.err" && command -v go >/dev/null; then
	top=$(go tool pprof -top -sample_index=inuse_space "$TMP/p.pb.gz" 2>/dev/null | grep -m1 -E '^ +[0-9.]+[kMG]?B')
	if echo "$top" | grep -q build_peak; then pass peak_pprof_inuse_at_peak
	else fail peak_pprof_inuse_at_peak "$top"; fi
elif [ -s "$TMP/p.pb.gz" ]; then skip peak_pprof_inuse_at_peak "go is not installed"
else fail peak_pprof_inuse_at_peak "$(cat "$TMP/pp.err")"; fi

# ---- memtrace-timeline over a snapshot directory: one point per snapshot, the peak marked
"$MT" --rate 1e-3 --snapshot-dir "$TMP/snaps" --snapshot-interval 0.2 -o /dev/null -- "$T" >/dev/null 2>"$TMP/s.err"
nsnap=$(ls "$TMP/snaps"/*.ctf 2>/dev/null | wc -l)
"$BIN/memtrace-timeline" "$TMP/snaps" -o "$TMP/snaps.svg" 2>"$TMP/tl.err"
sp=$(sed -n 's/.*>peak \([0-9.]*\) MiB at .*/\1/p' "$TMP/snaps.svg" | head -1)
echo "# $nsnap snapshots; their peak ${sp:-?} MiB (truth $(awk -v b="${tb:-0}" 'BEGIN { printf "%.1f", b / 1048576 }') MiB)"
if [ "$nsnap" -ge 5 ] && [ -n "${sp:-}" ] && awk -v a="$sp" -v b="${tb:-0}" 'BEGIN { d = a * 1048576 - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.1 * b) }' &&
	grep -q '>build_peak (' "$TMP/snaps.svg"
then pass peak_timeline_of_snapshots
else fail peak_timeline_of_snapshots "$nsnap snapshots, peak ${sp:-none} MiB: $(cat "$TMP/tl.err" "$TMP/s.err" | tail -2 | tr '\n' ' ')"; fi

# ---- Debian's python3: the peak against the highest anonymous memory of an untraced run ----
if ! command -v python3 >/dev/null; then
	skip peak_python "python3 is not installed"
	exit 0
fi
cat >"$TMP/p.py" <<'PY'
import time
time.sleep(0.3)
d = [{"k": i, "s": "x" * (i % 50), "l": [i, i + 1]} for i in range(400000)]
time.sleep(0.5)
del d
time.sleep(0.3)
PY
python3 "$TMP/p.py" & pid=$!
max=0
while kill -0 $pid 2>/dev/null; do
	v=$(awk '/^Anonymous:/ { print $2 * 1024 }' /proc/$pid/smaps_rollup 2>/dev/null)
	[ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
	sleep 0.02
done
wait $pid
"$MT" --rate 1e-3 -o "$TMP/py.ctf" -- python3 "$TMP/p.py" >/dev/null 2>"$TMP/py.err"
ppb=$("$REPORT" --raw --by peak --top 1 "$TMP/py.ctf" 2>/dev/null | sed -n 's/^peak: live \([0-9]*\) at.*/\1/p')
echo "# python3: untraced anonymous memory at most $max bytes; traced peak ${ppb:-?} bytes"
if [ -n "${ppb:-}" ] && awk -v a="$ppb" -v b="$max" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.25 * b) }'
then pass peak_python_within_25pct_of_anonymous
else fail peak_python_within_25pct_of_anonymous "traced ${ppb:-none}, untraced anonymous $max: $(tail -1 "$TMP/py.err" | cut -c1-200)"; fi
