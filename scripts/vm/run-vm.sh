#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the test VM under QEMU/TCG (nested KVM does not work on these
# machines) and wait for it to power off, at most TIMEOUT seconds; a guest
# that hangs is killed. The console goes to CONSOLE (a file, or - for this
# terminal) and the results channel (ttyS1) to RESULTS.
#
# Usage: run-vm.sh BZIMAGE INITRAMFS CONSOLE RESULTS TIMEOUT [KERNEL ARGS...]
# The guest has RMAD_VM_MEM megabytes of memory (default 2048) and RMAD_VM_CPUS
# vCPUs (default 2); RMAD_VM_QEMU adds QEMU arguments (the two-node tests' NIC).
# RMAD_VM_DEBUG_ARGS replaces the debugging arguments below (the bench kernel
# boots with none: RMAD_VM_DEBUG_ARGS= ). RMAD_VM_ACCEL replaces "tcg"
# (`make bench BENCH_INSN=1`: tcg,thread=single, one host thread for every vCPU,
# so that its plugin's instruction count is exact).
# Exit status: QEMU's, or 124 when the guest was killed for taking too long.
set -euo pipefail

[ $# -ge 5 ] || {
	echo "usage: $0 BZIMAGE INITRAMFS CONSOLE RESULTS TIMEOUT [ARGS...]" >&2
	exit 2
}
kernel="$1" initrd="$2" console="$3" results="$4" limit="$5"
shift 5

if [ "$console" = "-" ]; then
	serial0=stdio
else
	serial0="file:$console"
fi
: >"$results"

# panic=-1 with -no-reboot turns a kernel panic into an immediate QEMU exit;
# sysctl.kernel.hung_task_panic=1 turns a hung task into one, so that a deadlock ends the
# run at once with its report. slub_debug=U lets kmemleak see small kmalloc
# leaks; kasan_multi_shot keeps KASAN reporting after its first report.
# no5lvl: with -cpu max, TCG offers 5-level paging, and a timer interrupt that
# arrives while the boot CPU is being identified then trips KASAN
# (wild-memory-access in handle_edge_irq) in about one boot in three; with
# 4-level paging it never did in our runs.
debug_args="${RMAD_VM_DEBUG_ARGS-sysctl.kernel.hung_task_panic=1 slub_debug=U kasan_multi_shot}"
# The kernel's own built-in KUnit suites (the kernel crate's among them) do not run at boot:
# they are not rmad's, and one of them queues work on a system workqueue that 7.3 deprecated,
# whose one warning would then hide any that rmad's code caused (rmad_vm_run.kernel_log_clean
# looks for it). rmad's suites match; a later kunit.filter_glob in ARGS replaces this one.
kunit_default="kunit.filter_glob=rmad*"
# shellcheck disable=SC2086 # RMAD_VM_QEMU is a list of QEMU arguments.
exec timeout --kill-after=10 "$limit" \
	qemu-system-x86_64 -accel "${RMAD_VM_ACCEL:-tcg}" -cpu max -smp "${RMAD_VM_CPUS:-2}" -m "${RMAD_VM_MEM:-2048}" \
	-display none -monitor none -no-reboot \
	-serial "$serial0" -serial "file:$results" \
	-kernel "$kernel" -initrd "$initrd" ${RMAD_VM_QEMU:-} \
	-append "console=ttyS0 panic=-1 no5lvl $kunit_default $debug_args $*" </dev/null
