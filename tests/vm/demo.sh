#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Demonstration scenario for `make run`: load rmad with kernel messages shown
# on the console, show what it reports, and unload it.
. /lib.sh
echo "rmad demo: creating soft-RoCE device rxe0 on a dummy netdev"
setup_rxe || echo "rmad demo: no rxe0 (the RDMA part will be skipped)"
echo 7 >/proc/sys/kernel/printk
echo "rmad demo: loading rmad.ko"
insmod /modules/rmad.ko demo=1 || exit 1
echo "rmad demo: rmad is loaded:"
grep '^rmad ' /proc/modules
echo "rmad demo: unloading"
rmmod rmad
echo "rmad demo: done"
