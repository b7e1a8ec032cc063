#!/usr/bin/env bash
# Allocation wrappers (BPF; root needed): a program allocating through xmalloc from two
# functions is traced; memtrace-report ranks those two functions, not xmalloc (nor malloc), by
# allocated bytes; --keep-wrappers brings xmalloc back; --wrapper NAME folds a function of the
# user's; go tool pprof's top names the callers (the profile's drop_frames); the stacks keep
# every frame.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
REPORT=$BIN/memtrace-report
W=$TARGETS/wrapped
for p in "$MT" "$REPORT" "$W" "$BIN/memtrace-pprof"; do
	[ -x "$p" ] || { fail wrappers_built "missing $p (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip wrappers_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
"$MT" --rate 1e-3 -o "$TMP/w.ctf" -- "$W" 4000 >/dev/null 2>"$TMP/mt.err"
check wrappers_traced test -s "$TMP/w.ctf"

# the first rows of the "allocated" table: "  1. ... key" lines
top_rows() { awk '/^Top .*by bytes allocated/ { t = 1; next } /^Top / { t = 0 } t && /^ *[0-9]+\. /' "$1"; }
# the lines of the calls to xmalloc in parse_request and build_reply
l_parse=$(grep -n '^static NOINLINE void parse_request' "$TOP/tests/targets/wrapped.c" | cut -d: -f1)
l_reply=$(grep -n '^static NOINLINE void build_reply' "$TOP/tests/targets/wrapped.c" | cut -d: -f1)
for g in function line; do
	"$REPORT" --by alloc --group $g "$TMP/w.ctf" >"$TMP/r-$g.txt" 2>"$TMP/r.err"
	rows=$(top_rows "$TMP/r-$g.txt")
	first=$(printf '%s\n' "$rows" | head -n 1)
	second=$(printf '%s\n' "$rows" | sed -n 2p)
	if [ $g = function ]; then want1=' parse_request$' want2=' build_reply$'
	else want1="wrapped.c:$l_parse\$" want2="wrapped.c:$l_reply\$"; fi
	if printf '%s' "$first" | grep -q "$want1" && printf '%s' "$second" | grep -q "$want2" &&
		! printf '%s\n' "$rows" | grep -qE ' (xmalloc|malloc)$'; then
		pass "wrappers_group_${g}_ranks_the_callers"
	else fail "wrappers_group_${g}_ranks_the_callers" "$(printf '%s\n' "$rows" | head -n 3 | tr '\n' '|')"; fi
done
# the group line key of parse_request is its file:line in wrapped.c, the call to xmalloc
if top_rows "$TMP/r-line.txt" | head -n 1 | grep -q 'wrapped.c:[0-9]'; then pass wrappers_line_is_the_call_site
else fail wrappers_line_is_the_call_site "$(top_rows "$TMP/r-line.txt" | head -n 1)"; fi

"$REPORT" --by alloc --group function --keep-wrappers "$TMP/w.ctf" >"$TMP/keep.txt" 2>/dev/null
if top_rows "$TMP/keep.txt" | head -n 1 | grep -qE ' (malloc|xmalloc)$'; then pass wrappers_keep_wrappers
else fail wrappers_keep_wrappers "$(top_rows "$TMP/keep.txt" | head -n 3 | tr '\n' '|')"; fi

# a wrapper of the user's: parse_request and build_reply folded too -> main
"$REPORT" --by alloc --group function --wrapper parse_request --wrapper 'build_*' "$TMP/w.ctf" >"$TMP/user.txt" 2>/dev/null
if top_rows "$TMP/user.txt" | head -n 1 | grep -q ' main$'; then pass wrappers_user_pattern
else fail wrappers_user_pattern "$(top_rows "$TMP/user.txt" | head -n 3 | tr '\n' '|')"; fi

# the stacks keep every frame
if grep -q 'at xmalloc' "$TMP/r-function.txt"; then pass wrappers_stacks_keep_every_frame
else fail wrappers_stacks_keep_every_frame "no xmalloc frame in the printed stacks"; fi

# pprof: drop_frames names the wrappers, go tool pprof's top names the callers
if command -v go >/dev/null; then
	"$BIN/memtrace-pprof" -o "$TMP/w.pb.gz" "$TMP/w.ctf" 2>/dev/null
	HOME=$TMP GOCACHE=$TMP/gocache GOFLAGS=-mod=mod go tool pprof -top -sample_index=alloc_space "$TMP/w.pb.gz" >"$TMP/top.txt" 2>"$TMP/top.err"
	first=$(awk '/flat%/ { t = 1; next } t { print $NF; exit }' "$TMP/top.txt")
	if [ "$first" = parse_request ]; then pass wrappers_pprof_top_names_the_caller
	else fail wrappers_pprof_top_names_the_caller "first: '$first'; $(head -c 300 "$TMP/top.err")"; fi
else
	skip wrappers_pprof "no go tool (make deps installs golang-go)"
fi
exit 0
