#!/usr/bin/env bash
# A prefork server's workers under --match (issue 36): they are forked, never exec, and were
# never traced. tests/targets/prefork forks 4 workers that allocate at worker_site, then
# reloads on SIGHUP (4 new ones, as nginx does): every worker, before and after the reload, is
# traced, and its allocations at worker_site are in /metrics and its trace; --no-follow-forks
# leaves them out.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
for f in "$MT" "$DUMP" "$TARGETS/prefork"; do
	if [ ! -e "$f" ]; then
		fail prefork_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip prefork_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
cp "$TARGETS/prefork" "$TMP/preforkd"
mkdir -p "$TMP/w"
"$MT" --match preforkd --rate 1e-2 -o "$TMP/t-%p.ctf" -d 60 >/dev/null 2>"$TMP/mt.err" &
mt=$!
sleep 1.5 # its lifecycle watch is loaded
"$TMP/preforkd" "$TMP/w" 4 &
server=$!
traced_all() { # FILE: every worker pid in FILE has its "tracing PID" line
	local p
	for p in $(cat "$1"); do grep -q "tracing PID $p " "$TMP/mt.err" || return 1; done
}
wait_file "$TMP/w/ready" 100
cp "$TMP/w/workers" "$TMP/first"
for _ in $(seq 100); do traced_all "$TMP/first" && break; sleep 0.1; done
check prefork_workers_traced traced_all "$TMP/first"
kill -HUP "$server"
wait_file "$TMP/w/reloaded" 100
cp "$TMP/w/workers" "$TMP/second"
for _ in $(seq 100); do traced_all "$TMP/second" && break; sleep 0.1; done
check prefork_workers_after_reload_traced traced_all "$TMP/second"
sleep 1
touch "$TMP/w/stop"
wait "$server"
for _ in $(seq 100); do kill -0 "$mt" 2>/dev/null || break; grep -q "PID $server exited" "$TMP/mt.err" && break; sleep 0.1; done
kill -INT "$mt"; wait "$mt"
bad=""
for p in $(cat "$TMP/first" "$TMP/second"); do
	"$DUMP" "$TMP/t-$p.ctf" 2>/dev/null | grep -q ' worker_site$' || bad="$bad $p"
done
if [ -z "$bad" ]; then pass prefork_worker_allocations_at_worker_site
else fail prefork_worker_allocations_at_worker_site "no worker_site allocation in the traces of$bad"; fi

# --no-follow-forks: the server alone
rm -rf "$TMP/w2"; mkdir -p "$TMP/w2"
"$MT" --match preforkd --no-follow-forks --rate 1e-2 -o none --snapshot-dir "$TMP/s2" -d 4 >/dev/null 2>"$TMP/mt2.err" &
mt=$!
mkdir -p "$TMP/s2"
sleep 1.5
"$TMP/preforkd" "$TMP/w2" 2 &
server=$!
wait_file "$TMP/w2/ready" 100
sleep 1.5
n=$(grep -c "tracing PID" "$TMP/mt2.err")
touch "$TMP/w2/stop"; wait "$server"; wait "$mt"
check prefork_no_follow_forks_server_only test "$n" = 1
