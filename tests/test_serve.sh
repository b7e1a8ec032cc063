#!/usr/bin/env bash
# Serving (issue 24, step 2, /metrics and /): memtraced --listen serves the Prometheus text
# exposition of the traced processes, read here by Prometheus's own parser, and an index page;
# the server is the unprivileged parser's (the root daemon holds no socket a client reaches);
# a process that exits leaves no series; only GET and HEAD, no body; an address that is not
# loopback needs --listen-public.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
SITES=$TARGETS/sites
PY=/usr/bin/python3 # Debian's, with python3-prometheus-client
if [ ! -x "$MT" ] || [ ! -x "$SITES" ]; then
	fail serve_built "missing $MT or $SITES (run make)"
	exit 0
fi
if ! command -v curl >/dev/null || ! "$PY" -c 'import prometheus_client.parser' 2>/dev/null; then
	fail serve_tools "curl and python3-prometheus-client are needed (make deps installs them)"
	exit 0
fi
if ! bpf_ready; then
	skip serve_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

cp "$SITES" "$TMP/served"
mkdir -p "$TMP/w1" "$TMP/w2"
"$TMP/served" wait "$TMP/w1" >/dev/null 2>&1 &
a=$!
"$TMP/served" wait "$TMP/w2" >/dev/null 2>&1 &
b=$!
wait_file "$TMP/w1/ready" 100 && wait_file "$TMP/w2/ready" 100
P=$(free_port)
"$MT" --match served --rate 1e-3 --snapshot-dir "$TMP/snaps" --listen "127.0.0.1:$P" --listen-root-profiles --duration 12 \
	>"$TMP/mt.out" 2>"$TMP/mt.err" &
mt=$!
URL=http://127.0.0.1:$P
for _ in $(seq 100); do curl -s -o /dev/null "$URL/metrics" && grep -q "pid=\"$b\"" <(curl -s "$URL/metrics") && break; sleep 0.1; done
sleep 1.5 # a second publication, with samples
curl -s -D "$TMP/h1" "$URL/metrics" >"$TMP/m1.txt"
check serve_metrics_200 grep -q "^HTTP/1.1 200" "$TMP/h1"
check serve_healthz test "$(curl -s "$URL/healthz")" = "ok: 2 processes traced"
check serve_metrics_content_type grep -q -i "^content-type: text/plain; version=0.0.4" "$TMP/h1"
parse() { # FILE: "family type name labels value" per sample, by Prometheus's parser
	"$PY" - "$1" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        print(fam.name, fam.type, s.name, ",".join("%s=%s" % kv for kv in sorted(s.labels.items())), s.value)
PY
}
parse "$TMP/m1.txt" >"$TMP/p1.txt" 2>"$TMP/p1.err"
check serve_metrics_parse test -s "$TMP/p1.txt" -a ! -s "$TMP/p1.err"
for p in $a $b; do
	check "serve_series_of_traced_$([ $p = $a ] && echo first || echo second)" \
		grep -q "^memtraced_samples counter memtraced_samples_total comm=served,exe=[^ ]*/served,pid=$p[, ][^ ]* *[1-9]" "$TMP/p1.txt"
done
check serve_live_bytes_gauge grep -q "^memtraced_live_bytes gauge memtraced_live_bytes comm=served,exe=[^ ]*/served,pid=$a[, ]" "$TMP/p1.txt"
check serve_processes_2 grep -q "^memtraced_processes gauge memtraced_processes  2.0" "$TMP/p1.txt"
check serve_own_cpu grep -q "^process_cpu_seconds counter process_cpu_seconds_total  [0-9]" "$TMP/p1.txt"
fill=$(awk '$1 == "memtraced_ringbuf_fill_ratio" { print $NF }' "$TMP/p1.txt")
check serve_ringbuf_fill test -n "$fill" -a "$(awk -v f="${fill:-2}" 'BEGIN { print (f >= 0 && f <= 1) }')" = 1
curl -s "$URL/" >"$TMP/index.html"
check serve_index_lists_processes grep -q "<td>$a</td>" "$TMP/index.html"
check serve_index_links_profiles grep -q "href=\"/debug/pprof/heap?pid=$a\"" "$TMP/index.html"
# what an operator reads there: version, kernel, uptime, counts; each process's executable
# (never its arguments: issue 46), sizes in units, samples and drops
check serve_index_says_version grep -q "<p>memtraced [0-9][^ ]* on Linux $(uname -r) (.* probes), up 0 h 00 min. 2 processes traced; 0 refused" "$TMP/index.html"
check serve_index_shows_program grep -q "<td>$a</td><td>$TMP/served[ <]" "$TMP/index.html"
check serve_index_no_arguments bash -c "! grep -q 'wait $TMP/w1' '$TMP/index.html'"
check serve_index_sizes_in_units grep -q -E "<td>[0-9.]+ (B|KiB|MiB|GiB)</td><td>[0-9.]+ (B|KiB|MiB|GiB)</td><td>[0-9]+</td><td>0</td>" "$TMP/index.html"
check serve_404 test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/nope")" = 404
check serve_post_refused test "$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary x "$URL/metrics")" = 405
check serve_body_refused test "$(curl -s -o /dev/null -w '%{http_code}' -X GET --data-binary xyz "$URL/metrics")" = 413
long=$(head -c 40000 /dev/zero | tr '\0' a)
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/$long")
check serve_long_url_refused test "$code" != 200 -a "$code" != 404
# the server is the parser's: the parser (nobody) holds the listening socket and every
# connection; the root daemon keeps a copy of the listening socket for a restarted parser
# (issue 36) but never accepts on it: it holds no connection
parser=$(parser_of "$mt")
socks() { ls -l /proc/"$1"/fd 2>/dev/null | grep -c 'socket:'; }
inode=$(awk -v p="$(printf '%04X' "$P")" '$2 ~ ":" p "$" && $4 == "0A" { print $10 }' /proc/net/tcp | head -n 1)
check serve_parser_holds_the_socket test -n "$parser" -a -n "$inode" -a "$(ls -l /proc/"$parser"/fd 2>/dev/null | grep -c "socket:\[$inode\]")" = 1
exec 7<>"/dev/tcp/127.0.0.1/$P"
sleep 0.3 # accepted
conns=$(awk -v p="$(printf '%04X' "$P")" '$2 ~ ":" p "$" && $4 == "01" { print $10 }' /proc/net/tcp)
held_by() { for i in $conns; do ls -l /proc/"$1"/fd 2>/dev/null | grep -c "socket:\[$i\]"; done | awk '{ s += $1 } END { print s + 0 }'; }
check serve_parser_holds_the_connection test -n "$conns" -a "$(held_by "$parser")" -ge 1
check serve_daemon_holds_no_connection test -n "$conns" -a "$(held_by "$mt")" = 0
exec 7>&-
# a slow client that sends half a request does not stop the next scrape
exec 7<>/dev/tcp/127.0.0.1/"$P"
printf 'GET /metrics HTTP/1.1\r\nHost: x\r\n' >&7
check serve_not_stalled_by_slow_client test "$(curl -s -m 3 -o /dev/null -w '%{http_code}' "$URL/metrics")" = 200
exec 7>&-
# a process that exits: its series go
kill "$b"
wait "$b" 2>/dev/null
sleep 2.5
curl -s "$URL/metrics" >"$TMP/m2.txt"
parse "$TMP/m2.txt" >"$TMP/p2.txt"
if grep -q "pid=$b " "$TMP/p2.txt"; then fail serve_exited_series_gone "$(grep "pid=$b " "$TMP/p2.txt" | head -2)"
else pass serve_exited_series_gone; fi
check serve_others_stay grep -q "pid=$a " "$TMP/p2.txt"
wait "$mt"
check serve_exit_0 test $? = 0
kill "$a" 2>/dev/null
wait 2>/dev/null

"$MT" --match x --snapshot-dir "$TMP/s2" --listen 0.0.0.0:"$P" >/dev/null 2>"$TMP/pub.err"
check serve_public_needs_flag test $? = 2
check serve_public_says_why grep -q "not a loopback address" "$TMP/pub.err"
# IPv6: [::1]:PORT serves as 127.0.0.1 does; [::]:PORT is public
P6=$(free_port)
"$MT" --match served --snapshot-dir "$TMP/s6" --listen "[::1]:$P6" -d 3 >/dev/null 2>"$TMP/v6.err" &
m6=$!
got=""
for _ in $(seq 40); do got=$(curl -s -g "http://[::1]:$P6/metrics" | grep -c '^memtraced_build_info'); [ "$got" = 1 ] && break; sleep 0.1; done
check serve_ipv6_loopback test "$got" = 1
wait "$m6"
"$MT" --match x --snapshot-dir "$TMP/s2" --listen "[::]:$P" >/dev/null 2>"$TMP/pub6.err"
check serve_ipv6_public_needs_flag grep -q "not a loopback address" "$TMP/pub6.err"
"$MT" --match x --snapshot-dir "$TMP/s2" --listen nonsense >/dev/null 2>"$TMP/bad.err"
check serve_bad_spec_refused test $? = 2
