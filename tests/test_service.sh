#!/usr/bin/env bash
# Service mode of memtraced (heap snapshots, lifecycle, several -p), against real processes
# (BPF uprobes; root needed). The workload, tests/targets/service_leak.c, leaks slowly at one
# site (leak_site) among steady churn and prints its truth on exit.
#  - 1 s snapshots: every one reads cleanly, they grow at the leaking site, the last one is
#    within 15% of the truth, memtrace-diff first last puts leak_site first, files are 0600;
#  - -o none: snapshots only, SIGUSR1 gives one within 1 s, --file-mode;
#  - lifecycle: target exit (final snapshot, exit 0), memtraced SIGKILLed (target unharmed, the
#    trace reads cleanly), several -p (a trace and snapshots per process);
#  - bad input: missing / read-only / symlinked / unsafe snapshot directory, a disk that fills
#    up mid-run (message per failed snapshot, trace intact, snapshots resume when space frees);
#  - memory: the daemon's VmHWM does not grow with the number of events (rate 1).
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
DIFF=$BIN/memtrace-diff
SVC=$TARGETS/service_leak

if [ ! -x "$MT" ] || [ ! -x "$SVC" ] || [ ! -x "$DUMP" ] || [ ! -x "$DIFF" ]; then
	fail service_built "missing $MT, $SVC, $DUMP or $DIFF (run make)"
	exit 0
fi

# ---------------------------------------------------------------- options (no BPF needed)
bad_input() { # name expected-substring args...
	local name=$1 want=$2; shift 2
	"$MT" "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
	local r=$?
	if [ "$r" -ne 0 ] && [ ! -s "$TMP/bad.out" ] && grep -qi -- "$want" "$TMP/bad.err"; then pass "$name"
	else fail "$name" "exit $r, stderr: $(head -c 300 "$TMP/bad.err" | tr '\n' ' ')"; fi
}
bad_input bad_interval_without_dir "needs --snapshot-dir" -p 1 --snapshot-interval 1
bad_input bad_keep_without_dir "needs --snapshot-dir" -p 1 --snapshot-keep 3
bad_input bad_interval_value "invalid --snapshot-interval" -p 1 --snapshot-dir /tmp --snapshot-interval 0
bad_input bad_file_mode "invalid --file-mode" -p 1 --snapshot-dir /tmp --file-mode 0999
bad_input bad_output_none_without_dir "-o none writes no trace" -p 1 -o none
bad_input bad_several_pids_one_output "put %p" -p 1 -p 2 -o one.ctf
bad_input bad_same_pid_twice "given twice" -p 1 -p 1

if ! bpf_ready; then
	skip service_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# start_target DIR SECONDS LEAK_BYTES_PER_SEC: runs service_leak in the background (pid in
# tpid, stdout in DIR.out) and waits until it is ready.
start_target() {
	mkdir -p "$1"
	"$SVC" "$1" "$2" "$3" >"$1.out" &
	tpid=$!
	for _ in $(seq 200); do [ -e "$1/ready" ] && return 0; sleep 0.05; done
	return 1
}
# start_mt ERR ARGS...: memtraced in the background (pid in mpid), waits until it traces.
start_mt() {
	local err=$1; shift
	"$MT" "$@" 2>"$err" &
	mpid=$!
	for _ in $(seq 600); do
		grep -q "tracing PID" "$err" 2>/dev/null && return 0
		kill -0 $mpid 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
folded_bytes() { # FILE FUNCTION: estimated live bytes of the lines whose stack holds FUNCTION
	awk -v f="$2" '{ n = split($1, fr, ";"); for (i = 1; i <= n; i++) if (fr[i] == f) { s += $2; break } }
		END { printf "%d\n", s }' "$1"
}
snapshots_of() { # DIR PID: the snapshot .ctf files of PID, by SEQ
	ls "$1"/memtrace-"$2"-*.ctf 2>/dev/null |
		awk -F- '{ s = $NF; sub(/\.ctf$/, "", s); print s "\t" $0 }' | sort -n | cut -f2-
}

# ---------------------------------------------------------------- 1 s snapshots of a leak
S=$TMP/main
mkdir -p "$S/snaps"
start_target "$S/w" 6 1000000
start_mt "$S/mt.err" -p $tpid --rate 1e-3 -o "$S/trace.ctf" --snapshot-dir "$S/snaps" --snapshot-interval 1
touch "$S/w/go"
wait $tpid; trc=$?
timeout 60 tail --pid=$mpid -f /dev/null; wait $mpid; mrc=$?
sed -n 's/^/# /p' "$S/mt.err" | tail -n 2
if [ "$trc" = 0 ] && [ "$mrc" = 0 ] && grep -q "PID $tpid exited" "$S/mt.err" &&
	grep -q "allocations and .* frees seen" "$S/mt.err"; then pass lifecycle_target_exit_ends_tracing
else fail lifecycle_target_exit_ends_tracing "target exit $trc, memtraced exit $mrc: $(tail -n 3 "$S/mt.err" | tr '\n' ' ')"; fi
mapfile -t snaps < <(snapshots_of "$S/snaps" $tpid)
n=${#snaps[@]}
if [ "$n" -ge 5 ] && grep -q "$n snapshots written, 0 failed" "$S/mt.err"; then pass snapshots_every_second
else fail snapshots_every_second "$n snapshots in $S/snaps after 6 s at 1 s: $(grep snapshots "$S/mt.err")"; fi
bad=""
for f in "${snaps[@]}"; do
	"$DUMP" "$f" >"$S/$(basename "$f").dump" 2>"$S/dump.err" || bad="$bad $(basename "$f")"
	[ -f "${f%.ctf}.folded" ] || bad="$bad $(basename "${f%.ctf}.folded")-missing"
done
if [ "$n" -gt 0 ] && [ -z "$bad" ]; then pass snapshots_read_cleanly
else fail snapshots_read_cleanly "unreadable:$bad"; fi
check trace_reads_cleanly "$DUMP" --summary-only "$S/trace.ctf"
if [ "$n" -ge 2 ]; then
	grow=$(for f in "${snaps[@]}"; do folded_bytes "${f%.ctf}.folded" leak_site; done | tr '\n' ' ')
	echo "# leak_site live bytes per snapshot: $grow"
	if echo "$grow" | awk '{ for (i = 2; i <= NF; i++) if ($i < $(i-1)) exit 1; exit !($NF > 3 * $1 && $1 >= 0) }'
	then pass snapshots_grow_at_leak_site
	else fail snapshots_grow_at_leak_site "leak_site bytes per snapshot: $grow"; fi
	last=${snaps[n-1]} first=${snaps[0]}
	est=$(folded_bytes "${last%.ctf}.folded" leak_site)
	truth=$(awk '$1 == "truth" && $2 == "leak" { print $3 }' "$S/w.out" | tail -n 1)
	if awk -v e="$est" -v t="$truth" 'BEGIN { d = e - t; if (d < 0) d = -d; exit !(t > 0 && d <= 0.15 * t) }'
	then pass last_snapshot_leak_within_15pct
	else fail last_snapshot_leak_within_15pct "estimated $est live bytes at leak_site, truth $truth"; fi
	echo "# last snapshot: leak_site $est bytes, truth $truth"
	"$DIFF" --top 3 "$first" "$last" >"$S/diff.txt" 2>&1
	row=$(awk '/^Grew/ { g = 1; next } g && /^ *1\. / { print; exit }' "$S/diff.txt")
	if [[ "$row" == *leak_site* ]]; then pass diff_first_last_puts_leak_first
	else fail diff_first_last_puts_leak_first "first row: '$row'"; fi
	modes=$(stat -c %a "$S/snaps"/memtrace-* "$S/trace.ctf" | sort -u | tr '\n' ' ')
	if [ "$modes" = "600 " ]; then pass files_mode_0600
	else fail files_mode_0600 "modes: $modes"; fi
	if grep -q "^info pid=$tpid$" "$S/$(basename "$last").dump" &&
		grep -q 'heap snapshot' "$S/$(basename "$last").dump"; then
		pass snapshot_trace_info
	else fail snapshot_trace_info "$(grep '^info' "$S/$(basename "$last").dump" | tr '\n' ' ')"; fi
fi

# ---------------------------------------------------------------- -o none, SIGUSR1
S=$TMP/none
mkdir -p "$S/snaps" "$S/cwd"
start_target "$S/w" 4 200000
( cd "$S/cwd" && exec "$MT" -p $tpid --rate 1e-3 -o none --snapshot-dir "$S/snaps" --file-mode 0640 ) 2>"$S/mt.err" &
mpid=$!
for _ in $(seq 600); do grep -q "tracing PID" "$S/mt.err" && break; sleep 0.05; done
touch "$S/w/go"
sleep 1
before=$(snapshots_of "$S/snaps" $tpid | wc -l)
kill -USR1 $mpid
got=no
for _ in $(seq 20); do # 20 x 0.05 s = 1 s
	[ "$(snapshots_of "$S/snaps" $tpid | wc -l)" -gt "$before" ] && { got=yes; break; }
	sleep 0.05
done
if [ "$before" = 0 ] && [ $got = yes ]; then pass sigusr1_snapshot_within_1s
else fail sigusr1_snapshot_within_1s "$before snapshots before the signal, new one within 1 s: $got"; fi
wait $tpid
timeout 60 tail --pid=$mpid -f /dev/null; wait $mpid; mrc=$?
n=$(snapshots_of "$S/snaps" $tpid | wc -l)
if [ "$mrc" = 0 ] && [ "$n" = 2 ] && [ -z "$(ls "$S/cwd")" ] && grep -q "2 snapshots written" "$S/mt.err" &&
	grep -q "records kept" "$S/mt.err"; then pass output_none_snapshots_only
else fail output_none_snapshots_only "exit $mrc, $n snapshots (want SIGUSR1 + final), cwd: $(ls "$S/cwd"); $(tail -n 2 "$S/mt.err" | tr '\n' ' ')"; fi
last=$(snapshots_of "$S/snaps" $tpid | tail -n 1)
if [ -n "$last" ] && "$DUMP" --summary-only "$last" >/dev/null 2>&1 &&
	[ "$(folded_bytes "${last%.ctf}.folded" leak_site)" -gt 0 ]; then pass output_none_final_snapshot_has_leak
else fail output_none_final_snapshot_has_leak "$(cat "${last%.ctf}.folded" 2>/dev/null | head -3)"; fi
modes=$(stat -c %a "$S/snaps"/memtrace-* | sort -u | tr '\n' ' ')
if [ "$modes" = "640 " ]; then pass file_mode_option; else fail file_mode_option "modes: $modes"; fi

# ---------------------------------------------------------------- memtraced SIGKILLed
S=$TMP/kill
mkdir -p "$S"
start_target "$S/w" 60 100000
start_mt "$S/mt.err" -p $tpid --rate 1e-2 -o "$S/trace.ctf"
touch "$S/w/go"
flushed=no
for _ in $(seq 300); do
	"$DUMP" "$S/trace.ctf" 2>/dev/null | grep -q ' alloc id=' && { flushed=yes; break; }
	sleep 0.1
done
sleep 1
kill -KILL $mpid; wait $mpid 2>/dev/null
sleep 0.5 # the target keeps allocating and freeing without the probes
alive=no; kill -0 $tpid 2>/dev/null && alive=yes
touch "$S/w/stop"; wait $tpid; trc=$?
if [ $alive = yes ] && [ "$trc" = 0 ] && grep -q '^truth leak' "$S/w.out"; then pass sigkill_target_unharmed
else fail sigkill_target_unharmed "alive after the kill: $alive, target exit $trc"; fi
if [ $flushed = yes ] && "$DUMP" "$S/trace.ctf" >"$S/dump" 2>"$S/dump.err"; then
	pass sigkill_trace_reads_cleanly
	echo "# $(grep -c ' alloc id=' "$S/dump") allocations in the trace of the killed memtraced"
else fail sigkill_trace_reads_cleanly "flushed: $flushed; $(head -c 300 "$S/dump.err")"; fi

# ---------------------------------------------------------------- several -p
S=$TMP/multi
mkdir -p "$S/snaps"
start_target "$S/a" 3 300000; pa=$tpid
start_target "$S/b" 4 300000; pb=$tpid
start_mt "$S/mt.err" -p $pa -p $pb --rate 1e-3 -o "$S/trace-%p.ctf" --snapshot-dir "$S/snaps" \
	--snapshot-interval 0.5 --snapshot-keep 2
touch "$S/a/go" "$S/b/go"
wait $pa; wait $pb
timeout 60 tail --pid=$mpid -f /dev/null; wait $mpid; mrc=$?
ok=yes why=""
for p in $pa $pb; do
	"$DUMP" "$S/trace-$p.ctf" >"$S/$p.dump" 2>/dev/null || { ok=no; why="$why trace-$p.ctf unreadable;"; }
	grep -q "^info pid=$p$" "$S/$p.dump" || { ok=no; why="$why trace-$p.ctf not of pid $p;"; }
	grep -q ' alloc id=.*leak_site' "$S/$p.dump" || { ok=no; why="$why no leak_site in trace-$p.ctf;"; }
	ns=$(snapshots_of "$S/snaps" $p | wc -l)
	[ "$ns" = 2 ] || { ok=no; why="$why $ns snapshots of $p kept (--snapshot-keep 2);"; }
	last=$(snapshots_of "$S/snaps" $p | tail -n 1)
	[ "${last##*-}" != 1.ctf ] || { ok=no; why="$why only 2 snapshots of $p taken;"; }
	grep -q "PID $p exited" "$S/mt.err" || { ok=no; why="$why no exit of $p seen;"; }
done
if [ "$mrc" = 0 ] && [ $ok = yes ] && [ "$(ls "$S/snaps" | grep -c '\.folded$')" = 4 ]; then
	pass several_pids_own_trace_and_snapshots_keep_2
else fail several_pids_own_trace_and_snapshots_keep_2 "exit $mrc:$why $(tail -n 2 "$S/mt.err" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- bad snapshot directories
S=$TMP/baddir
mkdir -p "$S/elsewhere" "$S/unsafe" "$S/sticky" "$S/ro"
start_target "$S/w" 60 0
ln -s "$S/elsewhere" "$S/link"
chown 65534 "$S/unsafe" "$S/sticky"; chmod 0777 "$S/unsafe"; chmod 1777 "$S/sticky"
bad_snapdir() { # name substring dir
	"$MT" -p $tpid -o "$S/$1.ctf" --snapshot-dir "$3" --snapshot-interval 1 >/dev/null 2>"$S/err"
	local r=$?
	if [ "$r" = 2 ] && grep -qi -- "$2" "$S/err" && [ ! -e "$S/$1.ctf" ] &&
		[ -z "$(ls "$S/elsewhere")" ]; then pass "$1"
	else fail "$1" "exit $r, trace file left: $([ -e "$S/$1.ctf" ] && echo yes || echo no): $(head -c 300 "$S/err")"; fi
}
bad_snapdir bad_snapshot_dir_missing_parent "does not exist" "$S/missing/sub"
# a missing directory whose parent exists is made (0700)
"$MT" -p $tpid -o "$S/made.ctf" --snapshot-dir "$S/made" --duration 0.5 >/dev/null 2>"$S/err"
if [ "$(stat -c %a "$S/made" 2>/dev/null)" = 700 ] && ls "$S/made"/memtrace-$tpid-*.ctf >/dev/null 2>&1; then
	pass snapshot_dir_made
else fail snapshot_dir_made "$(stat -c %a "$S/made" 2>&1): $(head -c 300 "$S/err")"; fi
bad_snapdir bad_snapshot_dir_symlink "symbolic link" "$S/link"
bad_snapdir bad_snapshot_dir_unsafe "unsafe" "$S/unsafe"
bad_snapdir bad_snapshot_dir_not_a_dir "not a directory" "$S/w.out"
if mount -t tmpfs -o ro,size=64k memtraced-test-ro "$S/ro" 2>/dev/null; then
	bad_snapdir bad_snapshot_dir_read_only "read-only" "$S/ro"
	umount "$S/ro"
else
	skip bad_snapshot_dir_read_only "cannot mount a read-only tmpfs"
fi
"$MT" -q -p $tpid -o "$S/sticky.ctf" --snapshot-dir "$S/sticky" --duration 0.5 >/dev/null 2>"$S/err"; r=$?
if [ $r = 0 ] && [ -n "$(ls "$S/sticky")" ]; then pass sticky_foreign_dir_accepted
else fail sticky_foreign_dir_accepted "exit $r: $(head -c 300 "$S/err")"; fi
touch "$S/w/stop"; wait $tpid

# ---------------------------------------------------------------- disk fills up mid-run
S=$TMP/full
mkdir -p "$S/small"
if mount -t tmpfs -o size=256k memtraced-test-full "$S/small" 2>/dev/null; then
	start_target "$S/w" 60 200000
	start_mt "$S/mt.err" -p $tpid --rate 1e-3 -o "$S/trace.ctf" --snapshot-dir "$S/small" --snapshot-interval 0.3
	touch "$S/w/go"
	for _ in $(seq 100); do [ -n "$(snapshots_of "$S/small" $tpid)" ] && break; sleep 0.1; done
	dd if=/dev/zero of="$S/small/filler" bs=4k 2>/dev/null # until the disk is full
	for _ in $(seq 100); do grep -q "snapshot failed" "$S/mt.err" && break; sleep 0.1; done
	before=$(snapshots_of "$S/small" $tpid | wc -l)
	sleep 0.5
	rm -f "$S/small/filler"
	after=$before
	for _ in $(seq 100); do
		after=$(snapshots_of "$S/small" $tpid | wc -l)
		[ "$after" -gt "$before" ] && break
		sleep 0.1
	done
	touch "$S/w/stop"; wait $tpid
	timeout 60 tail --pid=$mpid -f /dev/null; wait $mpid; mrc=$?
	# said once while it lasts (issue 36: a line at every interval), and once when it is over
	nmsg=$(grep -c "snapshot failed (tracing goes on; said once until one is written again): .*No space left on device" "$S/mt.err")
	nfail=$(sed -n 's/.* snapshots written, \([0-9]*\) failed.*/\1/p' "$S/mt.err")
	if [ "$nmsg" = 1 ] && [ "${nfail:-0}" -ge 1 ] && grep -q "PID $tpid: snapshots written again" "$S/mt.err"
	then pass disk_full_reported_once
	else fail disk_full_reported_once "$nmsg messages, summary says ${nfail:-?} failed: $(grep -m1 'snapshot failed' "$S/mt.err")"; fi
	if [ "$after" -gt "$before" ]; then pass disk_full_snapshots_resume
	else fail disk_full_snapshots_resume "$before snapshots before space freed, $after after"; fi
	bad=""
	for f in $(snapshots_of "$S/small" $tpid); do "$DUMP" --summary-only "$f" >/dev/null 2>&1 || bad="$bad $f"; done
	leftovers=$(ls -A "$S/small" | grep -v '^memtrace-' | tr '\n' ' ')
	if [ "$mrc" = 0 ] && [ -z "$bad" ] && [ -z "$leftovers" ] && "$DUMP" --summary-only "$S/trace.ctf" >/dev/null 2>&1
	then pass disk_full_nothing_lost
	else fail disk_full_nothing_lost "exit $mrc, unreadable:$bad, leftovers: $leftovers"; fi
	umount "$S/small"
else
	skip disk_full "cannot mount a small tmpfs"
fi

# the trace itself on a disk that fills up: it ends with its last whole packet and reads
# cleanly; tracing and snapshots go on; memtraced exits 1 (the trace is incomplete)
S=$TMP/tracefull
mkdir -p "$S/small" "$S/snaps"
if mount -t tmpfs -o size=256k memtraced-test-tfull "$S/small" 2>/dev/null; then
	start_target "$S/w" 60 200000
	start_mt "$S/mt.err" -p $tpid --rate 1e-2 -o "$S/small/trace.ctf" --snapshot-dir "$S/snaps" --snapshot-interval 0.3
	touch "$S/w/go"
	sleep 1
	dd if=/dev/zero of="$S/small/filler" bs=4k 2>/dev/null
	for _ in $(seq 100); do grep -q "the trace stops here" "$S/mt.err" && break; sleep 0.1; done
	before=$(snapshots_of "$S/snaps" $tpid | wc -l)
	after=$before
	for _ in $(seq 100); do
		after=$(snapshots_of "$S/snaps" $tpid | wc -l)
		[ "$after" -gt $((before + 1)) ] && break
		sleep 0.1
	done
	# the snapshot directory vanishes, then comes back
	rm -rf "$S/snaps"
	for _ in $(seq 100); do grep -q "snapshot failed.*has vanished" "$S/mt.err" && break; sleep 0.1; done
	vanished_msg=$(grep -c "snapshot failed.*has vanished" "$S/mt.err")
	mkdir "$S/snaps"
	back=no
	for _ in $(seq 100); do [ -n "$(snapshots_of "$S/snaps" $tpid)" ] && { back=yes; break; }; sleep 0.1; done
	kill -INT $mpid; wait $mpid; mrc=$?
	touch "$S/w/stop"; wait $tpid
	if [ "$vanished_msg" -ge 1 ] && [ $back = yes ]; then pass snapshot_dir_vanished_and_back
	else fail snapshot_dir_vanished_and_back "$vanished_msg 'vanished' messages, snapshots in the new directory: $back"; fi
	"$DUMP" "$S/small/trace.ctf" >/dev/null 2>"$S/dump.err"; drc=$?
	if grep -q "No space left on device.*the trace stops here" "$S/mt.err" && [ "$after" -gt $((before + 1)) ] &&
		[ "$mrc" = 1 ]; then pass trace_disk_full_tracing_goes_on
	else fail trace_disk_full_tracing_goes_on "exit $mrc, snapshots $before -> $after: $(grep -m1 'trace' "$S/mt.err")"; fi
	if [ "$drc" = 0 ] && ! grep -q . "$S/dump.err"; then pass trace_disk_full_trace_reads_cleanly
	else fail trace_disk_full_trace_reads_cleanly "memtrace-dump exit $drc: $(head -c 300 "$S/dump.err")"; fi
	umount "$S/small"
else
	skip trace_disk_full "cannot mount a small tmpfs"
fi

# ---------------------------------------------------------------- memory does not grow with events
S=$TMP/mem
mkdir -p "$S/snaps"
start_target "$S/w" 60 0
# under make test SANITIZE=1: AddressSanitizer's quarantine keeps freed memory (256 MiB) and
# would grow VmHWM with the events; without it the figure means what it does in a normal build
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0" \
	start_mt "$S/mt.err" -p $tpid --rate 1 -o "$S/trace.ctf" --snapshot-dir "$S/snaps" --snapshot-interval 1
touch "$S/w/go"
hwm() { awk '/^VmHWM/ { print $2 }' /proc/$mpid/status; }
events() { stat -c %s "$S/trace.ctf"; } # the trace grows with the events
sleep 3
h1=$(hwm); b1=$(events)
sleep 5
h2=$(hwm); b2=$(events)
kill -INT $mpid; wait $mpid; mrc=$?
touch "$S/w/stop"; wait $tpid
calls=$(sed -n 's/.*: \([0-9]*\) allocations and.*/\1/p' "$S/mt.err")
echo "# VmHWM ${h1} kB -> ${h2} kB while the trace grew ${b1} -> ${b2} bytes ($calls allocations in all, rate 1)"
# margin: 2 MiB for allocator slack (the record queue's and writer's buffers are reused)
if [ -n "$h1" ] && [ -n "$h2" ] && [ "$mrc" = 0 ] && [ "$b2" -gt $((b1 + 100000)) ] && [ "$h2" -le $((h1 + 2048)) ]
then pass memory_bounded_by_contexts_not_events
else fail memory_bounded_by_contexts_not_events "VmHWM ${h1:-?} -> ${h2:-?} kB, trace ${b1:-?} -> ${b2:-?} bytes, exit $mrc"; fi
exit 0
