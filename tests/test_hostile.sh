#!/usr/bin/env bash
# Hostile local users, second round (issue 35). An unprivileged user created here starts the
# targets; root traces them as an administrator would. What must hold:
#
# - a root-only file the user bind-mounts over its /tmp/perf-PID.map (in a user and mount
#   namespace of its own) is never read: none of its names reach the trace, while the user's
#   own perf map there names the same JIT code;
# - a parser taken over cannot have root open a symlink named /tmp/perf-PID.map (to a root-only
#   file), a root-owned perf map of the user's process, or a root-only #! script;
# - a FIFO bind-mounted over a target's executable in its mount namespace is never opened: a
#   writer blocked on it stays blocked while memtraced attaches.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
for f in "$MT" "$DUMP" "$TARGETS/hostile_jit"; do
	if [ ! -e "$f" ]; then
		fail hostile_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip hostile_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
U=mt-hostile
if ! id -u "$U" >/dev/null 2>&1 && ! useradd --system --no-create-home --shell /usr/sbin/nologin "$U"; then
	fail hostile_user "cannot create the user $U"
	exit 0
fi
uid=$(id -u "$U")
gid=$(id -g "$U")
as_user() { setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"; }
if ! as_user unshare -Urm true 2>"$TMP/userns.err"; then
	skip hostile_userns "an unprivileged user cannot make a user namespace: $(cat "$TMP/userns.err")"
	exit 0
fi

# what the user can reach: its program and its working directories
H=$(mktemp -d /tmp/memtraced-hostile.XXXXXX)
trap 'rm -rf "$TMP" "$H"' EXIT
chmod 0755 "$H"
cp "$TARGETS/hostile_jit" "$H/jit"
chmod 0755 "$H/jit"
# the secret: root's, mode 0600, written as a perf map for the JIT code's address
mkdir -m 0711 "$H/root"
printf '3f0000000000 8 SECRET_NAME_%s\n' "$$" >"$H/root/secret"
chmod 0600 "$H/root/secret"
secret="SECRET_NAME_$$"

# start_user NAME SCRIPT: the user runs SCRIPT (sh, $$ its pid, ends by exec'ing the program
# with its directory) in a user and mount namespace of its own; the program's pid on stdout
start_user() {
	local d=$H/$1
	mkdir -p "$d"
	chown "$uid:$gid" "$d"
	as_user unshare -Urm sh -c "$2" sh "$d" >"$d.out" 2>&1 &
	wait_file "$d/ready" 100 && cat "$d/ready"
}
stop_user() { touch "$H/$1/stop"; }

# ---- 1. the user's own perf map names its JIT code (the path is read at all) ...
own=$(start_user own 'printf "3f0000000000 8 OWN_NAME\n" >/tmp/perf-$$.map; exec '"$H/jit"' "$1"')
if [ -n "$own" ]; then
	"$MT" -p "$own" --rate 1e-2 -d 2 -o "$TMP/own.ctf" 2>"$TMP/own.err"
	"$DUMP" "$TMP/own.ctf" >"$TMP/own.dump" 2>&1
	check hostile_own_perf_map_names_jit grep -q ' OWN_NAME' "$TMP/own.dump"
	rm -f "/tmp/perf-$own.map"
else
	fail hostile_own_perf_map_names_jit "the user's program never got ready: $(cat "$H/own.out")"
fi
stop_user own

# ... and a root-only file bind-mounted over it is not (finding 1)
bind=$(start_user bind 'touch /tmp/perf-$$.map && mount --bind '"$H/root/secret"' /tmp/perf-$$.map && exec '"$H/jit"' "$1"')
if [ -n "$bind" ]; then
	"$MT" -p "$bind" --rate 1e-2 -d 2 -o "$TMP/bind.ctf" 2>"$TMP/bind.err"
	"$DUMP" "$TMP/bind.ctf" >"$TMP/bind.dump" 2>&1
	if grep -q "$secret" "$TMP/bind.dump" "$TMP/bind.err"; then
		fail hostile_bind_mounted_secret_not_read "the secret's name is in the trace"
	elif ! grep -q ' alloc ' "$TMP/bind.dump"; then
		fail hostile_bind_mounted_secret_not_read "nothing traced: $(tail -n 2 "$TMP/bind.err" | tr '\n' ' ')"
	else
		pass hostile_bind_mounted_secret_not_read
	fi
	rm -f "/tmp/perf-$bind.map"
else
	fail hostile_bind_mounted_secret_not_read "the user's program never got ready: $(cat "$H/bind.out")"
fi
stop_user bind

# ---- 2. a parser taken over asks root for what its rules must refuse (finding 2), once the
# user's process is traced (a test-only hook of the parser)
printf '#!/bin/sh\necho root-only\n' >"$H/root/script"
chmod 0700 "$H/root/script"
printf '#!/bin/sh\necho anyone\n' >"$H/open-script"
chmod 0755 "$H/open-script"
mkdir -p "$H/ask"
chown "$uid:$gid" "$H/ask"
as_user "$H/jit" "$H/ask" >/dev/null 2>&1 &
if wait_file "$H/ask/ready" 100; then
	ask=$(cat "$H/ask/ready")
	as_user ln -s "$H/root/secret" "/tmp/perf-$ask.map"
	MEMTRACED_TEST_PARSER_OPEN_TRACED="/tmp/perf-$ask.map:$H/root/script:$H/open-script:/proc/$ask/root/tmp/perf-$ask.map" \
		"$MT" -p "$ask" --rate 1e-2 -d 1 -o "$TMP/ask.ctf" 2>"$TMP/ask.err"
	# (refused as the kernel would, or by the broker's rules: any error)
	refused() { grep "parser test: open $1: " "$TMP/ask.err" && ! grep -q "parser test: open $1: opened" "$TMP/ask.err"; }
	opened() { grep -q "parser test: open $1: opened" "$TMP/ask.err"; }
	check hostile_perf_map_symlink_refused refused "/tmp/perf-$ask.map"
	check hostile_perf_map_symlink_in_root_refused refused "/proc/$ask/root/tmp/perf-$ask.map"
	check hostile_root_only_script_refused refused "$H/root/script"
	check hostile_readable_script_opened opened "$H/open-script"
	# a root-owned regular file in its place: not the process's own
	rm -f "/tmp/perf-$ask.map"
	cp "$H/root/secret" "/tmp/perf-$ask.map"
	chmod 0644 "/tmp/perf-$ask.map"
	MEMTRACED_TEST_PARSER_OPEN_TRACED="/tmp/perf-$ask.map" \
		"$MT" -p "$ask" --rate 1e-2 -d 1 -o "$TMP/ask2.ctf" 2>"$TMP/ask.err"
	check hostile_root_owned_perf_map_refused refused "/tmp/perf-$ask.map"
	"$DUMP" "$TMP/ask2.ctf" 2>&1 | grep -q "$secret" &&
		fail hostile_root_owned_perf_map_unread "the secret's name is in the trace" ||
		pass hostile_root_owned_perf_map_unread
	rm -f "/tmp/perf-$ask.map"
else
	fail hostile_parser_asks "the user's program never got ready"
fi
touch "$H/ask/stop"

# ---- 3. a FIFO over the program's own file in its mount namespace (finding 5): a writer
# blocked on it is not released by memtraced's attach
fifo=$(start_user fifo 'exec '"$H/jit"' "$1"')
if [ -n "$fifo" ]; then
	mkfifo -m 0666 "$H/fifo/pipe"
	nsenter -t "$fifo" -m mount --bind "$H/fifo/pipe" "$H/jit"
	nsenter -t "$fifo" -m sh -c "echo released >'$H/jit'" &
	writer=$!
	sleep 0.3
	timeout 60 "$MT" -p "$fifo" --rate 1e-2 -d 1 -o "$TMP/fifo.ctf" 2>"$TMP/fifo.err"
	rc=$?
	sleep 0.3
	if [ "$rc" = 124 ]; then fail hostile_fifo_never_opened "memtraced hung"
	elif kill -0 "$writer" 2>/dev/null; then pass hostile_fifo_never_opened
	else fail hostile_fifo_never_opened "the FIFO's writer was released (exit $rc: $(tail -n 1 "$TMP/fifo.err"))"; fi
	kill "$writer" 2>/dev/null
	nsenter -t "$fifo" -m umount "$H/jit"
	kill -0 "$fifo" 2>/dev/null && pass hostile_fifo_target_lives || fail hostile_fifo_target_lives "the program is gone"
else
	fail hostile_fifo_never_opened "the user's program never got ready: $(cat "$H/fifo.out")"
fi
stop_user fifo


# ---- 4. JIT code that never repeats a pc (finding 4): past the cap of distinct frames (here
# 2000, a test hook; 1 Mi by default) new frames are one marker, the distinct stacks stop
# growing, and the summary and /metrics say how many frames were named so
mkdir -p "$H/churn"
chown "$uid:$gid" "$H/churn"
as_user "$H/jit" "$H/churn" churn >/dev/null 2>&1 &
if wait_file "$H/churn/ready" 100; then
	churn=$(cat "$H/churn/ready")
	port=$(free_port)
	MEMTRACED_TEST_MAX_SYMBOLIZED=2000 "$MT" -p "$churn" --rate 1e-2 -d 6 --listen "127.0.0.1:$port" \
		-o "$TMP/churn.ctf" 2>"$TMP/churn.err" &
	m=$!
	sleep 5
	curl -s "http://127.0.0.1:$port/metrics" >"$TMP/churn.metrics"
	wait $m
	over=$(grep -o '[0-9]* frames named "\[over the cap of distinct frames\]"' "$TMP/churn.err" | cut -d' ' -f1)
	stacks=$(grep -o '[0-9]* distinct stacks' "$TMP/churn.err" | cut -d' ' -f1)
	if [ "${over:-0}" -gt 1000 ] && [ "${stacks:-99999}" -le 2100 ]; then pass hostile_jit_churn_capped
	else fail hostile_jit_churn_capped "${over:-no} frames over the cap, ${stacks:-?} distinct stacks: $(tail -n 1 "$TMP/churn.err" | cut -c1-300)"; fi
	check hostile_jit_churn_metrics grep -qE "^memtraced_frames_over_cap_total\{pid=\"$churn\",comm=\"[^\"]*\"[^}]*,cap=\"distinct_frames\"\} [1-9]" "$TMP/churn.metrics"
else
	fail hostile_jit_churn_capped "the user's program never got ready"
fi
touch "$H/churn/stop"



# ---- 5. a process with 60,000 mapped files (finding 9): attached, and traced, in one pass;
# a normal process beside it attaches within 2 s of the first one
mkdir -p "$H/many" "$H/normal"
chown "$uid:$gid" "$H/many" "$H/normal"
as_user "$TARGETS/many_files" "$H/many" 60000 >/dev/null 2>"$H/many.err" &
as_user "$TARGETS/sites" wait "$H/normal" >/dev/null 2>&1 &
if wait_file "$H/many/ready" 600 && wait_file "$H/normal/ready" 100; then
	many=$(cat "$H/many/ready")
	normal_pid=$(pgrep -u "$uid" -f "sites wait $H/normal" | head -1)
	timeout 120 "$MT" -p "$many" --rate 1e-2 -d 2 -o "$TMP/many.ctf" 2>"$TMP/many.err"
	rc=$?
	ms=$(sed -n 's/.*attached in \([0-9]*\)\.[0-9]* ms.*/\1/p' "$TMP/many.err" | head -1)
	n=$("$DUMP" "$TMP/many.ctf" 2>/dev/null | grep -c ' alloc ')
	if [ "$rc" = 0 ] && [ -n "$ms" ] && [ "$ms" -le 5000 ] && [ "$n" -gt 0 ]; then pass hostile_many_files_traced
	else fail hostile_many_files_traced "exit $rc, attached in ${ms:-?} ms, $n allocations: $(tail -n 1 "$TMP/many.err" | cut -c1-200)"; fi
	# the lines' times, relative to memtraced's start, as they come
	timeout 60 "$MT" --match many_files --match sites --rate 1e-2 -d 3 -o "$TMP/m-%p.ctf" 2>&1 |
		while IFS= read -r l; do echo "$(date +%s%N) $l"; done >"$TMP/match.err"
	first=$(grep -m1 'tracing PID' "$TMP/match.err" | cut -d' ' -f1)
	normal=$(grep -m1 "tracing PID $normal_pid " "$TMP/match.err" | cut -d' ' -f1)
	if [ -n "$first" ] && [ -n "$normal" ] && [ $(( (normal - first) / 1000000 )) -le 2000 ]; then
		pass hostile_normal_attach_beside_many_files
	else
		fail hostile_normal_attach_beside_many_files "first attach at ${first:-never}, the normal process's at ${normal:-never} (ns)"
	fi
else
	fail hostile_many_files_traced "the user's programs never got ready: $(cat "$H/many.err")"
fi
touch "$H/many/stop" "$H/normal/stop"


# ---- 6. who reads the profiles (finding 7): without a token, root's processes are left out
# of every profile (?pid= of one: 403) while the user's are served; with --listen-token, every
# request needs the token and gets root's too; a token file others may read is refused
mkdir -p "$H/rootw" "$H/userw"
chown "$uid:$gid" "$H/userw"
cp "$TARGETS/sites" "$H/svc_tok"
chmod 0755 "$H/svc_tok"
"$H/svc_tok" wait "$H/rootw" >/dev/null 2>&1 &
as_user "$H/svc_tok" wait "$H/userw" >/dev/null 2>&1 &
if wait_file "$H/rootw/ready" 100 && wait_file "$H/userw/ready" 100; then
	rootp=$(pgrep -u 0 -f "svc_tok wait $H/rootw" | head -1)
	userp=$(pgrep -u "$uid" -f "svc_tok wait $H/userw" | head -1)
	P=$(free_port)
	U1=http://127.0.0.1:$P
	"$MT" --match svc_tok --rate 1e-3 --listen "127.0.0.1:$P" -o none -d 30 >/dev/null 2>"$TMP/tok0.err" &
	m=$!
	for _ in $(seq 100); do grep -q "pid=\"$userp\"" <(curl -s "$U1/metrics") && grep -q "pid=\"$rootp\"" <(curl -s "$U1/metrics") && break; sleep 0.1; done
	sleep 1
	check hostile_root_profile_refused_without_token test "$(curl -s -o /dev/null -w '%{http_code}' "$U1/debug/pprof/heap?pid=$rootp")" = 403
	check hostile_user_profile_served test "$(curl -s -o /dev/null -w '%{http_code}' "$U1/debug/pprof/heap?pid=$userp")" = 200
	go tool pprof -tags "$U1/debug/pprof/heap" >"$TMP/tags0.txt" 2>/dev/null
	if grep -q " $userp\$" "$TMP/tags0.txt" && ! grep -q " $rootp\$" "$TMP/tags0.txt"; then pass hostile_all_profile_leaves_root_out
	else fail hostile_all_profile_leaves_root_out "pids labelled: $(grep -o ' [0-9]*$' "$TMP/tags0.txt" | tr '\n' ' ')"; fi
	kill -INT "$m"; wait "$m"
	# with a token
	printf 'tok-%s-0123456789abcdef\n' "$$" >"$H/root/token"
	chmod 0600 "$H/root/token"
	tok=$(head -1 "$H/root/token")
	P=$(free_port)
	U2=http://127.0.0.1:$P
	"$MT" --match svc_tok --rate 1e-3 --listen "127.0.0.1:$P" --listen-token "$H/root/token" -o none -d 30 >/dev/null 2>"$TMP/tok1.err" &
	m=$!
	for _ in $(seq 100); do grep -q "pid=\"$rootp\"" <(curl -s -H "Authorization: Bearer $tok" "$U2/metrics") && break; sleep 0.1; done
	sleep 1
	check hostile_token_needed_for_metrics test "$(curl -s -o /dev/null -w '%{http_code}' "$U2/metrics")" = 401
	check hostile_healthz_without_token test "$(curl -s -o /dev/null -w '%{http_code}' "$U2/healthz")" = 200
	check hostile_wrong_token_refused test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${tok}x" "$U2/debug/pprof/heap")" = 401
	check hostile_token_opens_root_profile test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$U2/debug/pprof/heap?pid=$rootp")" = 200
	kill -INT "$m"; wait "$m"
	chmod 0644 "$H/root/token"
	"$MT" --match svc_tok --listen "127.0.0.1:$(free_port)" --listen-token "$H/root/token" -o none -d 1 >/dev/null 2>"$TMP/tok2.err"
	rc=$?
	if [ "$rc" = 2 ] && grep -q "readable by others than its owner" "$TMP/tok2.err"; then pass hostile_token_file_readable_by_others_refused
	else fail hostile_token_file_readable_by_others_refused "exit $rc: $(tail -n 1 "$TMP/tok2.err")"; fi
else
	fail hostile_root_profile_refused_without_token "the programs never got ready"
fi
touch "$H/rootw/stop" "$H/userw/stop"

wait 2>/dev/null
