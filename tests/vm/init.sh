#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# /init of rmad's test VM: mount the pseudo file systems, run /scenario.sh,
# report its exit code on the results channel and power off. The results
# channel is the second serial port (ttyS1), kept apart from the console so
# that kernel messages never interleave with what the harness parses.
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox mount -t debugfs debugfs /sys/kernel/debug
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export RESULTS=/dev/ttyS1

# InfiniBand is built as modules (tests/vm/kernel.config): load ib_core, which rmad imports,
# and the upper layers a kernel with InfiniBand built in would have running, before the
# scenario. Node a of a VM pair runs the kernel's connection manager on rmad
# (tests/vm/cm.sh), which takes ib_cm's place: there nothing loads ib_cm or the
# modules that would pull it in (rdma_cm, rdma_ucm), and the scenario loads them itself.
mods="ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm"
[ "${RMAD_NODE:-}" != a ] || mods="ib_core ib_uverbs ib_umad iw_cm"
for m in $mods; do
	modprobe "$m" || echo "init: modprobe $m failed"
done

/scenario.sh
rc=$?

# The whole kernel log goes to the harness too, which fails the run on any
# warning, BUG, oops or lockdep report.
{
	echo "RMAD-DMESG-BEGIN"
	dmesg
	echo "RMAD-DMESG-END"
	echo "RMAD-VM-DONE rc=$rc"
} >"$RESULTS"
sync
poweroff -f
