#!/usr/bin/env bash
# The two modes read the same (issue 38): a stripped C++ program allocates through an unnamed
# wrapper that only calls operator new (tests/targets/unnamed_wrapper.cc, as clang's
# libclang-cpp.so+0x920dff), from three functions (50%, 30%, 20% of the bytes). Traced at
# --rate 1 with uprobes and with the in-process sampler, the report's top sites by function
# are the same names with the same shares: the three callers, the wrapper folded into them in
# both (under --inject the sampler's wrapper frame stands for operator new's, which uprobes
# see; without it the wrapper was the leaf, "allocated itself", and was the top site).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
REPORT=$BIN/memtrace-report
P=$TARGETS/unnamed_wrapper
for p in "$MT" "$REPORT" "$P"; do
	[ -x "$p" ] || { fail modes_built "missing $p (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip modes_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
strip -s -o "$TMP/uw" "$P"
# "NAME SHARE" of the top rows of the allocated table, grouped by function
top() {
	"$REPORT" --raw --by alloc --group function --top 10 "$1" 2>/dev/null |
		awk '/^ *[0-9]+\. / { n = split($0, f, "  +"); s = $3; sub(/%$/, "", s); printf "%s %s\n", f[n], s }'
}
for m in no required; do
	"$MT" --inject=$m --rate 1 --no-mmap -o "$TMP/$m.ctf" -- "$TMP/uw" 20000 >"$TMP/$m.out" 2>"$TMP/$m.err"
	top "$TMP/$m.ctf" >"$TMP/$m.top"
done
check modes_traced_both grep -q "^done" "$TMP/no.out" "$TMP/required.out"
check modes_inject_used grep -q "in-process sampler (USDT)" "$TMP/required.err"
shares=$(awk '{ printf "%.0f ", $2 }' "$TMP/no.top" | cut -d' ' -f1-3)
if [ "$shares" = "50 30 20" ]; then
	pass modes_uprobes_wrapper_folded
else fail modes_uprobes_wrapper_folded "top rows: $(tr '\n' ';' <"$TMP/no.top")"; fi
# the sites of 1% or more: the same names, shares within half a point (uprobes also see what
# libraries allocate before the program's entry point, where the sampler is placed: libstdc++'s
# emergency pool, 0.2% here)
if awk 'FNR == NR { if ($2 >= 1) u[$1] = $2; next } { if ($2 >= 1) i[$1] = $2 }
	END { for (k in u) { if (!(k in i) || u[k] - i[k] > 0.5 || i[k] - u[k] > 0.5) exit 1; n++ }
	      for (k in i) if (!(k in u)) exit 1; exit n < 3 }' "$TMP/no.top" "$TMP/required.top"; then
	pass modes_same_top_sites
else fail modes_same_top_sites "uprobes: $(tr '\n' ';' <"$TMP/no.top") --inject: $(tr '\n' ';' <"$TMP/required.top")"; fi
