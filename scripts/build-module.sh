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
	# The sample client modules, linked against rmad's exported symbols.
	for s in c rust; do
		mkdir -p "$RMAD_ROOT/build/samples/$s"
		LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib" \
			make -C "$kbuild" M="$RMAD_ROOT/samples/$s" MO="$RMAD_ROOT/build/samples/$s" \
			KBUILD_EXTRA_SYMBOLS="$out/Module.symvers" "${vars[@]}" modules >&2
	done
	step "samples: build/samples/c/rmad_sample_c.ko build/samples/rust/rmad_sample_rust.ko"
fi
step "module: $out/rmad.ko"
