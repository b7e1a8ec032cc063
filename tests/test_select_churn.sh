#!/usr/bin/env bash
# Processes that come and go (issue 24, must show): over 50 starts and exits of programs that
# --match selects, each is attached at its exec and let go at its exit, and memtraced's open
# file descriptors and resident memory (the daemon's and its parser's) come back to where
# they were after the first ones.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
# a service's steady churn (100 ms ticks), not an allocation loop: a loop that outruns memtraced
# on 2 CPUs keeps tens of MB of records in flight, which would hide a leak or fake one
SERVICE=$TARGETS/service_leak
if [ ! -x "$MT" ] || [ ! -x "$SERVICE" ]; then
	fail churn_built "missing $MT or $SERVICE (run make)"
	exit 0
fi
if ! bpf_ready; then
	skip churn_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
# The least over 2 s: a finished process's BPF object is destroyed on a thread of its own and
# an exec's is loaded ahead, so one sample may catch one in passing.
settled() { # "fds rss parser_fds parser_rss"
	local i a b c d fa=1000000 ra=1000000000 fb=1000000 rb=1000000000
	for i in $(seq 10); do
		a=$(fds "$mt") b=$(rss_kb "$mt") c=$(fds "$parser") d=$(rss_kb "$parser")
		[ "$a" -lt "$fa" ] && fa=$a; [ "$b" -lt "$ra" ] && ra=$b
		[ "$c" -lt "$fb" ] && fb=$c; [ "$d" -lt "$rb" ] && rb=$d
		sleep 0.2
	done
	echo "$fa $ra $fb $rb"
}

cp "$SERVICE" "$TMP/churned"
# under make test SANITIZE=1: AddressSanitizer's quarantine would keep the freed memory
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0" \
"$MT" --match churned --rate 1e-3 --snapshot-dir "$TMP/snaps" --snapshot-keep 1 --duration 300 \
	>"$TMP/mt.out" 2>"$TMP/mt.err" &
mt=$!
mkdir -p "$TMP/anchor"
touch "$TMP/anchor/go"
"$TMP/churned" "$TMP/anchor" 600 2000 100 >/dev/null 2>&1 & # memtraced is up once it traces this one
anchor=$!
for _ in $(seq 100); do grep -q "PID $anchor .*traced" "$TMP/mt.err" 2>/dev/null && break; sleep 0.1; done
parser=$(parser_of "$mt")
n=0
run_one() { # a matching program, traced from its exec, then told to exit; waits for its summary
	n=$((n + 1))
	local d=$TMP/r$n
	mkdir -p "$d"
	touch "$d/go"
	"$TMP/churned" "$d" 600 2000 100 >/dev/null 2>&1 &
	local p=$!
	wait_file "$d/ready" 100
	for _ in $(seq 100); do grep -q "PID $p .*traced" "$TMP/mt.err" && break; sleep 0.05; done
	touch "$d/stop"
	wait "$p" 2>/dev/null
	for _ in $(seq 100); do grep -q -E "PID $p: [0-9]+ allocations and" "$TMP/mt.err" && break; sleep 0.05; done
}
attached() { grep -c "traced: executable churned matches" "$TMP/mt.err"; }
finished() { grep -c -E "PID [0-9]+: [0-9]+ allocations and" "$TMP/mt.err"; }
for i in $(seq 5); do run_one; done # warm-up: caches, the first sessions' buffers
read -r fd0 rss0 pfd0 prss0 < <(settled)
for i in $(seq 50); do run_one; done
read -r fd1 rss1 pfd1 prss1 < <(settled)
echo "# after 5: daemon $fd0 fds, $rss0 kB; parser $pfd0 fds, $prss0 kB. after 55: daemon $fd1 fds, $rss1 kB; parser $pfd1 fds, $prss1 kB"
check churn_all_attached test "$(attached)" -ge 56
check churn_all_let_go test "$(finished)" -ge 55
check churn_daemon_fds_back test "$fd1" -le "$fd0"
check churn_parser_fds_back test "$pfd1" -le "$pfd0"
check churn_daemon_memory_back test "$rss1" -le $((rss0 + 8192)) # a leak of 160 KB a process would show
check churn_parser_memory_back test "$prss1" -le $((prss0 + 8192))
touch "$TMP/anchor/stop"
kill -INT "$mt"
wait "$mt"
check churn_exit_0 test $? = 0
