#!/usr/bin/env bash
# mkinitrd.sh KDIR OUT.cpio.gz
#   KDIR: a Debian linux-image package unpacked (fetch_kernel.sh). Builds a busybox initramfs
#   whose /init (guest_init.sh) loads that kernel's own virtio and 9p modules (those not built
#   in, in modprobe's order), mounts this machine's / read-only over 9p and runs a script.
set -euo pipefail
KDIR=$(cd "$1" && pwd); OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
VMLINUZ=$(ls "$KDIR"/boot/vmlinuz-* | head -1)
KVER=${VMLINUZ##*/vmlinuz-}
BB=/bin/busybox
file -L "$BB" | grep -q 'statically linked' || { echo "mkinitrd: need busybox-static" >&2; exit 1; }
[ -e "$KDIR/lib/modules/$KVER/modules.dep" ] || depmod -b "$KDIR" "$KVER"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W"/{bin,dev,proc,sys,host,mnt,mods}
cp "$BB" "$W/bin/busybox"
for a in sh mount umount mkdir insmod cat echo sleep poweroff chroot grep sync uname hostname; do
	ln -s busybox "$W/bin/$a"
done
: >"$W/mods/order"
for m in virtio_pci 9pnet_virtio 9p; do
	modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r ko; do
	b=$(basename "$ko"); b=${b%.xz}; b=${b%.zst}
	case "$ko" in
	*.xz) xz -dc "$ko" >"$W/mods/$b" ;;
	*.zst) zstd -qdc "$ko" >"$W/mods/$b" ;;
	*) cp "$ko" "$W/mods/$b" ;;
	esac
	echo "$b" >>"$W/mods/order"
done
install -m 0755 "$HERE/guest_init.sh" "$W/init"
(cd "$W" && find . | cpio -o -H newc --quiet | gzip -1) >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
