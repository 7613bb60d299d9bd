#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# DKMS's build command (dkms.conf): the classic out-of-tree build of the
# production rmad.ko in this directory, against the kernel build tree KDIR,
# with the toolchain settings read from that tree.
#
# Usage: dkms-make.sh KDIR [IGNORED...]
# DKMS appends its own guess of the compiler (CC=clang LD=ld.lld for a kernel
# built with clang); it is ignored: the tree's own settings (clang-19, say) are
# the ones that work.
set -euo pipefail

[ $# -ge 1 ] || {
	echo "usage: $0 KDIR" >&2
	exit 2
}
here="$(cd "$(dirname "$0")/../.." && pwd)"
mapfile -t flags < <("$here/scripts/setup/kdir-flags.sh" "$1")
[ ${#flags[@]} -gt 0 ] || exit 1
make -C "$1" M="$here" "${flags[@]}" modules
