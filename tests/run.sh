#!/usr/bin/env bash
# Runs every test and ends with the line "N passed, N failed, N skipped".
#
# Protocol: every test program (tests/unit binaries, tests/test_*.sh scripts) prints one line per
# check: "PASS name", "FAIL name: why" or "SKIP name: why". A program that exits non-zero
# without printing a FAIL line counts as one failure (a crash must never pass silently).
# TESTS=pattern runs only the programs whose name matches the pattern.
set -u
BUILD=${1:-build}
export BUILD
cd "$(dirname "$0")/.." || exit 2
TOP=$(pwd)
export TOP
LOG_DIR=$TOP/$BUILD/test-logs
mkdir -p "$LOG_DIR"
pattern=${TESTS:-}

pass=0 fail=0 skip=0
run_one() {
	local name=$1; shift
	[ -n "$pattern" ] && [[ "$name" != *$pattern* ]] && return
	local log=$LOG_DIR/$name.log
	mkdir -p "$(dirname "$log")" # unit tests log into unit/
	echo "== $name"
	"$@" >"$log" 2>&1
	local rc=$?
	local p f s
	p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
	# A BPF test program that fails is run once more: some end-to-end checks race the target's
	# start-up on this shared 2-CPU machine (known flakes, listed in the closing notes). The
	# first run's log is kept and the retry is announced, so a flake is seen, never hidden.
	if { [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; } && [ -z "${NO_RETRY:-}" ] && [ -z "${retried:-}" ]; then
		cp "$log" "$log.first"
		echo "   RETRY $name: failed once ($f failing checks, status $rc; first log: $log.first)"
		grep '^FAIL ' "$log" | sed 's/^/      first run: /' | cut -c1-300
		retried=1 run_one "$name" "$@"
		return
	fi
	grep -E '^(PASS|FAIL|SKIP) ' "$log" | sed 's/^/   /'
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "   FAIL $name: exited with status $rc (log: $log)"; tail -n 5 "$log" | sed 's/^/      /'
		f=1
	fi
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
}

for t in "$BUILD"/tests/unit/test_*; do
	[ -x "$t" ] || continue
	run_one "unit/$(basename "$t")" "$t"
done
for t in tests/test_*.sh; do
	[ -f "$t" ] || continue
	run_one "$(basename "$t" .sh)" bash "$t"
done

echo
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
