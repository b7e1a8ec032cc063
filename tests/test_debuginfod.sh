#!/usr/bin/env bash
# Stripped binaries (BPF; root needed): a stripped copy of tests/targets/sites, its debug file
# served by a local debuginfod (Debian's package, on 127.0.0.1 only). With DEBUGINFOD_URLS the
# trace has the names, files and lines it has with debug info; without, the summary says how
# many frames stayed without a name, and --group line gives function or object+offset rows.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
REPORT=$BIN/memtrace-report
SITES=$TARGETS/sites
for p in "$MT" "$REPORT" "$SITES"; do
	[ -x "$p" ] || { fail debuginfod_built "missing $p (run make)"; exit 0; }
done
if ! command -v debuginfod >/dev/null || ! command -v debuginfod-find >/dev/null; then
	skip debuginfod_server "no debuginfod (make deps installs the debuginfod package)"
	exit 0
fi
if ! bpf_ready; then
	skip debuginfod_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
D=$TMP/dbg
mkdir -p "$D/srv"
cp "$SITES" "$D/sites"
objcopy --only-keep-debug "$D/sites" "$D/srv/sites.debug"
strip -s -o "$D/sites.stripped" "$D/sites"
id=$(readelf -n "$D/sites.stripped" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
port=$((20000 + $$ % 20000))
debuginfod -F "$D/srv" -p "$port" -d "$D/db.sqlite" >"$D/server.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf "$TMP"' EXIT
url=http://127.0.0.1:$port
ready=no
for _ in $(seq 150); do
	rm -rf "$D/probe-cache" # the client remembers a miss: ask anew each time
	DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$D/probe-cache debuginfod-find debuginfo "$id" >/dev/null 2>&1 &&
		{ ready=yes; break; }
	sleep 0.2
done
if [ $ready = yes ]; then pass debuginfod_serves_the_debug_file
else fail debuginfod_serves_the_debug_file "build-id $id not served: $(tail -n 2 "$D/server.log")"; exit 0; fi

# rows of --group line of a trace: the key of each "N. ..." line
# (--no-mmap: which of ld.so's first mappings a run samples varies; this test is about names)
rows() { "$REPORT" --group line --top 0 "$1" 2>/dev/null | awk '/^Top .*allocated/ { t = 1; next } /^Top / { t = 0 } t && /^ *[0-9]+\. / { sub(/.*samples\)  */, ""); print }' | sort; }

"$MT" --rate 1e-3 --no-mmap -o "$D/debug.ctf" -- "$D/sites" run 200 >/dev/null 2>"$D/debug.err"
DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$D/cache \
	"$MT" --rate 1e-3 --no-mmap -o "$D/served.ctf" -- "$D/sites.stripped" run 200 >/dev/null 2>"$D/served.err"
"$MT" --rate 1e-3 --no-mmap -o "$D/bare.ctf" -- "$D/sites.stripped" run 200 >/dev/null 2>"$D/bare.err"
rows "$D/debug.ctf" >"$D/debug.rows"
rows "$D/served.ctf" >"$D/served.rows"
rows "$D/bare.ctf" >"$D/bare.rows"
sites_rows=$(grep -c 'sites\.c:' "$D/debug.rows")
if [ "$sites_rows" -ge 5 ] && [ "$(grep 'sites\.c:' "$D/served.rows")" = "$(grep 'sites\.c:' "$D/debug.rows")" ]; then
	pass debuginfod_lines_as_with_debug_info
else fail debuginfod_lines_as_with_debug_info "with debug info: $(tr '\n' ' ' <"$D/debug.rows"); served: $(tr '\n' ' ' <"$D/served.rows")"; fi
if grep -q 'without a name' "$D/served.err"; then fail debuginfod_no_unnamed_frames "$(tail -n 1 "$D/served.err")"
else pass debuginfod_no_unnamed_frames; fi
if grep -qE '[0-9]+ distinct frames without a name' "$D/bare.err" && ! grep -q 'sites\.c:' "$D/bare.rows" &&
	grep -q 'sites.stripped+0x' "$D/bare.rows" && ! grep -q ':0$' "$D/bare.rows"; then
	pass stripped_without_debuginfod_says_so
else fail stripped_without_debuginfod_says_so "$(tail -n 1 "$D/bare.err" | cut -c1-300); rows: $(head -n 3 "$D/bare.rows" | tr '\n' ' ')"; fi
exit 0
