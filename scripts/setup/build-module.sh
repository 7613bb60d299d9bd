#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build rmad.ko.
#
# Without KDIR, against the cached test kernel (RMAD_KERNEL; bootstrapping it
# if needed),
# with exactly the toolchain the kernel was built with: the production module
# into build/module/, the test flavour (KUnit suites, loopback fabric, demo,
# bench, stress; Kbuild RMAD_TEST=1) into build/module-test/, and the sample
# client modules, linked against the production module's symbols, into
# build/samples/. With KDIR set, only the production module, against that
# Rust-enabled kernel build tree, the way any out-of-tree module builds, with
# the LLVM=/RUSTC= settings that tree was built with: KMAKEFLAGS if given,
# otherwise read from the tree (scripts/setup/kdir-flags.sh).
#
# RMAD_DEFAULT_KDIR (set by `make module` to the running kernel's build tree)
# is used as KDIR when KDIR is not set and that tree is Rust-enabled.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

out="$RMAD_OUT/module"
out_test="$RMAD_OUT/module-test"
mkdir -p "$out" "$out_test"

if user_kdir; then
	step "module: building against $KDIR (${USER_FLAGS[*]})"
	make -C "$KDIR" M="$RMAD_ROOT" MO="$out" "${USER_FLAGS[@]}" modules
	step "module: $out/rmad.ko"
	exit 0
fi

kbuild="$("$(dirname "$0")/bootstrap.sh")"
mapfile -t vars < <(kernel_make_vars)
kmake() {
	LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib" make -C "$kbuild" "${vars[@]}" "$@" >&2
}
step "module: building the production module against the cached kernel"
kmake M="$RMAD_ROOT" MO="$out" modules
step "module: building the test flavour"
kmake M="$RMAD_ROOT" MO="$out_test" RMAD_TEST=1 modules
# The sample client modules, linked against the production module's symbols.
for s in c rust template; do
	mkdir -p "$RMAD_OUT/samples/$s"
	kmake M="$RMAD_ROOT/samples/$s" MO="$RMAD_OUT/samples/$s" \
		KBUILD_EXTRA_SYMBOLS="$out/Module.symvers" modules
done
# The test clients of tests/clients/ (make test loads them next to the production module).
for c in hrtimer two_hca rust_drop cm; do
	mkdir -p "$RMAD_OUT/clients/$c"
	kmake M="$RMAD_ROOT/tests/clients/$c" MO="$RMAD_OUT/clients/$c" \
		KBUILD_EXTRA_SYMBOLS="$out/Module.symvers" modules
done
step "module: $out/rmad.ko (production), $out_test/rmad.ko (test flavour)"
step "samples: $RMAD_OUT/samples/{c/rmad_sample_c.ko,rust/rmad_sample_rust.ko,template/rmad_client.ko}"
step "test clients: $RMAD_OUT/clients/{hrtimer/rmad_hrtimer_client.ko,two_hca/rmad_two_hca_client.ko,rust_drop/rmad_rust_drop_client.ko,cm/rmad_cm.ko}"
