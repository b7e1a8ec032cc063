#!/usr/bin/env bash
# --inject survives memtraced's death at every instant (issue 20): memtraced is SIGKILLed (its
# test hook MEMTRACED_TEST_KILL=PHASE:USEC, as a service manager's stop timeout would) at a
# random delay of 0-5 ms inside each phase of -p --inject: placing the sampler, starting it,
# stopping it at the detach. The target (tests/targets/inject_hostile.c) must run on and exit
# 0 with its own output: malloc_loop (the main thread allocating, three threads in
# pthread_cond_wait) and recv (a socket with SO_RCVTIMEO: no EINTR). And killed while the
# agent's dlopen waits for ld.so's lock (slow_dlopen: another thread's dlopen holds it 1.5 s).
# RUNS (default 10) per phase; make bench runs 50.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
H=$TARGETS/inject_hostile
SLOW=$TOP/$BUILD/tests/plugins/slow_ctor.so
RUNS=${RUNS:-10}
for f in "$MT" "$H" "$SLOW"; do
	if [ ! -e "$f" ]; then
		fail inject_kill_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip inject_kill_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# one_run MODE PHASE USEC [PLUGIN]: 0 when the target was unharmed; why on stdout otherwise
one_run() {
	local mode=$1 phase=$2 usec=$3 dir tpid i
	dir=$(mktemp -d "$TMP/run.XXXXXX")
	"$H" "$mode" "$dir/stop" ${4:-} >"$dir/out" 2>"$dir/err" & tpid=$!
	for ((i = 0; i < 100; i++)); do grep -q '^ready' "$dir/out" && break; sleep 0.02; done
	sleep 0.1
	MEMTRACED_TEST_KILL=$phase:$usec timeout 60 "$MT" -p $tpid --inject=required --rate 1e-3 \
		-d 0.3 -o "$dir/t.ctf" 2>"$dir/mt.err"
	local rc_mt=$?
	sleep 0.3 # the target runs on without memtraced (a stub or the agent thread finishing)
	if ! kill -0 $tpid 2>/dev/null; then
		wait $tpid; echo "died after memtraced exited $rc_mt (status $?): $(tail -n 2 "$dir/err" | tr '\n' ' ')"
		return 1
	fi
	touch "$dir/stop"
	for ((i = 0; i < 200; i++)); do kill -0 $tpid 2>/dev/null || break; sleep 0.05; done
	if kill -0 $tpid 2>/dev/null; then
		kill -9 $tpid; wait $tpid
		echo "hung (memtraced exited $rc_mt)"
		return 1
	fi
	wait $tpid; local rc=$?
	if [ "$rc" != 0 ] || ! grep -q "^result $mode ok" "$dir/out"; then
		echo "exit $rc after memtraced exited $rc_mt: $(cat "$dir/out" "$dir/err" | tail -n 2 | tr '\n' ' ')"
		return 1
	fi
	echo "memtraced $rc_mt"
	return 0
}

for phase in place start stop; do
	bad=0 killed=0 first=""
	for ((r = 0; r < RUNS; r++)); do
		mode=malloc_loop
		[ $((r % 2)) = 1 ] && mode=recv
		usec=$((RANDOM % 5001))
		if ! why=$(one_run $mode $phase $usec); then
			bad=$((bad + 1))
			[ -z "$first" ] && first="$mode at $usec us: $why"
		elif [ "$why" = "memtraced 137" ]; then
			killed=$((killed + 1))
		fi
	done
	if [ "$bad" = 0 ]; then pass "inject_killed_while_${phase}_target_unharmed"
	else fail "inject_killed_while_${phase}_target_unharmed" "$bad of $RUNS: $first"; fi
	echo "# $phase: $RUNS runs, memtraced killed in $killed"
	# the hook works: memtraced did die in that phase (a run may finish before the delay)
	if [ "$killed" -ge $((RUNS / 2)) ]; then pass "inject_kill_hook_fired_while_$phase"
	else fail "inject_kill_hook_fired_while_$phase" "memtraced killed in $killed of $RUNS runs"; fi
done

# killed while the agent thread's dlopen waits seconds for ld.so's lock
bad=0 first=""
for ((r = 0; r < (RUNS + 1) / 2; r++)); do
	usec=$((200000 + RANDOM % 1000000))
	if ! why=$(one_run slow_dlopen place $usec "$SLOW"); then
		bad=$((bad + 1))
		[ -z "$first" ] && first="at $usec us: $why"
	fi
done
if [ "$bad" = 0 ]; then pass inject_killed_during_slow_dlopen_target_unharmed
else fail inject_killed_during_slow_dlopen_target_unharmed "$bad of $(((RUNS + 1) / 2)): $first"; fi
