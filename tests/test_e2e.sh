#!/usr/bin/env bash
# End-to-end stacks of real processes traced with BPF (memtraced -- CMD and -p, read back with
# memtrace-dump): the call chains of tests/targets/e2e_chain.c (file:line of every call site,
# the inlined frame) come out the same for a PIE and a -no-pie build, for a target in another
# mount namespace whose binary exists only there, for a binary whose DWARF was split off into a
# .gnu_debuglink file or a /usr/lib/debug/.build-id file; a stripped binary falls back to its
# .dynsym names; C++ names are demangled; a 12 KiB frame still unwinds fully from the default
# 16 KiB stack copy, a 32 KiB alloca ends in the truncation marker.
# Every sample of interest is an allocation of 4040 bytes (505 words) from chain_leaf().
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
CHAIN=$TARGETS/e2e_chain
CPP=$TARGETS/e2e_cpp
SRC=$TOP/tests/targets/e2e_chain.c

if [ ! -x "$MT" ] || [ ! -x "$DUMP" ] || [ ! -x "$CHAIN" ] || [ ! -x "$CPP" ]; then
	fail e2e_built "missing $MT, $DUMP, $CHAIN or $CPP (run make)"
	exit 0
fi
if ! bpf_ready; then
	skip e2e_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi

# The line of a "CALL:name" marker in a workload source.
line_of() { grep -n "CALL:$2 \*" "$1" | head -n 1 | cut -d: -f1; }
L_LEAF=$(line_of "$SRC" chain_leaf) L_MIDDLE=$(line_of "$SRC" chain_middle)
L_INLINE=$(line_of "$SRC" chain_inline) L_OUTER=$(line_of "$SRC" chain_outer)
CHAIN_TAIL="chain_outer@$L_OUTER&chain_inline@$L_INLINE | chain_middle@$L_MIDDLE | chain_leaf@$L_LEAF"
want_chain() { echo "main@$(line_of "$SRC" "$1") | $CHAIN_TAIL"; }

# signatures DUMP [SOURCE]: one line per 505-word allocation, its frames outermost first, each
# location as "defname@line" (line only for SOURCE, default e2e_chain.c: object paths and libc
# lines vary by build). A last frame in the C++ runtime's operator new (which forwards to the
# probed malloc) is left out.
signatures() {
	awk -v src="${2:-e2e_chain.c}" '$2 == "alloc" && $4 == "len=505" {
		p = index($0, ": "); if (!p) { print "<no frames>"; next }
		n = split(substr($0, p + 2), fr, / \| /); out = ""
		for (i = 1; i <= n; i++) {
			k = split(fr[i], locs, / & /); f = ""
			for (j = 1; j <= k; j++) {
				sp = index(locs[j], " "); head = substr(locs[j], 1, sp - 1); def = substr(locs[j], sp + 1)
				m = split(head, parts, ":")
				if (index(head, src ":")) def = def "@" parts[m - 1]
				f = f (j > 1 ? "&" : "") def
			}
			if (i == n && f ~ /^operator new/) break
			out = out (i > 1 ? " | " : "") f
		}
		print out
	}' "$1"
}

# check_chains NAME DUMP WANT: >= 99% of the 505-word samples (at least MIN) end in WANT and
# begin at _start (the whole stack, nothing truncated).
check_chains() {
	local name=$1 dump=$2 want=$3 src=${4:-e2e_chain.c} min=${MIN_SAMPLES:-20}
	signatures "$dump" "$src" >"$dump.sig"
	local total ok
	total=$(wc -l <"$dump.sig")
	ok=$(awk -v w="$want" '{ n = length(w); if (substr($0, length($0) - n + 1) == w && $0 ~ /^_start \| /) c++ } END { print c + 0 }' "$dump.sig")
	if [ "$total" -ge "$min" ] && [ $((ok * 100)) -ge $((total * 99)) ]; then pass "$name"
	else fail "$name" "$ok of $total samples have the chain '_start | ... | $want'; most common: $(sort "$dump.sig" | uniq -c | sort -rn | head -n 2 | tr '\n' ';')"; fi
}

# trace NAME ARGS...: memtraced ARGS > $TMP/NAME.{ctf,err,dump}; sets rc.
trace() {
	local name=$1; shift
	"$MT" -q -o "$TMP/$name.ctf" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	rc=$?
	"$DUMP" "$TMP/$name.ctf" >"$TMP/$name.dump" 2>"$TMP/$name.dump.err"
}

# wait_ready DIR: the workload's ready file (up to 30 s).
wait_ready() { for _ in $(seq 300); do [ -e "$1/ready" ] && return 0; sleep 0.1; done; return 1; }

CCBIN=${CC:-cc}
cflags=(-O2 -g -fomit-frame-pointer "$SRC")

# ---------------------------------------------------------------- PIE and -no-pie, -- CMD
trace pie --rate 1e-2 -- "$CHAIN" run 3000
check_chains pie_cmd_full_chain "$TMP/pie.dump" "$(want_chain main_run)"

if "$CCBIN" "${cflags[@]}" -no-pie -o "$TMP/e2e_chain_nopie" 2>"$TMP/cc.err" &&
	readelf -h "$TMP/e2e_chain_nopie" | grep -q 'Type: *EXEC'; then
	trace nopie --rate 1e-2 -- "$TMP/e2e_chain_nopie" run 3000
	check_chains nopie_cmd_full_chain "$TMP/nopie.dump" "$(want_chain main_run)"
	if [ -s "$TMP/pie.dump.sig" ] && cmp -s <(sort -u "$TMP/pie.dump.sig") <(sort -u "$TMP/nopie.dump.sig"); then
		pass pie_nopie_same_chains
	else fail pie_nopie_same_chains "$(diff <(sort -u "$TMP/pie.dump.sig") <(sort -u "$TMP/nopie.dump.sig") | head -n 4 | tr '\n' ';')"; fi

	# -no-pie attached with -p
	mkdir -p "$TMP/npw"
	"$TMP/e2e_chain_nopie" wait "$TMP/npw" >/dev/null & wpid=$!
	if wait_ready "$TMP/npw"; then
		trace nopie_p -p $wpid --rate 1e-2 --duration 2
		check_chains nopie_pid_full_chain "$TMP/nopie_p.dump" "$(want_chain main_wait)"
	else fail nopie_pid_full_chain "the workload never got ready"; fi
	touch "$TMP/npw/stop"; wait $wpid
else
	fail nopie_built "$CCBIN -no-pie: $(tail -n 2 "$TMP/cc.err" | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- another mount namespace
# The binary exists only in the target's namespace: a tmpfs over $TMP/nsroot there, empty here.
if command -v unshare >/dev/null; then
	mkdir -p "$TMP/nsroot" "$TMP/nsw"
	unshare -m --propagation private sh -c 'mount -t tmpfs e2e "$1/nsroot" && mkdir "$1/nsroot/bin" &&
		cp "$2" "$1/nsroot/bin/e2e_chain" && exec "$1/nsroot/bin/e2e_chain" wait "$1/nsw"' \
		sh "$TMP" "$CHAIN" >/dev/null 2>"$TMP/ns.sh.err" & nspid=$!
	if wait_ready "$TMP/nsw"; then
		tpid=$(pgrep -f "^$TMP/nsroot/bin/e2e_chain" | head -n 1)
		if [ -n "$tpid" ] && [ ! -e "$TMP/nsroot/bin/e2e_chain" ] &&
			grep -q "$TMP/nsroot/bin/e2e_chain" "/proc/$tpid/maps"; then
			pass mntns_binary_only_in_target_namespace
			trace mntns -p "$tpid" --rate 1e-2 --duration 2
			check_chains mntns_pid_full_chain "$TMP/mntns.dump" "$(want_chain main_wait)"
		else
			fail mntns_binary_only_in_target_namespace "pid '$tpid', path visible here or not mapped"
		fi
	else
		fail mntns_binary_only_in_target_namespace "the workload never got ready: $(head -c 300 "$TMP/ns.sh.err")"
	fi
	touch "$TMP/nsw/stop"; wait $nspid
else
	skip mntns_pid_full_chain "unshare (util-linux) missing"
fi

# ---------------------------------------------------------------- split debug info
# .gnu_debuglink: the DWARF in e2e_chain.debug next to the stripped binary.
mkdir -p "$TMP/dl"
if objcopy --only-keep-debug "$CHAIN" "$TMP/dl/e2e_chain.debug" &&
	objcopy --strip-debug --add-gnu-debuglink="$TMP/dl/e2e_chain.debug" "$CHAIN" "$TMP/dl/e2e_chain" &&
	! readelf -S "$TMP/dl/e2e_chain" | grep -q debug_info; then
	trace debuglink --rate 1e-2 -- "$TMP/dl/e2e_chain" run 3000
	check_chains debuglink_full_chain "$TMP/debuglink.dump" "$(want_chain main_run)"
else
	fail debuglink_full_chain "objcopy failed"
fi

# build-id: the DWARF in /usr/lib/debug/.build-id/xx/yyyy.debug (removed at the end).
bid=$(readelf -n "$CHAIN" | awk '/Build ID:/ { print $3 }')
mkdir -p "$TMP/bid"
if [ -n "$bid" ] && objcopy --strip-debug "$CHAIN" "$TMP/bid/e2e_chain" &&
	! readelf -S "$TMP/bid/e2e_chain" | grep -q -e debug_info -e gnu_debuglink; then
	bid_dir=/usr/lib/debug/.build-id/${bid:0:2}
	bid_file=$bid_dir/${bid:2}.debug
	if [ -e "$bid_file" ]; then bid_keep=yes; else bid_keep=no; fi
	trap '[ "$bid_keep" = no ] && rm -f "$bid_file" && rmdir "$bid_dir" 2>/dev/null; rm -rf "$TMP"' EXIT
	if mkdir -p "$bid_dir" && objcopy --only-keep-debug "$CHAIN" "$bid_file"; then
		trace buildid --rate 1e-2 -- "$TMP/bid/e2e_chain" run 3000
		check_chains buildid_full_chain "$TMP/buildid.dump" "$(want_chain main_run)"
	else
		fail buildid_full_chain "cannot write $bid_file"
	fi
	[ "$bid_keep" = no ] && rm -f "$bid_file" && rmdir "$bid_dir" 2>/dev/null
else
	fail buildid_full_chain "no build-id in $CHAIN or objcopy failed"
fi

# Fully stripped, symbols exported (-rdynamic): frames named from .dynsym, line 0; the inlined
# function is gone (no DWARF), its caller chain_outer stays.
if "$CCBIN" "${cflags[@]}" -rdynamic -o "$TMP/e2e_chain_dyn" 2>"$TMP/cc.err" &&
	strip --strip-all "$TMP/e2e_chain_dyn" && ! readelf -S "$TMP/e2e_chain_dyn" | grep -q symtab; then
	trace dynsym --rate 1e-2 -- "$TMP/e2e_chain_dyn" run 3000
	grep ' len=505 ' "$TMP/dynsym.dump" >"$TMP/dynsym.505"
	total=$(wc -l <"$TMP/dynsym.505")
	ok=$(grep -c -E "e2e_chain_dyn:0:0-0 main \| [^ ]*e2e_chain_dyn:0:0-0 chain_outer \| [^ ]*e2e_chain_dyn:0:0-0 chain_middle \| [^ ]*e2e_chain_dyn:0:0-0 chain_leaf$" "$TMP/dynsym.505")
	if [ "$total" -ge 20 ] && [ $((ok * 100)) -ge $((total * 99)) ]; then pass stripped_dynsym_names
	else fail stripped_dynsym_names "$ok of $total samples named from .dynsym; e.g. $(head -n 1 "$TMP/dynsym.505" | cut -c 1-400)"; fi
else
	fail stripped_dynsym_names "$CCBIN -rdynamic or strip failed: $(tail -n 2 "$TMP/cc.err" | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- C++: demangled names
CPPSRC=$TOP/tests/targets/e2e_cpp.cc
trace cpp --rate 1e-2 -- "$CPP" 3000
check_chains cpp_demangled_chain "$TMP/cpp.dump" "main::{lambda(int)#1}::operator()(int) const@$(line_of "$CPPSRC" lambda) | geo::Grid<double>::operator+=(int)@$(line_of "$CPPSRC" operator+=) | geo::Grid<double>::grow(int)@$(line_of "$CPPSRC" grow)" e2e_cpp.cc
mangled=$(grep ' len=505 ' "$TMP/cpp.dump" | grep -c -E ' _Z[A-Za-z0-9_]+( |$)')
if [ "$mangled" = 0 ] && grep -q ' len=505 ' "$TMP/cpp.dump"; then pass cpp_no_mangled_names
else fail cpp_no_mangled_names "$mangled samples with mangled names"; fi

# ---------------------------------------------------------------- large frames
# 12 KiB of locals on the path: the default 16 KiB copy still holds the whole stack.
trace bigframe --rate 1e-2 -- "$CHAIN" bigframe 3000
L_BIG=$(line_of "$SRC" big_frame)
check_chains bigframe_12k_full_chain "$TMP/bigframe.dump" "main@$(line_of "$SRC" main_bigframe) | big_frame@$L_BIG | chain_leaf@$L_LEAF"
# 32 KiB alloca: by default (64 KiB) the whole stack is there; with a 16 KiB copy, the copy ends
# inside it and the stack ends in the truncation marker.
trace alloca_default --rate 1e-2 -- "$CHAIN" alloca 3000
check_chains alloca_32k_full_chain_by_default "$TMP/alloca_default.dump" "main@$(line_of "$SRC" main_alloca) | alloca_frame@$(line_of "$SRC" alloca_frame) | chain_leaf@$L_LEAF"
trace alloca --rate 1e-2 --stack-bytes 16384 -- "$CHAIN" alloca 3000
signatures "$TMP/alloca.dump" >"$TMP/alloca.sig"
total=$(wc -l <"$TMP/alloca.sig")
want="[stack truncated at 16384 bytes] | alloca_frame@$(line_of "$SRC" alloca_frame) | chain_leaf@$L_LEAF"
ok=$(grep -c -x -F "$want" "$TMP/alloca.sig")
if [ "$total" -ge 20 ] && [ "$ok" = "$total" ] && grep -q '<truncated>:0:0-0 \[stack truncated' "$TMP/alloca.dump"; then
	pass alloca_32k_truncation_marker
else fail alloca_32k_truncation_marker "$ok of $total samples are '$want'; most common: $(sort "$TMP/alloca.sig" | uniq -c | sort -rn | head -n 2 | tr '\n' ';')"; fi
if grep -q "truncated" "$TMP/alloca.err"; then pass alloca_truncation_in_summary
else fail alloca_truncation_in_summary "$(tail -n 1 "$TMP/alloca.err")"; fi

# memtraced's stderr of every run above: no sanitizer report (SANITIZE=1 builds)
reports=$(grep -l -E "AddressSanitizer|LeakSanitizer|runtime error:" "$TMP"/*.err 2>/dev/null | tr '\n' ' ')
if [ -z "$reports" ]; then pass e2e_no_sanitizer_reports
else fail e2e_no_sanitizer_reports "in $reports"; fi

# ---------------------------------------------------------------- fixed bugs (regressions)
# -p: samples taken between the final drain and the detach were lost without being counted
# (fixed: session_finish detaches the probes before the final drain and the stats). At rate 1 each "sampled"
# allocation must be a record in the trace: sampled == written == allocations in the trace.
mkdir -p "$TMP/fast"
"$CHAIN" fast "$TMP/fast" >/dev/null & fpid=$!
if wait_ready "$TMP/fast"; then
	lost_runs=""
	for k in 1 2 3 4 5; do
		trace fast$k -p $fpid --rate 1 --duration 1
		read -r sampled written < <(sed -n 's/.* \([0-9]*\) sampled, \([0-9]*\) records written.*/\1 \2/p' "$TMP/fast$k.err")
		in_trace=$(grep -c ' alloc id=' "$TMP/fast$k.dump")
		if [ -z "$sampled" ] || [ "$sampled" != "$written" ] || [ "$written" != "$in_trace" ]; then
			lost_runs="$lost_runs run $k: ${sampled:-?} sampled, ${written:-?} written, $in_trace in the trace;"
		fi
	done
	if [ -z "$lost_runs" ]; then pass pid_final_samples_all_written
	else fail pid_final_samples_all_written "samples lost uncounted at the detach:$lost_runs"; fi
else fail pid_final_samples_all_written "the workload never got ready"; fi
touch "$TMP/fast/stop"; wait $fpid

# -- CMD of a program that lives a few milliseconds: its stacks must still be unwound (the
# mappings are gone once it has exited and been reaped; fixed: the command is held at its
# ptrace exit-stop until its records are read).
trace short --rate 1 -- "$CHAIN" run 3
MIN_SAMPLES=3 check_chains short_cmd_has_stacks "$TMP/short.dump" "$(want_chain main_run)"
exit 0
