#!/usr/bin/env bash
# memtrace-flamegraph: collapsed stacks with exact bytes, and the SVG rendered by headless
# Chromium (tests/browser/flamegraph_check.js): known sites' frames with widths proportional to
# their bytes (within 5%), hover, click-zoom, search, no console error. The screenshot is kept
# as $BUILD/test-logs/flamegraph.png.
source "$(dirname "$0")/lib/test.sh"
FG=$BIN/memtrace-flamegraph
GEN=$TOP/$BUILD/tests/unit/test_heapview
LOGS=$TOP/$BUILD/test-logs
mkdir -p "$LOGS"

if [ ! -x "$FG" ] || [ ! -x "$GEN" ]; then
	fail flamegraph_built "missing $FG or $GEN (run make)"
	exit 1
fi
if ! "$GEN" --write "$TMP/fx" >/dev/null; then
	fail flamegraph_fixtures "test_heapview --write failed"
	exit 1
fi
# Known sites (see tests/unit/test_heapview.c): allocated bytes per stack.
want_alloc='main;helper;small_site 409600
main;other_path;leak_site 163840
main;work;alloc_big 2457600
main;work;leak_site 819200'
want_live='main;helper;small_site 204800
main;other_path;leak_site 163840
main;work;leak_site 819200'

got=$("$FG" --folded "$TMP/fx/main.ctf" | sort)
if [ "$got" = "$want_alloc" ]; then pass flamegraph_folded_alloc
else fail flamegraph_folded_alloc "got: $(echo "$got" | tr '\n' '|')"; fi
got=$("$FG" --folded --live "$TMP/fx/main.ctf" | sort)
if [ "$got" = "$want_live" ]; then pass flamegraph_folded_live
else fail flamegraph_folded_live "got: $(echo "$got" | tr '\n' '|')"; fi
got=$("$FG" --folded --lines "$TMP/fx/main.ctf" | grep -c 'small_site (small.c:60)$\|small_site (small.c:60) ')
if [ "$got" = 1 ]; then pass flamegraph_folded_lines; else fail flamegraph_folded_lines "no small_site (small.c:60) frame"; fi

# On a real trace: the collapsed stacks add up to the report's total (rounding: 1 B a line).
ref=$DATA/memtrace/upstream-ocamlopt-v2.ctf
sum=$("$FG" --folded "$ref" | awk '{ s += $NF } END { printf "%d", s }')
total=$("$BIN/memtrace-report" --raw --top 1 "$ref" | sed -n 's/.*allocated \([0-9]*\) (.*/\1/p' | head -1)
lines=$("$FG" --folded "$ref" | wc -l)
if [ -n "$total" ] && [ "$sum" -gt 0 ] && [ $((sum - total)) -le "$lines" ] && [ $((total - sum)) -le "$lines" ]; then
	pass flamegraph_folded_sums_to_total
else fail flamegraph_folded_sums_to_total "folded sum $sum, report total ${total:-?}"; fi

# SVG: written, self-contained (no external resources), one frame per known function.
svg=$TMP/main.svg
if "$FG" "$TMP/fx/main.ctf" -o "$svg" && head -c 200 "$svg" | grep -q '<svg'; then pass flamegraph_svg_written
else fail flamegraph_svg_written "no SVG"; fi
if grep -Eq '(href|src)=|url\(|@import' "$svg"; then fail flamegraph_svg_self_contained "$(grep -Eo '(href|src)=[^ ]*|url\([^)]*\)' "$svg" | head -3)"
else pass flamegraph_svg_self_contained; fi
for f in alloc_big leak_site small_site helper work main; do
	grep -q "data-n=\"$f\"" "$svg" || { fail flamegraph_svg_frames "no frame $f"; break; }
done && pass flamegraph_svg_frames
# Without -o the SVG goes to standard output (memtrace-flamegraph FILE > x.svg)...
"$FG" "$TMP/fx/main.ctf" -o "$TMP/fx/o.svg" 2>/dev/null
if "$FG" "$TMP/fx/main.ctf" >"$TMP/fx/stdout.svg" 2>/dev/null && cmp -s "$TMP/fx/o.svg" "$TMP/fx/stdout.svg"; then
	pass flamegraph_svg_to_stdout_without_o
else fail flamegraph_svg_to_stdout_without_o "standard output differs from -o"; fi
# ... but not onto a terminal
if command -v script >/dev/null; then
	script -qec "$FG $TMP/fx/main.ctf" /dev/null >"$TMP/fx/tty.out" 2>&1; trc=$?
	if [ "$trc" = 2 ] && grep -q 'standard output is a terminal' "$TMP/fx/tty.out"; then pass flamegraph_no_svg_on_a_terminal
	else fail flamegraph_no_svg_on_a_terminal "exit $trc: $(head -c 200 "$TMP/fx/tty.out")"; fi
fi

# Malformed traces: rejected with the reader's message.
bad=0
for t in "$DATA"/memtrace/malformed/*.ctf; do
	if out=$("$FG" "$t" -o "$TMP/bad.svg" 2>&1); then bad=$((bad + 1)); echo "accepted $t"; continue; fi
	echo "$out" | grep -q "malformed trace" || { bad=$((bad + 1)); echo "no reader message for $t: $out"; }
done
if [ "$bad" = 0 ]; then pass flamegraph_rejects_malformed; else fail flamegraph_rejects_malformed "$bad traces not rejected properly"; fi

# The browser.
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ] || ! command -v node >/dev/null; then
	skip flamegraph_browser "chromium and node are needed (make deps)"
	exit 0
fi
node "$TOP/tests/browser/flamegraph_check.js" "$CHROMIUM" "$svg" "$LOGS/flamegraph.png" \
	alloc_big=2457600 leak_site=983040 small_site=409600
# What was live at the peak (issue 22): main.ctf's peak holds LEAK 120 samples (both stacks)
# and SMALL 25, 8192 bytes each.
"$FG" --at peak "$TMP/fx/main.ctf" -o "$TMP/peak.svg" &&
	{ if grep -q '>Live bytes at the peak: ' "$TMP/peak.svg"; then echo "PASS flamegraph_peak_titled"
	  else echo "FAIL flamegraph_peak_titled: $(grep -o '<title>[^<]*' "$TMP/peak.svg" | head -1)"; fi; } &&
	node "$TOP/tests/browser/flamegraph_check.js" "$CHROMIUM" "$TMP/peak.svg" "$LOGS/flamegraph-peak.png" \
		leak_site=983040 small_site=204800 | sed 's/^\(PASS\|FAIL\|SKIP\) flamegraph_/\1 flamegraph_peak_/'
# memtrace-timeline's chart (issue 22): its areas, legend and peak marker, at the peak's height.
"$BIN/memtrace-timeline" "$TMP/fx/main.ctf" -o "$TMP/timeline.svg" --top 2 &&
	node "$TOP/tests/browser/svg_check.js" "$CHROMIUM" "$TMP/timeline.svg" "$LOGS/timeline.png" timeline 1187840 \
		'path.series=3' 'g.legend=3' 'g.peak=1'
# A big real trace renders without a console error too.
"$FG" "$ref" -o "$TMP/ocamlopt.svg" &&
	node "$TOP/tests/browser/flamegraph_check.js" "$CHROMIUM" "$TMP/ocamlopt.svg" "$LOGS/flamegraph-ocamlopt.png" |
	sed 's/^\(PASS\|FAIL\|SKIP\) flamegraph_/\1 flamegraph_ocamlopt_/'
exit 0
