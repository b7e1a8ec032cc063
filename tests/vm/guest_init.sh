#!/bin/sh
# /init of the test initramfs (mkinitrd.sh). Kernel command line:
#   mt.top=DIR      the project's checkout on the host: stays visible, read-only, at that path
#   mt.script=PATH  a script of that checkout, run as root in a chroot of the host's /, as
#                   PATH /results (a writable share); the rest of mt.* goes to it as MT_* vars
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m 2>/dev/null || echo "init: insmod $m failed"; done
top=; script=; ci=; build=build
for a in $(cat /proc/cmdline); do
	case $a in
	mt.top=*) top=${a#mt.top=} ;;
	mt.script=*) script=${a#mt.script=} ;;
	mt.ci=*) ci=${a#mt.ci=} ;;
	mt.build=*) build=${a#mt.build=} ;;
	esac
done
echo "init: kernel $(uname -r)"
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host; then
	echo "init: cannot mount the host root over 9p"; poweroff -f
fi
R=/host
# Writable places over the read-only host root; the checkout stays visible where it is, even
# under /tmp (a CI clone may live there).
mount --bind "$R$top" /mnt
mount -t tmpfs -o size=3g tmpfs $R/tmp
for d in run root var/tmp var/cache var/log; do mount -t tmpfs tmpfs $R/$d; done
mkdir -p "$R$top" && mount --move /mnt "$R$top"
mount -t proc proc $R/proc
mount -t sysfs sys $R/sys
mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/shm $R/dev/pts
ln -sf /proc/self/fd $R/dev/fd
ln -sf /proc/self/fd/0 $R/dev/stdin
ln -sf /proc/self/fd/1 $R/dev/stdout
ln -sf /proc/self/fd/2 $R/dev/stderr
mount -t tmpfs tmpfs $R/dev/shm
mount -t devpts devpts $R/dev/pts 2>/dev/null
mount -t bpf bpf $R/sys/fs/bpf 2>/dev/null
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null
mkdir -p $R/tmp/results
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results $R/tmp/results || echo "init: no results share"
hostname memtraced-vm
echo "init: running $script"
chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root TERM=dumb LANG=C.UTF-8 CI="$ci" TOP="$top" BUILD="$build" /bin/bash "$script" /tmp/results
echo "init: script exited $?"
sync
umount $R/tmp/results 2>/dev/null
poweroff -f
