#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The long fuzz runs of the pure parts (tests/host/src/fuzz.rs): the wire parser, state::step,
# whole simulated agents, the RMPP machines (segments, windows, transfers over a lossy
# channel) and the opt-in retry rules (retry::plan) against their reference models,
# RMAD_FUZZ_INPUTS inputs per target (default 10 million), in release mode. `make test` runs
# a short seeded run of each target as part of the host tests; this is `make fuzz`.
#
#   RMAD_FUZZ_TARGET=wire|step|agent|rmpp|retry   one target only
#   RMAD_FUZZ_SEED, RMAD_FUZZ_FIRST                replay from a printed disagreement
#   RMAD_FUZZ_STRICT=1                             accept no known divergence (step, agent)
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

cargo="$(dirname "$(find_rustup)")/cargo"
[ -x "$cargo" ] || cargo="$(command -v cargo)"
# The long runs exist only with this cfg, so that `make test` neither runs nor skips them.
CARGO_TARGET_DIR="$RMAD_ROOT/build/fuzz-target" RUSTFLAGS="--cfg rmad_fuzz_long" \
	"$cargo" +"$RUST_VERSION" test --release \
	--manifest-path "$RMAD_ROOT/tests/host/Cargo.toml" \
	fuzz::long -- --nocapture --test-threads=3
