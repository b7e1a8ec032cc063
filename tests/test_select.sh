#!/usr/bin/env bash
# Finding targets (issue 24, step 1): --match traces the processes whose program matches, those
# running at the start and those that exec such a program later, and not the others; a
# selected process that execs a program that does not match is let go; --cgroup traces the
# processes of a cgroup v2 subtree; --max-processes caps them with a warning. Each traced
# process gets its snapshots (no continuous trace by default).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
SITES=$TARGETS/sites
if [ ! -x "$MT" ] || [ ! -x "$SITES" ]; then
	fail select_built "missing $MT or $SITES (run make)"
	exit 0
fi
if ! bpf_ready; then
	skip select_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# two programs that differ only by name, and a shell by another name that execs one of them
cp "$SITES" "$TMP/selme"
cp "$SITES" "$TMP/other"
cp "$(readlink -f /bin/sh)" "$TMP/selsh"
PIDS=()
start() { # NAME DIR ARGS...: a waiting workload; its pid in $started
	local dir=$2
	mkdir -p "$dir"
	"$TMP/$1" wait "$dir" >/dev/null 2>&1 &
	started=$!
	PIDS+=("$started")
	wait_file "$dir/ready" 100
}
[ -n "${KEEP_TMP:-}" ] && trap - EXIT
stop_all() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	PIDS=()
}
snaps_of() { ls "$1"/memtrace-"$2"-*.ctf 2>/dev/null | wc -l; }

cd "$TMP" || exit 2 # where a default trace would go
# ---- --match: one running before, one started after, one that does not match
start selme "$TMP/w1"; before=$started
start other "$TMP/w2"; unmatched=$started
"$MT" --match 'sel*' --snapshot-dir "$TMP/snaps" --duration 8 >"$TMP/m.out" 2>"$TMP/m.err" &
mt=$!
for _ in $(seq 50); do grep -q "PID $before .*traced" "$TMP/m.err" && break; sleep 0.1; done
start selme "$TMP/w3"; after=$started
# a selected shell that execs a program that is not selected: let go at that exec
mkdir -p "$TMP/w4"
"$TMP/selsh" -c "sleep 1; exec $TMP/other wait $TMP/w4" >/dev/null 2>&1 &
away=$!
PIDS+=("$away")
wait "$mt"
rc=$?
stop_all
check select_exit_0 test "$rc" = 0
check select_running_one_traced grep -q "PID $before (.*selme) traced: executable .*selme matches 'sel\*'" "$TMP/m.err"
check select_execd_one_traced grep -q "PID $after (.*selme) traced" "$TMP/m.err"
if grep -q "PID $unmatched" "$TMP/m.err"; then fail select_other_not_traced "$(grep "PID $unmatched" "$TMP/m.err" | head -2)"
else pass select_other_not_traced; fi
check select_snapshots_of_running test "$(snaps_of "$TMP/snaps" "$before")" -ge 1
check select_snapshots_of_execd test "$(snaps_of "$TMP/snaps" "$after")" -ge 1
check select_no_snapshot_of_other test "$(snaps_of "$TMP/snaps" "$unmatched")" = 0
check select_no_continuous_trace test -z "$(ls memtrace-*.ctf 2>/dev/null)"
check select_shell_let_go_at_exec grep -q "PID $away exec'd .*other, which --match/--cgroup do not select" "$TMP/m.err"
# the process found at its exec was traced from its start: its allocations were sampled
check select_execd_one_sampled grep -q -E "PID $after: [0-9]+ allocations and [0-9]+ frees seen, [1-9][0-9]* sampled" "$TMP/m.err"

# ---- --max-processes: two match, one is traced, the other is warned about
start selme "$TMP/w5"; first=$started
start selme "$TMP/w6"; second=$started
"$MT" --match selme --max-processes 1 --snapshot-dir "$TMP/snaps2" --duration 2 >/dev/null 2>"$TMP/x.err"
stop_all
check select_max_processes_warns grep -q "PID $second (.*) not traced: --max-processes 1 are traced already" "$TMP/x.err"
check select_max_processes_traces_first test "$(snaps_of "$TMP/snaps2" "$first")" -ge 1

# ---- --cgroup: only the process moved into a cgroup of ours
CGROOT=$(findmnt -t cgroup2 -n -o TARGET | head -n 1) # /sys/fs/cgroup/unified on a hybrid host
CG=$CGROOT/memtraced-test-$$
if [ -n "$CGROOT" ] && mkdir "$CG" 2>/dev/null; then
	start other "$TMP/w7"; inside=$started
	start other "$TMP/w8"; outside=$started
	echo "$inside" >"$CG/cgroup.procs"
	"$MT" --cgroup "memtraced-test-$$" --snapshot-dir "$TMP/snaps3" --duration 2 >/dev/null 2>"$TMP/c.err"
	rc=$?
	stop_all
	check select_cgroup_exit_0 test "$rc" = 0
	check select_cgroup_member_traced grep -q "PID $inside (.*) traced: in cgroup /memtraced-test-$$" "$TMP/c.err"
	check select_cgroup_other_not_traced test "$(snaps_of "$TMP/snaps3" "$outside")" = 0
	rmdir "$CG" 2>/dev/null
else
	fail select_cgroup "cannot create $CG (is a cgroup v2 hierarchy mounted? findmnt -t cgroup2)"
fi
"$MT" --cgroup no-such-cgroup-$$ --snapshot-dir "$TMP/s4" >/dev/null 2>"$TMP/bad.err"
check select_bad_cgroup_refused test $? = 2
check select_bad_cgroup_says_why grep -q "no cgroup v2 directory" "$TMP/bad.err"
"$MT" --match x >/dev/null 2>"$TMP/bad2.err"
check select_needs_an_output grep -q "give --snapshot-dir" "$TMP/bad2.err"

# ---- nothing selected could be traced (a program without an allocator): exit 1, said, and
# counted in /metrics' memtraced_attach_failures_total (tests/test_prometheus.sh)
if [ -x "$TARGETS/inject_nolibc" ]; then
	cp "$TARGETS/inject_nolibc" "$TMP/nolibc_sel"
	sleep 30 | "$TMP/nolibc_sel" >/dev/null 2>&1 &
	PIDS+=("$!")
	sleep 0.3
	"$MT" --match nolibc_sel --snapshot-dir "$TMP/s5" --duration 2 >/dev/null 2>"$TMP/none.err"
	rc=$?
	stop_all
	check select_none_traced_exits_1 test "$rc" = 1
	check select_none_traced_says_so grep -q "error: none of the 1 processes --match/--cgroup selected could be traced" "$TMP/none.err"
else
	fail select_none_traced_built "missing $TARGETS/inject_nolibc (run make)"
fi
