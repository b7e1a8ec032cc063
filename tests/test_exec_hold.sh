#!/usr/bin/env bash
# Nothing lost after an exec (BPF uprobes + ptrace; root needed). memtraced -- CMD holds the
# command at each exec until the new program's probes are live (and, with --follow-forks, each
# child at its start); -p --hold-exec does the same for a running process. Shims and wrappers:
# bash script -> /usr/bin/env -> a C program, two levels of #!/usr/bin/env scripts, sh -c
# 'exec ...', Debian's python3 behind a bash shim. The -o path holds the last program's trace,
# the earlier ones FILE.execN.ctf; a set-uid command gets a warning and still runs.
source "$(dirname "$0")/lib/test.sh"
source "$(dirname "$0")/lib/exact.sh"
source "$(dirname "$0")/lib/sites.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
W=$TARGETS/alloc_workload
SITES=$TARGETS/sites

for p in "$MT" "$DUMP" "$W" "$SITES" "$TARGETS/hold_fork" "$TARGETS/life_exec"; do
	[ -x "$p" ] || { fail exec_hold_built "missing $p (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip exec_hold_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# shim_case NAME CMD...: alloc_workload run through CMD (a chain of execs) at rate 1: every
# site of the final program exact, its trace at the -o path, every trace readable.
shim_case() {
	local name=$1; shift
	local S=$TMP/$name
	mkdir -p "$S/d"
	touch "$S/d/go" "$S/d/stop" # no waiting: the probes are live before it runs
	# 4 KiB stack copies: the whole burst fits in the ring buffer however late it is drained
	"$MT" --rate 1 --stack-bytes 4096 -o "$S/t.ctf" -- "$@" "$S/d" 20 >"$S/truth" 2>"$S/err"
	local rc=$?
	sed 's/^/# /' "$S/err" | grep -E 'held|trace ' | cut -c1-200
	if [ "$rc" = 0 ] && grep -q '^truth' "$S/truth"; then pass "${name}_ran"
	else fail "${name}_ran" "memtraced exit $rc: $(tail -n 3 "$S/err" | tr '\n' ' ')"; return; fi
	local ok=yes f
	for f in "$S"/t*.ctf; do "$DUMP" "$f" >"$f.dump" 2>/dev/null || ok=no; done
	check "${name}_traces_read_cleanly" test $ok = yes
	cp "$S/t.ctf.dump" "$S/t.dump"
	if grep -q '^info executable_name=".*alloc_workload"$' "$S/t.dump"; then pass "${name}_o_path_is_the_last_program"
	else fail "${name}_o_path_is_the_last_program" "$(grep executable_name "$S/t.dump")"; fi
	check_exact "$name" "$S"
	if grep -q "trace $S/t.ctf: PID [0-9]*, alloc_workload, [0-9]* records holding [0-9]* samples" "$S/err"; then
		pass "${name}_summary_lists_the_traces"
	else fail "${name}_summary_lists_the_traces" "$(grep 'trace ' "$S/err" | tail -n 3 | tr '\n' ' ')"; fi
}

SH=$TMP/shims
mkdir -p "$SH"
# a version manager's shim: bash, then env, then the program
printf '#!/bin/bash\nexec /usr/bin/env %s "$@"\n' "$W" >"$SH/shim.sh"
# two levels of #!/usr/bin/env scripts
printf '#!/usr/bin/env bash\nexec "%s" "$@"\n' "$SH/level2.sh" >"$SH/level1.sh"
printf '#!/usr/bin/env bash\nexec %s "$@"\n' "$W" >"$SH/level2.sh"
chmod +x "$SH"/*.sh
shim_case shim_bash_env "$SH/shim.sh"
shim_case shim_two_env_scripts "$SH/level1.sh"
shim_case shim_sh_c sh -c 'exec "$0" "$@"' "$W"

# The accuracy target behind the shim at rate 1e-3: every site within 10% (live 15%).
printf '#!/bin/bash\nexec /usr/bin/env %s "$@"\n' "$SITES" >"$SH/sites_shim.sh"
chmod +x "$SH/sites_shim.sh"
"$MT" --rate 1e-3 --stack-bytes 4096 -o "$TMP/sites.ctf" -- "$SH/sites_shim.sh" run 8000 >"$TMP/sites.truth" 2>"$TMP/sites.err"
rc=$?
if [ "$rc" = 0 ] && "$DUMP" "$TMP/sites.ctf" >"$TMP/sites.dump" 2>/dev/null; then
	pass shim_sites_rate_1e-3_traced
	check_sites "$TMP/sites.truth" "$TMP/sites.dump" 1e-3 stat shim_sites_r1e-3
else fail shim_sites_rate_1e-3_traced "exit $rc: $(tail -n 2 "$TMP/sites.err" | tr '\n' ' ')"; fi

# Debian's python3 behind a bash shim (as pyenv's): its trace names python and holds its
# allocations, as many as when it is traced directly (within 10%).
PY=/usr/bin/python3
if [ -x "$PY" ]; then
	printf 'd = {}\nfor i in range(300000):\n    d[str(i)] = [i]\nprint(len(d))\n' >"$TMP/s.py"
	printf '#!/bin/bash\nexec /usr/bin/env %s "$@"\n' "$PY" >"$SH/python3"
	chmod +x "$SH/python3"
	PYTHONHASHSEED=0 "$MT" --rate 1e-3 -o "$TMP/py_direct.ctf" -- "$PY" "$TMP/s.py" >"$TMP/py_direct.out" 2>"$TMP/py_direct.err"
	PYTHONHASHSEED=0 "$MT" --rate 1e-3 -o "$TMP/py.ctf" -- "$SH/python3" "$TMP/s.py" >"$TMP/py.out" 2>"$TMP/py.err"
	calls() { grep "trace $1 (" "$2" | grep -o '[0-9]* allocations and' | awk '{ print $1 }'; }
	direct=$(calls "$TMP/py_direct.ctf" "$TMP/py_direct.err")
	shimmed=$(calls "$TMP/py.ctf" "$TMP/py.err")
	echo "# python: $direct allocation calls traced directly, $shimmed behind the shim"
	if "$DUMP" "$TMP/py.ctf" 2>/dev/null | grep -q '^info executable_name=".*python3[.0-9]*)\{0,1\}"$'; then
		pass python_shim_trace_names_python
	else fail python_shim_trace_names_python "$("$DUMP" "$TMP/py.ctf" 2>&1 | grep executable_name)"; fi
	if [ -n "$direct" ] && [ -n "$shimmed" ] && [ "$direct" -gt 500 ] &&
		awk -v a="$direct" -v b="$shimmed" 'BEGIN { d = (a - b) / a; exit !(d < 0.1 && d > -0.1) }'; then
		pass python_shim_allocations_as_direct
	else fail python_shim_allocations_as_direct "direct ${direct:-?}, behind the shim ${shimmed:-?}"; fi
	check python_shim_output_unchanged cmp "$TMP/py_direct.out" "$TMP/py.out"
else
	skip python_shim "no $PY"
fi

# --follow-forks: children that allocate at once and exit within milliseconds.
S=$TMP/forks
mkdir -p "$S"
"$MT" --rate 1 --follow-forks -o "$S/f-%p.ctf" -- "$TARGETS/hold_fork" 4 200 >"$S/out" 2>"$S/err"
rc=$?
check fork_children_ran test "$rc" = 0
nchild=0 exact=0
for c in $(awk '$1 == "child" { print $2 }' "$S/out"); do
	nchild=$((nchild + 1))
	n=$("$DUMP" "$S/f-$c.ctf" 2>/dev/null | grep -c ' alloc id=.* child_site$')
	freed=$("$DUMP" "$S/f-$c.ctf" 2>/dev/null | grep -c ' collect ')
	[ "$n" = 200 ] && [ "$freed" -ge 100 ] && exact=$((exact + 1))
	echo "# child $c: $n allocations at child_site, $freed collects"
done
if [ "$nchild" = 4 ] && [ "$exact" = 4 ]; then pass fork_children_all_allocations
else fail fork_children_all_allocations "$exact of $nchild children with all 200 allocations"; fi

# -p --hold-exec: a running process execs a short program; nothing of it is lost.
S=$TMP/pid_hold
mkdir -p "$S/d" "$S/w"
touch "$S/w/go" "$S/w/stop"
"$TARGETS/life_exec" "$S/d" 10 "$W" "$S/w" 20 >"$S/out" &
tpid=$!
for _ in $(seq 100); do [ -e "$S/d/started" ] && break; sleep 0.05; done
"$MT" --rate 1 --stack-bytes 4096 --hold-exec -o "$S/t.ctf" -p $tpid 2>"$S/err" &
mpid=$!
for _ in $(seq 300); do grep -q "tracing PID" "$S/err" && break; sleep 0.05; done
touch "$S/d/go-start"
sleep 0.5
touch "$S/d/go-exec"
wait $tpid; trc=$?
timeout 60 tail --pid=$mpid -f /dev/null; wait $mpid; mrc=$?
sed 's/^/# /' "$S/err" | grep -E 'held|trace ' | cut -c1-200
if [ "$trc" = 0 ] && [ "$mrc" = 0 ]; then pass pid_hold_exec_ran
else fail pid_hold_exec_ran "target exit $trc, memtraced exit $mrc: $(tail -n 2 "$S/err" | tr '\n' ' ')"; fi
grep '^truth op_' "$S/out" >"$S/truth"
"$DUMP" "$S/t.ctf" >"$S/t.dump" 2>/dev/null
check_exact pid_hold_exec "$S"

# A set-uid command: the warning before it runs, and it still runs.
S=$TMP/setuid
mkdir -p "$S"
cp "$TARGETS/hold_fork" "$S/suid_prog"
chown root:root "$S/suid_prog" && chmod 4755 "$S/suid_prog"
"$MT" --rate 1e-3 -o "$S/t.ctf" -- "$S/suid_prog" 1 10 >"$S/out" 2>"$S/err"
rc=$?
if grep -q 'warning: .*suid_prog is a set-uid program' "$S/err"; then pass setuid_warned
else fail setuid_warned "$(head -n 3 "$S/err" | tr '\n' ' ')"; fi
if [ "$rc" = 0 ] && grep -q '^truth child_site 10 5$' "$S/out"; then pass setuid_still_runs
else fail setuid_still_runs "exit $rc: $(tail -n 2 "$S/err" | tr '\n' ' ')"; fi
exit 0
