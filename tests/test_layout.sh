#!/usr/bin/env bash
# The daemon's house: rooms by job, no dependency circle among its object files, small files.
# Static checks on the source tree and on build/libmemtraced.a (nm), no BPF.
set -u
. "$(dirname "$0")/lib/test.sh"
cd "$TOP" || exit 2
LIB=$BUILD/libmemtraced.a

# Two sides and what they share: the privileged daemon (core/), the unprivileged parser
# (parse/), the protocol between them and messages (shared/). Rooms are their sub-folders.
for side in core parse shared; do
	if [ -d "user/daemon/$side" ]; then pass "daemon_side_$side"; else fail "daemon_side_$side" "no user/daemon/$side"; fi
done
other=$(find user/daemon -mindepth 1 -maxdepth 1 | grep -v -E '^user/daemon/(core|parse|shared)$' || true)
if [ -z "$other" ]; then pass daemon_only_sides; else fail daemon_only_sides "outside core/, parse/, shared/: $other"; fi
rooms=$(find user/daemon/core user/daemon/parse user/daemon/shared -mindepth 1 -maxdepth 1 -type d | sort)
nrooms=$(printf '%s\n' "$rooms" | grep -c .)
if [ "$nrooms" -ge 8 ]; then pass daemon_has_rooms; else fail daemon_has_rooms "only $nrooms rooms: $rooms"; fi

# Every room has a header: what it offers is declared next to it.
for r in $rooms; do
	if ls "$r"/*.h >/dev/null 2>&1; then pass "room_has_header_$(basename "$r")"
	else fail "room_has_header_$(basename "$r")" "no header in $r"; fi
done

# No source of one side includes a room of the other (the build's -I already refuses it).
room_re() { find "user/daemon/$1" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | paste -sd'|'; }
core_rooms=$(room_re core); parse_rooms=$(room_re parse)
bad=$(grep -rn -E "#include \"($parse_rooms)/" user/daemon/core user/daemon/shared || true)
bad+=$(grep -rn -E "#include \"($core_rooms)/" user/daemon/parse user/daemon/shared || true)
if [ -z "$bad" ]; then pass no_include_across_sides; else fail no_include_across_sides "$(printf '%s' "$bad" | head -c 600)"; fi

# No source file under user/ over 700 lines.
long=$(find user -name '*.[ch]' -exec awk 'END { if (NR > 700) print FILENAME ": " NR " lines" }' {} \;)
if [ -z "$long" ]; then pass no_source_file_over_700_lines; else fail no_source_file_over_700_lines "$long"; fi

# No module below the entry includes the live view (messages go through common/msg.h).
bad=$(grep -rl '#include "status.h"' user/daemon --include='*.c' --include='*.h' |
	grep -v -E '^user/daemon/core/entry/[^/]+$' || true)
if [ -z "$bad" ]; then pass live_view_only_at_the_entry; else fail live_view_only_at_the_entry "$bad"; fi

# The object graph of the daemon library: A -> B when A uses a symbol that B defines.
# A circle (strongly connected component of more than one object) fails.
if [ ! -f "$LIB" ]; then fail no_object_circle "$LIB not built"; exit 0; fi
graph=$(nm -A "$LIB" 2>/dev/null | awk '
	{ split($1, p, ":"); obj = p[2] }
	NF == 3 && $2 ~ /^[TDBRWVGS]$/ { def[$3] = obj; next }
	NF == 2 && $1 ~ /:$/ && $2 == "U" { next }
	$2 == "U" { use[obj, $3] = 1 }
	END { for (k in use) { split(k, q, SUBSEP); if ((q[2] in def) && def[q[2]] != q[1]) print q[1], def[q[2]] } }' | sort -u)
# Objects that reach each other both ways are in a circle: transitive closure by repeated joins.
circle=$(printf '%s\n' "$graph" | awk '
	NF == 2 { e[$1, $2] = 1; n[$1] = 1; n[$2] = 1 }
	END {
		changed = 1
		while (changed) { changed = 0
			for (k in e) { split(k, a, SUBSEP)
				for (c in n) if (((a[2], c) in e) && !((a[1], c) in e)) { e[a[1], c] = 1; changed = 1 } } }
		for (k in e) { split(k, a, SUBSEP); if (a[1] < a[2] && ((a[2], a[1]) in e)) print a[1] " <-> " a[2] } }' | sort)
if [ -z "$circle" ]; then pass no_object_circle
else fail no_object_circle "$(printf "%s" "$circle" | tr "\n" ";" | head -c 600)"; fi
nedges=$(printf '%s\n' "$graph" | grep -c .)
if [ "$nedges" -gt 10 ]; then pass object_graph_read; else fail object_graph_read "only $nedges edges: nm output not understood"; fi

# The two programs: memtraced links no code of the parser's side and the parser none of the
# daemon's (their global symbols, read with nm from the objects of each side), and the root
# daemon does not even load the libraries that parse DWARF, instructions or C++ names.
defs() { find "$BUILD/obj/user/daemon/$1" -name '*.o' ! -name main.o -exec nm --defined-only -g {} + 2>/dev/null |
	awk 'NF == 3 { print $3 }' | sort -u; }
for pair in "memtraced parse" "memtraced-parse core"; do
	set -- $pair
	if [ ! -x "$BUILD/bin/$1" ]; then fail "no_${2}_code_in_$1" "$BUILD/bin/$1 not built"; continue; fi
	theirs=$(defs "$2")
	ours=$(nm --defined-only "$BUILD/bin/$1" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u)
	n=$(printf '%s\n' "$theirs" | grep -c .)
	both=$(comm -12 <(printf '%s\n' "$theirs") <(printf '%s\n' "$ours") | head -n 8 | tr '\n' ' ')
	if [ "$n" -lt 20 ]; then fail "no_${2}_code_in_$1" "only $n symbols defined by $2/: nm output not understood"
	elif [ -z "$both" ]; then pass "no_${2}_code_in_$1"
	else fail "no_${2}_code_in_$1" "$1 holds $2/'s $both"; fi
done
if [ -x "$BUILD/bin/memtraced" ]; then
	libs=$(ldd "$BUILD/bin/memtraced" 2>/dev/null | grep -o -E 'lib(dw|capstone|iberty)[^ ]*' | tr '\n' ' ')
	if [ -z "$libs" ]; then pass daemon_loads_no_parsing_library; else fail daemon_loads_no_parsing_library "memtraced loads $libs"; fi
fi

# One door to the targets' files (core/door/): no other object of the daemon calls open,
# fopen, opendir and the like, but those that open our own files: the trace (-o) and the
# --listen-token file (targets.o),
# the snapshot directory (snapshot.o), the terminal (status.o) and --options-file
# (options_file.o: root's, checked to be), the --inject claims in root's /run/memtraced
# (claim.o), the kernel's lockdown file (kernel_probe.o). The parser's objects open
# through the broker, which opens with the door.
openers=$(find "$BUILD/obj/user/daemon/core" -name '*.o' -exec nm -A {} + 2>/dev/null |
	awk '$2 == "U" && $3 ~ /^(open|open64|openat|openat64|__open_2|__open64_2|__openat_2|fopen|fopen64|freopen|opendir|creat|creat64|name_to_handle_at|open_by_handle_at)$/ {
		n = split($1, p, "/"); sub(/:$/, "", p[n]); print p[n] }' | sort -u | tr '\n' ' ')
stray=$(printf '%s\n' $openers | grep -v -x -E 'door\.o|targets\.o|snapshot\.o|status\.o|options_file\.o|claim\.o|kernel_probe\.o' | tr '\n' ' ')
if ! printf '%s' "$openers" | grep -q 'door\.o'; then fail one_door_for_target_files "nm found no opener at all (read: $openers)"
elif [ -z "$stray" ]; then pass one_door_for_target_files
else fail one_door_for_target_files "objects of the daemon that open files themselves (use door/door.h): $stray"; fi

# make -n demo names neither chromium, golang nor the Rust toolchain (the demo's set-up is lean).
demo=$(make -n demo 2>&1)
if printf '%s' "$demo" | grep -q -E 'chromium|golang|cargo|rustc|gdb'; then fail demo_setup_is_lean "make -n demo names chromium, golang, cargo, rustc or gdb"
else pass demo_setup_is_lean; fi


# The sampler's version, written twice (the daemon cannot include the sampler's header: the
# two sides share only include/): the same number (a bump on one side only made every
# placement fail with "the sampler library in PID N is version 6, this memtraced needs 5").
lib_v=$(sed -n 's/^#define MEMTRACED_SAMPLER_VERSION \([0-9]*\).*/\1/p' "$TOP/user/sampler/sampler.h")
daemon_v=$(sed -n 's/^#define SAMPLER_VERSION \([0-9]*\).*/\1/p' "$TOP/user/daemon/core/inject/sampler_ctl.h")
if [ -n "$lib_v" ] && [ "$lib_v" = "$daemon_v" ]; then pass sampler_version_same_on_both_sides
else fail sampler_version_same_on_both_sides "the sampler says ${lib_v:-?}, the daemon ${daemon_v:-?}"; fi
