#!/usr/bin/env bash
# memtrace-report, memtrace-diff, memtrace-pprof on synthetic traces with known sites and bytes
# (written by tests/unit/test_heapview --write, numbers documented there), on the reference
# traces, and on the malformed ones (every tool rejects them with the reader's message).
source "$(dirname "$0")/lib/test.sh"
GEN=$TOP/$BUILD/tests/unit/test_heapview
REPORT=$BIN/memtrace-report DIFF=$BIN/memtrace-diff PPROF=$BIN/memtrace-pprof FG=$BIN/memtrace-flamegraph
for b in "$GEN" "$REPORT" "$DIFF" "$PPROF" "$FG"; do
	[ -x "$b" ] || { fail tools_built "missing $b (run make)"; exit 1; }
done
"$GEN" --write "$TMP/fx" >/dev/null || { fail tools_fixtures "test_heapview --write failed"; exit 1; }
M=$TMP/fx/main.ctf

# expect NAME TEXT PATTERN: PASS if the (grep -E) pattern matches a line of TEXT.
expect() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then pass "$1"
	else fail "$1" "no line matches /$3/ in: $(printf '%s' "$2" | head -c 600 | tr '\n' '|')"; fi
}
# first_row TEXT: the first ranked row ("  1. ...") of a table
first_row() { printf '%s\n' "$1" | grep -E '^ +1\. ' | head -1; }

# ---- memtrace-report
out=$("$REPORT" --raw --by alloc "$M")
expect report_alloc_total "$out" 'allocated 3850240 \(.*live at the end 1187840'
expect report_alloc_first "$(first_row "$out")" '^ +1\. 2457600 +63\.8% .* big\.c:30$'
expect report_alloc_rows "$out" '^ +3\. 409600 .* small\.c:60$'
expect report_stack_symbolized "$out" '^ +at alloc_big \(big\.c:30\)$'
expect report_inlined_marked "$out" '^ +at small_site \(small\.c:60\) \[inlined\]$'
expect report_stack_caller "$out" '^ +at main \(main\.c:10\)$'
out=$("$REPORT" --raw --by live "$M")
expect report_live_first "$(first_row "$out")" '^ +1\. 983040 +82\.8% .*leak\.c:40$'
expect report_live_only_live_sites "$out" '^ +2\. 204800 .* small\.c:60$'
if printf '%s\n' "$out" | grep -q 'big\.c:30'; then fail report_live_excludes_freed "big.c:30 (all freed) listed"
else pass report_live_excludes_freed; fi
out=$("$REPORT" --raw --by live --group function "$M")
expect report_group_function "$(first_row "$out")" '^ +1\. 983040 .* leak_site$'
expect report_group_function_stacks "$out" 'heaviest of 2 stacks'
out=$("$REPORT" --raw --by alloc --group stack "$M")
expect report_group_stack "$out" '^ +4\. 163840 .* leak\.c:40 leak_site <- \.\.\. \(3 frames, below\)$'
expect report_group_stack_frames_below "$out" '^ +at other_path \(other\.c:70\)$'
out=$("$REPORT" --raw --by alloc --top 1 "$M")
if [ "$(printf '%s\n' "$out" | grep -cE '^ +[0-9]+\. ')" = 1 ]; then pass report_top_n; else fail report_top_n "not one row"; fi
out=$("$REPORT" --raw --from 1.5 --to 3.5 "$M")
expect report_window "$out" 'allocated 1228800 \(.*live at the end 1024000'
out=$("$REPORT" --raw --by live --to 0.2 "$M")
expect report_live_at_time "$(first_row "$out")" '^ +1\. 81920 .* big\.c:30$'
out=$("$REPORT" --by nonsense "$M" 2>&1); rc=$?
if [ $rc = 2 ] && printf '%s' "$out" | grep -q 'alloc, peak or live'; then pass report_bad_option; else fail report_bad_option "rc $rc: $out"; fi
out=$("$REPORT" "$TMP/nope.ctf" 2>&1); rc=$?
if [ $rc = 1 ] && printf '%s' "$out" | grep -q 'No such file'; then pass report_missing_file; else fail report_missing_file "rc $rc: $out"; fi
# every reference trace reads, with a plausible first row
bad=""
for t in "$DATA"/memtrace/*.ctf; do
	o=$("$REPORT" --top 3 "$t" 2>&1) && first_row "$o" | grep -q '%' || bad="$bad $(basename "$t")"
done
if [ -z "$bad" ]; then pass report_reference_traces; else fail report_reference_traces "failed on:$bad"; fi

# a frame without a line (an object without debug info) prints its object, not "object:0"
out=$("$REPORT" "$TMP/fx/nodebug.ctf")
expect report_frame_without_line "$out" '^ +at parse_request \(/usr/bin/prog\)$'
if printf '%s\n' "$out" | grep -q ':0)'; then fail report_no_line_zero "$(printf '%s\n' "$out" | grep ':0)' | head -1)"
else pass report_no_line_zero; fi

# ---- memtrace-diff: snapshots of a leaking target (site leak_site grows)
out=$("$DIFF" --raw "$TMP/fx/snapA.ctf" "$TMP/fx/snapB.ctf")
expect diff_leak_first "$(first_row "$out")" '^ +1\. \+2457600 +live 819200 -> 3276800 +samples 100 -> 400 +leak\.c:40 leak_site <- \.\.\. \(3 frames, below\)$'
expect diff_new_context "$out" '^ +2\. \+81920 +live 0 -> 81920 +samples 0 -> 10 +small\.c:60 small_site'
shrank=$(printf '%s\n' "$out" | sed -n '/^Shrank/,$p')
expect diff_shrank "$(first_row "$shrank")" '^ +1\. -409600 +live 1638400 -> 1228800 +samples 200 -> 150 +big\.c:30'
expect diff_stack_printed "$out" '^ +at leak_site \(leak\.c:40\)$'
out=$("$DIFF" --raw --group function "$TMP/fx/snapA.ctf" "$M")
expect diff_general_trace_live_at_end "$(first_row "$out")" '^ +1\. \+204800 +live 0 -> 204800 +samples 0 -> 25 +small_site$'
out=$("$DIFF" --raw "$TMP/fx/snapB.ctf" "$TMP/fx/snapB.ctf")
expect diff_same_is_empty "$out" '^change: \+0$'
# a row that changed by fewer than 10 samples is marked as noise, one with more is not
out=$("$DIFF" --raw "$TMP/fx/snapB.ctf" "$TMP/fx/snapC.ctf")
expect diff_few_samples_marked_noise "$(first_row "$out")" '^ +1\. \+24576 +live 81920 -> 106496 +samples 10 -> 13 \(noise: under 10 samples\) +small\.c:60'
out=$("$DIFF" --raw "$TMP/fx/snapA.ctf" "$TMP/fx/snapB.ctf")
if printf '%s\n' "$out" | grep -q 'leak_site.*noise\|noise.*leak\.c'; then fail diff_many_samples_not_noise "$(first_row "$out")"
else pass diff_many_samples_not_noise; fi

# ---- memtrace-pprof, read back by go tool pprof
if "$PPROF" "$M" -o "$TMP/main.pb.gz" && gzip -t "$TMP/main.pb.gz"; then pass pprof_written; else fail pprof_written "no gzip output"; fi
if command -v go >/dev/null; then
	export GOCACHE=${GOCACHE:-$TMP/gocache} HOME=${HOME:-$TMP}
	top() { go tool pprof -top -unit=B -sample_index="$1" "$TMP/main.pb.gz" 2>&1; }
	out=$(top alloc_space)
	expect pprof_alloc_big "$out" '^ +2457600B +63\.8[0-9]% .* alloc_big$'
	expect pprof_alloc_leak "$out" '^ +983040B .* leak_site$'
	expect pprof_alloc_small_inline "$out" '^ +409600B .* small_site \(inline\)$'
	expect pprof_cumulative "$out" '^ +0 +0% .* 3850240B +100% +main$'
	out=$(top inuse_space)
	expect pprof_inuse_leak "$out" '^ +983040B +82\.7[0-9]% .* leak_site$'
	expect pprof_inuse_total "$out" 'of 1187840B total'
	out=$(go tool pprof -top -sample_index=alloc_objects "$TMP/main.pb.gz" 2>&1)
	expect pprof_alloc_objects "$out" '^ +30 .* alloc_big$'
	out=$(go tool pprof -top -lines -unit=B -sample_index=alloc_space "$TMP/main.pb.gz" 2>&1)
	expect pprof_lines_inlined "$out" '^ +409600B .* small_site small\.c:60 \(inline\)$'
	expect pprof_lines_caller "$out" '^ +0 .* 409600B .* helper helper\.c:50$'
	"$PPROF" "$DATA/memtrace/upstream-ocamlopt-v2.ctf" -o "$TMP/ocamlopt.pb.gz" &&
		out=$(go tool pprof -top -sample_index=alloc_space "$TMP/ocamlopt.pb.gz" 2>&1)
	expect pprof_reference_trace "$out" 'Stdlib__set\.Make\.bal'
else
	skip pprof_go "go (golang-go) is needed to read the profile back (make deps)"
fi

# ---- a trace without allocations: empty tables, no error
"$BIN/memtrace-filter" --from 1000 --to 1001 "$M" "$TMP/noalloc.ctf" 2>/dev/null
out=$("$REPORT" "$TMP/noalloc.ctf" 2>&1); rc=$?
if [ $rc = 0 ] && [ "$(printf '%s\n' "$out" | grep -c '^     (none)$')" = 3 ]; then pass report_no_allocations
else fail report_no_allocations "rc $rc: $out"; fi
out=$("$DIFF" "$TMP/noalloc.ctf" "$TMP/noalloc.ctf" 2>&1); rc=$?
if [ $rc = 0 ] && [ "$(printf '%s\n' "$out" | grep -c '^     (none)$')" = 2 ]; then pass diff_no_allocations
else fail diff_no_allocations "rc $rc: $out"; fi

# ---- an empty --from/--to window is bad usage (exit 2) in every tool that takes one
bad=""
for tool in report flamegraph pprof; do
	o=(-o "$TMP/window.out"); [ $tool = report ] && o=()
	out=$("$BIN/memtrace-$tool" --from 2 --to 1 "${o[@]}" "$M" 2>&1); rc=$?
	[ $rc = 2 ] && printf '%s' "$out" | grep -q "^memtrace-$tool: --to (1) is before --from (2)$" ||
		bad="$bad $tool (rc $rc: $out)"
done
if [ -z "$bad" ]; then pass tools_empty_window; else fail tools_empty_window "$bad"; fi

# ---- format v3: every tool gives the same output on a v3 trace as on the v2 trace it was
# written from (tests/data/memtrace/v3/README.md). The two files get the same name in two
# folders, since some outputs name the file.
mkdir -p "$TMP/v2" "$TMP/v3"
bad=""
while read -r v3 v2; do
	cp "$DATA/memtrace/$v2.ctf" "$TMP/v2/trace.ctf"
	cp "$DATA/memtrace/v3/$v3.ctf" "$TMP/v3/trace.ctf"
	for d in v2 v3; do
		(
			cd "$TMP/$d" || exit 1
			"$REPORT" --top 0 trace.ctf >report.txt 2>&1
			"$REPORT" --top 0 --by live --group stack trace.ctf >report-stack.txt 2>&1
			"$FG" trace.ctf -o fg.svg 2>fg.err
			"$FG" --live --folded --lines trace.ctf -o folded.txt 2>>fg.err
			"$PPROF" trace.ctf -o profile.pb.gz 2>pprof.err
			"$DIFF" --top 0 trace.ctf trace.ctf >diff.txt 2>&1
		)
	done
	for f in report.txt report-stack.txt fg.svg folded.txt profile.pb.gz diff.txt fg.err pprof.err; do
		cmp -s "$TMP/v2/$f" "$TMP/v3/$f" || bad="$bad $v3:$f"
	done
	[ -s "$TMP/v3/fg.svg" ] && [ -s "$TMP/v3/profile.pb.gz" ] && grep -q '%' "$TMP/v3/report.txt" ||
		bad="$bad $v3:empty-output"
	out=$("$DIFF" --raw "$TMP/v2/trace.ctf" "$TMP/v3/trace.ctf" 2>&1)
	printf '%s\n' "$out" | grep -q '^change: +0$' || bad="$bad $v3:diff-v2-v3($(printf '%s' "$out" | grep change))"
done <<'EOF'
v3-lists-r1e-3 v2-lists-r1e-3
v3-deep-r1e-3 v2-deep-r1e-3
v3-upstream-ocamlopt upstream-ocamlopt-v2
EOF
if [ -z "$bad" ]; then pass tools_v3_same_as_v2; else fail tools_v3_same_as_v2 "differ:$bad"; fi
# A v3 trace of two domains (tests/fuzz/seeds, made by test_reader_v3 --write): each domain's
# backtraces are decoded with its own state, so the stacks are A.f;B.g twice, C.h (domain 1),
# then A.f;A.f (domain 0's bucket 5, not domain 1's C.h).
out=$("$FG" --folded "$TOP/tests/fuzz/seeds/v3-two-domains.ctf" 2>&1)
if [ "$out" = $'A.f;B.g 24000\nC.h 8000\nA.f;A.f 8000' ]; then pass tools_v3_two_domains
else fail tools_v3_two_domains "$(printf '%s' "$out" | tr '\n' '|')"; fi

# ---- every tool rejects every malformed trace with the reader's message (the same for all);
# v3-cut: a v3 trace that ends inside a packet header.
head -c 29545 "$DATA/memtrace/v3/v3-lists-r1e-3.ctf" >"$TMP/v3-cut.ctf"
bad=0
for t in "$DATA"/memtrace/malformed/*.ctf "$TMP/v3-cut.ctf"; do
	msgs=""
	for tool in report diff pprof flamegraph; do
		case $tool in
		report) out=$("$REPORT" "$t" 2>&1) ;;
		diff) out=$("$DIFF" "$t" "$t" 2>&1) ;;
		pprof) out=$("$PPROF" "$t" -o "$TMP/bad.pb.gz" 2>&1) ;;
		flamegraph) out=$("$FG" "$t" -o "$TMP/bad.svg" 2>&1) ;;
		esac
		rc=$?
		msg=$(printf '%s\n' "$out" | sed -n "s/^memtrace-$tool: //p" | head -1)
		if [ $rc != 1 ] || ! printf '%s' "$msg" | grep -q "malformed trace: "; then
			echo "memtrace-$tool on $(basename "$t"): rc $rc, $out"; bad=$((bad + 1))
		fi
		msgs="$msgs$msg"$'\n'
	done
	[ "$(printf '%s' "$msgs" | sort -u | wc -l)" = 1 ] || { echo "different messages for $t: $msgs"; bad=$((bad + 1)); }
done
if [ $bad = 0 ]; then pass tools_reject_malformed; else fail tools_reject_malformed "$bad problems (see log)"; fi

# ---- memtrace-timeline and memtrace-report --timeline (issue 22): main.ctf's peak is 145
# samples (1187840 bytes) at 4.019 s, after the last LEAK2 allocation
TL=$BIN/memtrace-timeline
if "$TL" "$M" -o "$TMP/tl.svg" --top 2 2>"$TMP/tl.err" &&
	python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$TMP/tl.svg" 2>/dev/null
then pass timeline_svg_well_formed
else fail timeline_svg_well_formed "$(cat "$TMP/tl.err")"; fi
expect timeline_peak_marked "$(cat "$TMP/tl.svg")" 'peak 1\.1 MiB at 4\.019 s'
# --top 2: the two sites live at the peak, then "other" (three legend rows), with file:line
n=$(grep -c 'class="legend"' "$TMP/tl.svg")
if [ "$n" = 3 ] && grep -q '>leak_site (leak.c:40)<' "$TMP/tl.svg" && grep -q '>other<' "$TMP/tl.svg"
then pass timeline_legend_top_and_other
else fail timeline_legend_top_and_other "$n legend rows: $(grep -o 'class="legend".*</text>' "$TMP/tl.svg" | sed 's/<[^>]*>//g' | tr '\n' ';')"; fi
expect timeline_y_axis_in_bytes "$(cat "$TMP/tl.svg")" '>1\.0 MiB</text>'
expect timeline_x_axis_in_seconds "$(cat "$TMP/tl.svg")" '>4 s</text>'
out=$("$TL" --top 1000 "$M" -o - 2>&1 >/dev/null); rc=$?
if [ $rc = 2 ] && printf '%s' "$out" | grep -q 'top up to 100'; then pass timeline_bad_option
else fail timeline_bad_option "rc $rc: $out"; fi
out=$("$REPORT" --timeline --by alloc "$M")
expect report_timeline_text_chart "$out" '1\.1 MiB \|'
expect report_timeline_peak_marked "$out" '\^ peak 1\.1 MiB at 4\.019 s'
exit 0
