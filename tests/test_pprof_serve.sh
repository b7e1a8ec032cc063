#!/usr/bin/env bash
# Serving profiles (issue 24, step 2): memtraced --listen answers /debug/pprof/heap and
# /debug/pprof/allocs in Go's heap profile layout, read here by `go tool pprof` straight from the
# URL as Parca or Pyroscope would scrape it: the leaking function ranks first by inuse_space, the
# churning one by alloc_space; ?pid= gives one process, the labels pid and comm name them;
# ?seconds=N holds only what those seconds allocated, and does not hold up other requests;
# scrapes while matching processes start and exit all return whole profiles.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
SVC=$TARGETS/service_leak
SITES=$TARGETS/sites
PY=/usr/bin/python3
if [ ! -x "$MT" ] || [ ! -x "$SVC" ] || [ ! -x "$SITES" ]; then
	fail pprof_serve_built "missing $MT, $SVC or $SITES (run make)"
	exit 0
fi
if ! command -v curl >/dev/null || ! command -v go >/dev/null; then
	fail pprof_serve_tools "curl and go (golang-go) are needed (make deps installs them)"
	exit 0
fi
if ! bpf_ready; then
	skip pprof_serve_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
export HOME=$TMP GOCACHE=$TMP/gocache PPROF_TMPDIR=$TMP/pprof
top() { # ARGS...: go tool pprof -top's rows "flat% function", functions with flat > 0 first
	go tool pprof -top "$@" 2>"$TMP/pprof.err" | awk '$1 ~ /^[0-9.]+[kMG]?B$/ && $1 != "0" { print $2, $6 }'
}

cp "$SVC" "$TMP/svcpp"
cp "$SITES" "$TMP/svcpp_sites"
mkdir -p "$TMP/a" "$TMP/b"
LEAK=1000000 # bytes per second
"$TMP/svcpp" "$TMP/a" 40 "$LEAK" >"$TMP/a.out" 2>&1 &
a=$!
"$TMP/svcpp_sites" wait "$TMP/b" >/dev/null 2>&1 &
b=$!
wait_file "$TMP/a/ready" 100 && wait_file "$TMP/b/ready" 100
P=$(free_port)
URL=http://127.0.0.1:$P
"$MT" --match 'svcpp*' --rate 1e-3 --listen "127.0.0.1:$P" --listen-root-profiles --duration 60 >"$TMP/mt.out" 2>"$TMP/mt.err" &
mt=$!
for _ in $(seq 100); do grep -q "pid=\"$b\"" <(curl -s "$URL/metrics") && grep -q "pid=\"$a\"" <(curl -s "$URL/metrics") && break; sleep 0.1; done
touch "$TMP/a/go"
sleep 4

curl -s -D "$TMP/h.txt" -o "$TMP/heap.pb.gz" "$URL/debug/pprof/heap?pid=$a"
check pprof_heap_200 grep -q "^HTTP/1.1 200" "$TMP/h.txt"
check pprof_heap_gzip gzip -t "$TMP/heap.pb.gz"
top -sample_index=inuse_space "$URL/debug/pprof/heap?pid=$a" >"$TMP/inuse.txt"
check pprof_inuse_leak_first test "$(head -n 1 "$TMP/inuse.txt" | cut -d' ' -f2)" = leak_site
top -sample_index=alloc_space "$URL/debug/pprof/heap?pid=$a" >"$TMP/alloc.txt"
check pprof_alloc_churn_first test "$(head -n 1 "$TMP/alloc.txt" | cut -d' ' -f2)" = handle_request
go tool pprof -top "$URL/debug/pprof/heap" 2>/dev/null | grep -q '^Type: inuse_space' &&
	go tool pprof -top "$URL/debug/pprof/allocs" 2>/dev/null | grep -q '^Type: alloc_space'
check pprof_default_sample_types test $? = 0

# labels: every traced process in the whole profile, one with ?pid=
go tool pprof -tags "$URL/debug/pprof/heap" >"$TMP/tags.txt" 2>/dev/null
check pprof_label_pid_of_each grep -q " $a\$" "$TMP/tags.txt"
check pprof_label_pid_of_other grep -q " $b\$" "$TMP/tags.txt"
check pprof_label_comm grep -q ": svcpp_sites$" "$TMP/tags.txt"
check pprof_label_exe grep -q ": /.*/svcpp_sites$" "$TMP/tags.txt" # (a name that outlives the pid)
go tool pprof -tags "$URL/debug/pprof/heap?pid=$b" >"$TMP/tags_b.txt" 2>/dev/null
check pprof_pid_filter test "$(grep -c " $a\$" "$TMP/tags_b.txt")" = 0 -a "$(grep -c " $b\$" "$TMP/tags_b.txt")" = 1
check pprof_untraced_pid_404 test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/debug/pprof/heap?pid=1")" = 404
check pprof_bad_pid_400 test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/debug/pprof/heap?pid=1x")" = 400
check pprof_bad_seconds_400 test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/debug/pprof/heap?seconds=-1")" = 400

# ?seconds=2: the leak of those 2 seconds only, while /metrics answers. The program leaks per
# tick of 10 ms plus its work, fewer ticks a second on a loaded machine: what it leaked over the
# window is its own count (SIGUSR2 prints it) just before and just after
truth_leak() { kill -USR2 "$a"; sleep 0.05; awk '$1 == "truth" && $2 == "leak" { v = $3 } END { print v + 0 }' "$TMP/a.out"; }
t0=$(truth_leak)
curl -s -o "$TMP/win.pb.gz" "$URL/debug/pprof/heap?pid=$a&seconds=2" &
win=$!
sleep 0.5
check pprof_window_holds_up_nothing test "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$URL/metrics")" = 200
wait "$win"
t1=$(truth_leak)
go tool pprof -top -sample_index=inuse_space "$TMP/win.pb.gz" >"$TMP/win.txt" 2>/dev/null
check pprof_window_duration grep -q '^Duration: 2s' "$TMP/win.txt"
leak_kb() { # the leak_site row's flat in kB
	awk '$NF == "leak_site" { v = $1; m = v ~ /MB$/ ? 1024 : v ~ /kB$/ ? 1 : 1 / 1024; sub(/[kMG]?B$/, "", v); print v * m }' "$1"
}
w=$(leak_kb "$TMP/win.txt")
go tool pprof -top -sample_index=inuse_space "$URL/debug/pprof/heap?pid=$a" >"$TMP/all.txt" 2>/dev/null
all=$(leak_kb "$TMP/all.txt")
want=$(( (t1 - t0) / 1024 )) # (the window is inside [t0, t1]: a little less than that)
if awk -v w="$w" -v t="$want" -v a="$all" 'BEGIN { exit !(t > 0 && w > 0.7 * t && w < 1.25 * t && a > 1.8 * w) }'; then
	pass pprof_window_holds_that_window
	echo "# window leak ${w}kB, the program's ~${want}kB over it; since attach ${all}kB"
else fail pprof_window_holds_that_window "window leak ${w}kB, the program's ~${want}kB over it; since attach ${all}kB"; fi

# scrapes while matching processes start and exit: every answer a whole gzip
bad=0
for i in $(seq 12); do
	"$TMP/svcpp_sites" run 300 >/dev/null 2>&1 &
	curl -s -o "$TMP/s$i.pb.gz" "$URL/debug/pprof/heap" && gzip -t "$TMP/s$i.pb.gz" 2>/dev/null || bad=$((bad + 1))
done
wait_pids=$(jobs -p | grep -v -w -e "$mt" -e "$a" -e "$b")
for p in $wait_pids; do wait "$p" 2>/dev/null; done
check pprof_scrapes_during_exits_whole test "$bad" = 0

touch "$TMP/b/stop"
kill "$a" 2>/dev/null
kill -INT "$mt"
wait "$mt"
check pprof_serve_exit_0 test $? = 0
wait 2>/dev/null
