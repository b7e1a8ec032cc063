#!/usr/bin/env bash
# memtraced on every common allocator (BPF uprobes; root needed): glibc, jemalloc, tcmalloc and
# mimalloc (LD_PRELOAD of the Debian libraries, attached with -p), jemalloc compiled into the
# executable and a -static program (-- CMD). tests/targets/alloc_workload.cc allocates through
# malloc/calloc/realloc, every C++ operator new/delete form and, when it has them, jemalloc's
# mallocx/rallocx/xallocx/dallocx/sdallocx, and prints the truth per operation. At --rate 1 the
# trace (read back with memtrace-dump) must match it exactly: allocations counted once (no
# double count through libstdc++'s operator new -> malloc), words, nsamples, and the blocks
# still live at the end (every delete form reaches a probe: no false leak).
source "$(dirname "$0")/lib/test.sh"
source "$(dirname "$0")/lib/exact.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
W=$TARGETS/alloc_workload
LIBDIR=/usr/lib/x86_64-linux-gnu
N=20

if [ ! -x "$MT" ] || [ ! -x "$DUMP" ] || [ ! -x "$W" ] || [ ! -x "${W}_static" ] ||
	[ ! -x "${W}_jemalloc_in" ]; then
	fail allocators_built "missing memtraced, memtrace-dump or the alloc_workload targets (run make)"
	exit 0
fi
if ! bpf_ready; then
	skip allocators_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi


# Lets memtraced see the last operation before the workload exits (it reads the target's
# mappings when samples arrive; a process that is gone by then has no stacks).
wait_flushed() { # trace
	local i
	for ((i = 0; i < 300; i++)); do
		"$DUMP" "$1" 2>/dev/null | grep -q ' op_new_kept$' && return 0
		sleep 0.1
	done
	return 1
}

# run_case NAME MODE ALLOCATOR_PATTERN PROGRAM [PRELOAD]
#   MODE pid: the workload runs (with LD_PRELOAD=PRELOAD) and memtraced attaches with -p
#   MODE cmd: memtraced --rate 1 -- PROGRAM
run_case() {
	local name=$1 mode=$2 want=$3 prog=$4 preload=${5:-} dir=$TMP/$1 wpid mpid rc
	mkdir -p "$dir"
	if [ -n "$preload" ] && [ ! -r "$preload" ]; then
		skip "${name}_traced" "$preload is not installed (make deps)"
		return
	fi
	# The whole run fits in the ring buffer (~500 records of a 4 KiB stack copy: the stacks
	# are 3-6 frames deep), so no record is dropped however late memtraced drains it.
	if [ "$mode" = pid ]; then
		LD_PRELOAD=$preload "$prog" "$dir" $N >"$dir/truth" 2>"$dir/w.err" & wpid=$!
		"$MT" -p $wpid --rate 1 --stack-bytes 4096 -o "$dir/t.ctf" 2>"$dir/mt.err" & mpid=$!
	else
		"$MT" --rate 1 --stack-bytes 4096 -o "$dir/t.ctf" -- "$prog" "$dir" $N >"$dir/truth" 2>"$dir/mt.err" & mpid=$!
	fi
	for _ in $(seq 600); do grep -q "tracing PID" "$dir/mt.err" && break; sleep 0.1; done
	touch "$dir/go"
	wait_file "$dir/done" && wait_flushed "$dir/t.ctf"
	touch "$dir/stop"
	wait $mpid; rc=$?
	[ -n "${wpid:-}" ] && wait "$wpid"
	sed -n 's/^/# /p' "$dir/mt.err" | tail -n 1
	if [ "$rc" = 0 ] && grep -q '^truth' "$dir/truth"; then pass "${name}_traced"
	else fail "${name}_traced" "memtraced exit $rc: $(tail -n 3 "$dir/mt.err" | tr '\n' ' ')"; return; fi
	if grep -q "dropped: 0 ring buffer, 0 live map full, 0 stack copy" "$dir/mt.err"; then pass "${name}_no_drops"
	else fail "${name}_no_drops" "$(tail -n 1 "$dir/mt.err")"; fi
	"$DUMP" "$dir/t.ctf" >"$dir/t.dump" 2>"$dir/dump.err"
	local ctx
	ctx=$(grep '^info context=' "$dir/t.dump")
	if printf '%s' "$ctx" | grep -q "allocator $want"; then pass "${name}_allocator_in_context"
	else fail "${name}_allocator_in_context" "want 'allocator $want', got: $ctx"; fi
	check_exact "$name" "$dir"
}

run_case glibc cmd "glibc 2\.[0-9]* (/" "$W"
run_case jemalloc_preload pid "jemalloc 5\.[0-9.]* (/.*libjemalloc" "$W" "$LIBDIR/libjemalloc.so.2"
if [ -e "$TMP/jemalloc_preload/truth" ]; then
	check jemalloc_preload_allocx_api_exercised grep -q '^truth op_xallocx ' "$TMP/jemalloc_preload/truth"
fi
run_case tcmalloc_preload pid "tcmalloc (gperftools [0-9.]*) (/.*libtcmalloc" "$W" "$LIBDIR/libtcmalloc_minimal.so.4"
run_case mimalloc_preload pid "mimalloc 2\.[0-9.]* (/.*libmimalloc" "$W" "$LIBDIR/libmimalloc.so.2"
run_case jemalloc_compiled_in cmd "jemalloc 5\.[0-9.]* compiled into the executable" "${W}_jemalloc_in"
check jemalloc_compiled_in_allocx_api_exercised grep -q '^truth op_rallocx_to ' "$TMP/jemalloc_compiled_in/truth"
run_case static cmd "glibc compiled into the executable" "${W}_static"
exit 0
