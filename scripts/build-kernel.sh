#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the test VM's kernel from tests/vm/kernel.config, out of the source
# tree, into a cache folder keyed by everything that produced it: the source
# version, the fragment, the toolchain versions and this script. An existing
# build with the same key is reused. Prints the build folder on stdout.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

fragment="$RMAD_ROOT/tests/vm/kernel.config"
[ -f "$LINUX_TREE/.rmad-unpacked" ] || die "no kernel source; run scripts/fetch-sources.sh first"
[ -x "$BINDGEN_ROOT/bin/bindgen" ] || die "no bindgen; run scripts/install-bindgen.sh first"

key="$(
	{
		echo "$LINUX_SRC_VERSION"
		cat "$fragment" "$0"
		"$(rust_tool rustc)" --version
		"$BINDGEN_ROOT/bin/bindgen" --version
		"clang$LLVM_SUFFIX" --version | head -n1
	} | sha256sum | cut -c1-16
)"
kbuild="$RMAD_CACHE/kernel-$key"

if [ -f "$kbuild/.rmad-built" ]; then
	step "kernel: cached build $kbuild"
	echo "$kbuild"
	exit 0
fi

mapfile -t vars < <(kernel_make_vars)
export LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib"
kmake() {
	make -C "$LINUX_TREE" O="$kbuild" "${vars[@]}" "$@"
}

step "kernel: checking the Rust toolchain (make rustavailable)"
mkdir -p "$kbuild"
kmake -s rustavailable >&2 || die "the kernel refuses this Rust toolchain (see above)"

step "kernel: configuring from tests/vm/kernel.config"
grep -v '^#' "$fragment" >"$kbuild/.config"
kmake -s olddefconfig >&2
missing="$(grep '^CONFIG_' "$fragment" | while read -r line; do
	grep -qx "$line" "$kbuild/.config" || echo "$line"
done)"
[ -z "$missing" ] || die "olddefconfig dropped: $missing"

jobs="$(nproc)"
step "kernel: building with -j$jobs (about 10 minutes on 2 cores)"
start=$SECONDS
kmake -j"$jobs" >"$kbuild/build.log" 2>&1 || {
	tail -n 40 "$kbuild/build.log" >&2
	die "kernel build failed; full log in $kbuild/build.log"
}
touch "$kbuild/.rmad-built"
step "kernel: built in $((SECONDS - start)) s at $kbuild"
echo "$kbuild"
