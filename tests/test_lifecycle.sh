#!/usr/bin/env bash
# memtraced follows what a service does besides allocating (BPF; root needed), at --rate 1 so
# that counts are exact. Workloads: tests/targets/life_*.c (each waits for a go-ahead file the
# test creates once memtraced says its probes are in place), tests/plugins/life_plugin.c.
#  - exec: two traces (FILE.exec0.ctf, then FILE: the -o path holds the last program), each with its own program's allocations, both
#    read cleanly: with -- CMD, with -p, and with the /proc fallback watcher;
#  - fork: without --follow-forks the parent's trace has no child allocation and no other
#    trace is written; with it, one trace per child with exactly its allocations (none of the
#    blocks it inherited), a thread is not a process;
#  - dlopen: a plugin with its own malloc/free loaded with RTLD_LOCAL gets probes; the
#    allocations made through it afterwards are all in the trace.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
for f in "$MT" "$DUMP" "$TARGETS/life_exec" "$TARGETS/life_exec_after" "$TARGETS/life_fork" \
	"$TARGETS/life_dlopen"; do
	[ -x "$f" ] || { fail lifecycle_built "missing $f (run make)"; exit 0; }
done

# options (no BPF needed)
"$MT" --follow-forks -o one.ctf -- true >"$TMP/bad.out" 2>"$TMP/bad.err"
r=$?
if [ $r = 2 ] && grep -q "follow-forks.*%p" "$TMP/bad.err" && [ ! -e one.ctf ]; then pass follow_forks_needs_percent_p
else fail follow_forks_needs_percent_p "exit $r: $(head -c 200 "$TMP/bad.err")"; fi

if ! bpf_ready; then
	skip lifecycle_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# site_allocs DUMP SITE: allocations whose innermost frame is SITE
site_allocs() { awk -v s="$2" '$2 == "alloc" && $NF == s { n++ } END { print n + 0 }' "$1"; }
# site_collects DUMP SITE: collects of those allocations
site_collects() {
	awk -v s="$2" '$2 == "alloc" && $NF == s { id[substr($3, 4)] = 1 }
		$2 == "collect" && (substr($3, 4) in id) { n++ } END { print n + 0 }' "$1"
}
# wait_for_line FILE REGEX [TENTHS]: until FILE has a line matching REGEX
wait_for_line() {
	for _ in $(seq "${3:-300}"); do grep -Eq "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# ---------------------------------------------------------------- exec
# exec_case NAME [ENV...]: life_exec (100 blocks at before_exec_site) execs life_exec_after
# (50 blocks at after_exec_site, 25 freed)
exec_case() {
	local name=$1 mode=$2; shift 2
	local S=$TMP/$name
	mkdir -p "$S/d"
	local mpid tpid=""
	if [ "$mode" = cmd ]; then
		touch "$S/d/no-wait"
		env "$@" "$MT" --rate 1 -o "$S/trace.ctf" -- "$TARGETS/life_exec" "$S/d" 100 \
			"$TARGETS/life_exec_after" "$S/d" 50 >"$S/out" 2>"$S/err" &
		mpid=$!
	else # -p: attach to the running program, then let it allocate
		"$TARGETS/life_exec" "$S/d" 100 "$TARGETS/life_exec_after" "$S/d" 50 >"$S/out" &
		tpid=$!
		for _ in $(seq 100); do [ -e "$S/d/started" ] && break; sleep 0.05; done
		env "$@" "$MT" --rate 1 -o "$S/trace.ctf" -p $tpid 2>"$S/err" &
		mpid=$!
		wait_for_line "$S/err" "tracing PID" || fail "${name}_attached" "$(tail -n 3 "$S/err")"
		touch "$S/d/go-start"
	fi
	# the old program's blocks in its trace (flushed once a second), then the exec
	for _ in $(seq 300); do
		"$DUMP" "$S/trace.ctf" 2>/dev/null | grep -q ' alloc id=.*before_exec_site$' && break
		sleep 0.1
	done
	touch "$S/d/go-exec"
	# the new program is traced and unwound (its waiting loop is in the new trace, at the -o
	# path: the old program's moved to trace.exec0.ctf), then it allocates
	local seen=no
	for _ in $(seq 300); do
		"$DUMP" "$S/trace.ctf" 2>/dev/null | grep -q  ' alloc id=.*waiting_site$' && { seen=yes; break; }
		sleep 0.1
	done
	touch "$S/d/go-after"
	[ $seen = yes ] || fail "${name}_followed" "no new trace with waiting_site: $(tail -n 3 "$S/err" | tr '\n' ' ')"
	timeout 60 tail --pid=$mpid -f /dev/null; wait $mpid; local mrc=$?
	[ -n "$tpid" ] && wait $tpid
	sed 's/^/# /' "$S/err" | cut -c1-600
	local ok=yes why=""
	[ "$mrc" = 0 ] || { ok=no; why="memtraced exit $mrc;"; }
	for f in trace.exec0.ctf trace.ctf; do
		"$DUMP" "$S/$f" >"$S/$f.dump" 2>"$S/$f.derr" || { ok=no; why="$why $f unreadable: $(head -c 200 "$S/$f.derr");"; }
	done
	if [ $ok = yes ]; then pass "${name}_two_traces_read_cleanly"; else fail "${name}_two_traces_read_cleanly" "$why"; fi
	local b1 a1 b2 a2 c2
	b1=$(site_allocs "$S/trace.exec0.ctf.dump" before_exec_site); a1=$(site_allocs "$S/trace.exec0.ctf.dump" after_exec_site)
	b2=$(site_allocs "$S/trace.ctf.dump" before_exec_site); a2=$(site_allocs "$S/trace.ctf.dump" after_exec_site)
	c2=$(site_collects "$S/trace.ctf.dump" after_exec_site)
	echo "# $name: first trace $b1 before_exec_site / $a1 after_exec_site; second $b2 / $a2 ($c2 freed)"
	if [ "$b1" = 100 ] && [ "$a1" = 0 ]; then pass "${name}_first_trace_old_program_exact"
	else fail "${name}_first_trace_old_program_exact" "before_exec_site $b1 (truth 100), after_exec_site $a1 (truth 0)"; fi
	# the new program's waiting loop before the exec was seen: never in the old trace, except
	# with the /proc fallback, which sees the exec late (documented)
	local w1
	w1=$(site_allocs "$S/trace.exec0.ctf.dump" waiting_site)
	[[ "$*" == *MEMTRACED_LIFECYCLE=proc* ]] && w1=0
	if [ "$a2" = 50 ] && [ "$c2" = 25 ] && [ "$b2" = 0 ] && [ "$w1" = 0 ]; then pass "${name}_second_trace_new_program_exact"
	else fail "${name}_second_trace_new_program_exact" "after_exec_site $a2 (truth 50), freed $c2 (25), before_exec_site $b2 (0), new program's waiting_site in the old trace $w1 (0)"; fi
	if grep -q '^info executable_name=".*life_exec"$' "$S/trace.exec0.ctf.dump" &&
		grep -q '^info executable_name=".*life_exec_after"$' "$S/trace.ctf.dump"; then
		pass "${name}_traces_name_their_program"
	else fail "${name}_traces_name_their_program" "$(grep -h executable_name "$S"/*.dump | tr '\n' ' ')"; fi
}
exec_case exec cmd
exec_case exec_pid pid
exec_case exec_proc_fallback cmd MEMTRACED_LIFECYCLE=proc

# exec_chain: life_exec (100 blocks) execs a '#!/usr/bin/env bash' script (exec env, then
# bash), which execs life_exec_after (50 blocks, 25 freed): three execs within milliseconds.
# The programs gone before memtraced could follow them get no trace; the one trace naming
# life_exec_after has exactly its allocations; every trace reads cleanly.
exec_chain_case() {
	local S=$TMP/exec_chain
	mkdir -p "$S/d"
	touch "$S/d/no-wait"
	printf '#!/usr/bin/env bash\nexec "%s" "%s" 50\n' "$TARGETS/life_exec_after" "$S/d" >"$S/chain.sh"
	chmod +x "$S/chain.sh"
	"$MT" --rate 1 -o "$S/trace.ctf" -- "$TARGETS/life_exec" "$S/d" 100 "$S/chain.sh" \
		>"$S/out" 2>"$S/err" &
	local mpid=$! f seen=no
	for _ in $(seq 300); do
		"$DUMP" "$S/trace.ctf" 2>/dev/null | grep -q ' alloc id=.*before_exec_site$' && break
		sleep 0.1
	done
	touch "$S/d/go-exec"
	for _ in $(seq 300); do
		for f in "$S"/trace*.ctf; do
			[ -e "$f" ] && "$DUMP" "$f" 2>/dev/null | grep -q ' alloc id=.*waiting_site$' && seen=yes
		done
		[ $seen = yes ] && break
		sleep 0.1
	done
	touch "$S/d/go-after"
	[ $seen = yes ] || fail exec_chain_followed "no trace with waiting_site: $(tail -n 3 "$S/err" | tr '\n' ' ')"
	timeout 60 tail --pid=$mpid -f /dev/null; wait $mpid; local mrc=$?
	sed 's/^/# /' "$S/err" | cut -c1-300
	local ok=yes why="" last=""
	for f in "$S"/trace*.ctf; do
		"$DUMP" "$f" >"$f.dump" 2>"$f.derr" || { ok=no; why="$why ${f##*/} unreadable: $(head -c 200 "$f.derr");"; }
		grep -q '^info executable_name=".*life_exec_after"$' "$f.dump" && last="$last $f"
	done
	[ "$mrc" = 0 ] || { ok=no; why="memtraced exit $mrc; $why"; }
	if [ $ok = yes ]; then pass exec_chain_traces_read_cleanly; else fail exec_chain_traces_read_cleanly "$why"; fi
	local b1 a2 c2 b2 n
	b1=$(site_allocs "$S/trace.exec0.ctf.dump" before_exec_site)
	last=$(echo $last) # the names, space-separated, none leading
	n=$(echo $last | wc -w)
	if [ "$n" = 1 ]; then
		a2=$(site_allocs "$last.dump" after_exec_site); c2=$(site_collects "$last.dump" after_exec_site)
		b2=$(site_allocs "$last.dump" before_exec_site)
	fi
	echo "# exec_chain: first trace $b1 before_exec_site; $n trace(s) of life_exec_after:$last: $a2 after_exec_site ($c2 freed), $b2 before_exec_site"
	if [ "$b1" = 100 ] && [ "$n" = 1 ] && [ "$a2" = 50 ] && [ "$c2" = 25 ] && [ "$b2" = 0 ]; then
		pass exec_chain_last_program_exact
	else fail exec_chain_last_program_exact "first trace before_exec_site $b1 (100); traces naming life_exec_after $n (1): after_exec_site ${a2:-?} (50), freed ${c2:-?} (25), before_exec_site ${b2:-?} (0)"; fi
	if [ "$last" = "$S/trace.ctf" ]; then pass exec_chain_last_program_at_the_o_path
	else fail exec_chain_last_program_at_the_o_path "life_exec_after's trace is '$last', not trace.ctf"; fi
}
exec_chain_case

# ---------------------------------------------------------------- fork
# fork_case NAME FOLLOW(yes/no): life_fork: 3 children of 30 blocks at child_site, 2 x 20 at
# parent_site
fork_case() {
	local name=$1 follow=$2
	local S=$TMP/$name
	mkdir -p "$S/d"
	local opt=()
	[ "$follow" = yes ] && opt=(--follow-forks)
	[ "$follow" = no ] && touch "$S/d/go-all"
	"$MT" --rate 1 "${opt[@]}" -o "$S/trace-%p.ctf" -- "$TARGETS/life_fork" "$S/d" 3 20 30 \
		>"$S/out" 2>"$S/err" &
	local mpid=$! ppid=""
	# each child waits for go.PID: given once memtraced traces it; the parent waits for
	# go-exit: given once its first blocks are in its trace
	for _ in $(seq 600); do
		[ -n "$ppid" ] || ppid=$(grep -o 'tracing PID [0-9]*' "$S/err" | head -n 1 | awk '{ print $3 }')
		if [ -n "$ppid" ] && [ ! -e "$S/d/go-exit" ] &&
			"$DUMP" "$S/trace-$ppid.ctf" 2>/dev/null | grep -q ' alloc id=.*parent_site$'; then
			touch "$S/d/go-exit"
		fi
		for c in "$S"/d/child.*; do
			[ -e "$c" ] || continue
			local p=${c##*.}
			[ -e "$S/d/go.$p" ] && continue
			if [ "$follow" = no ] || grep -q "tracing PID $p " "$S/err"; then touch "$S/d/go.$p"; fi
		done
		kill -0 $mpid 2>/dev/null || break
		sleep 0.1
	done
	wait $mpid; local mrc=$?
	sed 's/^/# /' "$S/err" | cut -c1-600
	ppid=$(grep -o 'tracing PID [0-9]*' "$S/err" | head -n 1 | awk '{ print $3 }')
	"$DUMP" "$S/trace-$ppid.ctf" >"$S/parent.dump" 2>"$S/parent.derr"
	local drc=$?
	local pp pc
	pp=$(site_allocs "$S/parent.dump" parent_site); pc=$(site_allocs "$S/parent.dump" child_site)
	echo "# $name: parent trace: $pp parent_site, $pc child_site"
	if [ "$mrc" = 0 ] && [ "$drc" = 0 ] && [ "$pp" = 40 ] && [ "$pc" = 0 ]; then pass "${name}_parent_trace_has_no_child_allocation"
	else fail "${name}_parent_trace_has_no_child_allocation" "memtraced exit $mrc, dump exit $drc, parent_site $pp (truth 40), child_site $pc (truth 0)"; fi
	local children
	children=$(ls "$S"/d/child.* 2>/dev/null | sed 's/.*child\.//' | tr '\n' ' ')
	local ntraces
	ntraces=$(ls "$S"/trace-*.ctf | wc -l)
	if [ "$follow" = no ]; then
		if [ "$ntraces" = 1 ] && [ "$(echo $children | wc -w)" = 3 ]; then pass "${name}_no_child_traces"
		else fail "${name}_no_child_traces" "$ntraces trace files for children $children"; fi
		return
	fi
	local ok=yes why=""
	[ "$(echo $children | wc -w)" = 3 ] || { ok=no; why="children: $children;"; }
	[ "$ntraces" = 4 ] || { ok=no; why="$why $ntraces traces (want parent + 3: a thread is no process);"; }
	for c in $children; do
		if ! "$DUMP" "$S/trace-$c.ctf" >"$S/$c.dump" 2>/dev/null; then ok=no; why="$why trace-$c.ctf unreadable;"; continue; fi
		local cc cp
		cc=$(site_allocs "$S/$c.dump" child_site); cp=$(site_allocs "$S/$c.dump" parent_site)
		grep -q "^info pid=$c$" "$S/$c.dump" || { ok=no; why="$why trace-$c.ctf is not of pid $c;"; }
		[ "$cc" = 30 ] && [ "$cp" = 0 ] || { ok=no; why="$why child $c: child_site $cc (truth 30), parent_site $cp (truth 0: inherited);"; }
	done
	if [ $ok = yes ]; then pass "${name}_each_child_own_trace_exact"; else fail "${name}_each_child_own_trace_exact" "$why"; fi
}
fork_case fork_no_follow no
fork_case fork_follow yes

# ---------------------------------------------------------------- dlopen
S=$TMP/dlopen
mkdir -p "$S/d"
if ! cc -O2 -g -fPIC -shared "$TOP/tests/plugins/life_plugin.c" -o "$S/libplugalloc.so" 2>"$S/cc.err"; then
	fail dlopen_plugin_built "$(head -c 300 "$S/cc.err")"
else
	"$MT" --rate 1 -o "$S/trace.ctf" -- "$TARGETS/life_dlopen" "$S/d" "$S/libplugalloc.so" 40 \
		>"$S/out" 2>"$S/err" &
	mpid=$!
	if wait_for_line "$S/err" "dlopen: .* probed in .*libplugalloc.so"; then probed=yes; else probed=no; fi
	touch "$S/d/go"
	wait $mpid; mrc=$?
	sed 's/^/# /' "$S/err" | cut -c1-600
	if [ $probed = yes ]; then pass dlopen_plugin_allocator_probed
	else fail dlopen_plugin_allocator_probed "no probe message: $(tail -n 3 "$S/err" | tr '\n' ' ')"; fi
	"$DUMP" "$S/trace.ctf" >"$S/dump" 2>"$S/derr"; drc=$?
	d=$(site_allocs "$S/dump" dl_site); dc=$(site_collects "$S/dump" dl_site); l=$(site_allocs "$S/dump" libc_site)
	echo "# dlopen: dl_site $d allocations ($dc freed), libc_site $l"
	if [ "$mrc" = 0 ] && [ "$drc" = 0 ] && [ "$d" = 40 ] && [ "$dc" = 20 ] && [ "$l" = 40 ]; then
		pass dlopen_allocations_after_dlopen_recorded
	else fail dlopen_allocations_after_dlopen_recorded "memtraced exit $mrc, dump exit $drc, dl_site $d (truth 40), freed $dc (20), libc_site $l (40)"; fi
fi
