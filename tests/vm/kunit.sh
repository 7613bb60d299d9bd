#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Test scenario: load rmad (its KUnit suites run inside insmod), hand every
# rmad suite's KTAP document to the harness, then check a clean unload.
. /lib.sh

vm_case setup_rxe0 setup_rxe
vm_case insmod_rmad insmod /modules/rmad.ko
for dir in /sys/kernel/debug/kunit/rmad_*; do
	[ -d "$dir" ] && emit_suite "$(basename "$dir")" >"$RESULTS"
done
vm_case rmmod_rmad rmmod rmad
vm_case no_rmad_after_rmmod sh -c '! grep -q "^rmad " /proc/modules'
emit_vm_suite >"$RESULTS"
