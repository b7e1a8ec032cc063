#!/usr/bin/env bash
# The default mode of -p and -- CMD (issue 34): the in-process sampler where it can be placed,
# uprobes otherwise, said in one line with the reason. The rest of the suite runs with
# MEMTRACED_INJECT=off (uprobes as the default, as its checks were written); this script
# checks the real default.
source "$(dirname "$0")/lib/test.sh"
unset MEMTRACED_INJECT
MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
W=$TARGETS/alloc_workload
for f in "$MT" "$DUMP" "$TARGETS/sites" "$W" "${W}_static" "$TOP/$BUILD/lib/libmemtraced_sampler.so"; do
	[ -e "$f" ] || { fail default_mode_built "missing $f (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip default_mode_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# -p: placed, said, traced through it
dir=$TMP/pid
mkdir -p "$dir"
"$TARGETS/sites" wait "$dir" >"$dir/out" 2>&1 & tpid=$!
wait_file "$dir/ready" 100
timeout 60 "$MT" -p $tpid --rate 1e-3 -d 1 -o "$dir/t.ctf" 2>"$dir/mt.err"; rc=$?
touch "$dir/stop"; wait $tpid; rc_t=$?
if [ $rc = 0 ] && grep -q "PID $tpid: traced through the in-process sampler (the default" "$dir/mt.err" &&
	grep -q 'probes: in-process sampler' "$dir/mt.err"
then pass default_pid_uses_sampler
else fail default_pid_uses_sampler "exit $rc: $(grep -E 'error|warning|traced' "$dir/mt.err" | head -2 | tr '\n' ' ')"; fi
if "$DUMP" "$dir/t.ctf" 2>/dev/null | grep -q ' wait_'; then pass default_pid_trace_has_stacks
else fail default_pid_trace_has_stacks "no record with the program's frames"; fi
if [ $rc_t = 3 ] && grep -q ', 0 bad rounds' "$dir/out"; then pass default_pid_target_unharmed
else fail default_pid_target_unharmed "exit $rc_t: $(tail -n 1 "$dir/out")"; fi

# --inject=no and MEMTRACED_INJECT=off: uprobes
dir=$TMP/no
mkdir -p "$dir"
"$TARGETS/sites" wait "$dir" >"$dir/out" 2>&1 & tpid=$!
wait_file "$dir/ready" 100
timeout 60 "$MT" -p $tpid --inject=no -d 0.5 -o "$dir/a.ctf" 2>"$dir/a.err"; rc_a=$?
MEMTRACED_INJECT=off timeout 60 "$MT" -p $tpid -d 0.5 -o "$dir/b.ctf" 2>"$dir/b.err"; rc_b=$?
touch "$dir/stop"; wait $tpid
if [ $rc_a = 0 ] && grep -q 'probes: .*uprobes' "$dir/a.err" && ! grep -q 'in-process sampler' "$dir/a.err"
then pass default_inject_no_uses_uprobes
else fail default_inject_no_uses_uprobes "exit $rc_a: $(tail -n 1 "$dir/a.err")"; fi
if [ $rc_b = 0 ] && grep -q 'probes: .*uprobes' "$dir/b.err" && ! grep -q 'in-process sampler' "$dir/b.err"
then pass default_env_off_uses_uprobes
else fail default_env_off_uses_uprobes "exit $rc_b: $(tail -n 1 "$dir/b.err")"; fi

# -- CMD: placed at its entry point, every call of the workload seen at --rate 1
dir=$TMP/cmd
mkdir -p "$dir"
touch "$dir/go" "$dir/stop"
timeout 120 "$MT" --rate 1 -o "$dir/t.ctf" -- "$W" "$dir" 5 >"$dir/truth" 2>"$dir/mt.err"; rc=$?
if [ $rc = 0 ] && grep -q 'sampler placed at its entry point' "$dir/mt.err" &&
	grep -q 'traced through the in-process sampler (the default' "$dir/mt.err"
then pass default_cmd_uses_sampler
else fail default_cmd_uses_sampler "exit $rc: $(grep -E 'error|warning|traced' "$dir/mt.err" | head -2 | tr '\n' ' ')"; fi
if "$DUMP" "$dir/t.ctf" 2>/dev/null | grep -q ' op_malloc'; then pass default_cmd_trace_has_stacks
else fail default_cmd_trace_has_stacks "no record with the workload's op_malloc frame"; fi

# -- CMD of a static program: cannot take the sampler, traced with uprobes, said why
dir=$TMP/static
mkdir -p "$dir"
touch "$dir/go" "$dir/stop"
timeout 120 "$MT" --rate 1 -o "$dir/t.ctf" -- "${W}_static" "$dir" 5 >"$dir/truth" 2>"$dir/mt.err"; rc=$?
if [ $rc = 0 ] && grep -q "traced with uprobes: .*static.* (the in-process sampler, the default, cannot be used)" "$dir/mt.err" &&
	"$DUMP" "$dir/t.ctf" 2>/dev/null | grep -q ' op_malloc'
then pass default_cmd_static_uses_uprobes
else fail default_cmd_static_uses_uprobes "exit $rc: $(grep -E 'error|warning|traced' "$dir/mt.err" | head -2 | tr '\n' ' ')"; fi

# -p of a static program: the same
dir=$TMP/pstatic
mkdir -p "$dir"
"${W}_static" "$dir" 5 >"$dir/truth" 2>/dev/null & tpid=$!
sleep 0.3
timeout 60 "$MT" -p $tpid --rate 1 -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
for _ in $(seq 200); do grep -q 'tracing PID' "$dir/mt.err" 2>/dev/null && break; sleep 0.05; done
touch "$dir/go"; wait_file "$dir/done" 600; sleep 0.5
touch "$dir/stop"; wait $mpid; rc=$?; wait $tpid
if [ $rc = 0 ] && grep -q "PID $tpid: traced with uprobes: .*static" "$dir/mt.err" &&
	"$DUMP" "$dir/t.ctf" 2>/dev/null | grep -q ' op_malloc'
then pass default_pid_static_uses_uprobes
else fail default_pid_static_uses_uprobes "exit $rc: $(grep -E 'error|warning|traced' "$dir/mt.err" | head -2 | tr '\n' ' ')"; fi
