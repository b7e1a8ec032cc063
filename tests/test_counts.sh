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

# The counter of stacks that ended early counts those the unwinder left before an entry point:
# perl's stacks all reach _start, where libdw may fail to go further ("30 unwind errors" on
# perl, whose 1,307 stacks all reached _start).
cat >"$TMP/p.pl" <<'PL'
my %h; for my $i (1..200000) { $h{"k$i"} = [$i, "v" x ($i % 50)]; delete $h{"k" . ($i - 1000)} if $i > 1000; }
PL
"$MT" --rate 1e-3 -o "$TMP/perl.ctf" -- perl "$TMP/p.pl" >/dev/null 2>"$TMP/perl.err"
early=$(sed -n 's/.* \([0-9]*\) ended early.*/\1/p' "$TMP/perl.err")
"$BIN/memtrace-dump" "$TMP/perl.ctf" 2>/dev/null | grep ' alloc ' | sed 's/.*bt=[0-9]*: //; s/ | .*//' |
	sed 's/^[^ ]* //' | sort | uniq -c | sort -rn >"$TMP/perl.outer"
echo "# perl: ${early:-0} stacks ended early; outermost frames: $(head -3 "$TMP/perl.outer" | tr -s ' ' | tr '\n' ';')"
if [ -s "$TMP/perl.outer" ] && ! grep -qv ' _start$' "$TMP/perl.outer" && [ "${early:-0}" = 0 ]
then pass counts_stacks_at_start_not_errors
else fail counts_stacks_at_start_not_errors "${early:-0} ended early; $(grep -v ' _start$' "$TMP/perl.outer" | head -3 | tr '\n' ';')"; fi
