#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make modules_install`: build the production rmad.ko (scripts/setup/build-module.sh)
# and install it with the kernel's modules_install into
# INSTALL_MOD_PATH/lib/modules/<kernel release>/updates/ (INSTALL_MOD_PATH
# empty: the running system), running depmod. The kernel is KDIR, or the
# running kernel's build tree when it is Rust-enabled, or else the cached test
# kernel, as for `make module`.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

"$RMAD_ROOT/scripts/setup/build-module.sh"
args=(M="$RMAD_ROOT" MO="$RMAD_OUT/module" INSTALL_MOD_PATH="${INSTALL_MOD_PATH:-}")
if user_kdir; then
	make -C "$KDIR" "${USER_FLAGS[@]}" "${args[@]}" modules_install
else
	mapfile -t vars < <(kernel_make_vars)
	make -C "$("$RMAD_ROOT/scripts/setup/bootstrap.sh")" "${vars[@]}" "${args[@]}" modules_install
fi
