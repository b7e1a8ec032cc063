# Helpers for shell tests (sourced). Each check prints one PASS/FAIL/SKIP line (see tests/run.sh).
# In CI (CI=true) a test that cannot run is a failure, not a skip.
set -u
TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-build}
BIN=$TOP/$BUILD/bin
TARGETS=$TOP/$BUILD/tests/targets
DATA=$TOP/tests/data
# -p and -- CMD trace through the in-process sampler by default (issue 34); the suite's checks
# of the uprobes mode run with uprobes as the default, as they were written, and the checks of
# the sampler ask for it (--inject). tests/test_default_mode.sh checks the real default.
export MEMTRACED_INJECT=off
TMP=$(mktemp -d /tmp/memtraced-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; }
skip() {
	if [ "${CI:-}" = true ]; then echo "FAIL $1: cannot run (in CI this is a failure): ${2:-}"
	else echo "SKIP $1: ${2:-}"; fi
}
# check NAME CMD...: PASS if CMD succeeds, else FAIL with its last output lines.
check() {
	local name=$1; shift
	local out
	if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"; fi
}
# Can this machine run BPF tests? (root, BTF, bpf syscall)
bpf_ready() {
	[ "$(id -u)" = 0 ] && [ -r /sys/kernel/btf/vmlinux ]
}
# wait_file FILE [TENTHS]: until FILE exists (default 60 s); non-zero on timeout
wait_file() {
	local i
	for ((i = 0; i < ${2:-600}; i++)); do [ -e "$1" ] && return 0; sleep 0.1; done
	return 1
}
# free_port: a TCP port of 127.0.0.1 that nothing listens on now (for --listen, Prometheus)
free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# parser_of PID: the pid of memtraced PID's unprivileged parser (its child running as nobody)
parser_of() {
	local c
	for c in $(ps -o pid= --ppid "$1"); do
		[ "$(awk '/^Uid:/ { print $2 }' "/proc/$c/status" 2>/dev/null)" = 65534 ] && { echo "$c"; return 0; }
	done
	return 1
}
# rss_kb PID: its resident memory (VmRSS) in kB
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
