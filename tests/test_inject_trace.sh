#!/usr/bin/env bash
# memtraced --inject end to end (root, BPF): our sampler library placed into running processes,
# their allocations sampled in the process, only the sampled ones reaching the BPF programs
# through the otel_memory USDT probes.
# - tests/targets/alloc_workload.cc at --rate 1 with glibc, jemalloc (linked, and preloaded),
#   tcmalloc and mimalloc (preloaded): exact per operation, as with uprobes (tests/lib/exact.sh);
#   no frame of the sampler on any stack.
# - tests/targets/inject_workload.c: blocks allocated before the injection freed and realloc'ed
#   after it, realloc of a sampled block, 8 threads, a library dlopen'ed after the injection,
#   threads blocked in read, epoll_wait and nanosleep (no EINTR); the GOT entry of malloc read
#   through /proc/PID/mem before, while and after tracing; a second --inject reuses the
#   library; memtraced SIGKILLed: the target runs on and its results are unchanged.
# - Refusals: a static program, with --inject (uprobes, said why) and --inject=required.
source "$(dirname "$0")/lib/test.sh"
source "$(dirname "$0")/lib/exact.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
W=$TARGETS/alloc_workload
IW=$TARGETS/inject_workload
PLUGIN=$TOP/$BUILD/tests/plugins/inject_plugin.so
SAMPLER=$TOP/$BUILD/lib/libmemtraced_sampler.so
LIBDIR=/usr/lib/x86_64-linux-gnu
N=20

for f in "$MT" "$DUMP" "$W" "$IW" "$PLUGIN" "$SAMPLER" "${W}_jemalloc_dyn" "${W}_static" "$TARGETS/dlsym_alloc"; do
	if [ ! -e "$f" ]; then
		fail inject_trace_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip inject_trace_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

wait_tracing() { # LOG
	local i
	for ((i = 0; i < 600; i++)); do grep -q "tracing PID" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
wait_flushed() { # TRACE PATTERN
	local i
	for ((i = 0; i < 300; i++)); do
		"$DUMP" "$1" 2>/dev/null | grep -q "$2" && return 0
		sleep 0.1
	done
	return 1
}
no_sampler_frames() { # NAME DIR
	if grep -q 'memtraced_sampler\|libmemtraced_sampler' "$2/t.dump"; then
		fail "$1_sampler_frames_hidden" "$(grep -m1 'memtraced_sampler' "$2/t.dump" | cut -c1-200)"
	else pass "$1_sampler_frames_hidden"; fi
}

# ---- every allocation function, every allocator: exact at --rate 1 ----
# run_alloc NAME PROGRAM [PRELOAD]
run_alloc() {
	local name=$1 prog=$2 preload=${3:-} dir=$TMP/$1 wpid mpid rc
	mkdir -p "$dir"
	if [ -n "$preload" ] && [ ! -r "$preload" ]; then
		skip "${name}_traced" "$preload is not installed (make deps)"
		return
	fi
	LD_PRELOAD=$preload "$prog" "$dir" $N >"$dir/truth" 2>"$dir/w.err" & wpid=$!
	sleep 0.3 # past ld.so: injection needs the program's libraries loaded
	"$MT" -p $wpid --inject=required --rate 1 --stack-bytes 4096 -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
	wait_tracing "$dir/mt.err"
	touch "$dir/go"
	wait_file "$dir/done" && wait_flushed "$dir/t.ctf" ' op_new_kept$'
	touch "$dir/stop"
	wait $mpid; rc=$?
	wait "$wpid"
	sed -n 's/^/# /p' "$dir/mt.err" | tail -n 2
	if [ "$rc" = 0 ] && grep -q '^truth' "$dir/truth" && grep -q 'GOT entries redirected' "$dir/mt.err"
	then pass "${name}_injected"
	else fail "${name}_injected" "memtraced exit $rc: $(tail -n 3 "$dir/mt.err" | tr '\n' ' ')"; return; fi
	# at rate 1 the sampler passes on every call: the summary counts them
	check "${name}_rate_1_calls_counted" grep -q "PID $wpid: [0-9]* allocations and" "$dir/mt.err"
	"$DUMP" "$dir/t.ctf" >"$dir/t.dump" 2>"$dir/dump.err"
	if [ -n "$preload" ]; then
		# alloc_workload took jemalloc's *allocx with dlsym before the injection: calls through
		# such a pointer reach the allocator directly (documented); with a linked jemalloc
		# (${W}_jemalloc_dyn) they go through the GOT and are checked
		sed -i '/^truth op_[mrx]allocx/d' "$dir/truth"
	fi
	check_exact "$name" "$dir"
	no_sampler_frames "$name" "$dir"
}

run_alloc inject_glibc "$W"
run_alloc inject_jemalloc_linked "${W}_jemalloc_dyn"
check inject_jemalloc_linked_allocx_exercised grep -q '^truth op_xallocx ' "$TMP/inject_jemalloc_linked/truth"
run_alloc inject_jemalloc_preload "$W" "$LIBDIR/libjemalloc.so.2"
run_alloc inject_tcmalloc_preload "$W" "$LIBDIR/libtcmalloc_minimal.so.4"
run_alloc inject_mimalloc_preload "$W" "$LIBDIR/libmimalloc.so.2"

# ---- allocation functions looked up with dlsym/dlvsym after the placement (issue 47): every
# call through them seen at --rate 1 (before: 0 of 1000, "GOT check passed")
dir=$TMP/dlsym
mkdir -p "$dir"
"$TARGETS/dlsym_alloc" "$dir" 1000 >"$dir/truth" 2>"$dir/w.err" & wpid=$!
wait_file "$dir/ready"
sleep 0.2
"$MT" -p $wpid --inject=required --rate 1 --stack-bytes 4096 -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
wait_tracing "$dir/mt.err"
touch "$dir/go"
wait_file "$dir/done" 300 && wait_flushed "$dir/t.ctf" ' op_dlvsym_malloc$'
touch "$dir/stop"
wait $mpid; rc=$?
wait "$wpid"
if [ "$rc" = 0 ] && grep -q '^truth' "$dir/truth" && grep -q 'GOT entries redirected' "$dir/mt.err"
then pass inject_dlsym_injected
else fail inject_dlsym_injected "memtraced exit $rc: $(tail -n 3 "$dir/mt.err" "$dir/w.err" | tr '\n' ' ')"; fi
"$DUMP" "$dir/t.ctf" >"$dir/t.dump" 2>"$dir/dump.err"
check_exact inject_dlsym "$dir"

# ---- a running service: before/after blocks, threads, dlopen, blocked calls, the GOT ----
# got_malloc PID: the value of the GOT entry of malloc in PID's executable
got_malloc() {
	python3 - "$1" "$IW" <<'PY'
import re, subprocess, sys
pid, exe = sys.argv[1], sys.argv[2]
rel = subprocess.run(["readelf", "-rW", exe], capture_output=True, text=True).stdout
off = None
for line in rel.splitlines():
    f = line.split()
    if len(f) >= 5 and f[2] in ("R_X86_64_JUMP_SLOT", "R_X86_64_GLOB_DAT") and f[4].startswith("malloc@"):
        off = int(f[0], 16)
base = None
for line in open(f"/proc/{pid}/maps"):
    f = line.split()
    if len(f) >= 6 and f[5].endswith("/inject_workload") and int(f[2], 16) == 0:
        base = int(f[0].split("-")[0], 16)
        break
if off is None or base is None:
    sys.exit("no GOT entry of malloc found")
with open(f"/proc/{pid}/mem", "rb") as m:
    m.seek(base + off)
    print(m.read(8)[::-1].hex())
PY
}

dir=$TMP/service
mkdir -p "$dir"
"$IW" "$dir" "$PLUGIN" >"$dir/truth" 2>"$dir/w.err" & wpid=$!
wait_file "$dir/ready"
sleep 0.2
got_before=$(got_malloc $wpid)
"$MT" -p $wpid --inject --rate 1 -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
wait_tracing "$dir/mt.err"
got_during=$(got_malloc $wpid)
touch "$dir/go"
wait_file "$dir/done" && wait_flushed "$dir/t.ctf" ' op_plugin_work$'
kill -INT $mpid
wait $mpid; rc=$?
got_after=$(got_malloc $wpid)
sed -n 's/^/# /p' "$dir/mt.err" | tail -n 2
if [ "$rc" = 0 ]; then pass inject_service_traced
else fail inject_service_traced "memtraced exit $rc: $(tail -n 3 "$dir/mt.err" | tr '\n' ' ')"; fi
if [ -n "$got_before" ] && [ "$got_during" != "$got_before" ]; then pass inject_got_redirected_while_tracing
else fail inject_got_redirected_while_tracing "before $got_before, while tracing $got_during"; fi
if [ -n "$got_before" ] && [ "$got_after" = "$got_before" ]; then pass inject_got_put_back_at_detach
else fail inject_got_put_back_at_detach "before $got_before, after detach $got_after"; fi
if [ "$(grep -c 'libmemtraced_sampler.so' /proc/$wpid/maps)" -ge 1 ]; then pass inject_library_stays_loaded
else fail inject_library_stays_loaded "not in /proc/$wpid/maps"; fi

# A second --inject on the same process: the library already there is used again.
"$MT" -p $wpid --inject=required --rate 1 -d 0.5 -o "$dir/t2.ctf" 2>"$dir/mt2.err"; rc=$?
if [ "$rc" = 0 ] && grep -q 'already in place (reused)' "$dir/mt2.err"; then pass inject_second_reuses_library
else fail inject_second_reuses_library "exit $rc: $(tail -n 2 "$dir/mt2.err" | tr '\n' ' ')"; fi
n_maps=$(awk '$6 ~ /libmemtraced_sampler.so$/ && $3 == "00000000"' /proc/$wpid/maps | wc -l)
if [ "$n_maps" = 1 ]; then pass inject_second_maps_it_once
else fail inject_second_maps_it_once "$n_maps mappings at offset 0"; fi
touch "$dir/stop"
wait $wpid; wrc=$?
if [ "$wrc" = 0 ] && grep -q '^syscalls ok$' "$dir/truth"; then pass inject_blocked_calls_no_eintr
else fail inject_blocked_calls_no_eintr "exit $wrc: $(grep syscalls "$dir/truth") $(cat "$dir/w.err")"; fi
"$DUMP" "$dir/t.ctf" >"$dir/t.dump" 2>"$dir/dump.err"
check_exact inject_service "$dir"
no_sampler_frames inject_service "$dir"

# ---- memtraced SIGKILLed: the target runs on, its results as without memtraced ----
dir=$TMP/killed
mkdir -p "$dir/ref"
touch "$dir/ref/go" "$dir/ref/stop"
"$IW" "$dir/ref" "$PLUGIN" >"$dir/ref.out" 2>&1
"$IW" "$dir" "$PLUGIN" >"$dir/out" 2>"$dir/w.err" & wpid=$!
wait_file "$dir/ready"
sleep 0.2
"$MT" -p $wpid --inject=required --rate 1e-3 -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
wait_tracing "$dir/mt.err"
kill -KILL $mpid
wait $mpid 2>/dev/null
touch "$dir/go"
wait_file "$dir/done" 300
touch "$dir/stop"
wait $wpid; wrc=$?
if [ "$wrc" = 0 ] && cmp -s "$dir/ref.out" "$dir/out"; then pass inject_sigkill_target_unharmed
else fail inject_sigkill_target_unharmed "exit $wrc; output differs: $(diff "$dir/ref.out" "$dir/out" | head -n 4 | tr '\n' ' ')"; fi

# ---- a program that carries a sampler of its own: plain -p traces through it ----
# run_own NAME OPTIONS...: tests/targets/own_sampler at --rate 1, exact per operation
run_own() {
	local name=$1 dir=$TMP/$1 wpid mpid rc; shift
	mkdir -p "$dir"
	"$TARGETS/own_sampler" "$dir" >"$dir/truth" 2>"$dir/w.err" & wpid=$!
	sleep 0.3
	"$MT" -p $wpid --rate 1 "$@" -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
	wait_tracing "$dir/mt.err"
	touch "$dir/go"
	wait_file "$dir/done" && wait_flushed "$dir/t.ctf" ' op_own_kept$'
	touch "$dir/stop"
	wait $mpid; rc=$?
	wait $wpid
	[ "$rc" = 0 ] || fail "${name}_traced" "exit $rc: $(tail -n 2 "$dir/mt.err" | tr '\n' ' ')"
	"$DUMP" "$dir/t.ctf" >"$dir/t.dump" 2>/dev/null
	check_exact "$name" "$dir"
}
run_own carried
if grep -q 'carries an in-process sampler (otel_memory probes in .*libownsampler.so)' "$TMP/carried/mt.err"; then
	pass carried_sampler_used_by_plain_p
else fail carried_sampler_used_by_plain_p "$(grep -v '^truth' "$TMP/carried/mt.err" | head -n 3 | tr '\n' ' ')"; fi
no_sampler_frames carried "$TMP/carried"
run_own carried_forced_uprobes --inject=no
if ! grep -q 'carries an in-process sampler' "$TMP/carried_forced_uprobes/mt.err"; then pass carried_sampler_not_used_with_inject_no
else fail carried_sampler_not_used_with_inject_no "it was used"; fi

# ---- -- CMD --inject --follow-forks: the children inherit the sampler and are traced through it
dir=$TMP/forks
mkdir -p "$dir"
"$MT" --inject=required --rate 1 --follow-forks -o "$dir/f-%p.ctf" -- "$TARGETS/hold_fork" 4 200 >"$dir/out" 2>"$dir/err"
rc=$?
nchild=0 exact=0
for c in $(awk '$1 == "child" { print $2 }' "$dir/out"); do
	nchild=$((nchild + 1))
	n=$("$DUMP" "$dir/f-$c.ctf" 2>/dev/null | grep -c ' alloc id=.* child_site$')
	[ "$n" = 200 ] && exact=$((exact + 1))
done
through=$(grep -c 'a fork of a process with the sampler in place: traced through it' "$dir/err")
if [ "$rc" = 0 ] && grep -q 'sampler placed at its entry point' "$dir/err"; then pass inject_cmd_sampler_at_entry
else fail inject_cmd_sampler_at_entry "exit $rc: $(head -n 3 "$dir/err" | tr '\n' ' ')"; fi
if [ "$nchild" = 4 ] && [ "$exact" = 4 ] && [ "$through" = 4 ]; then pass inject_forks_traced_through_the_sampler
else fail inject_forks_traced_through_the_sampler "$exact of $nchild children exact, $through through the sampler"; fi

# ---- where injection cannot work ----
dir=$TMP/static
mkdir -p "$dir"
"${W}_static" "$dir" 5 >"$dir/truth" 2>/dev/null & wpid=$!
sleep 0.3
"$MT" -p $wpid --inject=required -d 0.3 -o "$dir/r.ctf" 2>"$dir/req.err"; rc=$?
if [ "$rc" != 0 ] && grep -q 'static' "$dir/req.err"; then pass inject_required_refuses_static
else fail inject_required_refuses_static "exit $rc: $(tail -n 2 "$dir/req.err" | tr '\n' ' ')"; fi
"$MT" -p $wpid --inject --rate 1 -o "$dir/t.ctf" 2>"$dir/auto.err" & mpid=$!
wait_tracing "$dir/auto.err"
touch "$dir/go"
wait_file "$dir/done" && wait_flushed "$dir/t.ctf" ' op_new_kept$'
touch "$dir/stop"
wait $mpid; rc=$?
wait $wpid
if [ "$rc" = 0 ] && grep -q 'cannot place the sampler.*tracing it with uprobes' "$dir/auto.err"; then
	pass inject_auto_falls_back_to_uprobes
else fail inject_auto_falls_back_to_uprobes "exit $rc: $(head -n 3 "$dir/auto.err" | tr '\n' ' ')"; fi
"$DUMP" "$dir/t.ctf" >"$dir/t.dump" 2>/dev/null
check_exact inject_static_fallback "$dir"
exit 0
