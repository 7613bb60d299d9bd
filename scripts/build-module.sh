#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build rmad.ko into build/module/.
#
# Without KDIR, against the cached test kernel (bootstrapping it if needed),
# with exactly the toolchain the kernel was built with. With KDIR set, against
# that Rust-enabled kernel build tree, the way any out-of-tree module builds:
# pass the same LLVM=/RUSTC= settings that tree was built with in KMAKEFLAGS.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

out="$RMAD_ROOT/build/module"
mkdir -p "$out"

if [ -n "${KDIR:-}" ]; then
	step "module: building against $KDIR"
	# shellcheck disable=SC2086 # KMAKEFLAGS is a list of make arguments.
	make -C "$KDIR" M="$RMAD_ROOT" MO="$out" ${KMAKEFLAGS:-} modules
else
	kbuild="$("$(dirname "$0")/bootstrap.sh")"
	mapfile -t vars < <(kernel_make_vars)
	step "module: building against the cached kernel"
	LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib" \
		make -C "$kbuild" M="$RMAD_ROOT" MO="$out" "${vars[@]}" modules >&2
fi
step "module: $out/rmad.ko"
