#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Set up everything rmad needs from a fresh machine, reusing the cache:
# Debian packages, the kernel and Rust library sources, bindgen and the test
# kernel build (RMAD_KERNEL picks the flavour, default "test"). Prints the
# kernel build folder on stdout. Safe to re-run.
set -euo pipefail
here="$(dirname "$0")"

"$here/install-packages.sh" >&2
"$here/fetch-sources.sh" >&2
"$here/install-bindgen.sh" >&2
"$here/build-kernel.sh" "${RMAD_KERNEL:-test}"
