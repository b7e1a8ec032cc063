#!/usr/bin/env bash
# Backpressure (issue 37): a program allocating at full speed under --inject, beside two busy
# loops loading the CPUs, with a record queue made small (1 MiB, a test hook) so that the session
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
# loaded NAME QUEUE_BYTES MEMTRACED_ARGS... : the program for its seconds under memtraced, two
# busy loops beside; NAME.ctf, NAME.out, NAME.err in $TMP
loaded() {
	local name=$1 queue=$2 loaders=()
	shift 2
	for _ in 1 2; do (while :; do :; done) & loaders+=($!); done
	MEMTRACED_TEST_QUEUE_BYTES=$queue "$MT" -o "$TMP/$name.ctf" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	kill "${loaders[@]}" 2>/dev/null
	wait "${loaders[@]}" 2>/dev/null
	return $rc
}
# estimate NAME CHECK: the bytes the trace estimates within 10% of the program's own count
estimate() {
	local name=$1 check=$2 truth rate samples est
	truth=$(sed -n 's/^truth bytes \([0-9]*\) .*/\1/p' "$TMP/$name.out")
	"$DUMP" "$TMP/$name.ctf" >"$TMP/$name.dump" 2>/dev/null
	rate=$(sed -n 's/^info sample_rate=//p' "$TMP/$name.dump")
	samples=$(sed -n 's/^summary .* samples=\([0-9]*\) .*/\1/p' "$TMP/$name.dump")
	est=$(awk -v s="${samples:-0}" -v r="${rate:-1}" 'BEGIN { printf "%.0f", s * 8 / r }')
	if [ -n "$truth" ] && [ -n "$samples" ] &&
		awk -v e="$est" -v t="$truth" 'BEGIN { d = e - t; if (d < 0) d = -d; exit !(t > 0 && d / t <= 0.10) }'; then
		pass "$check"
	else fail "$check" "estimated $est bytes ($samples samples at rate $rate), the program's $truth"; fi
	echo "# backpressure, $name: estimated $est bytes, truth $truth; $(grep -o '[0-9]* samples thinned[^;]*' "$TMP/$name.err"); $(grep -o "rate lowered up to [0-9]*-fold" "$TMP/$name.err")"
}
# queue_drops NAME: samples dropped for a full queue
queue_drops() {
	local n
	n=$(sed -n "s/.*(of the ring buffer's: \([0-9]*\) the session's record queue full.*/\1/p" "$TMP/$1.err")
	echo "${n:-0}"
}

loaded t $((1 << 20)) --inject=required --rate 1e-2 -- "$PROG" 3
rc=$?
check backpressure_program_ran test "$rc" = 0 -a -n "$(grep '^truth bytes' "$TMP/t.out")"
check backpressure_inject_used grep -q 'GOT entries redirected\|sampler' "$TMP/t.err"
# thinned by the sink (the queue past half), by the sampler at the source (its rate lowered
# on the fly), or both: said in the summary
if grep -q 'samples thinned while the pipeline fell behind (1 kept in up to [0-9]*\|the in-process sampler.s rate lowered up to [0-9]*-fold' "$TMP/t.err"; then
	pass backpressure_thinning_said
else fail backpressure_thinning_said "$(grep -m1 'dropped' "$TMP/t.err")"; fi
# the queue filled (1 MiB, rate 1e-2, two busy loops beside): the sampler was told to lower
# its rate (at 1e-3 and 4 MiB the faster pipeline kept up in one run of five)
if grep -q "the in-process sampler's rate lowered up to [0-9]*-fold" "$TMP/t.err"; then
	pass backpressure_source_rate_lowered
else fail backpressure_source_rate_lowered "$(grep -m1 'dropped' "$TMP/t.err")"; fi
check backpressure_no_queue_drop test "$(queue_drops t)" = 0
estimate t backpressure_bytes_within_10pct

# The same with uprobes (--inject=no), at 1e-1 and a 1 MiB queue: the BPF countdown is told to
# thin (the process's slot), and the estimate holds.
loaded u $((1 << 20)) --inject=no --rate 1e-1 -- "$PROG" 2
rc=$?
check backpressure_uprobes_program_ran test "$rc" = 0 -a -n "$(grep '^truth bytes' "$TMP/u.out")"
if grep -q "the BPF probes' rate lowered up to [0-9]*-fold" "$TMP/u.err"; then
	pass backpressure_uprobes_source_rate_lowered
else fail backpressure_uprobes_source_rate_lowered "$(grep -m1 'dropped' "$TMP/u.err")"; fi
check backpressure_uprobes_no_queue_drop test "$(queue_drops u)" = 0
estimate u backpressure_uprobes_bytes_within_10pct
