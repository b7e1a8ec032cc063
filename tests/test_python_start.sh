#!/usr/bin/env bash
# A spawned Python program's first second is named (issue 38): with -- CMD on a loaded machine
# the unwinder, which finds the interpreter, opened 0.2-3.2 s after the start while the program
# ran on, and samples meanwhile had no Python frames (20% of a 3.12 program's heap on
# __libc_start_call_main). Now the program waits at its entry point until it is ready. Under
# two busy loops per core, a Python program whose first function allocates for its first
# 100 ms is traced at once with the in-process sampler (the default of -- CMD; with uprobes
# the program is not held at its entry: docs/python.md): every sample taken while Python code
# runs (the eval loop in its native stack) carries its Python frames, and the first function's
# samples are there.
source "$(dirname "$0")/lib/test.sh"

MT=$BIN/memtraced
DUMP=$BIN/memtrace-dump
for f in "$MT" "$DUMP"; do
	[ -x "$f" ] || { fail pystart_built "missing $f (run make)"; exit 0; }
done
if ! bpf_ready; then
	skip pystart_bpf "needs root and /sys/kernel/btf/vmlinux"
	exit 0
fi
[ -x /usr/bin/python3.11 ] || { fail pystart_python "Debian's python3.11 is not installed (make deps)"; exit 0; }
interpreters=(/usr/bin/python3.11)
for v in 3.12 3.13; do
	for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$v.*/bin/python$v; do
		[ -x "$p" ] && { interpreters+=("$p"); break; }
	done
done

cat >"$TMP/first.py" <<'PY'
import time
t0 = time.monotonic()


def first_100ms():
    d = {}
    i = 0
    while time.monotonic() - t0 < 0.1:
        d[str(i)] = bytearray(4096)
        i += 1
    return d


keep = first_100ms()
print("first", len(keep))
PY

# the load: two busy loops per core, for the test's length
loops=()
for _ in $(seq $((2 * $(nproc)))); do
	(while :; do :; done) &
	loops+=($!)
done
trap 'kill "${loops[@]}" 2>/dev/null; rm -rf "$TMP"' EXIT

# "SAMPLES_IN_PYTHON UNNAMED FIRST": samples whose stack shows Python running (the eval loop,
# or a Python frame: the interpreter's start runs frozen modules), those of them without any
# Python frame, those in first_100ms
named() {
	awk '/ alloc id=/ && /bt=[0-9]+: / {
		py = $0 ~ /\.py:[0-9]+:/ || index($0, "<frozen ") > 0
		ev = index($0, "_PyEval_EvalFrameDefault") > 0
		if (py || ev) n++
		if (ev && !py) bad++
		if (index($0, "first_100ms")) f++
	} END { printf "%d %d %d\n", n, bad, f }' "$1"
}

for py in "${interpreters[@]}"; do
	ver=$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
	for m in required; do
		name=py${ver}_$m
		timeout 120 "$MT" --inject=$m --rate 1e-2 --no-mmap -o "$TMP/$name.ctf" -- "$py" "$TMP/first.py" \
			>"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
		"$DUMP" "$TMP/$name.ctf" >"$TMP/$name.dump" 2>/dev/null
		read -r n bad f < <(named "$TMP/$name.dump")
		if grep -q "^first" "$TMP/$name.out" && [ "${f:-0}" -ge 20 ] && [ "${n:-0}" -ge 100 ] && [ "${bad:-1}" = 0 ]; then
			pass "${name}_first_100ms_named"
		else
			fail "${name}_first_100ms_named" "$f samples in first_100ms, $bad of $n samples in Python code without Python frames; $(grep -o 'CPython[^;]*' "$TMP/$name.err") $(grep -m1 -o 'not ready[^;]*' "$TMP/$name.err")"
		fi
	done
done
