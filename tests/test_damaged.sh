#!/usr/bin/env bash
# A target whose own files are damaged where the tracer reads them and the program does not:
# debug sections, .eh_frame, .symtab, notes and section headers bit-flipped, zeroed, or with
# sizes and offsets past the end of the file (the kernel and ld.so read only the program
# headers and the dynamic section, so each copy still runs). memtraced -- COPY must trace
# each one cleanly: exit with the program's status, leave its output unchanged, and write a
# trace memtrace-dump reads.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
SITES=$TARGETS/sites
if [ ! -x "$MT" ] || [ ! -x "$SITES" ] || [ ! -x "$DUMP" ]; then
	fail damaged_built "missing $MT, $SITES or $DUMP (run make)"
	exit 0
fi
if ! bpf_ready; then
	skip damaged_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# damage KIND SECTIONS... : writes $TMP/sites.KIND, a copy of sites damaged as KIND says.
#   flip     every 13th byte of the sections (names or name prefixes ending in '*') XORed
#   zero     the sections zeroed
#   past_end the sections' sizes and offsets point past the end of the file
#   shdrs    the section header table: zeroed (SECTIONS=zero), its offset past the end (far),
#            or a count of 65535 entries (count)
damage() {
	python3 - "$SITES" "$TMP/sites.$1" "$@" <<'EOF'
import struct, sys
src, dst, kind, names = sys.argv[1], sys.argv[2], sys.argv[4], sys.argv[5:]
b = bytearray(open(src, 'rb').read())
shoff, = struct.unpack_from('<Q', b, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', b, 0x3a)
def shdr(i):
    return struct.unpack_from('<IIQQQQIIQQ', b, shoff + i * shentsize)
stroff = shdr(shstrndx)[4]
def name(i):
    start = stroff + shdr(i)[0]
    return b[start:b.index(0, start)].decode()
def wanted(n):
    return any(n == w or (w.endswith('*') and n.startswith(w[:-1])) for w in names)
hit = 0
if kind == 'shdrs':
    if names == ['zero']:
        b[shoff:shoff + shnum * shentsize] = bytes(shnum * shentsize); hit = 1
    elif names == ['far']:
        struct.pack_into('<Q', b, 0x28, len(b) + 4096); hit = 1
    elif names == ['count']:
        struct.pack_into('<H', b, 0x3c, 0xffff); hit = 1
else:
    for i in range(1, shnum):
        if not wanted(name(i)):
            continue
        h = list(shdr(i)); off, size = h[4], h[5]
        if h[1] == 8:   # SHT_NOBITS: nothing in the file
            continue
        hit += 1
        if kind == 'flip':
            for k in range(off, off + size, 13):
                b[k] ^= 1 << (k % 8)
        elif kind == 'zero':
            b[off:off + size] = bytes(size)
        elif kind == 'past_end':
            h[4], h[5] = len(b) - 8, len(b) * 64
            struct.pack_into('<IIQQQQIIQQ', b, shoff + i * shentsize, *h)
if not hit or b == open(src, 'rb').read():
    sys.exit('nothing damaged: ' + kind + ' ' + ' '.join(names))
open(dst, 'wb').write(b)
EOF
	chmod +x "$TMP/sites.$1"
}

"$SITES" run 100 >"$TMP/expected.out" 2>&1
want_rc=$?
damages=(
	"debug_flip flip .debug_*"
	"debug_zero zero .debug_*"
	"debug_past_end past_end .debug_*"
	"eh_frame_flip flip .eh_frame .eh_frame_hdr"
	"eh_frame_zero zero .eh_frame .eh_frame_hdr"
	"eh_frame_past_end past_end .eh_frame .eh_frame_hdr"
	"symtab_flip flip .symtab .strtab"
	"symtab_zero zero .symtab .strtab"
	"symtab_past_end past_end .symtab .strtab"
	"notes_flip flip .note.gnu.build-id .note.ABI-tag"
	"notes_zero zero .note.gnu.build-id .note.ABI-tag"
	"notes_past_end past_end .note.*"
	"all_flip flip .debug_* .eh_frame .eh_frame_hdr .symtab .strtab .note.gnu.build-id .comment"
	"shdrs_zero shdrs zero"
	"shdrs_far shdrs far"
	"shdrs_count shdrs count"
)
for d in "${damages[@]}"; do
	read -r name kind sections <<<"$d"
	# (a word list: the section patterns are meant to split)
	# shellcheck disable=SC2086
	if ! err=$(damage "$name" "$kind" $sections 2>&1); then
		fail "damaged_${name}_made" "$err"
		continue
	fi
	copy=$TMP/sites.$name
	# the damaged copy runs as the original does: only what the tracer reads is damaged
	"$copy" run 100 >"$TMP/$name.plain" 2>&1
	plain_rc=$?
	if [ "$plain_rc" != "$want_rc" ] || ! cmp -s "$TMP/$name.plain" "$TMP/expected.out"; then
		fail "damaged_${name}_runs" "the copy itself exits $plain_rc (want $want_rc) or prints otherwise"
		continue
	fi
	timeout 120 "$MT" -q --rate 1 -o "$TMP/$name.ctf" -- "$copy" run 100 >"$TMP/$name.out" 2>"$TMP/$name.err"
	rc=$?
	if [ "$rc" = "$want_rc" ] && cmp -s "$TMP/$name.out" "$TMP/expected.out" &&
		grep -q "allocations and .* frees seen" "$TMP/$name.err"; then
		pass "damaged_${name}_traced"
	else
		fail "damaged_${name}_traced" "exit $rc (want $want_rc), output $(cmp -s "$TMP/$name.out" "$TMP/expected.out" && echo same || echo changed), stderr: $(tail -n 3 "$TMP/$name.err" | tr '\n' ' ' | cut -c1-400)"
		continue
	fi
	if "$DUMP" "$TMP/$name.ctf" >"$TMP/$name.dump" 2>"$TMP/$name.dump.err" &&
		grep -q "alloc" "$TMP/$name.dump"; then
		pass "damaged_${name}_trace_reads"
	else
		fail "damaged_${name}_trace_reads" "$(head -c 300 "$TMP/$name.dump.err")"
	fi
done
