#!/usr/bin/env bash
# memtrace-html (issue 22): one self-contained page from a trace, opened in headless Chromium
# (tests/browser/html_check.js over the DevTools protocol): the timeline drawn; the flame graph
# of what was live shows the peak first (its root stands for the report's peak bytes); a click
# on the timeline selects another moment whose flame graph holds what memtrace-report says was
# live then (within 1%); the table sorts; search highlights; no console error; no network (no
# URL in the page but its own); a screenshot in the test's log directory.
source "$(dirname "$0")/lib/test.sh"

HTML=$BIN/memtrace-html REPORT=$BIN/memtrace-report
GEN=$TOP/$BUILD/tests/unit/test_heapview
LOGS=$TOP/$BUILD/test-logs
mkdir -p "$LOGS"
for f in "$HTML" "$REPORT" "$GEN"; do
	if [ ! -e "$f" ]; then
		fail html_built "missing $f (run make)"
		exit 0
	fi
done
"$GEN" --write "$TMP/fx" >/dev/null || { fail html_fixtures "test_heapview --write failed"; exit 0; }
M=$TMP/fx/main.ctf
if "$HTML" "$M" -o "$TMP/r.html" 2>"$TMP/h.err" && [ -s "$TMP/r.html" ]; then pass html_written
else fail html_written "$(cat "$TMP/h.err")"; fi
# self-contained: no src= or href= to anything, no http(s) URL (but the SVG namespace's name)
if ! grep -v 'http://www.w3.org/2000/svg' "$TMP/r.html" | grep -qE '(src|href)=|https?://'; then pass html_self_contained
else fail html_self_contained "$(grep -oE '(src|href)=[^ >]*|https?://[^ "]*' "$TMP/r.html" | head -3 | tr '\n' ' ')"; fi
if python3 -c 'import json, re, sys; t = open(sys.argv[1]).read(); json.loads(re.search(r"<script id=\"data\" type=\"application/json\">(.*?)</script>", t, re.S).group(1))' "$TMP/r.html"
then pass html_data_is_json
else fail html_data_is_json "the data block does not parse"; fi
out=$("$HTML" "$TMP/none.ctf" -o "$TMP/x.html" 2>&1); rc=$?
if [ $rc = 1 ] && printf '%s' "$out" | grep -q 'none.ctf'; then pass html_missing_trace
else fail html_missing_trace "rc $rc: $out"; fi

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ] || ! command -v node >/dev/null; then
	skip html_browser "chromium and node are needed (make deps)"
	exit 0
fi
peak=$("$REPORT" --raw --by alloc --top 1 "$M" | sed -n 's/^peak: live \([0-9]*\) at.*/\1/p')
out=$(node "$TOP/tests/browser/html_check.js" "$CHROMIUM" "$TMP/r.html" "$LOGS/report.png" "$peak" 0.6 leak_site)
printf '%s\n' "$out" | grep -v '^# '
read -r t bytes < <(printf '%s\n' "$out" | sed -n 's/^# click \([0-9.]*\) \([0-9]*\)$/\1 \2/p')
want=$("$REPORT" --raw --by live --top 0 --to "${t:-0}" "$M" | sed -n 's/.*live at the end \([0-9]*\) .*/\1/p')
echo "# clicked at ${t:-?} s: the page's flame graph holds ${bytes:-?} bytes, the report says ${want:-?}"
if [ -n "${bytes:-}" ] && [ -n "${want:-}" ] && awk -v a="$bytes" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * b + 1) }'
then pass html_clicked_moment_matches_the_trace
else fail html_clicked_moment_matches_the_trace "page ${bytes:-none}, report ${want:-none} at ${t:-?} s"; fi
