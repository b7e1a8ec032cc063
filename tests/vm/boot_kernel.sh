#!/usr/bin/env bash
# boot_kernel.sh KDIR OUTDIR SCRIPT [TIMEOUT_S]
#   Boots the kernel unpacked in KDIR (fetch_kernel.sh) under qemu (TCG: no KVM on the machines
#   this runs on) with this machine's / read-only over 9p, runs SCRIPT (a file of this checkout)
#   inside as root with OUTDIR as a writable share, and powers off. OUTDIR gets console.log.
#   Env: VM_SMP (2), VM_MEM (4G).
set -euo pipefail
KDIR=$(cd "$1" && pwd); OUT=$2; SCRIPT=$(readlink -f "$3"); TMO=${4:-1200}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
case "$SCRIPT" in "$TOP"/*) ;; *) echo "boot_kernel: $SCRIPT is not in $TOP" >&2; exit 2 ;; esac
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
VMLINUZ=$(ls "$KDIR"/boot/vmlinuz-* | head -1)
INITRD=$KDIR/initrd.cpio.gz
[ "$INITRD" -nt "$HERE/guest_init.sh" ] && [ "$INITRD" -nt "$HERE/mkinitrd.sh" ] ||
	bash "$HERE/mkinitrd.sh" "$KDIR" "$INITRD"
APPEND="console=ttyS0 panic=-1 quiet loglevel=4 mt.top=$TOP mt.script=$SCRIPT mt.ci=${CI:-} mt.build=${BUILD:-build}"
rc=0
# One host thread runs every vCPU (thread=single). With a thread per vCPU (thread=multi), a
# 6.12 guest died about once in ten runs with "Oops: int3" in __schedule, right as a tracepoint
# or perf event turned a static key on: the kernel patches its own text through an int3 and
# syncs the other CPUs with an IPI, and a vCPU ran a stale translation of the int3 after the
# patch was done. The guest keeps 2 CPUs (SMP code paths run), at about the same speed here.
timeout --foreground -k 10 "$TMO" qemu-system-x86_64 -accel tcg,thread=single -cpu max \
	-m "${VM_MEM:-4G}" -smp "${VM_SMP:-2}" -nographic -no-reboot \
	-kernel "$VMLINUZ" -initrd "$INITRD" -append "$APPEND" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$OUT",mount_tag=results,security_model=none,multidevs=remap \
	-nic none </dev/null 2>&1 | tr -d '\r' >"$OUT/console.log" || rc=$?
exit "$rc"
