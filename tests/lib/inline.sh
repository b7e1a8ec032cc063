# Stacks as gdb shows them and as a trace holds them, in one comparable form (sourced).
#
# One stack per line, innermost frame first, frames separated by " | ", each frame
# "function@file:line" where file is the base name and function the last component of the
# name with template/generic arguments, parameters and closure numbering taken off (gdb and the
# demangler spell those differently: "alloc::alloc::{impl#1}::allocate" and
# "<alloc::alloc::Global as core::alloc::Allocator>::allocate" are both "allocate"). Only frames
# with a source line count: objects without debug info (libstdc++'s operator new) and _start
# are left out on both sides.

# The awk function that turns a full name into the compared one.
INLINE_AWK_NAME='
function short_name(s,    i, c, depth, out, n) {
	sub(/ const$/, "", s)
	# the parameter list at the end: "f(int, char)" -> "f"
	if (substr(s, length(s)) == ")") {
		depth = 0
		for (i = length(s); i > 0; i--) {
			c = substr(s, i, 1)
			if (c == ")") depth++
			else if (c == "(" && --depth == 0) break
		}
		if (i > 1) s = substr(s, 1, i - 1)
	}
	gsub(/\[abi:[^]]*\]/, "", s)
	gsub(/->/, "", s) # "fn() -> T" inside generic arguments: not a closing bracket
	# drop every <...>, nested
	out = ""; depth = 0
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "<") depth++
		else if (c == ">" && depth > 0) depth--
		else if (depth == 0) out = out c
	}
	n = split(out, parts, "::")
	s = parts[n]
	if (s ~ /^\{+closure/) s = "{closure}"
	return s
}
function base(f) { sub(/.*\//, "", f); return f }
'

# gdb_stacks BINARY BREAK_FIRST HITS ARGS...: runs BINARY ARGS under gdb, stops at BREAK_FIRST
# (the program's main function) and then at HITS calls of malloc, and prints the stack of each
# malloc call (its caller first) in the form above.
gdb_stacks() {
	local bin=$1 first=$2 hits=$3; shift 3
	local cmds=() i
	for ((i = 0; i < hits; i++)); do cmds+=(-ex continue -ex bt); done
	gdb -nx -q -batch -ex 'set width 0' -ex 'set pagination off' -ex 'set print frame-arguments none' \
		-ex 'set breakpoint pending on' -ex "break $first" -ex 'run' -ex 'break malloc' "${cmds[@]}" \
		-ex kill --args "$bin" "$@" 2>/dev/null |
	awk "$INLINE_AWK_NAME"'
	function flush() { if (stack != "") print stack; stack = "" }
	/^#0 / { flush(); next }
	/^#[0-9]+ / {
		if (!match($0, / at [^ ]+:[0-9]+$/)) next
		where = substr($0, RSTART + 4)
		name = substr($0, 1, RSTART - 1)
		pc_row = name ~ /^#[0-9]+ +0x[0-9a-f]+ in /
		sub(/^#[0-9]+ +(0x[0-9a-f]+ in )?/, "", name)
		sub(/ \([^()]*\)$/, "", name) # the arguments: "(this=..., n=...)" or "()"
		k = split(where, wp, ":")
		line = wp[k]; file = substr(where, 1, length(where) - length(line) - 1)
		stack = stack (stack == "" ? "" : " | ") short_name(name) "@" base(file) ":" line (pc_row ? "~" : "")
	}
	END { flush() }'
}

# trace_stacks DUMP: the stack of every allocation of a memtrace-dump output, in the form above
# (the dump lists frames outermost first, " | " between frames and " & " before each inlined
# location, each "file:line:start-end name").
trace_stacks() {
	awk "$INLINE_AWK_NAME"'
	$2 == "alloc" {
		p = index($0, ": ")
		if (!p) next
		nf = split(substr($0, p + 2), frames, / \| /)
		stack = ""
		for (i = 1; i <= nf; i++) {
			sub(/ \*[0-9]+$/, "", frames[i])
			nl = split(frames[i], locs, / & /)
			for (j = 1; j <= nl; j++) {
				sp = index(locs[j], " ")
				head = substr(locs[j], 1, sp - 1); name = substr(locs[j], sp + 1)
				k = split(head, hp, ":")
				if (k < 3) continue
				file = substr(head, 1, length(head) - length(hp[k]) - length(hp[k - 1]) - 2)
				key = short_name(name) "@" (hp[k - 1] + 0 ? base(file) ":" hp[k - 1] : "*") (j == nl ? "~" : "")
				stack = key (stack == "" ? "" : " | " stack)
			}
		}
		if (stack != "") print stack
	}' "$1" | sort -u
}

# stacks_missing GDB_STACKS TRACE_STACKS: the gdb stacks that no trace stack starts with.
# - A trace frame without a line ("name@*": no debug info, or a line-table row of line 0, which
#   gdb replaces by the row before it) matches a gdb frame of the same name, or none: gdb leaves
#   out frames without a line and may stop at main where the trace goes on to __libc_start_main.
# - The line of a pc itself (marked "~": gdb's "0x... in" frame, the trace's innermost location
#   of a physical frame) may differ in the same file: where the line table has several rows at
#   that address, gdb takes an is_stmt row and libdw, addr2line and llvm-symbolizer the last one.
#   The call lines of inlined frames (what this compares) must be equal.
stacks_missing() {
	awk 'function name(f) { sub(/@[^@]*$/, "", f); return f }
	function file(f) { sub(/^.*@/, "", f); sub(/:[0-9]+~?$/, "", f); return f }
	function wild(f) { return f ~ /@\*~?$/ }
	function same(g, t) {
		if (g == t) return 1
		if (wild(t)) return name(t) == name(g)
		return g ~ /~$/ && t ~ /~$/ && name(g) == name(t) && file(g) == file(t)
	}
	function starts(g, ng, t, nt,    i, j) {
		j = 1
		for (i = 1; i <= ng; i++) {
			while (j <= nt && !same(g[i], t[j]) && wild(t[j])) j++
			if (j > nt || !same(g[i], t[j])) return 0
			j++
		}
		return 1
	}
	FNR == NR { trace[++n] = $0; next }
	{ ng = split($0, g, / \| /); ok = 0
	  for (k = 1; k <= n && !ok; k++) { nt = split(trace[k], t, / \| /); ok = starts(g, ng, t, nt) }
	  if (!ok) print }' "$2" "$1"
}
