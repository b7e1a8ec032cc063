#!/usr/bin/env bash
# The fuzz targets' kept findings (tests/fuzz/regressions/X/, the reader's also
# tests/fuzz/regressions/*.ctf), replayed without libFuzzer by BUILD/tests/fuzz/replay_X: each
# must end cleanly (under `make test SANITIZE=1` with ASan and UBSan too). One ordinary input
# per target as well, so that every replay program is seen to run the code it fuzzes.
. "$(dirname "$0")/lib/test.sh"
export LSAN_OPTIONS=suppressions=$TOP/tests/fuzz/lsan.supp:print_suppressions=0

# replay NAME CHECK FILE: replay_NAME must end with status 0 on FILE within a minute.
replay() {
	local prog=$TOP/$BUILD/tests/fuzz/replay_$1
	check "$2" timeout 60 "$prog" "$3"
}

sample=$TMP/stacks_deep.sample
"$TOP/$BUILD/tests/unit/test_unwind_object" --write-seed "$sample" >/dev/null 2>&1
python3 - "$TARGETS/stacks_deep" "$sample" "$TMP/stacks_deep.in" <<'EOF'
import struct, sys
elf = open(sys.argv[1], 'rb').read()
open(sys.argv[3], 'wb').write(struct.pack('<I', len(elf)) + elf + open(sys.argv[2], 'rb').read())
EOF

for src in "$TOP"/tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c); name=${name#fuzz_}
	if [ ! -x "$TOP/$BUILD/tests/fuzz/replay_$name" ]; then
		fail "fuzz_replay_${name}_built" "$BUILD/tests/fuzz/replay_$name missing (make all)"
		continue
	fi
	case $name in
	reader) ordinary=$DATA/memtrace/$(ls "$DATA/memtrace" | grep -m1 '\.ctf$') ;;
	elf) ordinary=$TARGETS/sites ;;
	unwind) ordinary=$sample ;;
	unwind_elf) ordinary=$TMP/stacks_deep.in ;;
	protocol) ordinary=$TOP/tests/fuzz/regressions/protocol/locs-two-frames ;;
	maps) ordinary=$TOP/tests/fuzz/regressions/maps/node-like-maps-and-perf-map ;;
	*) ordinary= ;;
	esac
	if [ -s "$ordinary" ]; then replay "$name" "fuzz_replay_${name}_ordinary_input" "$ordinary"
	else fail "fuzz_replay_${name}_ordinary_input" "no ordinary input for $name"; fi
	for f in "$TOP"/tests/fuzz/regressions/"$name"/* $([ "$name" = reader ] && ls "$TOP"/tests/fuzz/regressions/*.ctf); do
		[ -f "$f" ] && replay "$name" "fuzz_replay_${name}_$(basename "$f")" "$f"
	done
done
