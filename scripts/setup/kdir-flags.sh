#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Print the make arguments that a kernel build tree was built with, one per
# line, for building out-of-tree modules against it: LLVM= (from the C
# compiler that compiled init/main.o) and RUSTC= (from the rustc that compiled
# rust/core.o). The kernel records each object's full command in its .cmd file
# next to it; nothing else in the tree says which LLVM= was given.
#
# Usage: kdir-flags.sh KDIR
# Fails, saying what to pass instead, when the tree does not record them (not
# built yet, or built without Rust).
set -euo pipefail

[ $# -eq 1 ] || {
	echo "usage: $0 KDIR" >&2
	exit 2
}
kdir="$1"

fail() {
	echo "kdir-flags: $1" >&2
	echo "kdir-flags: pass the settings $kdir was built with instead, for example" >&2
	echo "kdir-flags:   make module KDIR=$kdir KMAKEFLAGS=\"LLVM=-19 RUSTC=/path/to/rustc\"" >&2
	exit 1
}

# The command that built an object: the words after "savedcmd_<object> :=".
saved_command() {
	local cmd="$kdir/$1"
	[ -r "$cmd" ] || fail "$cmd is missing (is $kdir a finished kernel build tree?)"
	sed -n '1s/^savedcmd_[^ ]* := *//p' "$cmd"
}

cc="$(saved_command init/.main.o.cmd | awk '{ print $1 }')"
case "$cc" in
clang) echo "LLVM=1" ;;
*/clang) echo "LLVM=${cc%clang}" ;; # LLVM=/path/to/llvm/bin/
clang-*) echo "LLVM=-${cc#clang-}" ;;
gcc* | *-gcc*) ;; # GCC: make's default CC, nothing to pass.
*) fail "cannot tell the C compiler from '$cc'" ;;
esac

rustc="$(saved_command rust/.core.o.cmd | tr ' ' '\n' | grep -m1 '/rustc$\|^rustc$' || true)"
[ -n "$rustc" ] || fail "cannot find rustc in $kdir/rust/.core.o.cmd (a kernel without CONFIG_RUST?)"
echo "RUSTC=$rustc"
