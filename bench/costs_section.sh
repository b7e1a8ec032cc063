# bench/run.sh's costs section (sourced): what each mode costs real programs, side by side
# (issue 34: the default mode). Wall time of
#   clang++ -O2 -c on a generated C++ file (templates and std containers, clang's cc1 runs in
#   the driver's process), and
#   perl building and sorting a hash of 1M strings,
# untraced, under memtraced -- CMD with uprobes (--inject=no), under memtraced -- CMD by
# default (the in-process sampler), and under heaptrack; interleaved rounds. Keys:
#   costs_clang_uprobes_vs_none, costs_clang_sampler_vs_none, costs_clang_heaptrack_vs_none,
#   costs_perl_* the same; medians of per-round ratios; costs_clang_modes_top10_agree: the top 10
#   functions by bytes allocated that both modes share (issue 38); clang_truncated_share_peak:
#   what part of the live bytes at the peak has a stack cut by the copy's size (issue 38).
costs_section() {
	local d=$TMP/costs cxx=/usr/bin/clang++ perl=/usr/bin/perl ht
	ht=$(command -v heaptrack || true)
	[ "$have_memtraced" = 1 ] && [ -x "$cxx" ] && [ -x "$perl" ] ||
		{ na costs_clang_sampler_vs_none "memtraced, clang++ or perl is missing"; return; }
	mkdir -p "$d"
	# the C++ input: 150 class templates instantiated over std::map, std::vector, std::string
	{
		echo '#include <map>'; echo '#include <vector>'; echo '#include <string>'; echo '#include <algorithm>'
		for i in $(seq 150); do
			echo "template <class T> struct S$i { std::map<std::string, std::vector<T>> m;"
			echo "  void add(const std::string &k, T v) { m[k].push_back(v); std::sort(m[k].begin(), m[k].end()); } };"
			echo "int f$i() { S$i<int> s; s.add(\"a$i\", $i); S$i<double> t; t.add(\"b\", $i.5); return (int)s.m.size(); }"
		done
	} >"$d/in.cc"
	echo 'my %h; for my $i (1..1000000) { $h{"key$i"} = "value" x ($i % 7) . $i } my @k = sort keys %h; print scalar(@k), "\n";' >"$d/in.pl"
	local prog variant r t0 t1
	local -A cmd=([clang]="$cxx -O2 -c $d/in.cc -o $d/in.o" [perl]="$perl $d/in.pl")
	for r in $(seq "$ROUNDS"); do
		for prog in clang perl; do
			for variant in none uprobes sampler heaptrack; do
				[ "$variant" = heaptrack ] && [ -z "$ht" ] && continue
				t0=$(date +%s.%N)
				case $variant in
				none) ${cmd[$prog]} >/dev/null 2>>"$d/err" ;;
				uprobes) "$MEMTRACED" -q --inject=no -o "$d/$prog-uprobes.ctf" -- ${cmd[$prog]} >/dev/null 2>>"$d/err" ;;
				sampler) MEMTRACED_INJECT= "$MEMTRACED" -q -o "$d/$prog-sampler.ctf" -- ${cmd[$prog]} >/dev/null 2>>"$d/err" ;;
				heaptrack) (cd "$d" && "$ht" -o "$d/ht" ${cmd[$prog]} >/dev/null 2>>"$d/err") ;;
				esac
				t1=$(date +%s.%N)
				awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.3f\n", a - b }' >>"$d/$prog-$variant"
				rm -f "$d"/ht*.zst "$d"/ht*.gz
			done
			log "costs round $r $prog: none $(tail -1 "$d/$prog-none") uprobes $(tail -1 "$d/$prog-uprobes") sampler $(tail -1 "$d/$prog-sampler") heaptrack $(tail -1 "$d/$prog-heaptrack" 2>/dev/null) s"
		done
	done
	for prog in clang perl; do
		for variant in uprobes sampler heaptrack; do
			[ -s "$d/$prog-$variant" ] || { na "costs_${prog}_${variant}_vs_none" "$variant did not run"; continue; }
			set_result "costs_${prog}_${variant}_vs_none" "$(median_ratio "$d/$prog-$variant" "$d/$prog-none")"
		done
		# shellcheck disable=SC2046
		set_result "costs_${prog}_none_s" "$(median $(cat "$d/$prog-none"))"
	done
	# the two modes read the same (issue 38): the top 10 functions by bytes allocated, of the
	# last round's traces, in both lists
	local rep=$TOP/$BUILD/bin/memtrace-report
	if [ -s "$d/clang-uprobes.ctf" ] && [ -s "$d/clang-sampler.ctf" ]; then
		for variant in uprobes sampler; do
			"$rep" --by alloc --group function --top 10 "$d/clang-$variant.ctf" 2>/dev/null |
				awk '/^ *[0-9]+\. / { n = split($0, f, "  +"); print f[n] }' | sort >"$d/top-$variant"
		done
		set_result costs_clang_modes_top10_agree "$(comm -12 "$d/top-uprobes" "$d/top-sampler" | grep -c .)"
		note costs_clang_modes_top10_agree "of the top 10 functions by bytes allocated in clang's trace with uprobes, how many are in the top 10 with the in-process sampler (goal 10: the same program reads the same in both modes)"
	else na costs_clang_modes_top10_agree "no traces of both modes"; fi
	costs_deep_stacks "$d"
	note costs_clang_sampler_vs_none "wall time of clang++ -O2 -c (a generated file of 150 templates over std containers) under memtraced -- CMD by default (the in-process sampler) over untraced; _uprobes: --inject=no; _heaptrack: heaptrack; medians of per-round ratios"
	note costs_perl_sampler_vs_none "wall time of perl building and sorting a hash of 1M strings, the same variants"
}

# Deep stacks (issue 38): clang++ instantiating a chain of 200 class templates (each a
# std::vector of the next) recurses deep: most of its live bytes at the peak were allocated
# more than 64 KiB down its stack. The share of the live bytes at the peak whose stack ends in the
# "[stack truncated at N bytes]" marker, by default and at the former ceiling (64 KiB).
costs_deep_stacks() {
	local d=$1 fg=$TOP/$BUILD/bin/memtrace-flamegraph sb
	{
		echo '#include <vector>'
		echo 'template <int N> struct R { std::vector<R<N - 1>> v;'
		echo '  int f() { v.emplace_back(); return v.back().f() + (int)v.size(); } };'
		echo 'template <> struct R<0> { int f() { return 0; } };'
		echo 'int g() { return R<200>().f(); }'
	} >"$d/deep.cc"
	for sb in default 65536; do
		local opt=() key=clang_truncated_share_peak
		[ "$sb" = default ] || { opt=(--stack-bytes "$sb"); key=${key}_at_64k; }
		MEMTRACED_INJECT= "$MEMTRACED" -q "${opt[@]}" -o "$d/deep-$sb.ctf" -- /usr/bin/clang++ -O2 -c "$d/deep.cc" -o "$d/deep.o" >/dev/null 2>>"$d/err"
		local share
		share=$("$fg" --at peak --folded "$d/deep-$sb.ctf" 2>/dev/null |
			awk '{ t += $NF; if (index($0, "[stack truncated at ")) c += $NF }
			     END { if (t > 0) printf "%.2f\n", 100 * c / t }')
		if [ -n "$share" ]; then set_result "$key" "$share"
		else na "$key" "no trace of clang++ on the deep input"; fi
	done
	note clang_truncated_share_peak "percent of the live bytes at the peak of clang++ -O2 -c on a chain of 200 class templates (each a std::vector of the next) whose stack was cut by the copy's size, memtraced -- CMD by default (goal <= 1%; _at_64k: --stack-bytes 65536, the ceiling before)"
}
