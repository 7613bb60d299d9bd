#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The scenario of `make test-kcsan`, in the guest of the KCSAN kernel: the
# KUnit suites of the test flavour and the stress runs, for the data-race
# detector to watch. KCSAN's reports fail the run's log check and are listed
# by scripts/test-kcsan.sh.
. /lib.sh

vm_case setup_rxe0 setup_rxe
# rmad_peer's "other source GID", as in tests/vm/test.sh.
vm_case second_ipv6_gid add_ipv6_gid fd00:2::1 rmad0 fd00:0002:0000:0000:0000:0000:0000:0001
vm_case insmod_rmad insmod /modules/test/rmad.ko
for dir in /sys/kernel/debug/kunit/rmad_*; do
	[ -d "$dir" ] && emit_suite "$(basename "$dir")" >"$RESULTS"
done
stress_runs 10 5000
# Batched walks over many sends, racing the posting and cancelling threads.
stress "scale 20000"
emit_stress
# Positive control: KCSAN reports a deliberate race.
vm_case kcsan_sees_a_data_race control race "BUG: KCSAN: data-race"
vm_case rmmod_rmad rmmod rmad
emit_vm_suite rmad_vm >"$RESULTS"
