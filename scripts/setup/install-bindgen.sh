#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install bindgen-cli (which the kernel's Rust build runs) into the cache with
# cargo, once.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

if [ -x "$BINDGEN_ROOT/bin/bindgen" ]; then
	step "bindgen $BINDGEN_VERSION: cached"
	exit 0
fi
cargo="$(dirname "$(find_rustup)")/cargo"
[ -x "$cargo" ] || cargo="$(command -v cargo)"
step "bindgen $BINDGEN_VERSION: cargo install (a few minutes)"
LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib" \
	"$cargo" +"$RUST_VERSION" install --locked --quiet "bindgen-cli@$BINDGEN_VERSION" --root "$BINDGEN_ROOT"
