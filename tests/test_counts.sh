#!/usr/bin/env bash
# Every call counted once (issue 21): tests/targets/count_calls.c makes realloc(NULL, n),
# posix_memalign (alignment 16: glibc calls malloc inside), reallocarray (realloc inside) and
# realloc(p, 0) calls and prints how many allocations and frees it made; the summary's
# "N allocations and M frees seen" must say the same (a few more allocations for stdio's own
# buffer). Before, nested entry points were counted again: 230,001 allocations for 155,000.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
T=$TARGETS/count_calls
for f in "$MT" "$T"; do
	if [ ! -e "$f" ]; then
		fail counts_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip counts_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
"$MT" -o "$TMP/c.ctf" -- "$T" >"$TMP/out" 2>"$TMP/err"
rc=$?
read -r ta tf < <(sed -n 's/^truth allocs=\([0-9]*\) frees=\([0-9]*\)$/\1 \2/p' "$TMP/out")
read -r sa sf < <(sed -n 's/.*: \([0-9]*\) allocations and \([0-9]*\) frees seen.*/\1 \2/p' "$TMP/err")
echo "# truth ${ta:-?} allocations, ${tf:-?} frees; seen ${sa:-?}, ${sf:-?}"
if [ "$rc" = 0 ] && [ -n "${ta:-}" ] && [ -n "${sa:-}" ] && [ "$sa" -ge "$ta" ] && [ "$sa" -le $((ta + 20)) ]
then pass counts_allocations_once
else fail counts_allocations_once "exit $rc: truth ${ta:-?}, seen ${sa:-?}"; fi
if [ -n "${tf:-}" ] && [ -n "${sf:-}" ] && [ "$sf" -ge "$tf" ] && [ "$sf" -le $((tf + 20)) ]
then pass counts_frees_once
else fail counts_frees_once "truth ${tf:-?}, seen ${sf:-?}"; fi
