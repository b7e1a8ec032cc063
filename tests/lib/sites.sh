# Checks of a trace of tests/targets/sites.c against the truth it prints (sourced).

# check_sites TRUTH DUMP RATE MODE PREFIX: PASS/FAIL lines comparing a trace with the truth.
# MODE "stat": estimates within 10% (bytes) / 15% (live), chains on >= 99% of samples;
# MODE "exact": counts and words exact.
check_sites() {
	awk -v rate="$3" -v mode="$4" -v prefix="$5" '
	function abs(x) { return x < 0 ? -x : x }
	# "file:line:s-e def & file:line:s-e def" -> "def@line&def@line"
	function frame_key(f,    locs, n, i, sp, head, def, parts, k, out) {
		sub(/ \*[0-9]+$/, "", f)
		n = split(f, locs, / & /)
		out = ""
		for (i = 1; i <= n; i++) {
			sp = index(locs[i], " ")
			if (sp == 0) { head = locs[i]; def = "?" }
			else { head = substr(locs[i], 1, sp - 1); def = substr(locs[i], sp + 1) }
			k = split(head, parts, ":")
			out = out (i > 1 ? "&" : "") def "@" (k >= 3 ? parts[k - 1] : "?")
		}
		return out
	}
	FNR == NR {
		if ($1 == "truth") {
			site[$3 "@" $4] = $2; names[++nsites] = $2
			t_total[$2] = $5; t_live[$2] = $6; t_calls[$2] = $7; t_words[$2] = $8; t_lwords[$2] = $9
		} else if ($1 == "chain") {
			nch[$2] = NF - 2
			for (i = 3; i <= NF; i++) ch[$2, i - 2] = $i
		}
		next
	}
	$2 == "alloc" {
		id = substr($3, 4); len = substr($4, 5); ns = substr($5, 10)
		p = index($0, ": ")
		nf = p ? split(substr($0, p + 2), fr, / \| /) : 0
		if (nf == 0) { unattributed++; next }
		inner = frame_key(fr[nf])
		m = split(inner, innerlocs, "&")
		s = site[innerlocs[m]]
		if (s == "") { unattributed++; next }
		allocs[s]++; nsamp[s] += ns; words[s] += len
		id_site[id] = s; id_ns[id] = ns; id_len[id] = len; alive[id] = 1
		ok = nf >= nch[s]
		for (i = 0; ok && i < nch[s]; i++) if (frame_key(fr[nf - i]) != ch[s, nch[s] - i]) ok = 0
		if (ok) chain_ok[s]++
		else if (!bad_chain_shown++) print "# example of a wrong chain for " s ": " substr($0, p + 2)
		next
	}
	$2 == "collect" {
		id = substr($3, 4)
		if (id in alive) delete alive[id]
		else if (!(id in id_site)) { } # an allocation of no known site
		else bad_collect++
	}
	END {
		for (id in alive) { s = id_site[id]; live_n[s]++; live_ns[s] += id_ns[id]; live_len[s] += id_len[id] }
		tot = 0; tot_ok = 0
		for (k = 1; k <= nsites; k++) {
			s = names[k]; tot += allocs[s]; tot_ok += chain_ok[s]
			if (mode == "exact") {
				name = prefix "_exact_" s
				if (allocs[s] == t_calls[s] && words[s] == t_words[s] && nsamp[s] == t_words[s] && live_len[s] == t_lwords[s])
					print "PASS " name
				else printf "FAIL %s: allocs %d (truth %d), words %d nsamples %d (truth %d), live words %d (truth %d)\n", name, allocs[s], t_calls[s], words[s], nsamp[s], t_words[s], live_len[s], t_lwords[s]
				continue
			}
			est = nsamp[s] / rate * 8
			err = t_total[s] ? abs(est - t_total[s]) / t_total[s] : 1
			name = prefix "_bytes_" s
			if (err <= 0.10) print "PASS " name
			else printf "FAIL %s: estimated %.0f bytes, truth %d (%.1f%% off, %d samples)\n", name, est, t_total[s], err * 100, allocs[s]
			name = prefix "_live_" s
			est = live_ns[s] / rate * 8
			if (t_live[s] == 0) {
				if (live_n[s] == 0) print "PASS " name "_no_false_leak"
				else printf "FAIL %s_no_false_leak: %d sampled blocks never collected (%.0f bytes)\n", name, live_n[s], est
			} else {
				err = abs(est - t_live[s]) / t_live[s]
				if (err <= 0.15) print "PASS " name
				else printf "FAIL %s: estimated %.0f live bytes, truth %d (%.1f%% off)\n", name, est, t_live[s], err * 100
			}
		}
		name = prefix "_full_call_chains"
		if (tot > 0 && tot_ok >= 0.99 * tot) print "PASS " name
		else printf "FAIL %s: %d of %d samples have the full chain (inlined frame, file:line)\n", name, tot_ok, tot
		name = prefix "_collects_match_allocs"
		if (bad_collect == 0) print "PASS " name
		else printf "FAIL %s: %d collects of blocks already collected\n", name, bad_collect
		printf "# %d samples at the known sites, %d elsewhere (libc, stdio)\n", tot, unattributed
	}' "$1" "$2"
}
