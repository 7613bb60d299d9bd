#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Demonstration scenario for `make run`: load rmad with kernel messages shown
# on the console, show what it reports, and unload it.
echo 7 >/proc/sys/kernel/printk
echo "rmad demo: loading rmad.ko"
insmod /modules/rmad.ko demo=1 || exit 1
echo "rmad demo: rmad is loaded:"
grep '^rmad ' /proc/modules
echo "rmad demo: unloading"
rmmod rmad
echo "rmad demo: done"
