#!/usr/bin/env bash
# The default mode never harms a program, fourth round (issue 47). Each case with programs of
# its own, 5 fresh targets where timing matters:
#
# - postgres: Debian's PostgreSQL under `-p POSTMASTER --follow-forks --rate 1` with pgbench,
#   3 attaches: no backend crashed, backends traced (before: every backend forked after the
#   attach died of SIGSEGV in a call into the kernel's [uprobes-trampoline], which fork does
#   not copy, and the server shut down).
# - setxid: a daemon that switches its euid all the time (tests/targets/setxid_loop) is
#   attached with the sampler and let go: it runs on (before: the stub blocked SIGSETXID, and
#   the program and our pthread_create waited for each other for ever).
# - killed: memtraced is killed (-9) while the sampler traces a program; within a few seconds
#   the program's malloc leads to libc again (the sampler put its GOT back by itself, seeing no
#   tracer on its probe for 2 s), 5 fresh targets (before: its wrappers stayed for good).
# - a shim: -- ./start.sh (a script that execs the program) is said to be a script, and the
#   program it runs is traced (before: "not an ELF file: cannot inject: our calls are x86-64
#   code", which reads as an architecture problem).
# - single-thread mode: a single-threaded program is attached with the sampler and let go:
#   glibc's __libc_single_threaded is 1 again, its TCB's multiple_threads 0, and it has one
#   thread, as before (before: our agent's threads took glibc out of that mode for good: malloc
#   locked, and a program whose signal handler mallocs deadlocked).
# - `ld.so PROG`: said to be the dynamic linker itself (before: "statically linked"); one that
#   memtraced starts is traced with uprobes, its allocator found through PROG (before: none).
# - no safe moment for the sampler's start (a test hook: MEMTRACED_TEST_NO_SAFE=start): the
#   default mode falls back to uprobes, says so, and traces the program (before: exit 1).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
for f in "$MT" "$DUMP" "$TARGETS/setxid_loop" "$TARGETS/service_leak" "$TARGETS/got_watch"; do
	if [ ! -e "$f" ]; then
		fail inject_harm_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip inject_harm_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# progress DIR: the rounds the target counted so far
progress() { cat "$1/progress" 2>/dev/null || echo 0; }
# end_target DIR PID: a target told to stop (DIR/stop), given 5 s, then killed; reaped
end_target() {
	touch "$1/stop"
	for _ in $(seq 50); do kill -0 "$2" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$2" 2>/dev/null
	wait "$2" 2>/dev/null
}

# ---- setxid: 5 fresh targets, each attached with the sampler for 1 s and let go
hung=0 placed=0 details=""
for i in 1 2 3 4 5; do
	d=$TMP/setxid$i
	mkdir -p "$d"
	"$TARGETS/setxid_loop" "$d" >"$d/out" 2>&1 &
	t=$!
	wait_file "$d/ready" 100
	sleep 0.2
	timeout 60 "$MT" -p "$t" --inject=required --rate 1e-3 -d 1 -o "$d/t.ctf" >/dev/null 2>"$d/mt.err"
	rc=$?
	grep -q 'sampler placed' "$d/mt.err" && [ $rc = 0 ] && placed=$((placed + 1))
	a=$(progress "$d")
	sleep 1
	b=$(progress "$d")
	if [ "$b" -le "$a" ] || ! kill -0 "$t" 2>/dev/null; then
		hung=$((hung + 1))
		details="$details target $i: rounds $a then $b, memtraced exit $rc: $(tail -n 1 "$d/mt.err");"
	fi
	end_target "$d" "$t"
done
if [ "$hung" = 0 ]; then pass inject_setxid_daemon_runs_on
else fail inject_setxid_daemon_runs_on "$hung of 5 stopped:$details"; fi
check inject_setxid_sampler_placed test "$placed" = 5

# ---- a single-threaded program left in glibc's single-thread mode: 5 fresh targets, each
# asked for its mode, attached with the sampler for 1 s, and asked again once memtraced is gone
# ask_mode DIR: the line the target writes (tests/targets/single_mode.c)
ask_mode() {
	rm -f "$1/mode"
	touch "$1/ask"
	for _ in $(seq 100); do [ -s "$1/mode" ] && break; sleep 0.05; done
	cat "$1/mode" 2>/dev/null || echo "no answer"
}
same=0 traced=0 details=""
for i in 1 2 3 4 5; do
	d=$TMP/single$i
	mkdir -p "$d"
	"$TARGETS/single_mode" "$d" >/dev/null 2>&1 &
	t=$!
	wait_file "$d/ready" 100
	before=$(ask_mode "$d")
	timeout 60 "$MT" -p "$t" --inject=required --rate 1e-2 -d 1 -o "$d/t.ctf" >/dev/null 2>"$d/mt.err"
	rc=$?
	grep -q 'sampler placed' "$d/mt.err" && [ $rc = 0 ] && traced=$((traced + 1))
	after=$(ask_mode "$d")
	if [ "$before" = "single=1 libc=1 tcb=0 threads=1" ] && [ "$after" = "$before" ]; then same=$((same + 1))
	else details="$details target $i: before '$before', after '$after' (memtraced exit $rc);"; fi
	end_target "$d" "$t"
done
if [ "$same" = 5 ]; then pass inject_single_thread_mode_kept
else fail inject_single_thread_mode_kept "$same of 5 as before:$details"; fi
check inject_single_thread_sampler_placed test "$traced" = 5

# ---- no safe moment for the start: uprobes instead, the trace begun anew and whole
d=$TMP/nosafe
mkdir -p "$d"
"$TARGETS/service_leak" "$d" 60 100000 >/dev/null 2>&1 &
t=$!
wait_file "$d/ready" 100
touch "$d/go"
MEMTRACED_TEST_NO_SAFE=start timeout 90 "$MT" -p "$t" --inject --rate 1e-2 -d 2 -o "$d/t.ctf" >/dev/null 2>"$d/mt.err"
rc=$?
n=$("$DUMP" "$d/t.ctf" 2>/dev/null | grep -c 'leak_site\|handle_request')
alive=no
kill -0 "$t" 2>/dev/null && alive=yes
if [ $rc = 0 ] && grep -q "the sampler could not start.*tracing it with uprobes" "$d/mt.err" &&
	[ "${n:-0}" -gt 0 ] && [ $alive = yes ]; then
	pass inject_no_safe_moment_falls_back_to_uprobes
else
	fail inject_no_safe_moment_falls_back_to_uprobes "exit $rc, $n samples at the sites, target alive: $alive: $(tail -n 3 "$d/mt.err" | tr '\n' ' ')"
fi
touch "$d/stop"
wait "$t" 2>/dev/null

# ---- `ld.so PROG`: said to be the dynamic linker (not "statically linked"); one that memtraced
# starts is traced with uprobes, its allocator found through the program ld.so loads
LDSO=/lib64/ld-linux-x86-64.so.2
d=$TMP/ldso
mkdir -p "$d"
"$LDSO" "$TARGETS/service_leak" "$d" 60 100000 >/dev/null 2>&1 &
t=$!
wait_file "$d/ready" 100
timeout 90 "$MT" -p "$t" --inject=required --rate 1e-2 -d 1 -o "$d/t.ctf" >/dev/null 2>"$d/mt.err"
rc=$?
if [ $rc != 0 ] && grep -q "the dynamic linker itself" "$d/mt.err" && ! grep -q "statically linked" "$d/mt.err"
then pass inject_ldso_prog_running_said
else fail inject_ldso_prog_running_said "exit $rc: $(tail -n 2 "$d/mt.err" | tr '\n' ' ')"; fi
touch "$d/stop"
wait "$t" 2>/dev/null
d=$TMP/ldso_cmd
mkdir -p "$d"
touch "$d/go"
timeout 90 "$MT" --rate 1e-2 -o "$d/t.ctf" -- "$LDSO" "$TARGETS/service_leak" "$d" 1 100000 >/dev/null 2>"$d/mt.err"
rc=$?
n=$("$DUMP" "$d/t.ctf" 2>/dev/null | grep -c 'leak_site\|handle_request')
if [ $rc = 0 ] && ! grep -q "statically linked" "$d/mt.err" && [ "${n:-0}" -gt 0 ]
then pass inject_ldso_prog_started_traced
else fail inject_ldso_prog_started_traced "exit $rc, $n samples at the sites: $(grep -m2 'error\|cannot' "$d/mt.err" | tr '\n' ' ')"; fi

# ---- killed: the sampler lets go by itself
ok=0 details=""
for i in 1 2 3 4 5; do
	d=$TMP/killed$i
	mkdir -p "$d"
	"$TARGETS/got_watch" "$d" >"$d/out" 2>&1 &
	t=$!
	wait_file "$d/ready" 100
	"$MT" -p "$t" --inject=required --rate 1e-3 -d 60 -o "$d/t.ctf" >/dev/null 2>"$d/mt.err" &
	m=$!
	for _ in $(seq 200); do grep -q "sampler placed" "$d/mt.err" && break; sleep 0.05; done
	sleep 0.3
	during=$(cat "$d/malloc_in" 2>/dev/null)
	kill -9 "$m"
	wait "$m" 2>/dev/null
	after=""
	for _ in $(seq 100); do # 10 s at most; about 2 s (the lapse) to 2.5 s
		after=$(cat "$d/malloc_in" 2>/dev/null)
		[ "$after" = libc.so.6 ] && break
		sleep 0.1
	done
	if [ "$during" = libmemtraced_sampler.so ] && [ "$after" = libc.so.6 ] && kill -0 "$t" 2>/dev/null; then
		ok=$((ok + 1))
	else
		details="$details target $i: malloc in '$during' while traced, '$after' after the kill;"
	fi
	touch "$d/stop"
	wait "$t" 2>/dev/null
done
if [ "$ok" = 5 ]; then pass inject_killed_sampler_lets_go
else fail inject_killed_sampler_lets_go "$ok of 5:$details"; fi

# ---- a shim is said to be a script
d=$TMP/shim
mkdir -p "$d"
printf '#!/bin/sh\nexec %s "$@"\n' "$TARGETS/service_leak" >"$d/start.sh"
chmod 0755 "$d/start.sh"
(sleep 1.5; touch "$d/go"; sleep 1; touch "$d/stop") &
timeout 60 "$MT" --inject --rate 1e-2 -o "$d/t.ctf" -- "$d/start.sh" "$d" 3 100000 >/dev/null 2>"$d/mt.err"
rc=$?
n=$("$DUMP" "$d/t.ctf" 2>/dev/null | grep -c 'leak_site\|handle_request')
if [ $rc = 0 ] && grep -q "start.sh is a script (#!)" "$d/mt.err" && ! grep -q "x86-64 code" "$d/mt.err" &&
	[ "${n:-0}" -gt 0 ]; then
	pass inject_shim_said_to_be_a_script
else
	fail inject_shim_said_to_be_a_script "exit $rc, $n samples: $(grep -m2 'script\|inject\|x86' "$d/mt.err" | tr '\n' ' ')"
fi
wait

# ---- postgres: backends forked under the sampler live
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/postgres" ] || ! command -v pgbench >/dev/null || ! id postgres >/dev/null 2>&1; then
	fail inject_postgres_backends_live "PostgreSQL's server and pgbench are needed (make deps installs postgresql-15)"
else
	PGD=$(mktemp -d /tmp/memtraced-pg.XXXXXX)
	chown postgres: "$PGD"
	PGPORT=$(free_port)
	as_pg() { setpriv --reuid=postgres --regid=postgres --clear-groups -- env HOME="$PGD" "$@"; }
	as_pg "$PGBIN/initdb" -D "$PGD/data" -A trust >"$PGD/initdb.log" 2>&1
	as_pg "$PGBIN/pg_ctl" -D "$PGD/data" -o "-p $PGPORT -k $PGD -c listen_addresses=" -l "$PGD/pg.log" -w start >/dev/null 2>&1
	as_pg pgbench -h "$PGD" -p "$PGPORT" -i -s 1 postgres >"$PGD/init.log" 2>&1
	pm=$(head -1 "$PGD/data/postmaster.pid" 2>/dev/null)
	bad="" traced=0
	for round in 1 2 3; do
		timeout 90 "$MT" -p "$pm" --inject --rate 1 --follow-forks -d 10 -o "$TMP/pg$round-%p.ctf" >/dev/null 2>"$PGD/mt$round.err" &
		m=$!
		for _ in $(seq 100); do grep -q "tracing PID $pm " "$PGD/mt$round.err" && break; sleep 0.1; done
		as_pg pgbench -h "$PGD" -p "$PGPORT" -c 4 -T 4 postgres >"$PGD/bench$round.out" 2>&1 || bad="$bad round $round: pgbench failed: $(tail -n 1 "$PGD/bench$round.out");"
		wait "$m"
		n=$(grep -c "^memtraced: tracing PID" "$PGD/mt$round.err")
		traced=$((traced + n - 1))
	done
	if grep -q "terminated by signal" "$PGD/pg.log"; then bad="$bad $(grep -m1 'terminated by signal' "$PGD/pg.log")"; fi
	if [ -z "$bad" ] && [ "$traced" -ge 3 ] && kill -0 "$pm" 2>/dev/null; then pass inject_postgres_backends_live
	else fail inject_postgres_backends_live "$traced backends traced in 3 rounds;$bad"; fi
	as_pg "$PGBIN/pg_ctl" -D "$PGD/data" -m fast stop >/dev/null 2>&1
	rm -rf "$PGD"
fi
