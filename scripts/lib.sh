# SPDX-License-Identifier: GPL-2.0
#
# Shared settings for rmad's scripts: the cache folder, the pinned versions and
# a few helpers. Sourced, never run.

# Heavy outputs live outside the repository so that a fresh clone reuses them.
RMAD_CACHE="${RMAD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rmad}"
RMAD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The Rust toolchain the kernel is built with; rust-src must match it exactly.
RUST_VERSION="1.95.0"

# Debian trixie-backports packages that provide the kernel source and the
# Rust library source. Both are pinned and checked against their SHA-256.
LINUX_SRC_PKG="linux-source-7.3"
LINUX_SRC_VERSION="7.3.4-1~bpo13+1"
LINUX_SRC_SHA256="703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3"
RUST_SRC_PKG="rust-src"
RUST_SRC_VERSION="1.95.0+dfsg1-2~bpo13+1"
RUST_SRC_SHA256="7b76db5b880a77f9e52975d2baa6209d2f76d2c9c2789515c3088cb960e2c83b"

BINDGEN_VERSION="0.73.2"
LLVM_SUFFIX="-19"

# Where each piece ends up.
RMAD_SRC_DIR="$RMAD_CACHE/src"
LINUX_TREE="$RMAD_SRC_DIR/linux-${LINUX_SRC_VERSION%%-*}"
RUST_LIB_SRC="$RMAD_SRC_DIR/rust-src-$RUST_VERSION/usr/lib/rustlib/src/rust/library"
BINDGEN_ROOT="$RMAD_CACHE/bindgen-$BINDGEN_VERSION"

# Which test kernel to build and boot (scripts/setup/build-kernel.sh): "test" (KASAN,
# kmemleak, lockdep, hang detectors, failslab) or "kcsan". Module builds for a
# kernel other than "test" go to build/<kernel>/ so both can coexist.
RMAD_KERNEL="${RMAD_KERNEL:-test}"
if [ "$RMAD_KERNEL" = test ]; then
	RMAD_OUT="$RMAD_ROOT/build"
else
	RMAD_OUT="$RMAD_ROOT/build/$RMAD_KERNEL"
fi

# Print a step message on stderr, so stdout stays for results.
step() {
	printf '==> %s\n' "$*" >&2
}

# Print an error and exit.
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# Locate rustup even when CI's reduced environment leaves ~/.cargo/bin off PATH.
find_rustup() {
	local c
	for c in "$(command -v rustup 2>/dev/null || true)" \
		"${CARGO_HOME:-$HOME/.cargo}/bin/rustup"; do
		if [ -n "$c" ] && [ -x "$c" ]; then
			printf '%s\n' "$c"
			return 0
		fi
	done
	die "rustup not found (looked on PATH and in ${CARGO_HOME:-$HOME/.cargo}/bin)"
}

# Absolute path of a tool from the pinned Rust toolchain.
rust_tool() {
	"$(find_rustup)" which --toolchain "$RUST_VERSION" "$1"
}

# The make variables that every kernel and module build must share.
kernel_make_vars() {
	printf '%s\n' \
		"ARCH=x86_64" \
		"LLVM=$LLVM_SUFFIX" \
		"RUSTC=$(rust_tool rustc)" \
		"RUSTDOC=$(rust_tool rustdoc)" \
		"RUSTFMT=$(rust_tool rustfmt)" \
		"CLIPPY_DRIVER=$(rust_tool clippy-driver)" \
		"BINDGEN=$BINDGEN_ROOT/bin/bindgen" \
		"RUST_LIB_SRC=$RUST_LIB_SRC"
}

# vm_prepare OUT SCENARIO: what a VM run needs: the kernel (bootstrap; KBUILD is
# set to its build tree), the modules, and OUT/initramfs.cpio.gz with SCENARIO
# and every module a scenario loads. A failed step is handed to the caller's
# fail_step STEP LOG, and vm_prepare returns 1.
vm_prepare() {
	local out="$1" scenario="$2"
	# The set-up's progress stays visible (a cold one takes a quarter of an hour).
	if ! KBUILD="$("$RMAD_ROOT/scripts/setup/bootstrap.sh" 2> >(tee "$out/bootstrap.log" >&2))"; then
		fail_step bootstrap "$(tail -n 40 "$out/bootstrap.log")"
		return 1
	fi
	if ! "$RMAD_ROOT/scripts/setup/build-module.sh" >"$out/module.log" 2>&1; then
		fail_step module "$(tail -n 40 "$out/module.log")"
		return 1
	fi
	if ! "$RMAD_ROOT/scripts/vm/make-initramfs.sh" "$out/initramfs.cpio.gz" "$scenario" \
		"$RMAD_OUT/module/rmad.ko" \
		"$RMAD_OUT/module-test/rmad.ko=test/rmad.ko" \
		"$RMAD_OUT/samples/c/rmad_sample_c.ko" \
		"$RMAD_OUT/samples/rust/rmad_sample_rust.ko" \
		"$RMAD_OUT/samples/template/rmad_client.ko" \
		"$RMAD_OUT/clients/hrtimer/rmad_hrtimer_client.ko" \
		"$RMAD_OUT/clients/two_hca/rmad_two_hca_client.ko" \
		"$RMAD_OUT/clients/rust_drop/rmad_rust_drop_client.ko" \
		"$RMAD_OUT/clients/cm/rmad_cm.ko" 2> >(tee "$out/initramfs.log" >&2); then
		fail_step initramfs "$(tail -n 40 "$out/initramfs.log")"
		return 1
	fi
}

# user_kdir: whether the production module is built against a kernel of the
# user's (KDIR, or else RMAD_DEFAULT_KDIR when that is a Rust-enabled build
# tree) rather than the cached test kernel. If so, sets KDIR, and USER_FLAGS to
# the make arguments for that tree: KMAKEFLAGS if given, else the settings the
# tree was built with (scripts/setup/kdir-flags.sh).
user_kdir() {
	if [ -z "${KDIR:-}" ] && [ -n "${RMAD_DEFAULT_KDIR:-}" ]; then
		if grep -qx 'CONFIG_RUST=y' "$RMAD_DEFAULT_KDIR/include/config/auto.conf" 2>/dev/null; then
			KDIR="$RMAD_DEFAULT_KDIR"
		else
			step "$RMAD_DEFAULT_KDIR is not a Rust-enabled kernel build tree: using the cached test kernel"
		fi
	fi
	[ -n "${KDIR:-}" ] || return 1
	if [ -n "${KMAKEFLAGS:-}" ]; then
		read -r -a USER_FLAGS <<<"$KMAKEFLAGS"
	else
		mapfile -t USER_FLAGS < <("$RMAD_ROOT/scripts/setup/kdir-flags.sh" "$KDIR")
		[ ${#USER_FLAGS[@]} -gt 0 ] || die "cannot tell how $KDIR was built"
	fi
}
