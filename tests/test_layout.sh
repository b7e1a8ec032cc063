#!/usr/bin/env bash
# The daemon's house: rooms by job, no dependency circle among its object files, small files.
# Static checks on the source tree and on build/libmemtraced.a (nm), no BPF.
set -u
. "$(dirname "$0")/lib/test.sh"
cd "$TOP" || exit 2
LIB=$BUILD/libmemtraced.a

# At least four rooms (sub-folders by job) under user/daemon.
rooms=$(find user/daemon -mindepth 1 -maxdepth 1 -type d | sort)
nrooms=$(printf '%s\n' "$rooms" | grep -c .)
if [ "$nrooms" -ge 4 ]; then pass daemon_has_rooms; else fail daemon_has_rooms "only $nrooms rooms: $rooms"; fi

# Every room has a header: what it offers is declared next to it.
for r in $rooms; do
	if ls "$r"/*.h >/dev/null 2>&1; then pass "room_has_header_$(basename "$r")"
	else fail "room_has_header_$(basename "$r")" "no header in $r"; fi
done

# No source file under user/ over 700 lines.
long=$(find user -name '*.[ch]' -exec awk 'END { if (NR > 700) print FILENAME ": " NR " lines" }' {} \;)
if [ -z "$long" ]; then pass no_source_file_over_700_lines; else fail no_source_file_over_700_lines "$long"; fi

# No module below the entry includes the live view (messages go through common/msg.h).
bad=$(grep -rl '#include "status.h"' user/daemon --include='*.c' --include='*.h' |
	grep -v -E '^user/daemon/[^/]+$' || true)
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

# make -n demo names neither chromium, golang nor the Rust toolchain (the demo's set-up is lean).
demo=$(make -n demo 2>&1)
if printf '%s' "$demo" | grep -q -E 'chromium|golang|cargo|rustc|gdb'; then fail demo_setup_is_lean "make -n demo names chromium, golang, cargo, rustc or gdb"
else pass demo_setup_is_lean; fi

