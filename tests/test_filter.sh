#!/usr/bin/env bash
# memtrace-filter: byte-identical copies of the reference traces (v2, and v3 with --format v3),
# v2 <-> v3 conversions, a time window checked against the dump of the original, and clear
# errors on bad arguments and malformed input.
. "$(dirname "$0")/lib/test.sh"
FILTER=$BIN/memtrace-filter
DUMP=$BIN/memtrace-dump
REF=$DATA/memtrace

if [ ! -x "$FILTER" ] || [ ! -x "$DUMP" ]; then
	fail filter_built "build $FILTER and $DUMP first (make)"
	exit 1
fi

# 1. No window: the real library's traces come out byte for byte.
for f in "$REF"/*.ctf; do
	name=$(basename "$f" .ctf)
	rm -f "$TMP/out.ctf"
	if ! err=$("$FILTER" "$f" "$TMP/out.ctf" 2>&1); then
		fail "filter_identical_$name" "exit $?: $err"
	elif cmp -s "$f" "$TMP/out.ctf"; then
		pass "filter_identical_$name"
	else
		fail "filter_identical_$name" "$(cmp "$f" "$TMP/out.ctf" 2>&1 | head -n 1)"
	fi
done

# 1b. Format v3 (tests/data/memtrace/v3/: written by the newest memtrace from the v2 traces).
# --format v3 gives every v3 trace back byte for byte, and turns the v2 trace it came from into
# it; without --format the output is v2: the v3 trace becomes its v2 original again.
v3_pairs() {
	echo "v3-lists-r1e-3 v2-lists-r1e-3"
	echo "v3-deep-r1e-3 v2-deep-r1e-3"
	echo "v3-upstream-ocamlopt upstream-ocamlopt-v2"
}
same_bytes() { # NAME EXPECTED GOT
	if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$(cmp "$2" "$3" 2>&1 | head -n 1)"; fi
}
while read -r v3 v2; do
	rm -f "$TMP/o3.ctf" "$TMP/o2.ctf" "$TMP/c3.ctf"
	"$FILTER" --format v3 "$REF/v3/$v3.ctf" "$TMP/o3.ctf" 2>"$TMP/err.txt"
	same_bytes "filter_v3_identical_$v3" "$REF/v3/$v3.ctf" "$TMP/o3.ctf"
	"$FILTER" "$REF/v3/$v3.ctf" "$TMP/o2.ctf" 2>>"$TMP/err.txt"
	same_bytes "filter_v3_to_v2_$v3" "$REF/$v2.ctf" "$TMP/o2.ctf"
	"$FILTER" --format v3 "$REF/$v2.ctf" "$TMP/c3.ctf" 2>>"$TMP/err.txt"
	same_bytes "filter_v2_to_v3_$v2" "$REF/v3/$v3.ctf" "$TMP/c3.ctf"
	if [ -s "$TMP/err.txt" ]; then fail "filter_v3_quiet_$v3" "$(head -n 2 "$TMP/err.txt")"; fi
done < <(v3_pairs)
# v2 -> v3 -> v2 keeps every event and every byte, for every v2 reference trace (v2-synth has
# 12,000 allocations: the v3 writer ends a packet at each 10,000-id chunk, as the real one).
for f in "$REF"/*.ctf; do
	name=$(basename "$f" .ctf)
	rm -f "$TMP/r3.ctf" "$TMP/r2.ctf"
	if "$FILTER" --format v3 "$f" "$TMP/r3.ctf" 2>"$TMP/err.txt" &&
	   "$FILTER" --format v2 "$TMP/r3.ctf" "$TMP/r2.ctf" 2>>"$TMP/err.txt" &&
	   cmp -s "$f" "$TMP/r2.ctf" &&
	   diff <("$DUMP" "$f" | tail -n +2) \
		<("$DUMP" "$TMP/r3.ctf" | tail -n +2 | grep -v '^info initial_domain=' | sed 's/ dom=0//') >/dev/null
	then
		pass "filter_v2_v3_v2_$name"
	else
		fail "filter_v2_v3_v2_$name" "$(head -n 2 "$TMP/err.txt") $(cmp "$f" "$TMP/r2.ctf" 2>&1 | head -n 1)"
	fi
done
# The output is v2 unless asked: the version field (bytes 28-29) of packet 0.
"$FILTER" "$REF/v3/v3-deep-r1e-3.ctf" "$TMP/d2.ctf" 2>/dev/null
"$FILTER" --format v3 "$REF/v2-deep-r1e-3.ctf" "$TMP/d3.ctf" 2>/dev/null
if [ "$(od -An -tu2 -j28 -N2 "$TMP/d2.ctf" | tr -d ' ')" = 2 ] &&
   [ "$(od -An -tu2 -j28 -N2 "$TMP/d3.ctf" | tr -d ' ')" = 3 ]; then
	pass filter_default_format_v2
else
	fail filter_default_format_v2 "packet 0 versions: $(od -An -tu2 -j28 -N2 "$TMP/d2.ctf") / $(od -An -tu2 -j28 -N2 "$TMP/d3.ctf")"
fi
# A window over a v3 trace written as v3: the same events as the window over its v2 original.
"$FILTER" --from 0.2 --to 0.6 --format v3 "$REF/v3/v3-lists-r1e-3.ctf" "$TMP/w3.ctf" 2>/dev/null
"$FILTER" --from 0.2 --to 0.6 "$REF/v2-lists-r1e-3.ctf" "$TMP/w2.ctf" 2>/dev/null
if diff <("$DUMP" "$TMP/w2.ctf" | tail -n +2) \
	<("$DUMP" "$TMP/w3.ctf" | tail -n +2 | grep -v '^info initial_domain=' | sed 's/ dom=0//') >/dev/null &&
   [ "$(grep -c ' alloc ' <("$DUMP" "$TMP/w3.ctf"))" -gt 100 ]; then
	pass filter_v3_window
else
	fail filter_v3_window "the v3 window's events differ from the v2 window's"
fi

# A two-domain v3 trace: written in one domain (ours writes one), with a warning that says so.
"$FILTER" --format v3 "$TOP/tests/fuzz/seeds/v3-two-domains.ctf" "$TMP/one.ctf" 2>"$TMP/err.txt"
rc=$?
if [ $rc -eq 0 ] && grep -q "events of domain 1 .* are written as domain 0" "$TMP/err.txt" &&
   [ "$("$DUMP" "$TMP/one.ctf" | grep -c ' dom=0')" = 6 ]; then
	pass filter_v3_domains_merged
else
	fail filter_v3_domains_merged "exit $rc: $(head -n 1 "$TMP/err.txt")"
fi
# A damaged v3 input: exit 1 with the reader's message; what was read is a valid v3 trace.
head -c 29545 "$REF/v3/v3-lists-r1e-3.ctf" >"$TMP/cut3.ctf"
"$FILTER" --format v3 "$TMP/cut3.ctf" "$TMP/cut3-out.ctf" 2>"$TMP/err.txt"
rc=$?
if [ $rc -eq 1 ] && grep -q "malformed trace: buffer underflow .*packet 3" "$TMP/err.txt" &&
   [ "$("$DUMP" "$TMP/cut3-out.ctf" 2>/dev/null | grep -cE '^[0-9]{10} ')" = 3270 ]; then
	pass filter_v3_malformed
else
	fail filter_v3_malformed "exit $rc: $(head -c 300 "$TMP/err.txt")"
fi

# 2. A window: the output must hold exactly the allocations of the original made in
# [FROM, TO), renumbered 0, 1, ..., and the promotes and collects of those allocations.
# The expected dump is computed from the original's dump with awk.
src=$REF/v2-lists-r1e-3.ctf
FROM=0.25 TO=0.5
"$DUMP" "$src" >"$TMP/orig.txt" 2>&1
if "$FILTER" --from $FROM --to $TO "$src" "$TMP/win.ctf" 2>"$TMP/err.txt"; then
	pass filter_window_runs
else
	fail filter_window_runs "$(cat "$TMP/err.txt")"
fi
if "$DUMP" "$TMP/win.ctf" >"$TMP/win.txt" 2>&1; then
	pass filter_window_dump_valid
else
	fail filter_window_dump_valid "$(tail -n 2 "$TMP/win.txt")"
fi
awk -v from=250000 -v to=500000 '
	$2 == "alloc" {
		old = substr($3, 4); t = $1 + 0
		if (t >= from && t < to) { map[old] = n + 0; sub(/id=[0-9]+/, "id=" (n + 0)); n++; print }
		next
	}
	$2 == "promote" || $2 == "collect" {
		old = substr($3, 4)
		if (old in map) { sub(/id=[0-9]+/, "id=" map[old]); print }
	}' "$TMP/orig.txt" >"$TMP/expected.txt"
grep -E '^[0-9]+ (alloc|promote|collect) ' "$TMP/win.txt" >"$TMP/got.txt"
nalloc=$(grep -c ' alloc ' "$TMP/got.txt")
if [ "$nalloc" -gt 100 ] && [ "$nalloc" -lt "$(grep -c ' alloc ' "$TMP/orig.txt")" ]; then
	pass filter_window_nontrivial
else
	fail filter_window_nontrivial "$nalloc allocations kept"
fi
bad=$(awk -v from=250000 -v to=500000 '$2 == "alloc" && ($1 + 0 < from || $1 + 0 >= to)' "$TMP/got.txt" | head -n 1)
if [ -z "$bad" ]; then pass filter_window_allocs_in_window; else fail filter_window_allocs_in_window "$bad"; fi
bad=$(awk '$2 == "alloc" { if (substr($3, 4) + 0 != n + 0) { print; exit } n++; next }
	   { if (substr($3, 4) + 0 >= n) { print; exit } }' "$TMP/got.txt")
if [ -z "$bad" ]; then pass filter_window_ids_consistent; else fail filter_window_ids_consistent "$bad"; fi
if cmp -s "$TMP/expected.txt" "$TMP/got.txt"; then
	pass filter_window_events_exact
else
	fail filter_window_events_exact "$(diff "$TMP/expected.txt" "$TMP/got.txt" | head -n 2 | cut -c1-200 | tr '\n' ' ')"
fi
# Promotes and collects of kept allocations are kept even after TO.
late=$(awk -v to=500000 '($2 == "collect" || $2 == "promote") && $1 + 0 >= to' "$TMP/got.txt" | wc -l)
if [ "$late" -gt 0 ]; then pass filter_window_keeps_late_collects; else fail filter_window_keeps_late_collects "none after $TO s"; fi

# 3. Malformed input: exit 1, the reader's message, and what was written is a valid trace.
for m in badmagic version4-pkt2 bad-verifier alloc-id-end time-end-too-small trunc-mid-header; do
	rm -f "$TMP/m.ctf"
	"$FILTER" "$REF/malformed/$m.ctf" "$TMP/m.ctf" 2>"$TMP/err.txt"
	rc=$?
	if [ $rc -eq 1 ] && grep -q "malformed trace: .*packet 2" "$TMP/err.txt" &&
		"$DUMP" "$TMP/m.ctf" >/dev/null 2>&1; then
		pass "filter_malformed_$m"
	else
		fail "filter_malformed_$m" "exit $rc: $(head -c 300 "$TMP/err.txt")"
	fi
done
rm -f "$TMP/m.ctf"
"$FILTER" "$REF/malformed/v2-labelled-v3.ctf" "$TMP/m.ctf" 2>"$TMP/err.txt"
rc=$?
if [ $rc -eq 1 ] && grep -q "Monotone alloc IDs" "$TMP/err.txt" && [ ! -e "$TMP/m.ctf" ]; then
	pass filter_malformed_packet0_no_output
else
	fail filter_malformed_packet0_no_output "exit $rc: $(head -c 300 "$TMP/err.txt")"
fi

# 4. Bad arguments and unreadable input: exit 1 with a message that names the problem.
expect_error() { # NAME PATTERN ARGS...
	local name=$1 pattern=$2; shift 2
	local err rc
	err=$("$FILTER" "$@" 2>&1 >/dev/null)
	rc=$?
	if [ $rc -eq 1 ] && grep -q -- "$pattern" <<<"$err"; then pass "$name"
	else fail "$name" "exit $rc: $err"; fi
}
expect_error filter_args_missing "expected two arguments" "$src"
expect_error filter_args_bad_from "is not a number" --from abc "$src" "$TMP/x.ctf"
expect_error filter_args_negative "is not a number" --to -1 "$src" "$TMP/x.ctf"
expect_error filter_args_empty_window "empty window" --from 2 --to 1 "$src" "$TMP/x.ctf"
expect_error filter_args_unknown_option "usage" --bogus "$src" "$TMP/x.ctf"
expect_error filter_input_missing "cannot open" "$TMP/does-not-exist.ctf" "$TMP/x.ctf"
expect_error filter_input_not_a_trace "Not a CTF packet\|not a\|magic" /etc/hostname "$TMP/x.ctf"
cp "$src" "$TMP/same.ctf"
expect_error filter_same_file "same file" "$TMP/same.ctf" "$TMP/same.ctf"
if cmp -s "$src" "$TMP/same.ctf"; then pass filter_same_file_untouched; else fail filter_same_file_untouched "input was modified"; fi
expect_error filter_args_bad_format "is not v2 or v3" --format v4 "$src" "$TMP/x.ctf"
expect_error filter_output_unwritable "cannot write the output" "$src" /nonexistent-dir/out.ctf
