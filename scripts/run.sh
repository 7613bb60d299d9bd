#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make run`: boot the VM with rmad loaded and show, on this terminal, what
# rmad is doing (tests/vm/demo.sh). KUnit does not run here; see `make test`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

out="$RMAD_ROOT/build/run"
mkdir -p "$out"
kbuild="$("$RMAD_ROOT/scripts/bootstrap.sh")"
"$RMAD_ROOT/scripts/build-module.sh"
"$RMAD_ROOT/scripts/make-initramfs.sh" "$out/initramfs.cpio.gz" \
	"$RMAD_ROOT/tests/vm/demo.sh" "$RMAD_ROOT/build/module/rmad.ko"
step "VM: booting (software emulation, a few seconds)"
"$RMAD_ROOT/scripts/run-vm.sh" "$kbuild/arch/x86/boot/bzImage" "$out/initramfs.cpio.gz" \
	- "$out/results.log" "${RMAD_VM_TIMEOUT:-600}" quiet kunit.autorun=0
