#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the test VM's initramfs: static busybox, the `rdma`, `ip` and `tc` tools, rdma-core's
# rping, udaddy, ucmatose and cmtime with libibverbs' rxe provider (and those
# RMAD_INITRAMFS_TOOLS names: `make bench`'s profiler adds perf) with the shared libraries
# they need, tests/vm/init.sh as /init, a scenario script as
# /scenario.sh and the given kernel modules under /modules (a MODULE given as
# PATH=NAME lands at /modules/NAME, so that two builds of one module can
# travel side by side).
#
# Usage: make-initramfs.sh OUTPUT.cpio.gz SCENARIO.sh MODULE.ko[=NAME]...
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

[ $# -ge 2 ] || die "usage: $0 OUTPUT.cpio.gz SCENARIO.sh [MODULE.ko...]"
out="$(realpath -m "$1")"
scenario="$2"
shift 2

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,modules,proc,sys,dev,tmp}

cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
	[ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done

# copy_libs FILE: every shared library FILE links, at its own path.
copy_libs() {
	ldd "$1" | grep -o '/[^ ]*' | while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}

# The iproute2 tools (rdma for soft-RoCE links, ip for the netdev under them),
# rdma-core's connection tools (rdmacm-utils: tests/vm/cm.sh), the extra tools,
# and every shared library they link.
# shellcheck disable=SC2086 # RMAD_INITRAMFS_TOOLS is a list of tool names.
for tool in rdma ip tc rping udaddy ucmatose cmtime ${RMAD_INITRAMFS_TOOLS:-}; do
	path="$(command -v "$tool" || ls /usr/sbin/"$tool" /sbin/"$tool" /usr/bin/"$tool" 2>/dev/null | head -n1 || true)"
	[ -n "$path" ] && [ -x "$path" ] || die "the $tool tool is missing"
	rm -f "$root/bin/$tool"
	cp "$path" "$root/bin/$tool"
	copy_libs "$path"
done
# glibc loads libgcc_s when a thread exits (rping's do), not through a link.
# (awk reads to the end: an early exit would kill ldconfig with SIGPIPE, and pipefail this script.)
libgcc="$(ldconfig -p | awk '/libgcc_s\.so\.1 .*x86-64/ { p = $NF } END { print p }')"
[ -n "$libgcc" ] || die "libgcc_s.so.1 is missing"
mkdir -p "$root$(dirname "$libgcc")"
cp -L "$libgcc" "$root$libgcc"
# libibverbs' soft-RoCE provider, which it finds through /etc/libibverbs.d and loads by name.
rxe_driver=/etc/libibverbs.d/rxe.driver
[ -f "$rxe_driver" ] || die "libibverbs' rxe provider is missing ($rxe_driver)"
mkdir -p "$root/etc/libibverbs.d"
cp "$rxe_driver" "$root/etc/libibverbs.d/"
provider="$(find /usr/lib -path '*/libibverbs/librxe-rdmav*.so' | sort | tail -n1)"
[ -n "$provider" ] || die "libibverbs' rxe provider library is missing"
mkdir -p "$root$(dirname "$provider")"
cp -L "$provider" "$root$provider"
copy_libs "$provider"

# The test kernel's own modules (rdma_rxe and what it needs), where modprobe
# finds them: /lib/modules/<release>/, with modules.dep made by the host's depmod.
kbuild="$("$RMAD_ROOT/scripts/setup/bootstrap.sh" 2>/dev/null)"
release="$(cat "$kbuild/include/config/kernel.release")"
moddir="$root/lib/modules/$release"
mkdir -p "$moddir/kernel"
while read -r obj; do
	mkdir -p "$moddir/kernel/$(dirname "$obj")"
	cp "$kbuild/${obj%.o}.ko" "$moddir/kernel/${obj%.o}.ko"
done <"$kbuild/modules.order"
sed 's|^|kernel/|; s|\.o$|.ko|' "$kbuild/modules.order" >"$moddir/modules.order"
cp "$kbuild/modules.builtin" "$kbuild/modules.builtin.modinfo" "$moddir/"
depmod -b "$root" "$release"

cp "$RMAD_ROOT/tests/vm/init.sh" "$root/init"
cp "$RMAD_ROOT/tests/vm/lib.sh" "$root/lib.sh"
cp "$RMAD_ROOT/tests/vm/pair.sh" "$root/pair.sh"
cp "$RMAD_ROOT/tests/vm/cm.sh" "$root/cm.sh"
cp "$scenario" "$root/scenario.sh"
chmod +x "$root/init" "$root/scenario.sh"
for ko in "$@"; do
	case "$ko" in
	*=*)
		mkdir -p "$root/modules/$(dirname "${ko#*=}")"
		cp "${ko%%=*}" "$root/modules/${ko#*=}"
		;;
	*) cp "$ko" "$root/modules/" ;;
	esac
done

mkdir -p "$(dirname "$out")"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$out"
step "initramfs: $out"
