#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Test scenario: create soft-RoCE device rxe0, load rmad (its KUnit suites run
# inside insmod), hand every rmad suite's KTAP document to the harness, check a
# clean unload, then remove rxe0 and unload rmad with sends outstanding.
. /lib.sh

vm_case setup_rxe0 setup_rxe
vm_case insmod_rmad insmod /modules/rmad.ko
for dir in /sys/kernel/debug/kunit/rmad_*; do
	[ -d "$dir" ] && emit_suite "$(basename "$dir")" >"$RESULTS"
done
vm_case rmmod_rmad rmmod rmad
vm_case no_rmad_after_rmmod sh -c '! grep -q "^rmad " /proc/modules'
emit_vm_suite rmad_vm >"$RESULTS"

# The suites ran once; later loads skip them.
echo "rmad_none_" >/sys/module/kunit/parameters/filter_glob

# The sample client modules: each loads next to rmad, talks to rxe0 through
# rmad's exported API and reports what its handlers saw.
for lang in c rust; do
	vm_case insmod_rmad insmod /modules/rmad.ko
	vm_case insmod_sample insmod "/modules/rmad_sample_$lang.ko"
	vm_case sample_reports_pass sh -c "dmesg | grep -q 'rmad_sample_$lang: PASS'"
	vm_case rmmod_sample rmmod "rmad_sample_$lang"
	vm_case rmmod_rmad rmmod rmad
	emit_vm_suite "rmad_sample_$lang" >"$RESULTS"
done

# Device removal with sends outstanding: every send completes once, flushed.
vm_case removal_insmod_probe insmod /modules/rmad.ko rxe_probe=8
vm_case debugfs_shows_outstanding sh -c 'grep -q "outstanding 8 posted 8" /sys/kernel/debug/rmad/agents'
vm_case removal_rdma_link_delete rdma link delete rxe0
sleep 1
vm_case removal_rmmod rmmod rmad
vm_case removal_each_send_flushed_once probe_flushed 8 1

# Unload with sends outstanding: the same, through rmmod alone.
vm_case unload_setup_rxe0 setup_rxe
vm_case unload_insmod_probe insmod /modules/rmad.ko rxe_probe=8
vm_case unload_rmmod rmmod rmad
vm_case unload_each_send_flushed_once probe_flushed 8 2
# Nothing of rmad may run after it is gone (a late work item would oops here).
sleep 1
vm_case unload_no_rmad_left sh -c '! grep -q "^rmad " /proc/modules'
emit_vm_suite rmad_rxe_removal >"$RESULTS"
