#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark scenario for `make bench`: load rmad with bench=1 (KUnit off) and
# show the figures it prints.
echo 7 >/proc/sys/kernel/printk
insmod /modules/rmad.ko bench=1 || exit 1
rmmod rmad
