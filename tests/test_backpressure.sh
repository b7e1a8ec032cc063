#!/usr/bin/env bash
# Backpressure (issue 37): a program allocating at full speed under --inject, beside two busy
# loops loading the CPUs, with a record queue made small (4 MiB, a test hook) so that the session
# thread surely falls behind. No sample is dropped for a full queue: the sink thins them (1
# kept in k, its weight raised k-fold) and the sampler in the process is told to lower its
# rate as much (memtraced_sampler_thin: the probes' and the BPF side's work fall too), the
# summary and /metrics say so, and the bytes the trace estimates stay within 10% of what the
# program asked of malloc.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
PROG=$TARGETS/full_speed
for f in "$MT" "$DUMP" "$PROG"; do
	if [ ! -x "$f" ]; then
		fail backpressure_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip backpressure_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
loaders=()
for _ in 1 2; do (while :; do :; done) & loaders+=($!); done
MEMTRACED_TEST_QUEUE_BYTES=$((4 << 20)) "$MT" --inject=required --rate 1e-3 -o "$TMP/t.ctf" -- "$PROG" 3 \
	>"$TMP/out" 2>"$TMP/err"
rc=$?
kill "${loaders[@]}" 2>/dev/null
wait "${loaders[@]}" 2>/dev/null
check backpressure_program_ran test "$rc" = 0 -a -n "$(grep '^truth bytes' "$TMP/out")"
check backpressure_inject_used grep -q 'GOT entries redirected\|sampler' "$TMP/err"
# thinned by the sink (the queue past half), by the sampler at the source (its rate lowered
# on the fly), or both: said in the summary
if grep -q 'samples thinned while the pipeline fell behind (1 kept in up to [0-9]*\|the in-process sampler.s rate lowered up to [0-9]*-fold' "$TMP/err"; then
	pass backpressure_thinning_said
else fail backpressure_thinning_said "$(grep -m1 'dropped' "$TMP/err")"; fi
# the queue filled (4 MiB, two busy loops beside): the sampler was told to lower its rate
if grep -q "the in-process sampler's rate lowered up to [0-9]*-fold" "$TMP/err"; then
	pass backpressure_source_rate_lowered
else fail backpressure_source_rate_lowered "$(grep -m1 'dropped' "$TMP/err")"; fi
queue=$(sed -n "s/.*(of the ring buffer's: \([0-9]*\) the session's record queue full.*/\1/p" "$TMP/err")
check backpressure_no_queue_drop test "${queue:-0}" = 0
truth=$(sed -n 's/^truth bytes \([0-9]*\) .*/\1/p' "$TMP/out")
"$DUMP" "$TMP/t.ctf" >"$TMP/dump" 2>"$TMP/dump.err"
rate=$(sed -n 's/^info sample_rate=//p' "$TMP/dump")
samples=$(sed -n 's/^summary .* samples=\([0-9]*\) .*/\1/p' "$TMP/dump")
est=$(awk -v s="${samples:-0}" -v r="${rate:-1}" 'BEGIN { printf "%.0f", s * 8 / r }')
if [ -n "$truth" ] && [ -n "$samples" ] &&
	awk -v e="$est" -v t="$truth" 'BEGIN { d = e - t; if (d < 0) d = -d; exit !(t > 0 && d / t <= 0.10) }'; then
	pass backpressure_bytes_within_10pct
else fail backpressure_bytes_within_10pct "estimated $est bytes ($samples samples at rate $rate), the program's $truth"; fi
echo "# backpressure: estimated $est bytes, truth $truth; $(grep -o '[0-9]* samples thinned[^;]*' "$TMP/err"); $(grep -o "the in-process sampler's rate lowered up to [0-9]*-fold" "$TMP/err")"

# The same with uprobes (--inject=no), at 1e-1 and a 1 MiB queue: the BPF countdown is told to
# thin (the process's slot), and the estimate holds.
loaders=()
for _ in 1 2; do (while :; do :; done) & loaders+=($!); done
MEMTRACED_TEST_QUEUE_BYTES=$((1 << 20)) "$MT" --inject=no --rate 1e-1 -o "$TMP/u.ctf" -- "$PROG" 2 \
	>"$TMP/uout" 2>"$TMP/uerr"
rc=$?
kill "${loaders[@]}" 2>/dev/null
wait "${loaders[@]}" 2>/dev/null
check backpressure_uprobes_program_ran test "$rc" = 0 -a -n "$(grep '^truth bytes' "$TMP/uout")"
if grep -q "the BPF probes' rate lowered up to [0-9]*-fold" "$TMP/uerr"; then
	pass backpressure_uprobes_source_rate_lowered
else fail backpressure_uprobes_source_rate_lowered "$(grep -m1 'dropped' "$TMP/uerr")"; fi
queue=$(sed -n "s/.*(of the ring buffer's: \([0-9]*\) the session's record queue full.*/\1/p" "$TMP/uerr")
check backpressure_uprobes_no_queue_drop test "${queue:-0}" = 0
truth=$(sed -n 's/^truth bytes \([0-9]*\) .*/\1/p' "$TMP/uout")
"$DUMP" "$TMP/u.ctf" >"$TMP/udump" 2>/dev/null
rate=$(sed -n 's/^info sample_rate=//p' "$TMP/udump")
samples=$(sed -n 's/^summary .* samples=\([0-9]*\) .*/\1/p' "$TMP/udump")
est=$(awk -v s="${samples:-0}" -v r="${rate:-1}" 'BEGIN { printf "%.0f", s * 8 / r }')
if [ -n "$truth" ] && [ -n "$samples" ] &&
	awk -v e="$est" -v t="$truth" 'BEGIN { d = e - t; if (d < 0) d = -d; exit !(t > 0 && d / t <= 0.10) }'; then
	pass backpressure_uprobes_bytes_within_10pct
else fail backpressure_uprobes_bytes_within_10pct "estimated $est bytes ($samples samples at rate $rate), the program's $truth"; fi
echo "# backpressure, uprobes: estimated $est bytes, truth $truth; $(grep -o '[0-9]* samples thinned[^;]*' "$TMP/uerr"); $(grep -o "the BPF probes' rate lowered up to [0-9]*-fold" "$TMP/uerr")"

