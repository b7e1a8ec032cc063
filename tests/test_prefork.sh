#!/usr/bin/env bash
# A prefork server's workers under --match (issue 36): they are forked, never exec, and were
# never traced. tests/targets/prefork forks 4 workers that allocate at worker_site, then
# reloads on SIGHUP (4 new ones, as nginx does): every worker, before and after the reload, is
# traced, and its allocations at worker_site are in /metrics and its trace; --no-follow-forks
# leaves them out. Then real ones: nginx (4 workers, reloaded) and redis's BGSAVE child.
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

# ---- real prefork servers (Debian's packages): nginx, a master and 4 workers, reloaded (4 new
# workers forked, never exec'd); redis, whose BGSAVE forks a child that writes the snapshot
if ! command -v nginx >/dev/null || ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
	fail prefork_real_servers "nginx and redis-server are needed (make deps installs them)"
	exit 0
fi
mkdir -p "$TMP/ngx/logs" "$TMP/ngx/tmp"
port=$(free_port)
cat >"$TMP/ngx/nginx.conf" <<NGX
daemon off;
master_process on;
worker_processes 4;
pid $TMP/ngx/nginx.pid;
error_log $TMP/ngx/logs/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $TMP/ngx/tmp/body;
	proxy_temp_path $TMP/ngx/tmp/proxy;
	fastcgi_temp_path $TMP/ngx/tmp/fastcgi;
	uwsgi_temp_path $TMP/ngx/tmp/uwsgi;
	scgi_temp_path $TMP/ngx/tmp/scgi;
	server { listen 127.0.0.1:$port; location / { return 200 "ok\n"; } }
}
NGX
"$MT" --match nginx --rate 1e-2 -o none --listen "127.0.0.1:$(free_port)" -d 120 >/dev/null 2>"$TMP/ngx.err" &
mt=$!
sleep 1.5
nginx -e "$TMP/ngx/logs/error.log" -p "$TMP/ngx" -c "$TMP/ngx/nginx.conf" &
master=$!
workers() { pgrep -P "$master" | sort; }
for _ in $(seq 100); do [ "$(workers | wc -l)" = 4 ] && break; sleep 0.1; done
workers >"$TMP/ngx/first"
traced_in() { # FILE ERR: every pid of FILE has its "tracing PID" line in ERR
	local p
	[ -s "$1" ] || return 1
	for p in $(cat "$1"); do grep -q "tracing PID $p " "$2" || return 1; done
}
for _ in $(seq 100); do traced_in "$TMP/ngx/first" "$TMP/ngx.err" && break; sleep 0.1; done
check prefork_nginx_master_traced grep -q "PID $master (.*) traced" "$TMP/ngx.err"
check prefork_nginx_4_workers_traced traced_in "$TMP/ngx/first" "$TMP/ngx.err"
for _ in $(seq 20); do curl -s "http://127.0.0.1:$port/" >/dev/null; done
kill -HUP "$master" # nginx -s reload: new workers, the old ones leave
for _ in $(seq 100); do
	workers >"$TMP/ngx/second"
	[ "$(wc -l <"$TMP/ngx/second")" = 4 ] && [ -z "$(comm -12 "$TMP/ngx/first" "$TMP/ngx/second")" ] && break
	sleep 0.1
done
for _ in $(seq 100); do traced_in "$TMP/ngx/second" "$TMP/ngx.err" && break; sleep 0.1; done
check prefork_nginx_reloaded_workers_traced traced_in "$TMP/ngx/second" "$TMP/ngx.err"
kill -QUIT "$master"; wait "$master" 2>/dev/null
kill -INT "$mt"; wait "$mt"

# redis: BGSAVE forks a child that writes the dump (a few hundred ms with 400k keys)
mkdir -p "$TMP/redis"
rport=$(free_port)
"$MT" --match redis-server --rate 1e-3 -o none --listen "127.0.0.1:$(free_port)" -d 120 >/dev/null 2>"$TMP/redis.err" &
mt=$!
sleep 1.5
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP/redis" --daemonize no \
	--enable-debug-command yes >/dev/null 2>&1 &
rs=$!
for _ in $(seq 100); do redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
for _ in $(seq 100); do grep -q "PID $rs (.*) traced" "$TMP/redis.err" && break; sleep 0.1; done
check prefork_redis_traced grep -q "PID $rs (.*) traced" "$TMP/redis.err"
redis-cli -p "$rport" debug populate 400000 key 64 >/dev/null
redis-cli -p "$rport" bgsave >/dev/null
child=""
for _ in $(seq 200); do child=$(pgrep -P "$rs" | head -n 1); [ -n "$child" ] && break; sleep 0.01; done
for _ in $(seq 100); do
	[ "$(redis-cli -p "$rport" info persistence | tr -d '\r' | sed -n 's/^rdb_bgsave_in_progress://p')" = 0 ] && break
	sleep 0.1
done
if [ -n "$child" ] && grep -q "tracing PID $child " "$TMP/redis.err"; then pass prefork_redis_bgsave_child_traced
else fail prefork_redis_bgsave_child_traced "child '${child}': $(grep -m3 -E "PID ${child:-x}|fork" "$TMP/redis.err" | tr '\n' ' ')"; fi
check prefork_redis_dump_written test -s "$TMP/redis/dump.rdb"
redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1; wait "$rs" 2>/dev/null
kill -INT "$mt"; wait "$mt"
