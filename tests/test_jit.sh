#!/usr/bin/env bash
# Frames in JIT code and in a second mapping of an object (issue 21). libdw makes one module of
# a file's lines up to its last one: node 20 maps its builtins out of /usr/bin/node again far
# above the binary, and every pc in between (JIT code, the heap) was named "node+0x7f...".
# tests/targets/jit_code.c: JIT frames listed in its perf map are named from it, the others
# "[anon:jit] 0x..."; a function called in a second mapping of the executable is named as the
# function. Then Debian's node 20 at --rate 1e-3: no frame named node+0x7f..., the builtins
# named (Builtins_*), and with --perf-basic-prof the JavaScript functions (JS:...).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
T=$TARGETS/jit_code
for f in "$MT" "$DUMP" "$T"; do
	if [ ! -e "$f" ]; then
		fail jit_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip jit_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

"$MT" --rate 1 -o "$TMP/j.ctf" -- "$T" >"$TMP/j.out" 2>"$TMP/j.err"
rc=$?
pid=$(sed -n 's/^memtraced: tracing PID \([0-9]*\) .*/\1/p' "$TMP/j.err" | head -1)
rm -f "/tmp/perf-$pid.map"
"$DUMP" "$TMP/j.ctf" >"$TMP/j.dump" 2>&1
region=$(sed -n 's/^region //p' "$TMP/j.out")
# sizes in words: 1111 bytes -> len=139 (named JIT), 2222 -> 278 (unnamed), 3333 -> 417 (copy)
line() { grep -m1 " len=$1 " "$TMP/j.dump"; }
if [ "$rc" = 0 ] && line 139 | grep -q '\[anon:[a-z-]*\]:0:0-0 JS:named_jit_fn /srv/app.js:12$'
then pass jit_named_from_perf_map
else fail jit_named_from_perf_map "exit $rc: $(line 139 | cut -c1-300)"; fi
if line 278 | grep -qF "$region 0x"; then pass jit_unnamed_as_anon_region
else fail jit_unnamed_as_anon_region "$region: $(line 278 | cut -c1-300)"; fi
if line 417 | grep -q 'jit_code.c:[0-9]*:[0-9-]* copied_alloc'; then pass jit_copy_named_as_its_function
else fail jit_copy_named_as_its_function "$(line 417 | cut -c1-300)"; fi
if ! grep -q 'jit_code+0x' "$TMP/j.dump"; then pass jit_never_named_as_the_binary
else fail jit_never_named_as_the_binary "$(grep -o 'jit_code+0x[0-9a-f]*' "$TMP/j.dump" | head -3 | tr '\n' ' ')"; fi
if grep -q 'JIT code at 2 distinct pcs, 1 of them named' "$TMP/j.err"; then pass jit_summary_counts
else fail jit_summary_counts "$(grep -o 'JIT code[^;]*' "$TMP/j.err")"; fi

if ! command -v node >/dev/null; then
	skip jit_node "node is not installed"
	exit 0
fi
cat >"$TMP/n.js" <<'JS'
function mk(i) { return { i, s: JSON.stringify({ x: i, y: [i, i + 1], z: "v" + i }) }; }
let a = [];
for (let i = 0; i < 400000; i++) {
	a.push(mk(i));
	if (a.length > 50000) a = [];
	if (i % 1000 == 0) a.push(Buffer.alloc(4096 + (i & 1023)));
}
console.log("done", a.length);
JS
for v in plain perf; do
	opt=
	[ $v = perf ] && opt=--perf-basic-prof
	# (in $TMP: node writes its isolate-*-v8.log next to it with --perf-basic-prof)
	(cd "$TMP" && timeout 120 "$MT" --rate 1e-3 -o "$TMP/$v.ctf" -- node $opt "$TMP/n.js" >"$TMP/$v.out" 2>"$TMP/$v.err")
	rc=$?
	pid=$(sed -n 's/^memtraced: tracing PID \([0-9]*\) .*/\1/p' "$TMP/$v.err" | head -1)
	[ -n "$pid" ] && rm -f "/tmp/perf-$pid.map"
	"$DUMP" "$TMP/$v.ctf" >"$TMP/$v.dump" 2>&1
	if [ "$rc" = 0 ] && grep -q 'PID [0-9]*: .* records written' "$TMP/$v.err"; then pass "jit_node_${v}_traced"
	else fail "jit_node_${v}_traced" "exit $rc: $(tail -2 "$TMP/$v.err" | cut -c1-300)"; fi
	bad=$(grep -o 'node+0x7f[0-9a-f]*' "$TMP/$v.dump" | sort -u | head -3 | tr '\n' ' ')
	if [ -z "$bad" ]; then pass "jit_node_${v}_no_binary_offsets"
	else fail "jit_node_${v}_no_binary_offsets" "$bad"; fi
done
if grep -q ' Builtins_[A-Za-z]' "$TMP/plain.dump"; then pass jit_node_builtins_named
else fail jit_node_builtins_named "no Builtins_* frame"; fi
if grep -q '\[anon:jit\]:0:0-0 JS:' "$TMP/perf.dump"; then pass jit_node_js_functions_named
else fail jit_node_js_functions_named "$(grep -o 'JIT code[^;]*' "$TMP/perf.err")"; fi
