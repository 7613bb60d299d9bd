#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark scenario for `make bench`: create rxe0, load rmad with bench=1
# (KUnit off) and show the figures it prints.
. /lib.sh
setup_rxe || echo "bench: no rxe0"
echo 7 >/proc/sys/kernel/printk
insmod /modules/rmad.ko bench=1 || exit 1
rmmod rmad
