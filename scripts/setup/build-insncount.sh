#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the QEMU plugin that counts the guest's instructions
# (tools/insncount/insncount.c) for `make bench BENCH_INSN=1`, into
# build/insncount/, keyed by its source. Prints the plugin's path on stdout.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

src="$RMAD_ROOT/tools/insncount/insncount.c"
"$RMAD_ROOT/scripts/setup/install-packages.sh" >&2
key="$(sha256sum "$src" | cut -c1-16)"
so="$RMAD_ROOT/build/insncount/insncount-$key.so"
if [ ! -f "$so" ]; then
	mkdir -p "$(dirname "$so")"
	step "insncount: building the plugin"
	gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$so.tmp" "$src" -lpthread
	mv "$so.tmp" "$so"
fi
echo "$so"
