#!/usr/bin/env bash
# The core checks that tests/test_kernels.sh runs inside a VM of each kernel of the matrix, on
# the built tree (TOP), as root. Prints PASS/FAIL/SKIP lines (tests/run.sh's protocol) to
# stdout and to RESULTS/checks.txt; memtraced's own messages go to RESULTS/NAME.err.
#   core_checks.sh RESULTS
# Each check is small: the VM emulates its CPUs (TCG), 5-20x slower than this machine.
RESULTS=$1
export TOP BUILD=${BUILD:-build}
source "$TOP/tests/lib/test.sh"
exec > >(tee "$RESULTS/checks.txt") 2>&1
MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
REPORT=$BIN/memtrace-report
echo "# kernel $(uname -r)"
cd "$TMP" || exit 2

# save NAME: keeps memtraced's messages of the check for the host's log
save() { cp "$TMP/$1.err" "$RESULTS/$1.err" 2>/dev/null; }
# why NAME: the first error line memtraced printed
why() { grep -m1 -E 'error|warning|not traced|cannot' "$TMP/$1.err" 2>/dev/null | cut -c1-300; }

# What the kernel offers and the attach mode it gets (memtraced --kernel-check)
"$MT" --kernel-check >"$TMP/kcheck.out" 2>"$TMP/kcheck.err"
krc=$?
cp "$TMP/kcheck.out" "$RESULTS/kernel-check.txt"
sed 's/^/# /' "$TMP/kcheck.out"
has() { grep -q "^feature $1 yes" "$TMP/kcheck.out"; }
IFS=. read -r kmaj kmin _ <<<"$(uname -r)"
kver=$((kmaj * 1000 + kmin))
if [ $kver -ge 6013 ]; then want=session; elif [ $kver -ge 6006 ]; then want=multi; else want=perf; fi

if [ $krc != 0 ]; then
	# A kernel memtraced cannot trace on: one line that names what it lacks, the same for
	# every way in, an exit status that says it failed, nothing placed into a target.
	lacks=$(sed -n 's/^cannot trace: //p' "$TMP/kcheck.out")
	if [[ "$lacks" == "kernel $(uname -r) lacks "*": memtraced needs Linux "* ]]
	then pass refused_names_the_kernel_features
	else fail refused_names_the_kernel_features "--kernel-check exited $krc: $(tail -n 2 "$TMP/kcheck.out")"; fi
	sleep 600 & victim=$!
	declare -A ways=([cmd]="-- /bin/true" [pid]="-p $victim" [inject]="--inject=required -p $victim"
		[match]="--match sleep --snapshot-dir $TMP/s --duration 2")
	for w in cmd pid inject match; do
		timeout 120 "$MT" ${ways[$w]} >"$TMP/r-$w.out" 2>"$TMP/r-$w.err"
		rc=$?
		save r-$w
		if [ $rc != 0 ] && [ "$(wc -l <"$TMP/r-$w.err")" -le 2 ] &&
			grep -qF "memtraced: error: $lacks" "$TMP/r-$w.err" && ! grep -q libbpf "$TMP/r-$w.err"
		then pass "refused_in_one_line_$w"
		else fail "refused_in_one_line_$w" "exit $rc, $(wc -l <"$TMP/r-$w.err") lines: $(head -c 300 "$TMP/r-$w.err")"; fi
	done
	if grep -q memtraced_sampler "/proc/$victim/maps"
	then fail refused_inject_placed_nothing "the sampler is in the target"
	else pass refused_inject_placed_nothing; fi
	kill $victim
	echo "# done"
	exit 0
fi
check attach_mode_is_the_fastest grep -q "^mode $want: " "$TMP/kcheck.out"

# -- CMD at --rate 1: every malloc counted once, with its stack
seen() { # seen NAME MODE FN: "ALLOCS FREES" in the summary, truth in $TMP/NAME.truth
	local opt="--inject=no ${ATTACH:-}"
	[ "$2" = inject ] && opt=--inject=required
	timeout 300 "$MT" $opt --rate 1 --ring-size 67108864 -o "$TMP/$1.ctf" -- "$TARGETS/count_calls" "$3" \
		>"$TMP/$1.out" 2>"$TMP/$1.err"
	sed -n 's/^truth allocs=\([0-9]*\) frees=\([0-9]*\)$/\1 \2/p' "$TMP/$1.out" >"$TMP/$1.truth"
	sed -n 's/.*: \([0-9]*\) allocations and \([0-9]*\) frees seen.*/\1 \2/p' "$TMP/$1.err" | head -1
}
count_check() { # count_check MODE
	local m=$1
	read -r ba bf < <(seen base_$m ${m%%_*} none)
	read -r sa sf < <(seen malloc_$m ${m%%_*} malloc)
	read -r ta tf <"$TMP/malloc_$m.truth" || { ta=?; tf=?; }
	save malloc_$m
	if [ -n "${ba:-}" ] && [ -n "${sa:-}" ] && [ $((sa - ba)) = "$ta" ] && [ $((sf - bf)) = "$tf" ]
	then pass "count_rate1_$m"
	else fail "count_rate1_$m" "truth $ta/$tf, seen ${sa:-?}/${sf:-?} less ${ba:-?}/${bf:-?}: $(why malloc_$m)"; fi
	if "$DUMP" "$TMP/malloc_$m.ctf" 2>/dev/null | grep ' alloc ' | grep -q 'main.* run_malloc'
	then pass "cmd_stacks_$m"
	else fail "cmd_stacks_$m" "no allocation under run_malloc and main in the trace: $(why malloc_$m)"; fi
}
count_check uprobes
if grep -q "^memtraced: allocator probes: " "$TMP/malloc_uprobes.err" &&
	grep -q "; probes: " "$TMP/malloc_uprobes.err"
then pass attach_mode_said
else fail attach_mode_said "no 'allocator probes:' line or no probes in the summary"; fi
# every attach mode the kernel has loads and counts exactly (the default one above)
for m in session multi perf; do
	[ $m = $want ] && continue
	case $m in session) [ $want = session ] || continue ;; multi) [ $want = perf ] && continue ;; esac
	ATTACH="--attach-mode $m" count_check uprobes_$m
done

# -p on a running service: the report names its leaking site
mkdir -p "$TMP/svc"
"$TARGETS/service_leak" "$TMP/svc" 60 200000 >/dev/null 2>&1 &
svc=$!
wait_file "$TMP/svc/ready" 300
touch "$TMP/svc/go"
timeout 300 "$MT" -p $svc --rate 1e-3 --duration 4 -o "$TMP/p.ctf" >"$TMP/p.out" 2>"$TMP/p.err"
rc=$?
save p
if [ $rc = 0 ] && "$REPORT" "$TMP/p.ctf" 2>/dev/null | grep -q leak_site
then pass pid_report
else fail pid_report "memtraced exited $rc, leak_site not in the report: $(why p)"; fi

# --match: the service is selected, its snapshots are written
timeout 300 "$MT" --match service_leak --rate 1e-3 --snapshot-dir "$TMP/snaps" --snapshot-interval 1 \
	--duration 4 >"$TMP/match.out" 2>"$TMP/match.err"
rc=$?
save match
if [ $rc = 0 ] && grep -q "PID $svc .*traced" "$TMP/match.err" &&
	grep -qs leak_site "$TMP/snaps"/memtrace-$svc-*.folded
then pass match_snapshots
else fail match_snapshots "memtraced exited $rc, $(ls "$TMP/snaps" 2>/dev/null | wc -l) snapshot files: $(why match)"; fi
kill $svc 2>/dev/null; wait $svc 2>/dev/null

# a stack deeper than one ring record: its pieces (MT_REC_STACK_MORE) joined, main reached
timeout 300 "$MT" --inject=no --rate 1 --no-mmap -o "$TMP/deep.ctf" -- "$TARGETS/deep_stack" 20 200 \
	>"$TMP/deep.out" 2>"$TMP/deep.err"
rc=$?
save deep
"$DUMP" "$TMP/deep.ctf" 2>/dev/null | grep ' alloc ' | grep ' len=505 ' >"$TMP/deep.rows"
n=$(grep -c . "$TMP/deep.rows"); whole=$(grep 'main' "$TMP/deep.rows" | grep -vc 'truncated')
if [ $rc = 0 ] && [ "$n" -ge 20 ] && [ "$whole" = "$n" ]
then pass deep_stack_whole
else fail deep_stack_whole "memtraced exited $rc, $whole of $n stacks whole: $(why deep)"; fi

# a stack whose copy meets pages never touched (a frame's big unused array): the readable
# prefix is copied (bpf: copy_stack's search), its frames whole
timeout 300 "$MT" --inject=no --rate 1 --no-mmap -o "$TMP/gap.ctf" -- "$TARGETS/stack_gap" 20 \
	>"$TMP/gap.out" 2>"$TMP/gap.err"
rc=$?
save gap
n=$("$DUMP" "$TMP/gap.ctf" 2>/dev/null | grep ' alloc ' | grep -c 'with_gap | [^|]*gap_alloc$')
if [ $rc = 0 ] && [ "$n" -ge 20 ]
then pass stack_prefix_whole
else fail stack_prefix_whole "memtraced exited $rc, $n of 20 stacks with gap_alloc under with_gap: $(why gap)"; fi

# anonymous mappings (the system-call tracepoints)
echo | timeout 300 "$MT" --rate 1 -o "$TMP/mmap.ctf" -- "$TARGETS/mmap_workload" 2 >/dev/null 2>"$TMP/mmap.err"
rc=$?
save mmap
if [ $rc = 0 ] && "$DUMP" "$TMP/mmap.ctf" 2>/dev/null | grep ' alloc ' | grep -q map_kept
then pass mappings
else
	fail mappings "memtraced exited $rc, no map_kept allocation: $(why mmap)"
	"$DUMP" "$TMP/mmap.ctf" >"$RESULTS/mmap.dump" 2>&1
fi

# --follow-forks: each child in its own trace
mkdir -p "$TMP/fk/d"
touch "$TMP/fk/d/go-all" "$TMP/fk/d/go-exit"
timeout 300 "$MT" --rate 1 --follow-forks -o "$TMP/fk/t-%p.ctf" -- "$TARGETS/life_fork" "$TMP/fk/d" 2 20 30 \
	>/dev/null 2>"$TMP/fork.err"
rc=$?
save fork
nchild=0
for f in "$TMP"/fk/t-*.ctf; do
	"$DUMP" "$f" 2>/dev/null | grep ' alloc ' | grep -q child_site && nchild=$((nchild + 1))
done
if [ $rc = 0 ] && [ $nchild -ge 1 ]
then pass follow_forks
else fail follow_forks "memtraced exited $rc, $nchild child traces with child_site: $(why fork)"; fi

# Python frames
cat >"$TMP/py.py" <<'PY'
def inner(n):
    return bytes(n)
def outer():
    for i in range(20000):
        inner(4000 + i % 100)
outer()
PY
timeout 300 "$MT" --rate 1e-3 -o "$TMP/py.ctf" -- /usr/bin/python3 "$TMP/py.py" >/dev/null 2>"$TMP/py.err"
rc=$?
save py
if [ $rc = 0 ] && "$DUMP" "$TMP/py.ctf" 2>/dev/null | grep ' alloc ' | grep -q 'py.py:5:[-0-9]* outer | [^|]*py.py:2:[-0-9]* inner'
then pass python_frames
elif grep -q "Python frames off:" "$TMP/py.err"
then skip python_frames "$(grep -m1 'Python frames off:' "$TMP/py.err")"
else fail python_frames "memtraced exited $rc, no inner under outer: $(why py)"; fi

# --inject: the sampler placed, every call counted
count_check inject
echo "# done"
