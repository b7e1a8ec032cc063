#!/usr/bin/env bash
# Anonymous memory mappings as allocations (BPF; root): mmap (private or shared), munmap whole
# and partial, mremap, sampled like malloc'ed blocks with the same rate, with their stacks;
# mappings an allocator makes for its own blocks are not counted twice; --no-mmap turns it off.
# tests/targets/mmap_workload.c prints its truth; a Python program's live bytes are compared
# with what /proc/PID/smaps_rollup says of its anonymous memory at the same moments.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
W=$TARGETS/mmap_workload
PY=/usr/bin/python3
for p in "$MT" "$DUMP" "$W" "$BIN/memtrace-report"; do
	[ -x "$p" ] || { fail mmap_built "missing $p (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip mmap_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# by_func DUMP RATE: "FUNC ALLOCATED_BYTES LIVE_BYTES RECORDS" per workload function (the
# innermost frame named like one), estimated as nsamples * 8 / RATE
by_func() {
	awk -v rate="$2" '
	$2 == "alloc" {
		id = substr($3, 4); ns = substr($5, 10); f = ""
		p = index($0, ": ")
		nf = p ? split(substr($0, p + 2), fr, / \| /) : 0
		for (i = nf; i >= 1 && f == ""; i--)
			if (match(fr[i], / (map_kept|map_temp|map_split|map_grown|malloc_big|map_reserved)$/)) f = substr(fr[i], RSTART + 1)
		if (f == "") next
		b = ns * 8 / rate; total[f] += b; rec[f]++; idf[id] = f; idb[id] = b; alive[id] = 1
		next
	}
	$2 == "collect" { id = substr($3, 4); if (id in alive) delete alive[id] }
	END {
		for (id in alive) live[idf[id]] += idb[id]
		for (f in total) printf "%s %.0f %.0f %d\n", f, total[f], live[f], rec[f]
	}' "$1"
}
within() { # VALUE TRUTH PERCENT
	awk -v v="$1" -v t="$2" -v p="$3" 'BEGIN { d = v - t; if (d < 0) d = -d; exit !(t > 0 ? d <= t * p / 100 : v == 0) }'
}

# ---- at rate 1: exact, and glibc's own mapping for a 1 MiB malloc counted once ----
echo | "$MT" --rate 1 -o "$TMP/r1.ctf" -- "$W" 20 >"$TMP/r1.truth" 2>"$TMP/r1.err"; rc=$?
"$DUMP" "$TMP/r1.ctf" >"$TMP/r1.dump" 2>/dev/null
by_func "$TMP/r1.dump" 1 >"$TMP/r1.sum"
sed 's/^/# /' "$TMP/r1.sum"
if [ "$rc" = 0 ] && grep -q 'anonymous mappings: [1-9]' "$TMP/r1.err"; then pass mmap_rate1_traced
else fail mmap_rate1_traced "exit $rc: $(tail -n 2 "$TMP/r1.err" | tr '\n' ' ')"; fi
while read -r _ f calls bytes live; do
	got=$(awk -v f="$f" '$1 == f { print $2, $3 }' "$TMP/r1.sum")
	gb=${got% *}; gl=${got#* }
	# map_grown: 1 MiB mapped, then grown to 3 MiB (a free and a new mapping, as realloc);
	# map_split: 8 MiB, then the two 3 MiB pieces left by unmapping the middle;
	# map_reserved: 6 MiB, then the two 1 MiB pieces left by madvise(MADV_DONTNEED) of the
	# middle of its 3 MiB
	case $f in map_grown) want=$((bytes)) ;; map_split) want=$((bytes + bytes * 6 / 8)) ;;
	map_reserved) want=$((bytes + bytes / 3)) ;; *) want=$bytes ;; esac
	if [ "${gb:-x}" = "$want" ] && [ "${gl:-x}" = "$live" ]; then pass "mmap_rate1_exact_$f"
	else fail "mmap_rate1_exact_$f" "allocated ${gb:-none} (truth $want), live ${gl:-none} (truth $live)"; fi
done < <(grep '^truth' "$TMP/r1.truth")
n_big=$(awk '$1 == "malloc_big" { print $4 }' "$TMP/r1.sum")
if [ "${n_big:-0}" = 1 ] && grep -qE 'anonymous mappings: .* [1-9][0-9]* sampled ones left out as the allocator' "$TMP/r1.err"
then pass mmap_glibc_malloc_mapping_counted_once
else fail mmap_glibc_malloc_mapping_counted_once "malloc_big has ${n_big:-0} records: $(grep -o 'anonymous mappings[^;]*' "$TMP/r1.err")"; fi
if grep -q 'mmap64.c\|mremap.c' <("$BIN/memtrace-report" "$TMP/r1.ctf" 2>/dev/null | grep -E '^ +[0-9]+\. '); then
	fail mmap_report_attributes_to_the_caller "a row of the mmap function itself"
else pass mmap_report_attributes_to_the_caller; fi

# ---- at rate 1e-3: sampled like malloc'ed blocks ----
echo | "$MT" --rate 1e-3 -o "$TMP/s.ctf" -- "$W" 100 >"$TMP/s.truth" 2>"$TMP/s.err"
"$DUMP" "$TMP/s.ctf" >"$TMP/s.dump" 2>/dev/null
by_func "$TMP/s.dump" 1e-3 >"$TMP/s.sum"
sed 's/^/# /' "$TMP/s.sum"
kept_live=$(awk '$1 == "map_kept" { print $3 }' "$TMP/s.sum")
if within "${kept_live:-0}" $((64 * 1024 * 1024)) 15; then pass mmap_kept_live_within_15pct
else fail mmap_kept_live_within_15pct "estimated ${kept_live:-0} live, truth 67108864"; fi
temp=$(awk '$1 == "map_temp" { print $2, $3 }' "$TMP/s.sum")
if within "${temp% *}" $((100 * 4 * 1024 * 1024)) 10 && [ "${temp#* }" = 0 ]; then pass mmap_temporary_total_within_10pct_none_live
else fail mmap_temporary_total_within_10pct_none_live "estimated ${temp:-none} (allocated live), truth 419430400 0"; fi

# ---- --no-mmap ----
echo | "$MT" --rate 1 --no-mmap -o "$TMP/n.ctf" -- "$W" 5 >/dev/null 2>"$TMP/n.err"
"$DUMP" "$TMP/n.ctf" >"$TMP/n.dump" 2>/dev/null
if grep -q ' alloc ' "$TMP/n.dump" && ! grep -q ' map_kept$\| map_temp$' "$TMP/n.dump" &&
	! grep -q 'anonymous mappings' "$TMP/n.err"; then pass mmap_off_with_no_mmap
else fail mmap_off_with_no_mmap "$(grep -c ' map_' "$TMP/n.dump") mapping records"; fi

# ---- Python: live bytes against the process's anonymous memory ----
if [ ! -x "$PY" ]; then
	skip mmap_python "no $PY (make deps installs python3)"
	exit 0
fi
anon_kib() { awk '/^Anonymous:/ { print $2 }' "/proc/$1/smaps_rollup"; }
# live_of SNAPSHOT: the estimated live bytes memtrace-report prints for a snapshot
live_of() { "$BIN/memtrace-report" "$1" 2>/dev/null | sed -nE 's/.*live at the end ([0-9.]+) (B|KiB|MiB|GiB).*/\1 \2/p' |
	awk '{ m = $2 == "GiB" ? 1073741824 : $2 == "MiB" ? 1048576 : $2 == "KiB" ? 1024 : 1; printf "%.0f\n", $1 * m }'; }
mkdir -p "$TMP/snaps" "$TMP/py"
mkfifo "$TMP/py/in"
"$MT" --snapshot-dir "$TMP/snaps" -o "$TMP/py.ctf" -- "$PY" "$TOP/tests/targets/py_heap.py" <"$TMP/py/in" >"$TMP/py/out" 2>"$TMP/py.err" &
mpid=$!
exec 7>"$TMP/py/in"
for _ in $(seq 600); do grep -q '^peak' "$TMP/py/out" && break; sleep 0.1; done
# (not the unprivileged parser, which is a child of memtraced too, running as nobody)
ppid=$(pgrep -P $mpid -f py_heap.py --euid 0 | head -1)
sleep 0.5
peak_anon=$(( $(anon_kib "$ppid") * 1024 ))
kill -USR1 $mpid; sleep 1.5
echo >&7
for _ in $(seq 600); do grep -q '^end' "$TMP/py/out" && break; sleep 0.1; done
sleep 0.5
end_anon=$(( $(anon_kib "$ppid") * 1024 ))
kill -USR1 $mpid; sleep 1.5
echo >&7
exec 7>&-
wait $mpid
snaps=($(ls "$TMP/snaps"/memtrace-*.ctf 2>/dev/null | sort -t- -k3 -n))
peak_live=$(live_of "${snaps[0]:-/nonexistent}")
end_live=$(live_of "${snaps[1]:-/nonexistent}")
echo "# python: anonymous memory $peak_anon at the peak, $end_anon at the end; traced live $peak_live, $end_live"
if within "${peak_live:-0}" "$peak_anon" 25; then pass mmap_python_peak_within_25pct
else fail mmap_python_peak_within_25pct "traced live ${peak_live:-none}, anonymous $peak_anon"; fi
if within "${end_live:-0}" "$end_anon" 25; then pass mmap_python_end_within_25pct
else fail mmap_python_end_within_25pct "traced live ${end_live:-none}, anonymous $end_anon"; fi
exit 0
