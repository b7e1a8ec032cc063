#!/usr/bin/env bash
# No silent loss in a file (BPF; root needed): a trace whose tracer dropped samples says how
# many, as of its end (the context string's "drops: N", written over in place when the trace
# is closed), and every tool warns with the share lost; a trace without drops gives no warning.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
SITES=$TARGETS/sites
for p in "$MT" "$SITES" "$BIN/memtrace-dump" "$BIN/memtrace-report" "$BIN/memtrace-filter"; do
	[ -x "$p" ] || { fail drops_built "missing $p (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip drops_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# burst OUT.ctf ERR [OPTION...]: `sites wait` allocates and frees in a loop, traced by -p at
# rate 1 with a 128 KiB ring while memtraced is stopped for half a second: the ring overflows
# and samples are dropped. (A burst of `sites run` dropped only when it outran the reader: a
# faster pipeline kept up at times.) Sets rc to memtraced's exit status.
burst() {
	local out=$1 err=$2 d prog mt
	shift 2
	d=$(mktemp -d "$TMP/burst.XXXXXX")
	"$SITES" wait "$d" >/dev/null 2>&1 &
	prog=$!
	for _ in $(seq 200); do [ -e "$d/ready" ] && break; sleep 0.05; done
	"$MT" "$@" --inject=no --rate 1 --ring-size 131072 --stack-bytes 16384 -p $prog -o "$out" 2>"$err" &
	mt=$!
	for _ in $(seq 300); do grep -q "tracing PID $prog" "$err" && break; sleep 0.05; done
	kill -STOP $mt
	sleep 0.5
	kill -CONT $mt
	sleep 0.3
	touch "$d/stop"
	wait $prog
	wait $mt
	rc=$?
}

# A small ring buffer at rate 1, its reader stopped: samples are dropped.
burst "$TMP/d.ctf" "$TMP/d.err"
sum=$(grep -E 'dropped: [0-9]+ ring buffer' "$TMP/d.err" | tail -1)
ring=$(printf '%s' "$sum" | sed -nE 's/.*dropped: ([0-9]+) ring buffer, ([0-9]+) live map full, ([0-9]+) stack copy.*/\1/p')
total=$(printf '%s' "$sum" | sed -nE 's/.*dropped: ([0-9]+) ring buffer, ([0-9]+) live map full, ([0-9]+) stack copy.*/\1 \2 \3/p' | awk '{ print $1 + $2 + $3 }')
echo "# summary: $ring ring-buffer drops, $total in all"
if [ "$rc" = 0 ] && [ -n "$ring" ] && [ "$ring" -gt 0 ]; then pass drops_happened
else fail drops_happened "exit $rc, no drop: $(tail -n 1 "$TMP/d.err")"; fi
"$BIN/memtrace-dump" "$TMP/d.ctf" >"$TMP/d.dump" 2>"$TMP/dump.err"
if grep -q "^info context=\".*drops: $total *\"$" "$TMP/d.dump"; then pass drops_in_the_file_as_of_its_end
else fail drops_in_the_file_as_of_its_end "summary $total, file: $(grep context "$TMP/d.dump")"; fi
for tool in dump report filter; do
	case $tool in
	dump) "$BIN/memtrace-dump" --summary-only "$TMP/d.ctf" >/dev/null 2>"$TMP/$tool.err" ;;
	report) "$BIN/memtrace-report" "$TMP/d.ctf" >/dev/null 2>"$TMP/$tool.err" ;;
	filter) "$BIN/memtrace-filter" "$TMP/d.ctf" "$TMP/f.ctf" >/dev/null 2>"$TMP/$tool.err" ;;
	esac
	if grep -qE "warning: the tracer dropped $total samples \([0-9.]+% of [0-9]+\)" "$TMP/$tool.err"; then
		pass "drops_warned_by_$tool"
	else fail "drops_warned_by_$tool" "$(head -c 300 "$TMP/$tool.err")"; fi
done
if "$BIN/memtrace-dump" "$TMP/f.ctf" 2>/dev/null | grep -q "^info context=\".*drops: $total *\"$"; then
	pass drops_kept_by_filter
else fail drops_kept_by_filter "$("$BIN/memtrace-dump" "$TMP/f.ctf" 2>&1 | grep context)"; fi

# No drop: no warning.
"$MT" --rate 1e-3 -o "$TMP/n.ctf" -- "$SITES" run 100 >/dev/null 2>"$TMP/n.err"
"$BIN/memtrace-report" "$TMP/n.ctf" >/dev/null 2>"$TMP/nr.err"
if grep -q 'dropped: 0 ring buffer, 0 live map full, 0 stack copy' "$TMP/n.err" && ! grep -q warning "$TMP/nr.err"; then
	pass no_drops_no_warning
else fail no_drops_no_warning "$(tail -n 1 "$TMP/n.err"; cat "$TMP/nr.err")"; fi

# memtraced --format v3: the trace is v3 (domain ids on its events) with the drops as of its
# end in its context, and the tools read it
burst "$TMP/v3.ctf" "$TMP/v3.err" --format v3
"$BIN/memtrace-dump" "$TMP/v3.ctf" >"$TMP/v3.dump" 2>/dev/null
v3drops=$(grep -E 'dropped: [0-9]+ ring buffer' "$TMP/v3.err" | sed -nE 's/.*dropped: ([0-9]+) ring buffer, ([0-9]+) live map full, ([0-9]+) stack copy.*/\1 \2 \3/p' | awk '{ print $1 + $2 + $3 }')
if grep -q '^info initial_domain=' "$TMP/v3.dump" && grep -q ' dom=0 ' "$TMP/v3.dump" &&
	grep -q "^info context=\".*drops: ${v3drops:-x} *\"$" "$TMP/v3.dump"; then pass format_v3_written_with_drops
else fail format_v3_written_with_drops "drops ${v3drops:-none}: $(grep -c dom= "$TMP/v3.dump") events with dom=, $(grep context "$TMP/v3.dump")"; fi
if "$BIN/memtrace-report" "$TMP/v3.ctf" >/dev/null 2>"$TMP/v3r.err" && grep -q 'warning: .*dropped' "$TMP/v3r.err"; then
	pass format_v3_read_by_report
else fail format_v3_read_by_report "$(cat "$TMP/v3r.err")"; fi
exit 0
