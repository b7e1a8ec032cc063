#!/usr/bin/env bash
# Prometheus scrapes memtraced (issue 24, must show): Debian's prometheus on 127.0.0.1 scrapes
# memtraced's /metrics every second while memtraced traces two programs found by --match, one
# started after memtraced; through Prometheus's own HTTP query API both processes' live bytes
# are there, and the leaking one's grow. memtraced asks for a bearer token (--listen-token), which
# Prometheus sends from its job's authorization.credentials_file (issue 35).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
SVC=$TARGETS/service_leak
SITES=$TARGETS/sites
PY=/usr/bin/python3
PROM=/usr/bin/prometheus
if [ ! -x "$MT" ] || [ ! -x "$SVC" ] || [ ! -x "$SITES" ]; then
	fail prometheus_built "missing $MT, $SVC or $SITES (run make)"
	exit 0
fi
if [ ! -x "$PROM" ] || ! command -v curl >/dev/null; then
	fail prometheus_installed "Debian's prometheus and curl are needed (make deps installs them)"
	exit 0
fi
if ! bpf_ready; then
	skip prometheus_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
P=$(free_port)
Q=$(free_port)
QURL=http://127.0.0.1:$Q

cp "$SVC" "$TMP/promleak"
cp "$SITES" "$TMP/promsteady"
mkdir -p "$TMP/a" "$TMP/b"
"$TMP/promleak" "$TMP/a" 60 400000 >/dev/null 2>&1 &
a=$!
wait_file "$TMP/a/ready" 100
touch "$TMP/a/go"
head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$TMP/token"
chmod 0600 "$TMP/token"
"$MT" --match 'prom*' --rate 1e-3 --listen "127.0.0.1:$P" --listen-token "$TMP/token" --duration 90 >"$TMP/mt.out" 2>"$TMP/mt.err" &
mt=$!
sleep 1
"$TMP/promsteady" wait "$TMP/b" >/dev/null 2>&1 & # started after memtraced: found at its exec
b=$!

cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: memtraced
    authorization:
      credentials_file: $TMP/token
    static_configs:
      - targets: ['127.0.0.1:$P']
EOF
"$PROM" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
	--web.listen-address="127.0.0.1:$Q" >"$TMP/prom.log" 2>&1 &
prom=$!

query() { # PROMQL: "pid value" per series, from Prometheus's HTTP API
	curl -s -G "$QURL/api/v1/query" --data-urlencode "query=$1" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
for r in d.get("data", {}).get("result", []):
    print(r["metric"].get("pid", "-"), r["value"][1])'
}
for _ in $(seq 150); do
	[ "$(query 'memtraced_live_bytes{job="memtraced"}' | grep -c -w -e "^$a" -e "^$b")" = 2 ] && break
	sleep 0.2
done
query 'memtraced_live_bytes' >"$TMP/q1.txt"
check prometheus_up test "$(query 'up{job="memtraced"}' | awk '{ print $2 }')" = 1
check prometheus_has_first grep -q "^$a [0-9]" "$TMP/q1.txt"
check prometheus_has_later_one grep -q "^$b [0-9]" "$TMP/q1.txt"
v1=$(awk -v p="$a" '$1 == p { print $2 }' "$TMP/q1.txt")
sleep 4
v2=$(query "memtraced_live_bytes{pid=\"$a\"}" | awk '{ print $2 }')
if awk -v x="${v1:-0}" -v y="${v2:-0}" 'BEGIN { exit !(y > x + 500000) }'; then
	pass prometheus_leak_grows
	echo "# live bytes of the leaking process: $v1, 4 s later $v2 (it leaks 400000 per second)"
else fail prometheus_leak_grows "live bytes $v1 then $v2"; fi
check prometheus_scrape_needs_token test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/metrics")" = 401
check prometheus_samples_rate test -n "$(query "rate(memtraced_samples_total{pid=\"$b\"}[3s]) > 0")"

kill "$prom" 2>/dev/null
touch "$TMP/b/stop"
kill "$a" 2>/dev/null
kill -INT "$mt" 2>/dev/null
wait "$mt"
check prometheus_memtraced_exit_0 test $? = 0
wait 2>/dev/null
