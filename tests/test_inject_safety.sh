#!/usr/bin/env bash
# --inject must never harm the target (issue 20): tests/targets/inject_hostile.c in each of its
# modes is traced with --inject=required through an attach and a detach; the target must then
# exit 0 with its own output ("result MODE ok"), and memtraced must have placed the sampler.
# - thread_seccomp: a thread confined by a filter of its own that kills on openat is never the
#   one that runs dlopen;
# - blocking calls that return a bare EINTR when merely woken (sockets with SO_RCVTIMEO, poll,
#   select, msgrcv, clock_nanosleep, an inotify read): no EINTR reaches the program;
# - deepbind: a plugin's own malloc/free are left alone (its GOT slots do not resolve to the
#   traced allocator), so no block crosses allocators.
# - nopie: a -no-pie program that takes malloc's and free's addresses (canonical PLT entries,
#   as Debian's node and cc1): its own PLT slots are redirected too, every call is seen at
#   --rate 1, and the sampler's GOT check passes.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
H=$TARGETS/inject_hostile
NOPIE=$TARGETS/inject_nopie
PLUGIN=$TOP/$BUILD/tests/plugins/own_alloc.so
for f in "$MT" "$H" "$NOPIE" "$PLUGIN"; do
	if [ ! -e "$f" ]; then
		fail inject_safety_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip inject_safety_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# run_mode MODE [PLUGIN]: starts the target, traces it for 1 s with --inject=required, lets it
# finish; sets rc_mt, rc_t and the files in $TMP/MODE.
run_mode() {
	local mode=$1 dir=$TMP/$1 tpid
	mkdir -p "$dir" "$dir/stop.dir"
	"$H" "$mode" "$dir/stop" ${2:-} >"$dir/out" 2>"$dir/err" & tpid=$!
	for _ in $(seq 100); do grep -q '^ready' "$dir/out" && break; sleep 0.05; done
	sleep 0.2 # in its call
	timeout 60 "$MT" -p $tpid --inject=required --rate 1e-4 -d 1 -o "$dir/t.ctf" 2>"$dir/mt.err"
	rc_mt=$?
	touch "$dir/stop"
	local i
	for ((i = 0; i < 200; i++)); do kill -0 $tpid 2>/dev/null || break; sleep 0.05; done
	if kill -0 $tpid 2>/dev/null; then
		kill -9 $tpid
		echo "(hung: killed)" >>"$dir/err"
	fi
	wait $tpid; rc_t=$?
}

check_mode() { # MODE [PLUGIN]
	local mode=$1 dir=$TMP/$1
	run_mode "$@"
	if [ "$rc_t" = 0 ] && grep -q "^result $mode ok" "$dir/out"; then pass "inject_${mode}_target_unharmed"
	else fail "inject_${mode}_target_unharmed" "exit $rc_t: $(cat "$dir/out" "$dir/err" | tail -n 3 | tr '\n' ' ')"; fi
	if [ "$rc_mt" = 0 ] && grep -q 'sampler placed\|sampler already in place' "$dir/mt.err"; then
		pass "inject_${mode}_sampler_placed"
	else fail "inject_${mode}_sampler_placed" "memtraced exit $rc_mt: $(tail -n 3 "$dir/mt.err" | tr '\n' ' ')"; fi
}

check_mode thread_seccomp
check_mode malloc_loop
for mode in recv read_sock accept poll select msgrcv clock_nanosleep inotify; do
	check_mode $mode
done
check_mode deepbind "$PLUGIN"

dir=$TMP/nopie
mkdir -p "$dir"
"$NOPIE" "$dir" >"$dir/out" & tpid=$!
for _ in $(seq 100); do grep -q '^ready' "$dir/out" && break; sleep 0.05; done
"$MT" -p $tpid --inject=required --rate 1 -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
for _ in $(seq 300); do grep -q 'tracing PID' "$dir/mt.err" && break; sleep 0.1; done
touch "$dir/go"
wait_file "$dir/done" 300
sleep 0.5
kill -INT $mpid
wait $mpid; rc_mt=$?
touch "$dir/stop"
wait $tpid; rc_t=$?
if [ "$rc_t" = 0 ] && [ "$rc_mt" = 0 ] && grep -q 'GOT check passed' "$dir/mt.err"; then pass inject_nopie_got_check_passes
else fail inject_nopie_got_check_passes "exit $rc_t/$rc_mt: $(grep -E 'GOT|error' "$dir/mt.err" | tr '\n' ' ')"; fi
# 1000 made by direct calls, 1000 through the pointers (the canonical PLT entries), each freed
# the other way, and the program's stdio buffer
if grep -q 'records written (200[0-9] freed, 0 live)' "$dir/mt.err"; then pass inject_nopie_every_call_seen
else fail inject_nopie_every_call_seen "$(grep -o '[0-9]* records written ([^)]*)' "$dir/mt.err")"; fi
