#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the VM with rmad and run one scenario script of tests/vm/ with KUnit
# off, for `make run` and `make bench` (the test flavour of rmad.ko, which
# holds both), on the kernel RMAD_KERNEL names (default test). Sets everything
# up first.
#
# Usage: vm-scenario.sh NAME CONSOLE
#   NAME     the scenario (tests/vm/NAME.sh); outputs go to build/NAME/
#   CONSOLE  - to show the console here, or a file name under build/NAME/
# RMAD_VM_ARGS: more kernel arguments; NAME=VALUE ones reach the scenario as
# environment variables (the kernel hands them to /init).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

name="$1"
out="$RMAD_ROOT/build/$name"
console="$2"
[ "$console" = "-" ] || console="$out/$console"
mkdir -p "$out"
kbuild="$("$RMAD_ROOT/scripts/setup/bootstrap.sh")"
"$RMAD_ROOT/scripts/setup/build-module.sh"
# The test flavour: it holds the demonstration and the benchmark.
"$RMAD_ROOT/scripts/vm/make-initramfs.sh" "$out/initramfs.cpio.gz" \
	"$RMAD_ROOT/tests/vm/$name.sh" "$RMAD_OUT/module-test/rmad.ko=rmad.ko"
step "VM: booting (software emulation)"
# shellcheck disable=SC2086 # RMAD_VM_ARGS is a list of kernel arguments.
"$RMAD_ROOT/scripts/vm/run-vm.sh" "$kbuild/arch/x86/boot/bzImage" "$out/initramfs.cpio.gz" \
	"$console" "$out/results.log" "${RMAD_VM_TIMEOUT:-1200}" quiet kunit.autorun=0 \
	${RMAD_VM_ARGS:-}
