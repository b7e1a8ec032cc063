#!/usr/bin/env bash
# Privilege separation: the parsing of a target's files and stacks runs in an unprivileged
# child (nobody, no capabilities, no_new_privs, seccomp), which reaches files only through
# the daemon's broker; a forbidden system call kills it, the daemon says so, and the trace so
# far reads; the root daemon holds no ELF file of the target open (it opens one only to pass it).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
SITES=$TARGETS/sites
if [ ! -x "$MT" ] || [ ! -x "$SITES" ] || [ ! -x "$DUMP" ]; then
	fail privsep_built "missing $MT, $SITES or $DUMP (run make)"
	exit 0
fi
if ! bpf_ready; then
	skip privsep_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# ---- the parser's credentials, read from /proc while it parses
mkdir -p "$TMP/w"
"$MT" -o "$TMP/live.ctf" --rate 1e-2 -- "$SITES" wait "$TMP/w" >"$TMP/live.out" 2>"$TMP/live.err" &
mt=$!
# the root daemon's open files, every 20 ms while it runs (issue 23: it opens a target's ELF
# file only to pass it to the parser): "SAMPLE PATH" for each regular ELF file it holds
(n=0; while kill -0 "$mt" 2>/dev/null; do
	for l in /proc/"$mt"/fd/*; do
		f=$(readlink "$l" 2>/dev/null) || continue
		[ -f "$f" ] && [ "$(head -c 4 "$f" 2>/dev/null | od -An -tx1 | tr -d ' ')" = 7f454c46 ] && echo "$n $f"
	done
	n=$((n + 1)); echo "$n" >"$TMP/fd_samples"; sleep 0.02
done) >"$TMP/fds" 2>/dev/null &
fdwatch=$!
if wait_file "$TMP/w/ready" && sleep 0.5; then
	parser=""
	for c in $(ps -o pid= --ppid "$mt"); do
		[ "$(awk '/^Uid:/ { print $2 }' "/proc/$c/status" 2>/dev/null)" = 65534 ] && parser=$c
	done
	if [ -n "$parser" ]; then
		st=/proc/$parser/status
		field() { awk -v f="$1:" '$1 == f { print $2 }' "$st"; }
		pass privsep_parser_found
		check privsep_capeff_0 test "$(field CapEff)" = 0000000000000000
		check privsep_capprm_capbnd_0 test "$(field CapPrm)$(field CapBnd)" = 00000000000000000000000000000000
		check privsep_seccomp_2 test "$(field Seccomp)" = 2
		check privsep_no_new_privs test "$(field NoNewPrivs)" = 1
		check privsep_uid_gid_nobody test "$(awk '/^Uid:/ { print $2 $3 $4 $5 } ' "$st")$(awk '/^Gid:/ { print $2 $3 $4 $5 } ' "$st")" = 6553465534655346553465534655346553465534
		# every thread of it (the channels' threads too) is confined the same way
		bad=0
		for t in /proc/"$parser"/task/*; do
			grep -q '^Seccomp:[[:space:]]*2' "$t/status" && grep -q '^CapEff:[[:space:]]*0*$' "$t/status" || bad=$((bad + 1))
		done
		check privsep_all_threads_confined test "$bad" = 0
		# its limits: no core file, a bounded count of open files and address space
		lim=/proc/$parser/limits
		check privsep_no_core_file test "$(awk '/^Max core file size/ { print $5 }' "$lim")" = 0
		check privsep_open_files_bounded test "$(awk '/^Max open files/ { print $5 }' "$lim")" -le 16384
		# (not under AddressSanitizer, whose shadow memory is a reservation of terabytes)
		if ldd "$BIN/memtraced-parse" 2>/dev/null | grep -q libasan; then
			check privsep_address_space_unbounded_under_asan test "$(awk '/^Max address space/ { print $4 }' "$lim")" = unlimited
		else
			check privsep_address_space_bounded test "$(awk '/^Max address space/ { print $4 }' "$lim")" != unlimited
		fi
		# a fresh image (memtraced --parser), not a fork holding a copy of the daemon's memory
		check privsep_parser_is_its_own_program test "$(readlink "/proc/$parser/exe") $(tr '\0' ' ' <"/proc/$parser/cmdline")" = "$BIN/memtraced-parse memtraced-parse --parser $mt "
	else
		fail privsep_parser_found "no child of memtraced (PID $mt) runs as nobody: $(ps -o pid=,user=,comm= --ppid "$mt" | tr '\n' ' ')"
	fi
else
	fail privsep_parser_found "the target never got ready: $(tail -n 3 "$TMP/live.err" | tr '\n' ' ')"
fi
# the watcher takes at least 5 samples while the target runs (a sample forks a few commands
# per fd: on a loaded machine a few take longer than the checks above)
for _ in $(seq 300); do [ "$(cat "$TMP/fd_samples" 2>/dev/null || echo 0)" -ge 5 ] && break; sleep 0.1; done
touch "$TMP/w/stop"
wait "$mt"
rc=$?
wait "$fdwatch" 2>/dev/null
# an ELF file seen open in two samples in a row is held, not passed
held=$(awk '{ if (($2) in last && last[$2] == $1 - 1) print $2; last[$2] = $1 }' "$TMP/fds" | sort -u)
samples=$(cat "$TMP/fd_samples" 2>/dev/null)
echo "# the daemon's fds sampled ${samples:-0} times: an ELF file open in $(awk '{ print $1 }' "$TMP/fds" | sort -u | wc -l) of them"
if [ -z "$held" ] && [ "${samples:-0}" -ge 5 ]; then pass privsep_daemon_holds_no_target_elf
else fail privsep_daemon_holds_no_target_elf "${samples:-0} samples; held across samples: $(printf '%s\n' "$held" | head -3 | tr '\n' ' ')"; fi
# the trace of that run is complete and has named frames: the parser did the unwinding
if [ "$rc" = 3 ] && "$DUMP" "$TMP/live.ctf" >"$TMP/live.dump" 2>"$TMP/live.dump.err" &&
	grep -q 'sites.c:[0-9]' "$TMP/live.dump"; then pass privsep_trace_unwound_by_parser
else fail privsep_trace_unwound_by_parser "exit $rc; $(tail -n 2 "$TMP/live.err" "$TMP/live.dump.err" | tr '\n' ' ')"; fi

# ---- the same confinement with --inject and with --follow-forks (issue 23: every mode)
for mode in inject forks; do
	opt=--inject=required
	[ $mode = forks ] && opt=--follow-forks
	rm -rf "$TMP/wm"
	mkdir -p "$TMP/wm"
	"$MT" $opt -o "$TMP/$mode-%p.ctf" --rate 1e-2 -- "$SITES" wait "$TMP/wm" >/dev/null 2>"$TMP/$mode.err" &
	m=$!
	ok=
	if wait_file "$TMP/wm/ready" && sleep 0.3; then
		for c in $(ps -o pid= --ppid "$m"); do
			st=/proc/$c/status
			[ "$(awk '/^Uid:/ { print $2 }' "$st" 2>/dev/null)" = 65534 ] || continue
			grep -q '^Seccomp:[[:space:]]*2' "$st" && grep -q '^CapEff:[[:space:]]*0*$' "$st" &&
				grep -q '^NoNewPrivs:[[:space:]]*1' "$st" && ok=1
		done
	fi
	touch "$TMP/wm/stop"
	wait "$m"
	if [ -n "$ok" ]; then pass "privsep_parser_confined_with_$mode"
	else fail "privsep_parser_confined_with_$mode" "no confined parser found: $(tail -n 2 "$TMP/$mode.err" | tr '\n' ' ')"; fi
done

# ---- what the broker lets it open (a test-only hook tries the paths once confined)
probe="/etc/shadow:/etc/passwd:/proc/1/maps:/proc/1/mem:/proc/self/environ:/proc/1/root/etc/shadow:$SITES:/etc/ld.so.cache:/dev/mem"
MEMTRACED_TEST_PARSER_OPEN=$probe "$MT" -o "$TMP/open.ctf" -- /bin/true 2>"$TMP/open.err"
opened() { grep -q "parser test: open $1: opened" "$TMP/open.err"; }
refused() { grep -q "parser test: open $1: Permission denied" "$TMP/open.err"; }
for p in /etc/shadow /etc/passwd /proc/1/maps /proc/1/mem /proc/self/environ /proc/1/root/etc/shadow /dev/mem; do
	check "privsep_broker_refuses_${p//\//_}" refused "$p"
done
check privsep_broker_opens_elf opened "$SITES"
check privsep_broker_opens_ld_so_cache opened /etc/ld.so.cache

# ---- a forbidden system call (test-only hook: after 50 unwinds the parser makes a socket)
MEMTRACED_TEST_PARSER_SYSCALL=50 "$MT" -o "$TMP/killed.ctf" --rate 1e-2 -- "$SITES" run 3000 \
	>"$TMP/killed.out" 2>"$TMP/killed.err"
rc=$?
check privsep_killed_reported grep -q 'unprivileged parser is gone (killed by SIGSYS: it made a system call its seccomp filter forbids' "$TMP/killed.err"
check privsep_killed_names_the_call grep -q 'the unprivileged parser made a forbidden system call: socket (41)' "$TMP/killed.err"
# the command ran to its end unchanged, with its own exit status
"$SITES" run 3000 >"$TMP/plain.out" 2>/dev/null
prc=$?
check privsep_killed_target_unchanged test "$rc:$(md5sum <"$TMP/killed.out")" = "$prc:$(md5sum <"$TMP/plain.out")"
if "$DUMP" "$TMP/killed.ctf" >"$TMP/killed.dump" 2>"$TMP/killed.dump.err"; then
	n=$(grep -c ' alloc ' "$TMP/killed.dump")
	# the records before the kill are there: 50 unwound (some asked ahead and lost), and a
	# few of the command's first ones, made before its unwinder was prepared (no stack); the
	# run is 3000 allocations at 1e-2 (~1000 records), so a parser that went on is seen
	if [ "$n" -ge 20 ] && [ "$n" -le 100 ]; then pass privsep_killed_trace_readable
	else fail privsep_killed_trace_readable "$n allocations in the trace (want 20..100)"; fi
else
	fail privsep_killed_trace_readable "$(tail -n 2 "$TMP/killed.dump.err" | tr '\n' ' ')"
fi

# ---- -p: the same kill ends memtraced with status 1 and the message
mkdir -p "$TMP/w2"
"$SITES" wait "$TMP/w2" >/dev/null 2>&1 &
tp=$!
if wait_file "$TMP/w2/ready"; then
	MEMTRACED_TEST_PARSER_SYSCALL=20 "$MT" -p "$tp" -o "$TMP/pk.ctf" --rate 1e-2 --duration 5 2>"$TMP/pk.err"
	rc=$?
	if [ "$rc" = 1 ] && grep -q 'killed by SIGSYS' "$TMP/pk.err" && kill -0 "$tp" 2>/dev/null &&
		"$DUMP" "$TMP/pk.ctf" >/dev/null 2>&1; then pass privsep_pid_killed_exit_1_target_runs
	else fail privsep_pid_killed_exit_1_target_runs "exit $rc; $(tail -n 2 "$TMP/pk.err" | tr '\n' ' ')"; fi
else
	fail privsep_pid_killed_exit_1_target_runs "the target never got ready"
fi
touch "$TMP/w2/stop"
wait "$tp"
check privsep_pid_target_exit_status test $? = 3

# ---- a stopped and continued parser lives on (issue 35): after SIGCONT the kernel resumes an
# interrupted sleep or poll through restart_syscall, which the filter forbade ("forbidden
# system call: restart_syscall (219)"), and every trace stopped with the parser
mkdir -p "$TMP/stop"
"$SITES" wait "$TMP/stop" >/dev/null 2>&1 & spid=$!
wait_file "$TMP/stop/ready"
"$MT" -p $spid --rate 1e-3 -d 4 -o "$TMP/stop.ctf" 2>"$TMP/stop.err" & mt=$!
for _ in $(seq 100); do grep -q 'tracing PID' "$TMP/stop.err" && break; sleep 0.05; done
parser=""
for c in $(ps -o pid= --ppid "$mt"); do
	[ "$(awk '/^Uid:/ { print $2 }' "/proc/$c/status" 2>/dev/null)" = 65534 ] && parser=$c
done
for _ in 1 2 3 4 5; do
	[ -n "$parser" ] && kill -STOP "$parser" 2>/dev/null; sleep 0.2
	[ -n "$parser" ] && kill -CONT "$parser" 2>/dev/null; sleep 0.2
done
wait $mt; rc=$?
touch "$TMP/stop/stop"; wait $spid
if [ -n "$parser" ] && [ $rc = 0 ] && ! grep -q 'forbidden system call' "$TMP/stop.err"; then
	pass privsep_parser_survives_stop_and_continue
else fail privsep_parser_survives_stop_and_continue "parser '${parser}', memtraced exit $rc: $(grep -m1 -E 'forbidden|error' "$TMP/stop.err")"; fi

# ---- a host service whose parser dies gets a new one (issue 36: it served nothing more, for
# ever): killed during scrapes and tracing, every process is traced anew, /metrics answers
# again within 2 s with the process's series and the restart counted, samples come again
SVC=$TARGETS/service_leak
mkdir -p "$TMP/host"
cp "$SVC" "$TMP/hostsvc"
"$TMP/hostsvc" "$TMP/host" 120 10000 >/dev/null 2>&1 & hpid=$!
wait_file "$TMP/host/ready"; touch "$TMP/host/go"
port=$(free_port)
"$MT" --match hostsvc --rate 1e-3 --listen "127.0.0.1:$port" -o none -d 90 2>"$TMP/host.err" & mt=$!
scrape() { curl -sf -m 2 "http://127.0.0.1:$port/metrics" >"$TMP/host.metrics" 2>/dev/null; }
for _ in $(seq 200); do scrape && grep -q "pid=\"$hpid\"" "$TMP/host.metrics" && break; sleep 0.05; done
parser=$(parser_of "$mt")
t0=$(date +%s%N)
[ -n "$parser" ] && kill -KILL "$parser"
back=""
for _ in $(seq 80); do
	if scrape && grep -q '^memtraced_parser_restarts_total 1$' "$TMP/host.metrics" &&
		grep -q "pid=\"$hpid\"" "$TMP/host.metrics"; then back=1; break; fi
	sleep 0.025
done
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
new=$(parser_of "$mt")
if [ -n "$parser" ] && [ -n "$back" ] && [ "$ms" -le 2000 ] && [ -n "$new" ] && [ "$new" != "$parser" ] &&
	grep -q 'the unprivileged parser is gone (killed by signal 9 (Killed)): starting a new one' "$TMP/host.err"; then
	pass privsep_host_parser_killed_restarted
else fail privsep_host_parser_killed_restarted "parser '$parser' -> '$new', scrape back: '${back}' after $ms ms: $(grep -m2 -E 'parser|error' "$TMP/host.err" | tr '\n' ' ')"; fi
n=$(grep -c "PID $hpid (.*) traced" "$TMP/host.err")
check privsep_host_process_traced_anew test "$n" = 2
samples() { scrape && awk -v p="pid=\"$hpid\"" 'index($0, "memtraced_samples_total{") == 1 && index($0, p) { print $2 }' "$TMP/host.metrics"; }
got=""
for _ in $(seq 60); do got=$(samples); [ -n "$got" ] && [ "$got" -gt 0 ] && break; sleep 0.1; done
check privsep_host_samples_after_restart test "${got:-0}" -gt 0
kill -0 "$mt" 2>/dev/null && pass privsep_host_daemon_lives || fail privsep_host_daemon_lives "memtraced exited: $(tail -n 2 "$TMP/host.err" | tr '\n' ' ')"
kill -INT "$mt"; wait $mt

# ---- a parser that dies again and again (SIGSYS, a test-only hook: after 20 unwinds it makes
# a socket): restarted with backoff, then, at the 6th death within 60 s, memtraced stops with
# status 1 so that its service manager restarts it; every death says why
MEMTRACED_TEST_PARSER_SYSCALL=20 "$MT" --match hostsvc --rate 1e-2 --listen "127.0.0.1:$(free_port)" -o none -d 90 \
	2>"$TMP/deaths.err" & mt=$!
for _ in $(seq 600); do kill -0 "$mt" 2>/dev/null || break; sleep 0.05; done
wait $mt; rc=$?
n=$(grep -c 'warning: the unprivileged parser is gone (killed by SIGSYS.*: starting a new one' "$TMP/deaths.err")
if [ "$rc" = 1 ] && [ "$n" = 5 ] && grep -q 'gone (killed by SIGSYS.*), 6 times in 60 s: stopping with status 1' "$TMP/deaths.err" &&
	[ "$(grep -c 'forbidden system call: socket' "$TMP/deaths.err")" = 6 ]; then
	pass privsep_host_parser_deaths_exit_1
else fail privsep_host_parser_deaths_exit_1 "exit $rc, $n restarts said: $(grep -m3 -E 'parser|error' "$TMP/deaths.err" | tr '\n' ' ')"; fi
kill -0 "$hpid" 2>/dev/null && pass privsep_host_target_lives || fail privsep_host_target_lives "the traced program is gone"
touch "$TMP/host/stop"; wait $hpid || true
