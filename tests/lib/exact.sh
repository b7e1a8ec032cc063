# Exact checks of a trace against tests/targets/alloc_workload.cc's truth (sourced).
# The workload prints "truth op_NAME CALLS WORDS LIVE_WORDS" per operation; at --rate 1 the
# trace (memtrace-dump output) must match it exactly, per operation (the op_ frame innermost
# on the stack of each allocation).

# check_exact NAME DIR: compares DIR/t.dump with DIR/truth.
check_exact() {
	awk -v prefix="$1" '
	FNR == NR { if ($1 == "truth") { names[++n] = $2; t_calls[$2] = $3; t_words[$2] = $4; t_live[$2] = $5 }; next }
	$2 == "alloc" {
		id = substr($3, 4); len = substr($4, 5); ns = substr($5, 10)
		p = index($0, ": "); op = ""
		nf = p ? split(substr($0, p + 2), fr, / \| /) : 0
		for (i = nf; i >= 1 && op == ""; i--) if (match(fr[i], / op_[a-z_]+$/)) op = substr(fr[i], RSTART + 1)
		if (op == "") next
		calls[op]++; words[op] += len; nsamp[op] += ns
		id_op[id] = op; id_len[id] = len; alive[id] = 1
		next
	}
	$2 == "collect" {
		id = substr($3, 4)
		if (id in alive) delete alive[id]
		else if (id in id_op) bad_collect++
	}
	END {
		for (id in alive) live[id_op[id]] += id_len[id]
		for (k = 1; k <= n; k++) {
			s = names[k]
			if (calls[s] == t_calls[s] && words[s] == t_words[s] && nsamp[s] == t_words[s] && live[s] == t_live[s])
				print "PASS " prefix "_exact_" s
			else printf "FAIL %s_exact_%s: %d allocs (truth %d), %d words, %d nsamples (truth %d), %d live words (truth %d)\n", prefix, s, calls[s], t_calls[s], words[s], nsamp[s], t_words[s], live[s], t_live[s]
		}
		if (n > 0 && bad_collect == 0) print "PASS " prefix "_collects_match_allocs"
		else printf "FAIL %s_collects_match_allocs: %d operations in the truth, %d collects of blocks already collected\n", prefix, n, bad_collect
	}' "$2/truth" "$2/t.dump"
}

