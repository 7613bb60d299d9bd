#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run the host tests (tests/host: the kernel-independent files of src/ under
# cargo test) with the pinned Rust toolchain. Output goes to stdout.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

cargo="$(dirname "$(find_rustup)")/cargo"
[ -x "$cargo" ] || cargo="$(command -v cargo)"
CARGO_TARGET_DIR="$RMAD_ROOT/build/host-target" \
	"$cargo" +"$RUST_VERSION" test --manifest-path "$RMAD_ROOT/tests/host/Cargo.toml" "$@" 2>&1
