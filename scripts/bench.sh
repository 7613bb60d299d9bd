#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: boot the VM with rmad loaded with bench=1 and print the
# figures (mean cost of modify, response matching and cancel as the number of
# outstanding sends grows). Figures only; nothing is asserted.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

out="$RMAD_ROOT/build/bench"
mkdir -p "$out"
kbuild="$("$RMAD_ROOT/scripts/bootstrap.sh")"
"$RMAD_ROOT/scripts/build-module.sh"
"$RMAD_ROOT/scripts/make-initramfs.sh" "$out/initramfs.cpio.gz" \
	"$RMAD_ROOT/tests/vm/bench.sh" "$RMAD_ROOT/build/module/rmad.ko"
step "VM: running the benchmark (software emulation: figures are relative)"
"$RMAD_ROOT/scripts/run-vm.sh" "$kbuild/arch/x86/boot/bzImage" "$out/initramfs.cpio.gz" \
	"$out/console.log" "$out/results.log" "${RMAD_VM_TIMEOUT:-1200}" quiet kunit.autorun=0 || true
grep -h 'bench:' "$out/console.log" | sed 's/^\[[^]]*\] //'
