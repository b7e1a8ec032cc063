#!/usr/bin/env bash
# Python frames (issue 25): a CPython 3.11+ process's samples carry its Python frames, walked
# in BPF, named in the parser, spliced into the native stack in place of the eval loop.
# tests/targets/py_frames.py under Debian's python3.11 (the interpreter in the executable) and
# every pyenv CPython 3.11, 3.12 and 3.13 on the machine (in libpython), at --rate 1e-4:
# - each of three functions' bytes (bytes objects, dict copies, json.loads's strings) within
#   10 % of the truth the program prints, their Python chain whole at the right lines, and
#   the C extension's (_json) frames inside json's raw_decode frame;
# - the five lines that allocate most, as the innermost Python frame says, are tracemalloc's
#   five top lines of an untraced run, in the same order.
# Then: 8 threads each in its own function; -p on a running http.server; --python=no and
# --python=only; an interpreter whose debug offsets are damaged and whose symbols are stripped.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
PROG=$TOP/tests/targets/py_frames.py
CHECK="$TOP/tests/lib/py_stacks.py"
for f in "$MT" "$DUMP"; do
	if [ ! -e "$f" ]; then
		fail python_built "missing $f (run make)"
		exit 0
	fi
done
if ! bpf_ready; then
	skip python_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
if [ ! -x /usr/bin/python3.11 ]; then
	skip python_debian "Debian's python3.11 is not installed (make deps)"
	exit 0
fi
# the checker runs under Debian's python: any will do
checker() { /usr/bin/python3.11 "$CHECK" "$@"; }

pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
interpreters=(/usr/bin/python3.11)
for v in 3.11 3.12 3.13; do
	for p in "$pyenv_root"/versions/$v.*/bin/python$v; do
		[ -x "$p" ] && interpreters+=("$p")
	done
done
echo "interpreters: ${interpreters[*]}"

RATE=1e-4
for py in "${interpreters[@]}"; do
	ver=$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
	name=py$ver
	[[ $py == /usr/bin/* ]] && name=debian$ver
	out=$TMP/$name
	timeout 300 "$MT" --rate $RATE -o "$out.ctf" -- "$py" "$PROG" three >"$out.out" 2>"$out.err" </dev/null
	rc=$?
	"$DUMP" "$out.ctf" >"$out.dump" 2>&1
	if [ $rc = 0 ] && grep -q "CPython 3\.[0-9]* ([^)]*): [0-9]* samples with Python frames" "$out.err"; then
		pass "${name}_python_frames"
	else
		fail "${name}_python_frames" "exit $rc: $(grep -o 'CPython[^;]*' "$out.err") $(tail -c 300 "$out.err")"
	fi
	checker "$out.dump" $RATE "$PROG" three >"$out.check"
	for fn in make_bytes make_dicts parse_json; do
		truth=$(awk -v f=$fn '$1 == "truth" && $2 == f {print $3}' "$out.out")
		read -r _ est whole native < <(grep "^$fn " "$out.check")
		if [ -n "$truth" ] && [ -n "$est" ] && awk -v t="$truth" -v e="$est" 'BEGIN {d = e - t; if (d < 0) d = -d; exit !(d <= 0.10 * t)}'; then
			pass "${name}_${fn}_bytes_within_10pct"
		else
			fail "${name}_${fn}_bytes_within_10pct" "estimated ${est:-none}, truth ${truth:-none}"
		fi
		if awk -v w="${whole:-0}" 'BEGIN {exit !(w >= 0.95)}'; then pass "${name}_${fn}_python_chain_whole"
		else fail "${name}_${fn}_python_chain_whole" "only ${whole:-0} of its samples"; fi
	done
	native=$(awk '$1 == "parse_json" {print $4}' "$out.check")
	if awk -v w="${native:-0}" 'BEGIN {exit !(w >= 0.95)}'; then pass "${name}_json_native_frames_inside_raw_decode"
	else fail "${name}_json_native_frames_inside_raw_decode" "only ${native:-0} of its samples: $(grep -m1 parse_json "$out.dump" | cut -c1-400)"; fi

	# tracemalloc's top five lines (untraced) against ours
	"$py" "$PROG" keep tracemalloc | awk -F'\t' '$1 == "top" {print $2}' >"$out.tm"
	timeout 300 "$MT" --rate $RATE -o "$out.keep.ctf" -- "$py" "$PROG" keep >/dev/null 2>"$out.keep.err" </dev/null
	"$DUMP" "$out.keep.ctf" >"$out.keep.dump" 2>&1
	checker "$out.keep.dump" $RATE "$PROG" top | awk -F'\t' '{print $2}' >"$out.ours"
	if [ "$(wc -l <"$out.tm")" = 5 ] && cmp -s "$out.tm" "$out.ours"; then
		pass "${name}_top5_lines_as_tracemalloc"
	else
		fail "${name}_top5_lines_as_tracemalloc" "tracemalloc: $(tr '\n' ' ' <"$out.tm") ours: $(tr '\n' ' ' <"$out.ours")"
	fi
done

# Debian's _json module is stripped: its frames are unnamed, "OBJECT+0xSTART", each the start
# of its function (the .eh_frame_hdr's FDEs), not one name per return address
so=/usr/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so
if [ -e "$so" ] && [ -s "$TMP/debian311.dump" ]; then
	readelf --debug-dump=frames "$so" 2>/dev/null | sed -n 's/.* pc=0*\([0-9a-f]*\)\.\..*/\1/p' | sort -u >"$TMP/json.starts"
	grep -o '_json\.cpython-311-x86_64-linux-gnu\.so+0x[0-9a-f]*' "$TMP/debian311.dump" | sed 's/.*+0x//' | sort -u >"$TMP/json.named"
	if [ -s "$TMP/json.named" ] && [ -s "$TMP/json.starts" ] && [ -z "$(comm -23 "$TMP/json.named" "$TMP/json.starts")" ]
	then pass debian311_unnamed_json_frames_by_function
	else fail debian311_unnamed_json_frames_by_function "names not at a function's start: $(comm -23 "$TMP/json.named" "$TMP/json.starts" | head -5 | tr '\n' ' ')"; fi
else fail debian311_unnamed_json_frames_by_function "no $so or no trace of Debian's python3.11"; fi

# --inject: the in-process sampler's USDT probes carry the Python frames too
# (-p on a program that waits: with -- CMD its first phase could end before the sampler is in)
py=/usr/bin/python3.11
mkfifo "$TMP/inj.in"
"$py" "$PROG" three wait <"$TMP/inj.in" >"$TMP/inj.out" 2>&1 &
prog=$!
exec 7>"$TMP/inj.in"
for _ in $(seq 100); do grep -q ready "$TMP/inj.out" && break; sleep 0.1; done
# (a 32 MiB ring: its records carry deep C stacks, up to 64 KiB each, 1,800 a second; the
# default 4 MiB ring overflowed whenever the daemon stalled 50 ms on a loaded machine)
timeout 300 "$MT" --inject=required --rate $RATE --ring-size 33554432 -p $prog -o "$TMP/inj.ctf" >/dev/null 2>"$TMP/inj.err" &
mt=$!
for _ in $(seq 300); do grep -q "tracing PID $prog" "$TMP/inj.err" && break; sleep 0.1; done
echo go >&7
exec 7>&-
wait $prog
wait $mt
rc=$?
"$DUMP" "$TMP/inj.ctf" >"$TMP/inj.dump" 2>&1
checker "$TMP/inj.dump" $RATE "$PROG" three >"$TMP/inj.check"
truth=$(awk '$1 == "truth" && $2 == "make_bytes" {print $3}' "$TMP/inj.out")
read -r _ est whole _ < <(grep "^make_bytes " "$TMP/inj.check")
if [ $rc = 0 ] && [ -n "$truth" ] && [ -n "$est" ] && awk -v t="$truth" -v e="$est" -v w="$whole" 'BEGIN {d = e - t; if (d < 0) d = -d; exit !(d <= 0.10 * t && w >= 0.95)}'; then
	pass inject_python_frames
else
	fail inject_python_frames "exit $rc: estimated ${est:-none} of ${truth:-none}, whole ${whole:-0}: $(grep -o '[0-9]* sampled\|dropped: [^;]*' "$TMP/inj.err" | tr '\n' ' ') $(grep -o 'CPython[^;]*' "$TMP/inj.err") $(tail -c 300 "$TMP/inj.err")"
fi

# 8 threads, each allocating in its own function
py=/usr/bin/python3.11
timeout 300 "$MT" --rate 1e-3 -o "$TMP/th.ctf" -- "$py" "$PROG" threads 4000 >/dev/null 2>"$TMP/th.err" </dev/null
"$DUMP" "$TMP/th.ctf" >"$TMP/th.dump" 2>&1
read -r _ n bad < <(checker "$TMP/th.dump" 1e-3 "$PROG" threads)
if [ "${n:-0}" -ge 100 ] && [ "${bad:-1}" = 0 ]; then pass threads_innermost_frame_is_their_function
else fail threads_innermost_frame_is_their_function "$bad of $n samples: $(tail -c 300 "$TMP/th.err")"; fi

# a subinterpreter (3.12+, run in the main thread): its frames, not the main interpreter's
py12=$(ls "$pyenv_root"/versions/3.12.*/bin/python3.12 2>/dev/null | head -1)
if [ -n "$py12" ]; then
	timeout 300 "$MT" --rate 1e-3 -o "$TMP/sub.ctf" -- "$py12" "$PROG" subinterp 20000 >/dev/null 2>"$TMP/sub.err" </dev/null
	"$DUMP" "$TMP/sub.ctf" >"$TMP/sub.dump" 2>&1
	read -r _ n bad < <(checker "$TMP/sub.dump" 1e-3 "$PROG" subinterp)
	if [ "${n:-0}" -ge 100 ] && [ "${bad:-1}" = 0 ]; then pass subinterpreter_frames_its_own
	else fail subinterpreter_frames_its_own "$bad of $n samples: $(tail -c 300 "$TMP/sub.err")"; fi
else
	skip subinterpreter_frames_its_own "no pyenv CPython 3.12"
fi

# -p on a running http.server, under a request loop
port=$(free_port)
"$py" "$PROG" serve "$port" >"$TMP/srv.out" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q serving "$TMP/srv.out" && break; sleep 0.1; done
(for _ in $(seq 4000); do curl -s "http://127.0.0.1:$port/" >/dev/null || break; done) &
loop=$!
timeout 60 "$MT" -p $srv --rate 1e-3 -d 3 -o "$TMP/srv.ctf" >/dev/null 2>"$TMP/srv.err"
kill $loop $srv 2>/dev/null
wait $srv 2>/dev/null
"$DUMP" "$TMP/srv.ctf" >"$TMP/srv.dump" 2>&1
hl=$(grep -n "# LINE handler" "$PROG" | cut -d: -f1)
n=$(checker "$TMP/srv.dump" 1e-3 "$PROG" find handle_alloc "$hl")
if [ "${n:-0}" -ge 5 ]; then pass server_handler_function_and_line
else fail server_handler_function_and_line "${n:-0} samples at handle_alloc:$hl: $(tail -c 300 "$TMP/srv.err")"; fi

# --python=no: native frames only; --python=only: no frame of the interpreter's own
for mode in no only; do
	timeout 300 "$MT" --rate 1e-3 --python=$mode -o "$TMP/m$mode.ctf" -- "$py" "$PROG" three >/dev/null 2>"$TMP/m$mode.err" </dev/null
	"$DUMP" "$TMP/m$mode.ctf" >"$TMP/m$mode.dump" 2>&1
done
if ! grep -q 'py_frames.py' "$TMP/mno.dump" && grep -q '_PyEval_EvalFrameDefault\|PyEval_EvalCode' "$TMP/mno.dump"; then
	pass python_no_native_only
else
	fail python_no_native_only "$(grep -c py_frames.py "$TMP/mno.dump") Python frames"
fi
if grep -q 'py_frames.py:[0-9]*:[0-9-]* make_bytes' "$TMP/monly.dump" && ! grep -q ' /usr/bin/python3.11:' "$TMP/monly.dump" && grep -q '_json' "$TMP/monly.dump"; then
	pass python_only_hides_the_interpreter
else
	fail python_only_hides_the_interpreter "$(grep -c ' /usr/bin/python3.11:' "$TMP/monly.dump") interpreter frames"
fi

# An interpreter whose offsets cannot be found: 3.13's libpython with its debug offsets'
# cookie damaged and its symbols stripped. Native frames, and the summary says why.
lib=$(ls "$pyenv_root"/versions/3.13.*/lib/libpython3.13.so.1.0 2>/dev/null | head -1)
if [ -z "$lib" ]; then
	skip python_damaged "no pyenv CPython 3.13 to damage"
	exit 0
fi
mkdir -p "$TMP/lib"
strip --strip-all -o "$TMP/lib/libpython3.13.so.1.0" "$lib"
"$py" - "$TMP/lib/libpython3.13.so.1.0" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
open(p, "wb").write(b.replace(b"xdebugpy", b"xdamaged"))
PY
py13=$(dirname "$lib")/../bin/python3.13
LD_LIBRARY_PATH=$TMP/lib timeout 300 "$MT" --rate 1e-3 -o "$TMP/dmg.ctf" -- "$py13" "$PROG" three >/dev/null 2>"$TMP/dmg.err" </dev/null
rc=$?
"$DUMP" "$TMP/dmg.ctf" >"$TMP/dmg.dump" 2>&1
if [ $rc = 0 ] && grep -q "CPython 3.13 ([^)]*): native frames only, its _Py_DebugOffsets cookie is not there" "$TMP/dmg.err" &&
	grep -q '_PyEval_EvalFrameDefault' "$TMP/dmg.dump" && ! grep -q 'py_frames.py' "$TMP/dmg.dump"; then
	pass python_damaged_native_frames_and_why
else
	fail python_damaged_native_frames_and_why "exit $rc: $(grep -o 'CPython[^;]*' "$TMP/dmg.err") $(tail -c 200 "$TMP/dmg.err")"
fi

# pymalloc arenas (issue 38): the interpreter maps its 1 MiB arenas itself, and the small
# objects in them never reach malloc. Under Python code an arena is charged to the innermost
# Python line (as tracemalloc charges the objects), not to the C line that needed a new one
# (csv's reader: _csv.c): every arena-sized mapping of the script ends in a Python frame (its
# line, or the import machinery's while it compiles a module).
cat >"$TMP/arenas.py" <<'PY'
import csv
import io


def read_rows():
    text = "\n".join("a%d,b%d,c%d" % (i, i, i) for i in range(200000))
    return list(csv.reader(io.StringIO(text)))


rows = read_rows()
print("rows", len(rows))
PY
for py in "${interpreters[@]}"; do
	ver=$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
	[[ $py == /usr/bin/* ]] && ver=debian$ver
	timeout 300 "$MT" --rate 1e-3 -o "$TMP/ar$ver.ctf" -- "$py" "$TMP/arenas.py" >"$TMP/ar$ver.out" 2>"$TMP/ar$ver.err" </dev/null
	"$DUMP" "$TMP/ar$ver.ctf" 2>/dev/null | grep ' alloc ' | grep ' len=131072 ' | grep 'arenas\.py:' >"$TMP/ar$ver.rows"
	n=$(grep -c . "$TMP/ar$ver.rows")
	bad=$(awk -F' \\| ' '$NF !~ /(\.py|^<frozen [^>]*>):[0-9]+:/' "$TMP/ar$ver.rows" | grep -c .)
	if [ "$n" -ge 3 ] && [ "$bad" = 0 ] && grep -q "arenas charged to the Python line" "$TMP/ar$ver.err"
	then pass "py${ver#py}_arenas_charged_to_the_python_line"
	else fail "py${ver#py}_arenas_charged_to_the_python_line" "$bad of $n arena mappings end elsewhere: $(awk -F' \\| ' '$NF !~ /(\.py|^<frozen [^>]*>):[0-9]+:/ { print $NF; exit }' "$TMP/ar$ver.rows")"; fi
done
