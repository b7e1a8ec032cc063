#!/usr/bin/env bash
# Hostile local users, third round (issue 46). An unprivileged user created here owns the
# targets and every directory it may write; root traces them as an administrator would.
#
# 1. -o never follows what the user planted: a symbolic link to a root file, or a file the user
#    made first, at -o (and at -o with %p under --follow-forks, for the children to come): the
#    root file is intact, the user's file stays empty, and memtraced says why. A directory the
#    user may write (not sticky) is refused for root's trace. The tools run as root do the same.
#    A rerun in root's own directory still replaces its old trace (mode 0600).
# 2. The --inject claim cannot be squatted: the user binds the abstract socket name it used to
#    be and fills its backlog; root's --inject=required traces the user's service anyway.
# 3. A fork loop under -p --follow-forks: the daemon's memory and its stderr stay bounded.
# 4. Decoys of any user started under root's service's name (exec -a) take no --max-processes
#    slot; --match-argv0 asks for them.
# 5. A root process that dropped its euid for a while is root's: 403 without the token.
# 6. The index page shows no process's arguments.
# 7. A public listener counts every loopback address as one; window slots per address.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
for f in "$MT" "$DUMP" "$BIN/memtrace-html" "$TARGETS/prefork" "$TARGETS/service_leak" "$TARGETS/fork_loop"; do
	if [ ! -e "$f" ]; then
		fail hostile_root_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip hostile_root_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
U=mt-hostile
if ! id -u "$U" >/dev/null 2>&1 && ! useradd --system --no-create-home --shell /usr/sbin/nologin "$U"; then
	fail hostile_root_user "cannot create the user $U"
	exit 0
fi
uid=$(id -u "$U")
gid=$(id -g "$U")
USER_RUN=(setpriv --reuid="$uid" --regid="$gid" --clear-groups --)
as_user() { "${USER_RUN[@]}" "$@"; }

H=$(mktemp -d /tmp/memtraced-hostile3.XXXXXX)
chmod 0755 "$H"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$TMP" "$H"' EXIT
cp "$TARGETS/service_leak" "$TARGETS/prefork" "$H/"
chmod 0755 "$H/service_leak" "$H/prefork"
# root's file that a planted link points at
mkdir -m 0700 "$H/root"
echo "root's own data $$" >"$H/root/precious"
chmod 0644 "$H/root/precious"
precious_sum=$(sha256sum <"$H/root/precious")
precious_intact() {
	[ "$(sha256sum <"$H/root/precious")" = "$precious_sum" ] &&
		[ "$(stat -c '%U %a' "$H/root/precious")" = "root 644" ]
}
# the user's own directory (0755, the user's) and a sticky one as /tmp is
mkdir -m 0755 "$H/home" && chown "$uid:$gid" "$H/home"
mkdir -m 1777 "$H/sticky"

# a service of the user's, running until its stop file
start_service() {
	local d=$1
	as_user mkdir -p "$d"
	"${USER_RUN[@]}" "$H/service_leak" "$d" 60 100000 >/dev/null 2>&1 & # $!: the program
	pids+=($!)
	wait_file "$d/ready" 100
	as_user touch "$d/go"
	echo "${pids[-1]}"
}
svc=$(start_service "$H/home/svc")

# ---- 1a. in the user's own directory: a planted link is not followed: refused, said why
as_user ln -s "$H/root/precious" "$H/home/trace.ctf"
"$MT" -p "$svc" --rate 1e-2 -d 1 -o "$H/home/trace.ctf" >"$TMP/1a.out" 2>"$TMP/1a.err"
rc=$?
if [ $rc -ne 0 ] && precious_intact && [ -L "$H/home/trace.ctf" ] &&
	grep -q "belongs to uid $uid" "$TMP/1a.err"; then
	pass hostile_out_link_in_user_dir_refused
else
	fail hostile_out_link_in_user_dir_refused "rc $rc, precious $(precious_intact && echo intact || echo CHANGED): $(tail -n 2 "$TMP/1a.err")"
fi

# ---- 1b. in a sticky directory: a planted link and a file of the user's are refused by name
as_user ln -s "$H/root/precious" "$H/sticky/trace.ctf"
"$MT" -p "$svc" --rate 1e-2 -d 1 -o "$H/sticky/trace.ctf" >"$TMP/1b.out" 2>"$TMP/1b.err"
rc=$?
if [ $rc -ne 0 ] && precious_intact && [ -L "$H/sticky/trace.ctf" ] &&
	grep -q "symbolic link" "$TMP/1b.err"; then
	pass hostile_out_link_in_sticky_dir_refused
else
	fail hostile_out_link_in_sticky_dir_refused "rc $rc, precious $(precious_intact && echo intact || echo CHANGED): $(tail -n 2 "$TMP/1b.err")"
fi
as_user touch "$H/sticky/mine.ctf"
"$MT" -p "$svc" --rate 1e-2 -d 1 -o "$H/sticky/mine.ctf" >"$TMP/1c.out" 2>"$TMP/1c.err"
rc=$?
if [ $rc -ne 0 ] && [ ! -s "$H/sticky/mine.ctf" ] && [ "$(stat -c %U "$H/sticky/mine.ctf")" = "$U" ] &&
	grep -q "belongs to uid $uid" "$TMP/1c.err"; then
	pass hostile_out_user_file_not_written
else
	fail hostile_out_user_file_not_written "rc $rc, size $(stat -c %s "$H/sticky/mine.ctf"): $(tail -n 2 "$TMP/1c.err")"
fi

# ---- 1c. the same sticky directory, a name nobody planted: traced, root's, 0600
"$MT" -p "$svc" --rate 1e-2 -d 1 -o "$H/sticky/fresh.ctf" >"$TMP/1d.out" 2>"$TMP/1d.err"
if [ "$(stat -c '%U %a' "$H/sticky/fresh.ctf" 2>/dev/null)" = "root 600" ] &&
	"$DUMP" "$H/sticky/fresh.ctf" >/dev/null 2>&1; then
	pass hostile_out_sticky_fresh_name_traced
else
	fail hostile_out_sticky_fresh_name_traced "$(stat -c '%U %a' "$H/sticky/fresh.ctf" 2>&1): $(tail -n 2 "$TMP/1d.err")"
fi

# ---- 1d. a rerun in root's directory replaces root's old trace (not through it: a second
# name of the old file keeps the old bytes)
"$MT" -p "$svc" --rate 1e-2 -d 1 -o "$TMP/again.ctf" >/dev/null 2>"$TMP/1e1.err"
ln "$TMP/again.ctf" "$TMP/again.old"
old=$(sha256sum <"$TMP/again.old")
"$MT" -p "$svc" --rate 1e-2 -d 1 -o "$TMP/again.ctf" >/dev/null 2>"$TMP/1e2.err"
if [ "$(sha256sum <"$TMP/again.old")" = "$old" ] && [ "$(stat -c %i "$TMP/again.ctf")" != "$(stat -c %i "$TMP/again.old")" ] &&
	"$DUMP" "$TMP/again.ctf" >/dev/null 2>&1 && [ "$(stat -c %a "$TMP/again.ctf")" = 600 ]; then
	pass hostile_out_rerun_replaces_root_trace
else
	fail hostile_out_rerun_replaces_root_trace "$(tail -n 2 "$TMP/1e2.err")"
fi
touch "$H/home/svc/stop"

# ---- 1e. --follow-forks into a sticky directory: the children's names were planted (links to
# root's file and files of the user's for the next pids): each refused, the parent traced
mkdir -p "$H/sticky/pf" && chown "$uid:$gid" "$H/sticky/pf"
"${USER_RUN[@]}" "$H/prefork" "$H/sticky/pf" 2 >/dev/null 2>&1 &
ppid=$!
pids+=($ppid)
wait_file "$H/sticky/pf/ready" 100
"$MT" -p "$ppid" --follow-forks --rate 1e-2 -d 4 -o "$H/sticky/w-%p.ctf" >"$TMP/1f.out" 2>"$TMP/1f.err" &
mt=$!
sleep 1
last=$(cat /proc/sys/kernel/ns_last_pid)
as_user sh -c 'for i in $(seq 1 300); do p=$(('"$last"' + i)); if [ $((i % 2)) = 0 ]; then ln -s '"$H/root/precious"' '"$H"'/sticky/w-$p.ctf; else : >'"$H"'/sticky/w-$p.ctf; fi; done'
kill -HUP "$ppid"
wait_file "$H/sticky/pf/reloaded" 100
sleep 1
wait "$mt"
new=$(cat "$H/sticky/pf/workers" 2>/dev/null | tr '\n' ' ')
grew=$(find "$H/sticky" -maxdepth 1 -name 'w-*.ctf' -type f -user "$U" -size +0 | wc -l)
planted_new=0
for w in $new; do [ -L "$H/sticky/w-$w.ctf" ] || [ "$(stat -c %U "$H/sticky/w-$w.ctf" 2>/dev/null)" = "$U" ] && planted_new=$((planted_new + 1)); done
if precious_intact && [ "$grew" = 0 ] && [ "$planted_new" -ge 1 ] &&
	[ "$(stat -c %U "$H/sticky/w-$ppid.ctf" 2>/dev/null)" = root ] &&
	grep -q "will not write the trace file" "$TMP/1f.err"; then
	pass hostile_out_follow_forks_planted_children
else
	fail hostile_out_follow_forks_planted_children "precious $(precious_intact && echo intact || echo CHANGED), user files grown $grew, new workers planted $planted_new ($new): $(grep -m2 -i 'trace file\|not followed' "$TMP/1f.err")"
fi
touch "$H/sticky/pf/stop"

# ---- 1f. the tools, run as root, do the same
cp "$TMP/again.ctf" "$H/sticky/t.ctf"
as_user ln -s "$H/root/precious" "$H/sticky/page.html"
"$BIN/memtrace-html" -o "$H/sticky/page.html" "$H/sticky/t.ctf" >/dev/null 2>"$TMP/1g.err"
rc=$?
if [ $rc -ne 0 ] && precious_intact && grep -q "symbolic link" "$TMP/1g.err"; then
	pass hostile_out_tool_link_refused
else
	fail hostile_out_tool_link_refused "rc $rc: $(tail -n 2 "$TMP/1g.err")"
fi

# ---- 2. the --inject claim cannot be squatted: the user binds the abstract socket the claim
# used to be, for its own service, and fills its backlog; root traces it with the sampler anyway
svc3=$(start_service "$H/home/svc3")
cat >"$H/squat.py" <<'PY'
import os, socket, sys, time
pid = sys.argv[1]
st = open("/proc/%s/stat" % pid).read()
start = st[st.rindex(")") + 2:].split()[19]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0memtraced-inject/%s/%s" % (pid, start))
s.listen(0)
held = []
for _ in range(8):   # a full backlog: a blocking connect() would wait for ever
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.setblocking(False)
    try: c.connect("\0memtraced-inject/%s/%s" % (pid, start))
    except OSError: pass
    held.append(c)
open(sys.argv[2], "w").close()
time.sleep(60)
PY
chmod 0644 "$H/squat.py"
"${USER_RUN[@]}" /usr/bin/python3 "$H/squat.py" "$svc3" "$H/home/squatting" >"$TMP/squat.out" 2>&1 &
pids+=($!)
if wait_file "$H/home/squatting" 100; then
	timeout 60 "$MT" -p "$svc3" --inject=required --rate 1e-2 -d 2 -o "$TMP/squat.ctf" >/dev/null 2>"$TMP/2.err"
	rc=$?
	n=$("$DUMP" "$TMP/squat.ctf" 2>/dev/null | grep -c leak_site)
	if [ $rc = 0 ] && [ "${n:-0}" -gt 0 ] && ! grep -q "already" "$TMP/2.err"; then pass hostile_claim_squat_traced_anyway
	else fail hostile_claim_squat_traced_anyway "exit $rc, $n leak_site samples: $(tail -n 2 "$TMP/2.err")"; fi
else
	fail hostile_claim_squat_traced_anyway "the squatter never bound: $(cat "$TMP/squat.out")"
fi
touch "$H/home/svc3/stop"

# ---- 3. a fork loop of the user's (1000 forks a second, each child living 300 ms) under
# -p --follow-forks: the daemon's peak RSS stays under 256 MiB (the default --max-processes 64
# forked children at once, and each child that cannot be followed freed at once: ~100 MiB
# here; 500-830 MB when they piled up until the loop's next turn), and its lines about children not
# followed bounded (5 in full a 10 s window, the rest summed up; 11-18k lines in 20 s before)
mkdir -p "$H/home/fl" && chown "$uid:$gid" "$H/home/fl"
cp "$TARGETS/fork_loop" "$H/fork_loop" && chmod 0755 "$H/fork_loop"
"${USER_RUN[@]}" "$H/fork_loop" "$H/home/fl" 1000 300 >/dev/null 2>&1 &
flp=$!
pids+=($flp)
if wait_file "$H/home/fl/ready" 100; then
	"$MT" -p "$flp" --follow-forks --rate 1e-2 -d 20 -o "$TMP/fl-%p.ctf" >/dev/null 2>"$TMP/3.err" &
	m=$!
	hwm=0
	while kill -0 "$m" 2>/dev/null; do
		h=$(awk '/^VmHWM:/ { print $2 }' "/proc/$m/status" 2>/dev/null)
		[ -n "$h" ] && hwm=$h
		sleep 1
	done
	wait "$m"
	mrc=$?
	touch "$H/home/fl/stop"
	lines=$(wc -l <"$TMP/3.err")
	full=$(grep -c "forked PID .*: not followed" "$TMP/3.err")
	nf=$(grep -c "not followed" "$TMP/3.err")
	traced=$(grep -c "^memtraced: tracing PID" "$TMP/3.err")
	echo "fork loop: daemon peak RSS ${hwm} kB, $lines stderr lines ($full 'not followed' in full), $traced children traced"
	if [ "$hwm" -gt 0 ] && [ "$hwm" -lt 262144 ]; then pass hostile_fork_loop_daemon_rss_bounded
	else fail hostile_fork_loop_daemon_rss_bounded "peak RSS ${hwm} kB (bound 262144)"; fi
	# children's tracers closed on threads of their own while others attach share libbpf's
	# USDT manager: memtraced ends well, its heap whole (it aborted in realloc before)
	if [ "$mrc" = 0 ] && ! grep -qE "realloc\(\)|free\(\)|malloc\(\)|corrupted" "$TMP/3.err"; then
		pass hostile_fork_loop_daemon_ends_well
	else
		fail hostile_fork_loop_daemon_ends_well "exit $mrc: $(grep -E "realloc|free\(|malloc\(|corrupted" "$TMP/3.err" | head -n 2)"
	fi
	# each child traced says a few lines (tracing, exited, its summary); the rest is bounded
	if [ "$lines" -le $((6 * traced + 200)) ] && [ "$full" -le 15 ] && [ "$nf" -le 30 ] && grep -q "forked children not followed: [0-9]* in all" "$TMP/3.err" &&
		[ "$traced" -ge 2 ]; then
		pass hostile_fork_loop_lines_bounded
	else
		fail hostile_fork_loop_lines_bounded "$lines lines, $full in full, $nf not followed, $traced traced: $(tail -n 2 "$TMP/3.err")"
	fi
else
	fail hostile_fork_loop_daemon_rss_bounded "the fork loop never got ready"
	fail hostile_fork_loop_daemon_ends_well "the fork loop never got ready"
fi

# ---- 4. decoys started under root's service's name (exec -a) take no slot of --max-processes:
# root's service is traced, no decoy is
for i in 1 2 3; do
	"${USER_RUN[@]}" bash -c "exec -a decoysvc-$$ sleep 30" &
	pids+=($!)
done
sleep 0.5
mkdir -p "$H/root/rsvc"
cp "$TARGETS/service_leak" "$H/root/decoysvc-$$"
"$H/root/decoysvc-$$" "$H/root/rsvc" 60 100000 >/dev/null 2>&1 &
realp=$!
pids+=($realp)
wait_file "$H/root/rsvc/ready" 100 && touch "$H/root/rsvc/go"
"$MT" --match "decoysvc-$$" --max-processes 1 --rate 1e-2 --snapshot-dir "$TMP/snaps4" -d 2 >/dev/null 2>"$TMP/4.err"
if grep -q "PID $realp .*traced\|tracing PID $realp " "$TMP/4.err" && [ -n "$(ls "$TMP/snaps4" | grep -- "-$realp-")" ] &&
	! grep -q "max-processes\|refused" "$TMP/4.err"; then
	pass hostile_match_decoys_take_no_slot
else
	fail hostile_match_decoys_take_no_slot "$(grep -m3 'tracing PID\|max-processes\|refused' "$TMP/4.err" | tr '\n' ' ')"
fi
# ... and --match-argv0 asks for them: then they match (as before)
"$MT" --match "decoysvc-$$" --match-argv0 --max-processes 8 --rate 1e-2 --snapshot-dir "$TMP/snaps4b" -d 1 >/dev/null 2>"$TMP/4b.err"
n=$(grep -c "tracing PID" "$TMP/4b.err")
check hostile_match_argv0_when_asked test "$n" -ge 4
touch "$H/root/rsvc/stop"

# ---- 5, 6. a root process that dropped its euid for a while (uid line "0 65534 0 65534") is
# root's: its profile is 403 without the token; the index page shows no process's arguments
mkdir -p "$H/drop"
cat >"$H/drop/prog.py" <<'PY'
import os, sys, time
d = sys.argv[1]
open(d + "/ready", "w").close()
os.setresuid(0, 65534, 0)   # real and saved root, effective nobody, as a daemon between requests
keep = []
while not os.path.exists(d + "/stop"):
    keep = [bytearray(64) for _ in range(200)]
    time.sleep(0.01)
PY
/usr/bin/python3 "$H/drop/prog.py" "$H/drop" --password=Sekr1t-$$ >/dev/null 2>&1 &
dropp=$!
pids+=($dropp)
as_user mkdir -p "$H/home/svc2"
"${USER_RUN[@]}" "$H/service_leak" "$H/home/svc2" 60 100000 >/dev/null 2>&1 &
userp=$!
pids+=($userp)
if wait_file "$H/drop/ready" 100 && wait_file "$H/home/svc2/ready" 100; then
	touch "$H/home/svc2/go"
	sleep 0.3
	P=$(free_port)
	URL=http://127.0.0.1:$P
	"$MT" -p "$dropp" -p "$userp" --rate 1e-2 --listen "127.0.0.1:$P" -o none --snapshot-dir "$TMP/snaps56" -d 30 >/dev/null 2>"$TMP/56.err" &
	m=$!
	for _ in $(seq 150); do curl -s "$URL/metrics" | grep -q "pid=\"$dropp\"" && curl -s "$URL/metrics" | grep -q "pid=\"$userp\"" && break; sleep 0.1; done
	sleep 1
	grep '^Uid:' "/proc/$dropp/status" >"$TMP/drop.uid"
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/debug/pprof/heap?pid=$dropp")
	if [ "$code" = 403 ] && grep -q $'^Uid:\t0\t65534\t0' "$TMP/drop.uid"; then pass hostile_dropped_euid_root_profile_refused
	else fail hostile_dropped_euid_root_profile_refused "HTTP $code, $(cat "$TMP/drop.uid")"; fi
	check hostile_dropped_euid_user_profile_served test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/debug/pprof/heap?pid=$userp")" = 200
	curl -s "$URL/" >"$TMP/index.html"
	if grep -q "<td>$dropp</td>" "$TMP/index.html" && grep -q "<td>$userp</td>" "$TMP/index.html" &&
		! grep -q "Sekr1t\|prog.py\|svc2" "$TMP/index.html"; then
		pass hostile_index_page_no_arguments
	else
		fail hostile_index_page_no_arguments "$(grep -o 'Sekr1t[^<]*\|prog.py\|svc2' "$TMP/index.html" | head -3 | tr '\n' ' ') (pids listed: $(grep -c "<td>$dropp</td>\|<td>$userp</td>" "$TMP/index.html"))"
	fi
	kill -INT "$m"; wait "$m"
else
	fail hostile_dropped_euid_root_profile_refused "the programs never got ready"
fi
touch "$H/drop/stop" "$H/home/svc2/stop"
wait 2>/dev/null

# ---- 7. a public listener: every loopback address is one for the per-address limits (a local
# user connecting from 127.0.0.2, .3, ... held all 256 connections); window slots per address:
# one client (here loopback) holds at most 2 of the 4, a client elsewhere gets one meanwhile
ADDR=198.51.100.46   # a second address of this host (on lo), not loopback (TEST-NET-2)
ip addr del "$ADDR/32" dev lo 2>/dev/null
if ip addr add "$ADDR/32" dev lo; then
	trap 'kill "${pids[@]}" 2>/dev/null; ip addr del '"$ADDR/32"' dev lo 2>/dev/null; rm -rf "$TMP" "$H"' EXIT
	svc7=$(start_service "$H/home/svc7")
	P=$(free_port)
	"$MT" -p "$svc7" --rate 1e-2 --listen "0.0.0.0:$P" --listen-public --listen-root-profiles -o none --snapshot-dir "$TMP/snaps7" -d 40 >/dev/null 2>"$TMP/7.err" &
	m=$!
	for _ in $(seq 100); do curl -s "http://$ADDR:$P/metrics" | grep -q "pid=\"$svc7\"" && break; sleep 0.1; done
	/usr/bin/python3 - "$P" >"$TMP/7.conns" 2>&1 <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
held = []
for i in range(100):   # from 127.0.0.2 .. 127.0.0.101, each a "different" address before
    s = socket.socket()
    s.bind(("127.0.0.%d" % (i + 2), 0))
    try:
        s.connect(("127.0.0.1", port))
        held.append(s)
    except OSError:
        pass
time.sleep(1.5)
open_ = 0
for s in held:
    s.setblocking(False)
    try:
        open_ += s.recv(1) != b""
    except BlockingIOError:
        open_ += 1      # nothing to read: still open
    except OSError:
        pass
print("open", open_)
sys.stdout.flush()
time.sleep(3)
PY
	conns=$!
	sleep 2.5
	other=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "http://$ADDR:$P/metrics")
	wait "$conns"
	n=$(awk '/^open/ { print $2 }' "$TMP/7.conns")
	if [ -n "$n" ] && [ "$n" -le 64 ] && [ "$other" = 200 ]; then pass hostile_loopback_one_address
	else fail hostile_loopback_one_address "$n of 100 loopback connections held open (at most 64), another address: HTTP $other; $(cat "$TMP/7.conns" | tail -n 2)"; fi
	# windows: 2 from loopback, the third refused; one from another address is answered
	wp=()
	for _ in 1 2; do curl -s -m 6 -o /dev/null "http://127.0.0.1:$P/debug/pprof/heap?seconds=5" & wp+=($!); done
	sleep 1
	third=$(curl -s -m 2 --interface 127.0.0.3 "http://127.0.0.1:$P/debug/pprof/heap?seconds=5")
	away=$(curl -s -m 6 -o /dev/null -w '%{http_code}' "http://$ADDR:$P/debug/pprof/heap?seconds=1")
	wait "${wp[@]}"
	if [ "$third" = "too many windows (?seconds=N) from your address at once" ] && [ "$away" = 200 ]; then
		pass hostile_windows_per_address
	else
		fail hostile_windows_per_address "third from loopback: '$third', from $ADDR: HTTP $away"
	fi
	kill -INT "$m"; wait "$m"
	touch "$H/home/svc7/stop"
	ip addr del "$ADDR/32" dev lo
else
	fail hostile_loopback_one_address "cannot add the address $ADDR to lo"
fi
wait 2>/dev/null
