#!/usr/bin/env bash
# Unwinds remembered (user/daemon/parse/unwind/unwind_memo.h): a sample whose registers and
# stack words (where the unwinder read) are an earlier sample's takes that sample's frames
# without a walk. Programs traced at --rate 1 (every allocation, so the two runs sample the
# same calls) with the memo and without (MEMTRACED_UNWIND_MEMO=off) must give the same
# stacks, byte for byte in the report by whole stack; and the memo must have been used. Both
# modes: uprobes (frame 0 the allocator's entry) and --inject (the sampler's frames hidden).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
REPORT=$BIN/memtrace-report
for p in "$MT" "$REPORT" "$TARGETS/burst_cpp" "$TARGETS/sites"; do
	[ -x "$p" ] || { fail memo_built "missing $p (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip memo_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# same NAME MODE CMD...: the stacks of CMD with and without the memo
same() {
	local name=$1 mode=$2; shift 2
	local v
	for v in on off; do
		MEMTRACED_UNWIND_MEMO=$v "$MT" $mode --rate 1 --no-mmap -o "$TMP/$name-$v.ctf" -- "$@" \
			>/dev/null 2>"$TMP/$name-$v.err"
		# the tables (the header names the file, the pid, the times)
		"$REPORT" --raw --by alloc --group stack --top 0 --frames 0 "$TMP/$name-$v.ctf" 2>&1 |
			grep -vE '^(trace |window: |peak: |memtrace-report: warning)' >"$TMP/$name-$v.txt"
	done
	local hits rows
	hits=$(sed -nE 's/.*; ([0-9]+) of ([0-9]+) unwinds remembered.*/\1/p' "$TMP/$name-on.err" | tail -1)
	rows=$(grep -c . "$TMP/$name-on.txt")
	# a run that dropped samples (the walk of every sample is slower: --inject at rate 1 can
	# outrun it) is compared by its distinct stacks, each a line, the counts left out
	local a=$TMP/$name-on.txt b=$TMP/$name-off.txt
	if grep -q "dropped: [1-9]" "$TMP/$name-on.err" "$TMP/$name-off.err"; then
		for v in on off; do
			awk '/^ *[0-9]+\. / { if (cur != "") print cur; sub(/.*samples\)  /, ""); cur = $0; next }
			     /^       at / { cur = cur " | " $0 } END { if (cur != "") print cur }' \
				"$TMP/$name-$v.txt" | sort >"$TMP/$name-$v.stacks"
		done
		a=$TMP/$name-on.stacks b=$TMP/$name-off.stacks
	fi
	if [ -n "$hits" ] && [ "$hits" -gt 0 ] && [ "$rows" -gt 5 ] && cmp -s "$a" "$b" &&
	   ! grep -q "unwinds remembered" "$TMP/$name-off.err"; then
		pass "memo_${name}_same_stacks"
	else
		fail "memo_${name}_same_stacks" "remembered ${hits:-none}; $rows report lines; $(diff "$a" "$b" | head -4 | tr '\n' ' ') $(tail -1 "$TMP/$name-on.err")"
	fi
}

same burst_uprobes "" "$TARGETS/burst_cpp"
same sites_inject "--inject=required" "$TARGETS/sites" run 300
same threads_inject "--inject=required" "$TARGETS/sites" threads 3 3000
