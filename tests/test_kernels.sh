#!/usr/bin/env bash
# The kernel matrix (issue 33): memtraced's core checks (tests/vm/core_checks.sh: -- CMD and -p
# with stacks and the report, --match with snapshots, the mapping probes, --follow-forks,
# Python frames, --inject, counts at --rate 1) run inside a qemu VM of each kernel that fleets
# run, on this built tree: Debian 12's own 6.1, the newest 6.12 Debian ships for bookworm, and
# Debian 11's 5.10. This machine's own kernel is the main run (every other test).
#   KERNELS="6.1 6.12 5.10" (the default), a subset, or "none".
# Kernel packages are fetched from Debian by name (tests/vm/fetch_kernel.sh) and kept under
# BUILD/kernels; one that cannot be fetched fails its checks. Each VM's console, the probing
# line and memtraced's messages of each check are kept under BUILD/test-logs/kernels/NAME.
source "$(dirname "$0")/lib/test.sh"

KERNELS=${KERNELS:-6.1 6.12 5.10}
[ "$KERNELS" = none ] && { echo "# KERNELS=none: no kernel VM"; exit 0; }
for f in "$BIN/memtraced" "$TARGETS/count_calls"; do
	[ -x "$f" ] || { fail kernels_built "missing $f (run make)"; exit 0; }
done
for t in qemu-system-x86_64 cpio depmod; do
	command -v $t >/dev/null || { fail kernels_tools "missing $t (make deps installs qemu-system-x86, cpio, kmod)"; exit 0; }
done
[ "$(id -u)" = 0 ] || { skip kernels_root "the VMs' checks trace as root"; exit 0; }
VM=$TOP/tests/vm
for k in $KERNELS; do
	logs=$TOP/$BUILD/test-logs/kernels/$k
	# A retry of this script keeps the earlier attempt's logs (a guest panic's console above all).
	[ -d "$logs" ] && { rm -rf "$logs.previous"; mv "$logs" "$logs.previous"; }
	mkdir -p "$logs"
	if ! kdir=$(bash "$VM/fetch_kernel.sh" "$k" "$TOP/$BUILD/kernels" 2>"$logs/fetch.err"); then
		fail "kernel_${k}_fetched" "$(tail -n 2 "$logs/fetch.err" | tr '\n' ' ')"
		continue
	fi
	start=$(date +%s)
	bash "$VM/boot_kernel.sh" "$kdir" "$logs" "$VM/core_checks.sh" 1500 >/dev/null 2>"$logs/boot.err"
	rc=$?
	echo "# kernel $k ($(basename "$kdir")): VM ran $(( $(date +%s) - start )) s, qemu status $rc"
	grep '^# ' "$logs/checks.txt" 2>/dev/null | sed "s/^# /#   /"
	grep -E '^(PASS|FAIL|SKIP) ' "$logs/checks.txt" 2>/dev/null | sed -E "s/^(PASS|FAIL|SKIP) /\1 kernel_${k}_/"
	if grep -q '^# done' "$logs/checks.txt" 2>/dev/null
	then pass "kernel_${k}_ran"
	else fail "kernel_${k}_ran" "the checks did not finish (qemu $rc): $(tail -n 3 "$logs/console.log" 2>/dev/null | tr '\n' ' ')"; fi
done
