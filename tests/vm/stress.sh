#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The scenario of `make stress`: the stress runs of `make test`, longer
# (RMAD_STRESS_SECONDS on the kernel command line, default 60) and with a
# million create/free cycles, then a leak scan.
. /lib.sh

seconds="${RMAD_STRESS_SECONDS:-60}"
echo clear >/sys/kernel/debug/kmemleak
vm_case setup_rxe0 setup_rxe
vm_case insmod_rmad insmod /modules/test/rmad.ko
stress_runs "$seconds" "${RMAD_HANDLE_CYCLES:-1000000}"
vm_case rmmod_rmad rmmod rmad
vm_case kmemleak_reports_nothing kmemleak_clean
emit_vm_suite rmad_vm >"$RESULTS"
