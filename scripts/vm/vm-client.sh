#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make vm MODULES="a.ko b.ko" [SCRIPT=s.sh]`: boot the test VM with rxe0 up,
# the production rmad.ko and the given client modules loaded, run SCRIPT
# inside if given (a busybox sh script; rdma, ip and tc are there), unload
# everything, and show the console here (kernel messages at level 7). Client
# modules are built against build/module/Module.symvers (KBUILD_EXTRA_SYMBOLS)
# and the cached test kernel, like the samples.
#
# Environment: MODULES, SCRIPT, RMAD_VM_TIMEOUT (default 600 s).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

out="$RMAD_ROOT/build/vm"
rm -rf "$out"
mkdir -p "$out"
kbuild="$("$RMAD_ROOT/scripts/setup/bootstrap.sh")"
"$RMAD_ROOT/scripts/setup/build-module.sh"
files=("$RMAD_OUT/module/rmad.ko=rmad.ko")
order=()
for ko in ${MODULES:-}; do
	[ -f "$ko" ] || die "no such module: $ko"
	files+=("$ko=client/$(basename "$ko")")
	order+=("$(basename "$ko")")
done
printf '%s\n' "${order[@]}" >"$out/order"
files+=("$out/order=client/order")
if [ -n "${SCRIPT:-}" ]; then
	[ -f "$SCRIPT" ] || die "no such script: $SCRIPT"
	cp "$SCRIPT" "$out/script.sh"
	chmod +x "$out/script.sh"
	files+=("$out/script.sh=client/script.sh")
fi
"$RMAD_ROOT/scripts/vm/make-initramfs.sh" "$out/initramfs.cpio.gz" "$RMAD_ROOT/tests/vm/client.sh" \
	"${files[@]}"
step "VM: booting with ${order[*]:-no client module} (software emulation)"
"$RMAD_ROOT/scripts/vm/run-vm.sh" "$kbuild/arch/x86/boot/bzImage" "$out/initramfs.cpio.gz" \
	- "$out/results.log" "${RMAD_VM_TIMEOUT:-600}" quiet
