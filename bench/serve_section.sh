# bench/run.sh's serve section (sourced): what --listen's scrapes cost.
#   scrape_ms           serving /debug/pprof/heap?pid=N for a process with 10,000 distinct live
#                       stacks (bench/many_stacks at --rate 1): curl's total time, median of 9
#   scrape_bytes        that profile's size
#   scrape_pair_ratio   micro_alloc's ns per pair under memtraced --listen with a scrape of
#                       /metrics and /debug/pprof/heap every second, over the same without
#                       scrapes (median of per-round ratios; goal within 5%)
serve_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

serve_section() {
	[ "$have_memtraced" = 1 ] && [ -x "$BB/many_stacks" ] && command -v curl >/dev/null ||
		{ na scrape_ms "memtraced, build/bench/many_stacks or curl is missing"; return; }
	local port url d=$TMP/serve
	mkdir -p "$d"
	port=$(serve_port)
	url=http://127.0.0.1:$port
	"$BB/many_stacks" 10000 >"$d/ms.out" 2>&1 &
	local w=$!
	STARTED+=("$w")
	wait_line "$d/ms.out" '^ready' 10 "$w" || { na scrape_ms "many_stacks did not start"; return; }
	"$MEMTRACED" -q --rate 1 -p "$w" --listen "127.0.0.1:$port" --listen-root-profiles -o none >"$d/mt.log" 2>&1 &
	local t=$!
	STARTED+=("$t")
	for _ in $(seq 300); do grep -q "pid=\"$w\"" <(curl -s "$url/metrics") && break; sleep 0.1; done
	kill -USR1 "$w"
	wait_line "$d/ms.out" '^done' 60 "$w"
	sleep 2 # the samples drained
	local a=() i v
	for i in $(seq 9); do
		v=$(curl -s -o "$d/heap.pb.gz" -w '%{time_total}' "$url/debug/pprof/heap?pid=$w")
		a+=("$(awk -v s="$v" 'BEGIN { printf "%.1f", s * 1000 }')")
	done
	set_result scrape_ms "$(median "${a[@]}")"
	set_result scrape_bytes "$(stat -c %s "$d/heap.pb.gz")"
	local stacks
	stacks=$(gzip -dc "$d/heap.pb.gz" | wc -c)
	note scrape_ms "/debug/pprof/heap?pid= of a process with 10,000 distinct live stacks of 17 frames (many_stacks, --rate 1): curl's total time, median of 9; the want waits for the daemon's loop (at most one poll slice); profile $stacks bytes before gzip"
	stop_proc "$t" 10 INT
	kill "$w" 2>/dev/null; wait "$w" 2>/dev/null

	# the pair cost with a scrape every second beside without
	local iters=${BENCH_SERVE_ITERS:-2000000} r mode
	: >"$d/with"; : >"$d/without"
	for r in $(seq "$ROUNDS"); do
		for mode in without with; do
			"$BB/micro_alloc" --cpu 0 --mode mix --iters "$iters" --wait-probes --timeout 90 >"$d/micro.out" 2>&1 &
			w=$!
			STARTED+=("$w")
			wait_line "$d/micro.out" '^ready' 10 "$w" || { echo x >>"$d/$mode"; continue; }
			port=$(serve_port)
			"$MEMTRACED" -q -p "$w" --listen "127.0.0.1:$port" --listen-root-profiles -o none >"$d/mt-$mode.log" 2>&1 &
			t=$!
			STARTED+=("$t")
			local scraper=""
			if [ "$mode" = with ]; then
				( while sleep 1; do
					curl -s -o /dev/null "http://127.0.0.1:$port/metrics"
					curl -s -o /dev/null "http://127.0.0.1:$port/debug/pprof/heap"
				done ) &
				scraper=$!
			fi
			wait "$w"
			[ -n "$scraper" ] && { kill "$scraper"; wait "$scraper" 2>/dev/null; }
			stop_proc "$t" 10 INT 5
			v=$(sed -nE 's/^ns_per_pair=([0-9.]+)/\1/p' "$d/micro.out")
			echo "${v:-x}" >>"$d/$mode"
		done
	done
	set_result scrape_pair_ratio "$(median_ratio "$d/with" "$d/without")"
	note scrape_pair_ratio "micro_alloc (mix, $iters pairs) under memtraced --listen at the default rate: ns per pair with /metrics and /debug/pprof/heap scraped every second over without; median of $ROUNDS interleaved rounds (goal <= 1.05)"
}

# The fleet section: memtraced --match over many processes (issue 24, step 3).
#   daemon_rss_mb_N     memtraced's resident memory (VmRSS) tracing N processes (1, 8, 64)
#                       found by --match, their samples flowing (tests/targets/service_leak at 100 ms ticks: a
#                       service's steady churn, 760 allocations a second, and a slow leak);
#                       parser_rss_mb_N its parser's; daemon_pss_mb_N, parser_pss_mb_N the same
#                       as proportional set sizes (a page mapped twice counted once)
#   daemon_fds_N        memtraced's open file descriptors then
#   attach_ms_1st, attach_ms_64th   from a matching program's exec to memtraced's "traced"
#                       message, for the first process and for the 64th (63 traced already)
fleet_measure() { # N: starts N waiting programs, one at a time, timing the first and the last
	local n=$1 d=$TMP/fleet$1 i p t0 t1
	mkdir -p "$d"
	cp "$(dirname "$SITES_TARGET")/service_leak" "$d/fleetprog"
	"$MEMTRACED" --no-status --match fleetprog --rate 1e-4 --max-processes 100 --listen "127.0.0.1:$(serve_port)" \
		--duration 600 >"$d/mt.out" 2>"$d/mt.err" &
	local mt=$!
	STARTED+=("$mt")
	sleep 1.5 # its lifecycle watch is loaded
	for i in $(seq "$n"); do
		mkdir -p "$d/w$i"
		t0=$(date +%s%N)
		touch "$d/w$i/go" # no wait for a tracer: it runs at once
		"$d/fleetprog" "$d/w$i" 600 2000 100 >/dev/null 2>&1 &
		p=$!
		STARTED+=("$p")
		for _ in $(seq 500); do grep -q "PID $p .*traced" "$d/mt.err" && break; sleep 0.01; done
		t1=$(date +%s%N)
		[ "$i" = 1 ] && echo $(((t1 - t0) / 1000000)) >"$d/first_ms"
		[ "$i" = "$n" ] && echo $(((t1 - t0) / 1000000)) >"$d/last_ms"
	done
	sleep 3 # samples flowing into every session
	local parser=""
	for c in $(ps -o pid= --ppid "$mt"); do [ "$(awk '/^Uid:/ { print $2 }' "/proc/$c/status")" = 65534 ] && parser=$c; done
	set_result "daemon_rss_mb_$n" "$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$mt/status")"
	set_result "parser_rss_mb_$n" "$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$parser/status" 2>/dev/null)"
	# proportional: a page mapped twice (the ring's data pages, a debug file's shared copy in
	# every process's libdw) counts once, as the kernel charges it to the service's cgroup
	set_result "daemon_pss_mb_$n" "$(awk '/^Pss:/ { printf "%.1f", $2 / 1024 }' "/proc/$mt/smaps_rollup")"
	set_result "parser_pss_mb_$n" "$(awk '/^Pss:/ { printf "%.1f", $2 / 1024 }' "/proc/$parser/smaps_rollup" 2>/dev/null)"
	set_result "daemon_fds_$n" "$(ls "/proc/$mt/fd" | wc -l)"
	set_result "traced_$n" "$(grep -c "traced: executable" "$d/mt.err")"
	[ "$n" = 1 ] && set_result attach_ms_1st "$(cat "$d/first_ms")"
	[ "$n" = 64 ] && set_result attach_ms_64th "$(cat "$d/last_ms")"
	for i in $(seq "$n"); do touch "$d/w$i/stop"; done
	stop_proc "$mt" 30 INT 5
}

fleet_section() {
	[ "$have_memtraced" = 1 ] || { na daemon_rss_mb_1 "memtraced is not built"; return; }
	local n
	for n in 1 8 64; do fleet_measure "$n"; done
	note daemon_rss_mb_64 "memtraced --match over N service_leak programs (100 ms ticks: 760 allocations/s each, 200 B/s leaked) at rate 1e-4, 3 s after the last was traced: VmRSS of the daemon (goal: at most 64 + N MB) and of its parser; fds of the daemon; traced_N how many it traced"
	note attach_ms_64th "from the exec of a matching program to memtraced's 'traced' line (polled every 10 ms): the first with none traced, the 64th with 63 traced (goal: as fast as the first)"
}

# The idle section: what processes that allocate nothing cost once picked up (issue 36).
#   daemon_cpu_pct_idle_64   memtraced's CPU (daemon and parser, % of one core) over 10 s while
#                            it traces 64 idle programs (a copy of sleep), picked up at their
#                            exec by --match; idle_traced_64 how many it traced
#   attach_ms_exec           from a matching program's exec to memtraced's "traced" message
#                            (polled every 5 ms), median over the 64; attach_ms_exec_max the
#                            slowest
idle_section() {
	[ "$have_memtraced" = 1 ] || { na daemon_cpu_pct_idle_64 "memtraced is not built"; return; }
	local d=$TMP/idle i p t0 t1
	mkdir -p "$d"
	cp "$(command -v sleep)" "$d/idleprog"
	"$MEMTRACED" --no-status --match idleprog --rate 1e-4 --max-processes 100 --listen "127.0.0.1:$(serve_port)" \
		-o none --duration 600 >"$d/mt.out" 2>"$d/mt.err" &
	local mt=$!
	STARTED+=("$mt")
	sleep 1.5 # its lifecycle watch is loaded
	: >"$d/ms"
	for i in $(seq 64); do
		t0=$(date +%s%N)
		"$d/idleprog" 600 &
		p=$!
		STARTED+=("$p")
		for _ in $(seq 1000); do grep -q "PID $p .*traced" "$d/mt.err" && break; sleep 0.005; done
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000000)) >>"$d/ms"
	done
	sleep 2 # every pick-up done
	local parser="" ticks a0 a1
	for c in $(ps -o pid= --ppid "$mt"); do [ "$(awk '/^Uid:/ { print $2 }' "/proc/$c/status")" = 65534 ] && parser=$c; done
	cpu() { awk '{ s += $14 + $15 } END { print s }' "/proc/$mt/stat" ${parser:+"/proc/$parser/stat"}; }
	ticks=$(getconf CLK_TCK)
	a0=$(cpu)
	sleep 10
	a1=$(cpu)
	set_result daemon_cpu_pct_idle_64 "$(awk -v a="$a0" -v b="$a1" -v t="$ticks" 'BEGIN { printf "%.2f", (b - a) / t / 10 * 100 }')"
	set_result idle_traced_64 "$(grep -c "traced: executable" "$d/mt.err")"
	set_result attach_ms_exec "$(median $(cat "$d/ms"))"
	set_result attach_ms_exec_max "$(sort -n "$d/ms" | tail -1)"
	note daemon_cpu_pct_idle_64 "memtraced --match over 64 copies of sleep (no allocation after their start) picked up at their exec: CPU of the daemon and its parser over 10 s, % of one core (goal <= 1)"
	note attach_ms_exec "from the exec of a matching program to memtraced's 'traced' line (polled every 5 ms), median of 64 started one after another (goal <= 50); attach_ms_exec_max the slowest"
	pkill -f "$d/idleprog" 2>/dev/null
	stop_proc "$mt" 30 INT 5
}

# The forks section: a fork loop under -p --follow-forks (issue 46), side by side with the same
# loop traced without --follow-forks.
#   daemon_rss_mb_forks_1000      memtraced's peak RSS (VmHWM) over 20 s while tests/targets/
#                                 fork_loop forks 1000 children a second, each living 300 ms
#                                 (the default --max-processes 64 children at once)
#   daemon_rss_mb_forks_parent    the same loop, its parent alone traced
#   forks_children_traced, forks_stderr_lines   what the first run traced and printed
forks_section() {
	[ "$have_memtraced" = 1 ] || { na daemon_rss_mb_forks_1000 "memtraced is not built"; return; }
	local loop=$TOP/$BUILD/tests/targets/fork_loop variant d p m h hwm
	[ -x "$loop" ] || { na daemon_rss_mb_forks_1000 "tests/targets/fork_loop is not built"; return; }
	for variant in follow parent; do
		d=$TMP/forks-$variant
		mkdir -p "$d"
		"$loop" "$d" 1000 300 >/dev/null 2>&1 &
		p=$!
		STARTED+=("$p")
		for _ in $(seq 100); do [ -e "$d/ready" ] && break; sleep 0.1; done
		if [ "$variant" = follow ]; then
			"$MEMTRACED" --no-status -p "$p" --follow-forks --rate 1e-2 -d 20 -o "$d/t-%p.ctf" >/dev/null 2>"$d/mt.err" &
		else
			"$MEMTRACED" --no-status -p "$p" --rate 1e-2 -d 20 -o "$d/t.ctf" >/dev/null 2>"$d/mt.err" &
		fi
		m=$!
		hwm=0
		while kill -0 "$m" 2>/dev/null; do
			h=$(awk '/^VmHWM:/ { print $2 }' "/proc/$m/status" 2>/dev/null)
			[ -n "$h" ] && hwm=$h
			sleep 1
		done
		wait "$m"
		touch "$d/stop"
		wait "$p" 2>/dev/null
		set_result "daemon_rss_mb_forks_$([ $variant = follow ] && echo 1000 || echo parent)" "$(awk -v k="$hwm" 'BEGIN { printf "%.1f", k / 1024 }')"
		if [ "$variant" = follow ]; then
			set_result forks_children_traced "$(grep -c 'tracing PID' "$d/mt.err")"
			set_result forks_stderr_lines "$(wc -l <"$d/mt.err")"
		fi
	done
	note daemon_rss_mb_forks_1000 "fork_loop DIR 1000 300 under memtraced -p --follow-forks --rate 1e-2 for 20 s: the daemon's VmHWM; 1.15 GB / 183 MB / 287 MB in the issue's runs before the cap (issue 46); _parent: the same loop, --follow-forks not given"
}
