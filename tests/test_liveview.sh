#!/usr/bin/env bash
# The live view of memtraced (status line, --top), on a real terminal: memtraced runs in a tmux
# pane (a private tmux server), the screen is read with capture-pane and everything written to
# the terminal is logged raw with pipe-pane. Workload: tests/targets/demo_server.c, whose
# biggest leak is session_cache (one 496-byte entry per new user, never freed).
# No timed assertions: waits poll with generous deadlines and only bound how long a failure takes.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DEMO=$TARGETS/demo_server
SOCK=memtraced-liveview-$$
S=lv
trap 'tmux -L "$SOCK" kill-server >/dev/null 2>&1; [ -n "${DEMO_PID:-}" ] && kill "$DEMO_PID" 2>/dev/null; rm -rf "$TMP"' EXIT

ALL="status_line_shown status_line_refreshes status_summary_clean status_line_in_place status_exit_status
     no_status_option no_status_stderr_file top_shows_leak top_refreshes top_by_function
     top_resize top_quit_restores top_sigint_restores top_needs_terminal no_sanitizer_reports"
skip_all() { for n in $ALL; do skip "$n" "$1"; done; exit 0; }

# option values are checked before anything else (no root, no terminal needed)
[ -x "$MT" ] || { ALL="$ALL top_interval_checked top_by_checked"; skip_all "build first: $MT"; }
out=$("$MT" --top-interval 0 -p 1 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "invalid --top-interval '0'"; then pass top_interval_checked
else fail top_interval_checked "rc $rc: $out"; fi
out=$("$MT" --top-by lines -p 1 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "invalid --top-by 'lines'.*'site' or 'function'"; then pass top_by_checked
else fail top_by_checked "rc $rc: $out"; fi

command -v tmux >/dev/null || skip_all "tmux is not installed (make deps)"
bpf_ready || skip_all "needs root and BTF"
[ -x "$MT" ] && [ -x "$DEMO" ] || skip_all "build first: $MT, $DEMO"

tm() { tmux -L "$SOCK" "$@"; }
# A fresh pane (200x50) running a plain shell, its raw output logged to $TMP/raw.
pane_start() {
	tm kill-server >/dev/null 2>&1
	# kill-server returns before the server is gone: a new session asked of a server that is
	# exiting is lost with it (an empty screen for the whole --top part, seen once in CI)
	local i
	for ((i = 0; i < 50; i++)); do tm list-sessions >/dev/null 2>&1 || break; sleep 0.1; done
	[ -f "$TMP/raw" ] && cat "$TMP/raw" >>"$TMP/raw.all"
	: >"$TMP/raw"
	tm new-session -d -s $S -x "${1:-200}" -y "${2:-50}" "env PS1='$ ' TERM=xterm bash --norc --noprofile" || return 1
	tm pipe-pane -t $S "cat >>'$TMP/raw'"
	wait_screen '^\$' 10 # the shell is ready for keys
}
screen() { tm capture-pane -p -J -t $S | sed "s/ *$//"; }
# wait_screen REGEX [SECONDS]: polls the screen until it matches (default 30 s).
wait_screen() {
	local deadline=$((SECONDS + ${2:-30}))
	while [ $SECONDS -lt $deadline ]; do
		screen | grep -Eq -- "$1" && return 0
		sleep 0.2
	done
	return 1
}
# The last sample count shown by the status line / the --top header.
status_samples() { screen | sed -nE 's/^memtraced: ([0-9]+) samples \(.*/\1/p' | tail -n 1; }
top_samples() { screen | sed -nE 's/^memtraced --top .* samples ([0-9]+) .*/\1/p' | head -n 1; }
# wait_growth FN: polls FN until it shows a number larger than the first one it showed.
wait_growth() {
	local first next deadline=$((SECONDS + 20))
	first=$($1)
	[ -n "$first" ] || return 1
	while [ $SECONDS -lt $deadline ]; do
		sleep 0.3
		next=$($1)
		if [ -n "$next" ] && [ "$next" -gt "$first" ]; then
			echo "$first -> $next"
			return 0
		fi
	done
	echo "stayed at $first"
	return 1
}

# ---- status line: memtraced -- CMD in a terminal ----
pane_start || skip_all "tmux cannot start a session"
tm send-keys -t $S "$MT --rate 1e-3 -o $TMP/a.ctf -- $DEMO 8 >/dev/null; echo __END__\$?" Enter
if wait_screen '^memtraced: [0-9]+ samples \([0-9]+/s\), live ~[0-9.]+ [KMG]?i?B in [0-9]+ blocks, [0-9]+ dropped'; then
	pass status_line_shown
	if out=$(wait_growth status_samples); then pass status_line_refreshes
	else fail status_line_refreshes "the sample count did not grow: $out"; fi
else
	fail status_line_shown "no status line on the terminal: $(screen | grep -v '^$' | tail -n 3 | tr '\n' '|')"
	fail status_line_refreshes "no status line"
fi
if wait_screen '__END__[0-9]' 60; then
	scr=$(screen)
	summary=$(printf '%s\n' "$scr" | grep -E 'allocations and [0-9]+ frees seen')
	# the summary starts on its own clean line, the status line is gone from the screen
	if printf '%s\n' "$summary" | grep -Eq '^memtraced: PID [0-9]+: [0-9]+ allocations' &&
	   ! printf '%s\n' "$scr" | grep -Eq 'samples \([0-9]+/s\)'; then
		pass status_summary_clean
	else
		fail status_summary_clean "screen: $(printf '%s\n' "$scr" | grep -v '^$' | tail -n 4 | tr '\n' '|')"
	fi
	# the raw terminal output: redrawn in place (\r, ESC[K), never a newline after a status line
	# (several redraws, each \r + text + ESC[K, none ended by a newline)
	n=$(grep -ao $'\r''memtraced: [0-9]* samples ([0-9]*/s)[^\r]*dropped'$'\033''\[K' "$TMP/raw" | wc -l)
	if [ "$n" -ge 2 ] && ! grep -aq 'dropped'$'\033''\[K'$'\r''\?$' "$TMP/raw"; then
		pass status_line_in_place
	else
		fail status_line_in_place "$n redraws in place; raw: $(cat -v "$TMP/raw" | grep -a 'samples (' | head -c 300)"
	fi
	if printf '%s\n' "$scr" | grep -q '__END__0'; then pass status_exit_status
	else fail status_exit_status "memtraced did not exit 0: $(printf '%s\n' "$scr" | grep -o '__END__[0-9]*')"; fi
else
	fail status_summary_clean "memtraced did not end"
	fail status_line_in_place "memtraced did not end"
	fail status_exit_status "memtraced did not end"
fi

# ---- no status line: --no-status on a terminal, and stderr redirected to a file ----
pane_start
tm send-keys -t $S "$MT --no-status --rate 1e-3 -o $TMP/b.ctf -- $DEMO 2 >/dev/null; echo __END__\$?" Enter
if wait_screen '__END__[0-9]' 60; then
	if grep -q 'allocations and' "$TMP/raw" && ! grep -Eq 'samples \([0-9]+/s\)' "$TMP/raw" &&
	   ! grep -q $'\033\\[K' "$TMP/raw"; then
		pass no_status_option
	else
		fail no_status_option "status output with --no-status (or no summary): $(tr -d '\033' <"$TMP/raw" | tail -c 300)"
	fi
else
	fail no_status_option "memtraced did not end"
fi
pane_start
tm send-keys -t $S "$MT --rate 1e-3 -o $TMP/c.ctf -- $DEMO 2 >/dev/null 2>$TMP/err; echo __END__\$?" Enter
if wait_screen '__END__[0-9]' 60; then
	if grep -q 'allocations and' "$TMP/err" && ! grep -q $'\r' "$TMP/err" && ! grep -q $'\033' "$TMP/err" &&
	   ! grep -Eq 'samples \([0-9]+/s\)' "$TMP/err"; then
		pass no_status_stderr_file
	else
		fail no_status_stderr_file "stderr file: $(cat -v "$TMP/err" | tail -n 3 | tr '\n' '|')"
	fi
else
	fail no_status_stderr_file "memtraced did not end: $(screen | grep -v "^$" | tail -n 4 | tr "\n" "|")"
fi

# ---- --top against a running demo_server ----
start_demo() {
	"$DEMO" 120 >/dev/null &
	DEMO_PID=$!
}
start_demo
pane_start || fail top_pane_started "tmux cannot start a session: $(tm list-sessions 2>&1 | head -1)"
tm send-keys -t $S "$MT --top --rate 1e-3 -o $TMP/d.ctf -p $DEMO_PID; echo __END__\$?; stty -a | grep -o -- '-\?icanon' | sed 's/^/MODE:/'" Enter
# the first data row (right under the column titles) is the leak
first_row() { screen | grep -A1 'LIVE EST' | sed -n 2p; }
deadline=$((SECONDS + 30)) row=""
while [ $SECONDS -lt $deadline ]; do
	row=$(first_row)
	printf '%s\n' "$row" | grep -q 'session_cache demo_server.c:[0-9]' && break
	sleep 0.3
done
if printf '%s\n' "$row" | grep -Eq '^ *[0-9.]+ [KMG]?i?B +[0-9]+ +[0-9.]+%  session_cache demo_server.c:[0-9]+' &&
   screen | grep -Eq "^memtraced --top  PID $DEMO_PID \(demo_server\)"; then
	pass top_shows_leak
else
	fail top_shows_leak "first row '$row'; screen: $(screen | grep -v '^$' | head -n 6 | tr '\n' '|')"
fi
if out=$(wait_growth top_samples); then pass top_refreshes
else fail top_refreshes "the header's sample count did not grow: $out"; fi
tm send-keys -t $S f
if wait_screen 'FUNCTION \(innermost frame\)' 10 && wait_screen '%  session_cache demo_server\.c *$' 10; then
	pass top_by_function
else
	fail top_by_function "screen: $(screen | grep -v '^$' | head -n 6 | tr '\n' '|')"
fi
tm resize-window -t $S -x 60 -y 12
if wait_screen '^  LIVE EST' 10 && [ "$(screen | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')" -le 60 ] &&
   [ "$(screen | wc -l)" -le 12 ] && wait_screen 'session_cache' 5; then
	pass top_resize
else
	fail top_resize "screen after a resize to 60x12: $(screen | head -n 12 | tr '\n' '|')"
fi
tm send-keys -t $S q
if wait_screen 'MODE:-?icanon' 30; then
	scr=$(screen)
	# the lines before the summary's end from the pane's history: at 60x12 a long summary (one that
	# says samples were thinned) pushes its start above the screen
	hist=$(tm capture-pane -p -J -S - -t $S | sed "s/ *$//")
	if printf '%s\n' "$hist" | grep -q 'quit from --top' && printf '%s\n' "$scr" | grep -q '__END__0' &&
	   printf '%s\n' "$scr" | grep -q 'MODE:icanon' && ! printf '%s\n' "$scr" | grep -q 'LIVE EST' &&
	   printf '%s\n' "$hist" | grep -Eq '^memtraced: PID [0-9]+: [0-9]+ allocations'; then
		pass top_quit_restores
	else
		fail top_quit_restores "screen: $(printf '%s\n' "$scr" | grep -v '^$' | tail -n 5 | tr '\n' '|')"
	fi
else
	fail top_quit_restores "q did not end memtraced: $(screen | grep -v '^$' | tail -n 3 | tr '\n' '|')"
fi
kill -0 "$DEMO_PID" 2>/dev/null || fail top_quit_restores "the target died"

# Ctrl-C (SIGINT) also restores the terminal
pane_start
tm send-keys -t $S "$MT --top --rate 1e-3 -o $TMP/e.ctf -p $DEMO_PID; echo __END__\$?; stty -a | grep -o -- '-\?icanon' | sed 's/^/MODE:/'" Enter
if wait_screen 'LIVE EST' 30; then
	sleep 0.5
	tm send-keys -t $S C-c
	if wait_screen 'MODE:-?icanon' 30 && screen | grep -q 'MODE:icanon' && ! screen | grep -q 'LIVE EST' &&
	   screen | grep -q 'Interrupt received' && screen | grep -q '__END__0'; then
		pass top_sigint_restores
	else
		fail top_sigint_restores "screen: $(screen | grep -v '^$' | tail -n 5 | tr '\n' '|')"
	fi
else
	fail top_sigint_restores "no table: $(screen | grep -v '^$' | tail -n 3 | tr '\n' '|')"
fi
kill "$DEMO_PID" 2>/dev/null
wait "$DEMO_PID" 2>/dev/null
DEMO_PID=

# --top without any terminal: a clear error before anything is attached
"$DEMO" 30 >/dev/null &
DEMO_PID=$!
setsid "$MT" --top -o "$TMP/f.ctf" -p "$DEMO_PID" </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'needs a terminal' "$TMP/err" && [ ! -e "$TMP/f.ctf" ]; then
	pass top_needs_terminal
else
	fail top_needs_terminal "rc $rc, stderr: $(head -c 300 "$TMP/err")"
fi

# everything memtraced wrote on the terminals (SANITIZE=1 builds report there)
cat "$TMP/raw" "$TMP/err" >>"$TMP/raw.all" 2>/dev/null
if ! grep -aEq 'Sanitizer|runtime error' "$TMP/raw.all"; then pass no_sanitizer_reports
else fail no_sanitizer_reports "$(grep -aE -m 3 'Sanitizer|runtime error' "$TMP/raw.all" | tr '\n' '|')"; fi
