#!/usr/bin/env bash
# Inlined frames as gdb shows them (BPF; root needed). A Rust workload built by Debian's cargo
# (tests/targets/rust_inline: release, debug = 1; rustc nests every function in namespaces) and
# a C++ one (tests/targets/inline_cpp.cc: libstdc++'s header templates inlined into ours) are
# traced at --rate 1 and run under gdb with a breakpoint on malloc: every stack gdb shows
# (function names, file:line of every inlined frame down to main) must be in the trace.
source "$(dirname "$0")/lib/test.sh"
source "$(dirname "$0")/lib/inline.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
for p in "$MT" "$DUMP" "$TARGETS/rust_inline" "$TARGETS/inline_cpp"; do
	[ -x "$p" ] || { fail inline_built "missing $p (run make; Rust needs Debian's cargo and rustc)"; exit 0; }
done
if ! command -v gdb >/dev/null; then
	skip inline_gdb "no gdb (make deps installs it)"
	exit 0
fi
if ! bpf_ready; then
	skip inline_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# compare NAME BINARY GDB_BREAK HITS: the trace of BINARY 3 against HITS malloc stacks of gdb.
compare() {
	local name=$1 bin=$2 first=$3 hits=$4
	"$MT" --rate 1 --no-mmap -q -o "$TMP/$name.ctf" -- "$bin" 3 >/dev/null 2>"$TMP/$name.err"
	local rc=$?
	"$DUMP" "$TMP/$name.ctf" >"$TMP/$name.dump" 2>/dev/null
	trace_stacks "$TMP/$name.dump" >"$TMP/$name.trace"
	gdb_stacks "$bin" "$first" "$hits" 3 >"$TMP/$name.gdb"
	stacks_missing "$TMP/$name.gdb" "$TMP/$name.trace" >"$TMP/$name.missing"
	local ngdb nmiss
	ngdb=$(grep -c . "$TMP/$name.gdb"); nmiss=$(grep -c . "$TMP/$name.missing")
	if [ "$rc" = 0 ] && [ "$ngdb" -ge $((hits - 2)) ] && [ "$nmiss" = 0 ]; then
		pass "${name}_stacks_as_gdb"
	else
		local want have
		want=$(head -n 1 "$TMP/$name.missing")
		# the trace stack that shares the most leading frames with the first one missing
		have=$(awk -v w="$want" 'BEGIN { nw = split(w, g, / \| /) }
			{ n = split($0, t, / \| /); k = 0; while (k < n && k < nw && t[k + 1] == g[k + 1]) k++
			  if (k >= best) { best = k; line = $0 } } END { print line }' "$TMP/$name.trace")
		fail "${name}_stacks_as_gdb" "memtraced exit $rc, $ngdb gdb stacks, $nmiss not in the trace; gdb: $(printf '%s' "$want" | cut -c1-700); trace: $(printf '%s' "$have" | cut -c1-700)"
	fi
}

compare rust_inline "$TARGETS/rust_inline" rust_inline::main 12
# The workload really is inlined: main's physical frame holds round, build_record, the closure
# and make_buffer, each at its call line in src/main.rs (else the comparison proves little).
if grep -qE 'src/main\.rs:[0-9]+:[0-9-]+ rust_inline::main & src/main\.rs:[0-9]+:[0-9-]+ rust_inline::round & src/main\.rs:[0-9]+:[0-9-]+ rust_inline::build_record & src/main\.rs:[0-9]+:[0-9-]+ rust_inline::build_record::\{\{closure\}\} & src/main\.rs:[0-9]+:[0-9-]+ rust_inline::make_buffer & ' "$TMP/rust_inline.dump" &&
	grep -q 'make_buffer@main.rs:[0-9]* | {closure}@main.rs:[0-9]* | build_record@main.rs:[0-9]* | round@main.rs:[0-9]* | main@main.rs:' "$TMP/rust_inline.gdb"; then
	pass rust_inline_chain_down_to_main_rs
else
	fail rust_inline_chain_down_to_main_rs "no expanded chain main > round > build_record > closure > make_buffer: $(grep -m 1 'make_buffer' "$TMP/rust_inline.dump" | cut -c1-600)"
fi

compare inline_cpp "$TARGETS/inline_cpp" main 8
if grep -q 'allocate@alloc_traits.h:[0-9]* | _M_allocate@stl_vector.h:[0-9]* | _M_realloc_insert@vector.tcc' "$TMP/inline_cpp.trace" &&
	grep -q '_M_get_node@stl_tree.h:[0-9]* | _M_create_node@stl_tree.h' "$TMP/inline_cpp.trace"; then
	pass inline_cpp_header_templates_expanded
else
	fail inline_cpp_header_templates_expanded "$(head -n 3 "$TMP/inline_cpp.trace" | cut -c1-600)"
fi
exit 0
