#!/usr/bin/env bash
# memtrace-dump against the reference traces (tests/data/memtrace/README.md): the dump of every
# v2 trace equals the real 0.2.3 reader's dump from line 2 on, the dump of every v3 trace
# (v3/, written by the newest memtrace) the newest real reader's; --summary-only; the verdict
# on every damaged trace in malformed/; command-line errors.
source "$(dirname "$0")/lib/test.sh"
DUMP=$BIN/memtrace-dump
REF=$DATA/memtrace

if [ ! -x "$DUMP" ]; then
	fail dump-built "$DUMP not built (run make)"
	exit 1
fi

for ctf in "$REF"/*.ctf "$REF"/v3/*.ctf; do
	name=$(basename "$ctf" .ctf)
	txt=${ctf%.ctf}.txt
	out=$TMP/$name.out
	"$DUMP" "$ctf" >"$out" 2>"$TMP/$name.err"
	rc=$?
	if [ $rc -ne 0 ]; then
		fail "dump-$name" "exit status $rc: $(tail -n 2 "$TMP/$name.err" | tr '\n' ' ')"
	elif ! head -n 1 "$out" | grep -q '^# '; then
		fail "dump-$name" "line 1 is not a '# ...' comment"
	elif d=$(diff <(tail -n +2 "$txt") <(tail -n +2 "$out")); then
		pass "dump-$name"
	else
		fail "dump-$name" "differs from $name.txt: $(printf '%s' "$d" | head -n 4 | cut -c1-160 | tr '\n' ' ')"
	fi

	"$DUMP" --summary-only "$ctf" >"$TMP/$name.sum" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && diff <(grep -E '^(info|summary) ' "$txt") <(tail -n +2 "$TMP/$name.sum") >/dev/null; then
		pass "dump-summary-only-$name"
	else
		fail "dump-summary-only-$name" "status $rc or output differs from the info and summary lines of $name.txt"
	fi
done

# Reading from a pipe gives the same dump as reading the file.
if diff <(cat "$REF/v2-lists-r1e-4.ctf" | "$DUMP" - | tail -n +2) <(tail -n +2 "$REF/v2-lists-r1e-4.txt") >/dev/null; then
	pass dump-from-pipe
else
	fail dump-from-pipe "dump of stdin differs from the reference"
fi

# malformed/: NAME STATUS EVENTS STREAM PATTERN
# v2-labelled-v3 says v3 in packet 0, so it is read as the newest reader reads it: a 68-byte
# header, whose alloc_id_end (bytes 60-67) takes the first two bytes of the trace-info event as
# its top bytes, a negative number: the header check "Monotone alloc IDs" fails (trace.ml,
# get_ctf_header; 0.2.3 said "trace format v003, but expected v002").
#   STATUS: expected exit status; EVENTS: event lines printed before the verdict;
#   STREAM: where the message must appear (err = stderr, out = stdout); PATTERN: grep -E.
verdicts() {
	cat <<'EOF'
badmagic          1 0    out ^error: malformed trace: Not a CTF packet \(packet 2 at byte [0-9]+
version4-pkt2     1 0    out ^error: malformed trace: trace format v004, but expected v002 \(packet 2 at byte
v2-labelled-v3    1 0    out ^error: malformed trace: Monotone alloc IDs \(packet 0 at byte 52: alloc_id_begin 0 > alloc_id_end -
trunc-mid-packet  0 0    err ^warning: skipping truncated packet \(packet 2 at byte [0-9]+
trunc-mid-header  1 0    out ^error: malformed trace: buffer underflow at position 30 \(packet 2 at byte [0-9]+
bad-verifier      1 0    out ^error: malformed trace: cache verification failed \(packet 2 at byte [0-9]+: bucket 4242
alloc-id-end      1 1355 out ^error: malformed trace: alloc id sync \(packet 2 at byte [0-9]+
wrong-pid-pkt2    0 0    err ^warning: skipping bad packet \(wrong pid: 99999, but tracing 21711\) \(packet 2 at byte
time-end-too-small 1 0   out ^error: malformed trace: time in packet bounds \(packet 2 at byte [0-9]+
alloc-id-begin-5  0 0    err ^warning: skipping bad packet at id 0 5-642 \(packet 2 at byte
missing-location  1 1355 out ^error: 637 backtrace slots use location codes
EOF
}
while read -r name status events stream pattern; do
	f=$REF/malformed/$name.ctf
	"$DUMP" "$f" >"$TMP/m.out" 2>"$TMP/m.err"
	rc=$?
	n=$(grep -cE '^[0-9]{10} ' "$TMP/m.out")
	where=$TMP/m.$stream
	if [ $rc -ne "$status" ]; then
		fail "malformed-$name" "exit status $rc, expected $status: $(tail -n 1 "$TMP/m.out" "$TMP/m.err" | tr '\n' ' ')"
	elif [ "$n" -ne "$events" ]; then
		fail "malformed-$name" "$n events printed, expected $events"
	elif ! grep -qE "$pattern" "$where"; then
		fail "malformed-$name" "no line matching '$pattern' on std$stream: $(tail -n 1 "$where")"
	elif [ "$status" -eq 1 ] && ! grep -q "memtrace-dump: .*$name.ctf: " "$TMP/m.err"; then
		fail "malformed-$name" "no error message on stderr"
	elif [ "$status" -eq 0 ] && ! tail -n 1 "$TMP/m.out" | grep -q '^summary events=0 '; then
		fail "malformed-$name" "a skipped packet must still end with the summary line"
	else
		pass "malformed-$name"
	fi
done < <(verdicts)

# Damaged v3 traces, made here from v3-lists-r1e-3 (packet 3 starts at byte 29506, has a real
# cache verifier and ids 1590-3086): the verdict of the newest reader's rules, naming the packet.
# NAME STATUS EVENTS STREAM PATTERN, as above.
V3=$REF/v3/v3-lists-r1e-3.ctf P3=29506
poke() { # FILE OFFSET BYTES(octal escapes): overwrite in place
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
cp "$V3" "$TMP/v3-bad-verifier.ctf" && poke "$TMP/v3-bad-verifier.ctf" $((P3 + 44)) '\071\060'
cp "$V3" "$TMP/v3-version4.ctf" && poke "$TMP/v3-version4.ctf" $((P3 + 28)) '\004\000'
cp "$V3" "$TMP/v3-alloc-id-end.ctf" && poke "$TMP/v3-alloc-id-end.ctf" $((P3 + 60)) '\075'
head -c $((P3 + 39)) "$V3" >"$TMP/v3-cut-in-domain.ctf"
head -c $(($(stat -c %s "$V3") - 100)) "$V3" >"$TMP/v3-trunc-mid-packet.ctf"
v3_verdicts() {
	cat <<'EOF'
v3-bad-verifier     1 3270 out ^error: malformed trace: cache verification failed \(packet 3 at byte 29546: bucket 4242 .*code 0x3039 \(in this packet's domain\)
v3-version4         1 3270 out ^error: malformed trace: trace format v004, but expected v003 \(packet 3 at byte 29534
v3-alloc-id-end     1 6708 out ^error: malformed trace: alloc id sync \(packet 3 at byte 29566
v3-cut-in-domain    1 3270 out ^error: malformed trace: buffer underflow at position 38 \(packet 3 at byte 29544: the input ends inside the packet header \(domain\)
v3-trunc-mid-packet 0 13488 err ^warning: skipping truncated packet \(packet 6 at byte 115238
EOF
}
while read -r name status events stream pattern; do
	"$DUMP" "$TMP/$name.ctf" >"$TMP/m.out" 2>"$TMP/m.err"
	rc=$?
	n=$(grep -cE '^[0-9]{10} ' "$TMP/m.out")
	if [ $rc -ne "$status" ] || [ "$n" -ne "$events" ] || ! grep -qE "$pattern" "$TMP/m.$stream"; then
		fail "malformed-$name" "exit $rc (want $status), $n events (want $events): $(tail -n 1 "$TMP/m.$stream")"
	else
		pass "malformed-$name"
	fi
done < <(v3_verdicts)

# missing-location: the undescribed code prints as <unknown>, counted in the summary.
if "$DUMP" "$REF/malformed/missing-location.ctf" 2>/dev/null | grep -q '^summary .* unknown_codes=637 ' &&
   "$DUMP" "$REF/malformed/missing-location.ctf" 2>/dev/null | grep -q '^0000007222 alloc id=0 .*<unknown>'; then
	pass malformed-missing-location-unknown-frames
else
	fail malformed-missing-location-unknown-frames "no <unknown> frame or unknown_codes=637 in the summary"
fi

# Fuzzer findings (tests/fuzz/regressions/): each gives a verdict, never a crash or UB report.
for f in "$TOP"/tests/fuzz/regressions/*.ctf; do
	name=$(basename "$f" .ctf)
	"$DUMP" "$f" >"$TMP/r.out" 2>"$TMP/r.err"
	rc=$?
	if [ $rc -le 1 ] && ! grep -qE 'runtime error|Sanitizer' "$TMP/r.err" &&
	   { [ $rc -eq 0 ] || tail -n 1 "$TMP/r.out" | grep -q '^error: '; }; then
		pass "regression-$name"
	else
		fail "regression-$name" "status $rc: $(tail -n 2 "$TMP/r.err" | tr '\n' ' ')"
	fi
done
if "$DUMP" "$TOP/tests/fuzz/regressions/negative-start-time.ctf" 2>/dev/null |
   grep -q '^info start_time_us=-4512153117443440178$'; then
	pass regression-negative-start-time-info
else
	fail regression-negative-start-time-info "start time not printed as a signed number"
fi

# Command-line errors: exit 1 and a message saying what is wrong.
cli() { # NAME PATTERN ARGS...
	local name=$1 pattern=$2; shift 2
	"$DUMP" "$@" >"$TMP/c.out" 2>"$TMP/c.err"
	local rc=$?
	if [ $rc -eq 1 ] && grep -qE "$pattern" "$TMP/c.err"; then pass "$name"
	else fail "$name" "status $rc, stderr: $(head -n 1 "$TMP/c.err")"; fi
}
cli dump-missing-file "cannot open .*/nonexistent.ctf: No such file" "$TMP/nonexistent.ctf"
cli dump-directory "Is a directory|read error" "$TMP"
cli dump-bad-option "unknown option '--bogus'" --bogus "$REF/v2-synth.ctf"
cli dump-no-file "no trace file given"
cli dump-two-files "more than one file" "$REF/v2-synth.ctf" "$REF/v2-deep-r1e-3.ctf"
: >"$TMP/empty.ctf"
cli dump-empty-file "malformed trace: .*the input is empty" "$TMP/empty.ctf"
head -c 40 "$REF/v2-synth.ctf" >"$TMP/short.ctf"
cli dump-short-file "buffer underflow at position 40 \(packet 0 at byte 40" "$TMP/short.ctf"
exit 0
