#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install the Debian packages that building the kernel, the module and the test
# VM needs, and any packages named as arguments (`make bench`'s profiler:
# linux-perf). Skips apt entirely when everything is already installed.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

packages=(
	bc bison build-essential cpio flex kmod libelf-dev libssl-dev python3 rsync
	xz-utils "clang$LLVM_SUFFIX" "lld$LLVM_SUFFIX" "llvm$LLVM_SUFFIX"
	"libclang$LLVM_SUFFIX-dev" qemu-system-x86 busybox-static iproute2
	libmnl0 libbsd0 libcap2 dkms rdmacm-utils ibverbs-providers
	"$@"
)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	step "Debian packages: all ${#packages[@]} present"
	exit 0
fi

step "Debian packages: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	die "installing packages needs root (missing: ${missing[*]})"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
