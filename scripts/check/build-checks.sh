#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Suite rmad_build: what the README promises about building, installing and
# the C API's header, checked on a copy of the working tree against the cached
# test kernel, as a user would run each command. Writes the cases to OUT (the
# JSON of scripts/report/vm-verdict.py, which scripts/report/report.py reads).
#
#   kdir_flags_read_from_tree   scripts/setup/kdir-flags.sh reads LLVM= and RUSTC=
#                               from the tree, and says what to pass otherwise
#   classic_kbuild              make -C $KDIR M=$PWD builds rmad.ko in the tree
#   make_clean_after_classic    make clean leaves only the tree's own files,
#   module_after_classic_clean  and make module KDIR=... (the README's form,
#                               no KMAKEFLAGS) builds again
#   modules_install_staged      make modules_install INSTALL_MOD_PATH=... puts
#                               rmad.ko under updates/ and into modules.dep
#   dkms_build                  dkms add + dkms build with dkms.conf
#   header_kernel_doc           include/rmad.h: kernel-doc -Wall says nothing,
#                               and every export, structure, enum and callback
#                               type has a kernel-doc comment
#   api_layouts_agree           the three views of the C API's structures
#                               have the same fields (scripts/check/check-api.py)
#   rust_analyzer_indexes_src   make rust-analyzer writes a rust-project.json
#                               with rmad's crate root, which git ignores
#   rust_sample_has_no_unsafe   the binding is enough for the Rust sample
#   binding_kept_mad_outlives_no_view  the binding rejects, at compile time,
#                               a view of a received MAD used after the MAD
#                               was kept (and the kept buffer dropped), and
#                               builds the same client written correctly
#   binding_refuses_other_header_version  a client of a binding whose rmad.h
#                               (beside it) says another API version does not
#                               build, the same client with the binding's own
#                               header does (include/rmad_binding.rs)
#
# Usage: build-checks.sh OUT
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

[ $# -eq 1 ] || die "usage: $0 OUT"
out="$1"
kdir="$("$RMAD_ROOT/scripts/setup/bootstrap.sh" 2>/dev/null)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cases="$tmp/cases.tsv"
: >"$cases"

# check NAME COMMAND...: one case; its output is the case's log when it fails.
check() {
	local name="$1" status=PASS
	shift
	"$@" >"$tmp/log" 2>&1 || status=FAIL
	printf '%s\t%s\t%s\n' "$name" "$status" "$(tail -n 30 "$tmp/log" | tr '\t\n' '  ')" >>"$cases"
	step "rmad_build.$name: $status"
}

# A copy of the working tree (tracked and new files, not ignored ones).
copy="$tmp/rmad"
mkdir -p "$copy"
(cd "$RMAD_ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - 2>/dev/null) |
	tar -x -C "$copy"
(cd "$copy" && find . -type f | sort) >"$tmp/files"

flags_read() {
	local flags refusal
	flags="$("$RMAD_ROOT/scripts/setup/kdir-flags.sh" "$kdir")"
	echo "$flags"
	echo "$flags" | grep -qx "LLVM=$LLVM_SUFFIX" &&
		[ -x "$(echo "$flags" | sed -n 's/^RUSTC=//p')" ] || return 1
	# A directory that is no kernel build tree: refused, saying what to pass.
	if refusal="$("$RMAD_ROOT/scripts/setup/kdir-flags.sh" "$tmp" 2>&1)"; then
		return 1
	fi
	echo "$refusal"
	echo "$refusal" | grep -q 'KMAKEFLAGS="LLVM='
}

classic() {
	mapfile -t flags < <("$RMAD_ROOT/scripts/setup/kdir-flags.sh" "$kdir")
	make -C "$kdir" M="$copy" "${flags[@]}" modules && [ -f "$copy/rmad.ko" ]
}

clean_after_classic() {
	make -C "$copy" clean &&
		(cd "$copy" && find . -type f | sort) >"$tmp/files-after" &&
		diff "$tmp/files" "$tmp/files-after"
}

module_after_clean() {
	make -C "$copy" module KDIR="$kdir" && [ -f "$copy/build/module/rmad.ko" ]
}

install_staged() {
	local release
	release="$(cat "$kdir/include/config/kernel.release")"
	make -C "$copy" modules_install KDIR="$kdir" INSTALL_MOD_PATH="$tmp/root" &&
		[ -f "$tmp/root/lib/modules/$release/updates/rmad.ko" ] &&
		grep -q '^updates/rmad.ko:' "$tmp/root/lib/modules/$release/modules.dep"
}

dkms_build() {
	local release version
	release="$(cat "$kdir/include/config/kernel.release")"
	version="$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$copy/dkms.conf")"
	mkdir -p "$tmp/dkms-src" "$tmp/dkms-tree"
	make -C "$copy" clean >/dev/null
	cp -r "$copy" "$tmp/dkms-src/rmad-$version"
	local where=(--sourcetree "$tmp/dkms-src" --dkmstree "$tmp/dkms-tree")
	dkms add "rmad/$version" "${where[@]}" &&
		dkms build "rmad/$version" -k "$release" --kernelsourcedir "$kdir" "${where[@]}" &&
		[ -f "$tmp/dkms-tree/rmad/$version/$release/x86_64/module/rmad.ko" ] ||
		{
			cat "$tmp/dkms-tree/rmad/$version/build/make.log" 2>/dev/null
			return 1
		}
}

header_docs() {
	local warnings
	warnings="$("$LINUX_TREE/scripts/kernel-doc" -Wall -none "$RMAD_ROOT/include/rmad.h" 2>&1)"
	echo "$warnings"
	[ -z "$warnings" ] && python3 "$RMAD_ROOT/scripts/check/check-api.py" docs "$RMAD_ROOT"
}

check kdir_flags_read_from_tree flags_read
check classic_kbuild classic
check make_clean_after_classic clean_after_classic
check module_after_classic_clean module_after_clean
check modules_install_staged install_staged
check dkms_build dkms_build
check header_kernel_doc header_docs
check api_layouts_agree python3 "$RMAD_ROOT/scripts/check/check-api.py" layouts "$RMAD_ROOT"

rust_analyzer() {
	make -C "$copy" rust-analyzer &&
		python3 - "$copy" <<'PY' && git -C "$RMAD_ROOT" check-ignore -q rust-project.json
import json, sys
crates = json.load(open(sys.argv[1] + "/rust-project.json"))["crates"]
roots = [c["root_module"] for c in crates]
assert sys.argv[1] + "/src/rmad_main.rs" in roots, roots[-3:]
assert sys.argv[1] + "/samples/rust/rmad_sample_rust.rs" in roots, roots[-3:]
PY
}
check rust_analyzer_indexes_src rust_analyzer
check rust_sample_has_no_unsafe sh -c "! grep -n unsafe '$RMAD_ROOT/samples/rust/rmad_sample_rust.rs'"

# client_module DIR BODY [BINDING]: a Rust client module of the binding (BINDING, by default
# the tree's) in DIR whose receive handler is BODY (with `r` the received MAD); compiles it
# against the cached kernel (the object only: what is checked is what rustc accepts).
client_module() {
	local dir="$1" binding="${3:-$RMAD_ROOT/include/rmad_binding.rs}" vars
	mkdir -p "$dir"
	echo 'obj-m := rmad_client_check.o' >"$dir/Kbuild"
	cat >"$dir/rmad_client_check.rs" <<RS
// SPDX-License-Identifier: GPL-2.0
//! A client of the binding, built by scripts/check/build-checks.sh.
use kernel::prelude::*;
#[path = "$binding"]
#[allow(dead_code)]
mod rmad;
struct Check;
impl rmad::Client for Check {
    fn send_done(&self, _done: rmad::SendDone) {}
    fn recv(&self, r: rmad::Received<'_>) {
        $2
    }
}
module! {
    type: Module,
    name: "rmad_client_check",
    description: "checks what the binding accepts",
    license: "GPL",
}
struct Module;
impl kernel::Module for Module {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Module)
    }
}
RS
	mapfile -t vars < <(kernel_make_vars)
	LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib" make -C "$kdir" "${vars[@]}" M="$dir" \
		rmad_client_check.o
}

# The view `m` of the received MAD must not survive `keep` (whose buffer, once dropped, frees
# the MAD): rustc refuses the move while `m` borrows `r` (E0505). The same client reading the
# MAD through the kept buffer builds.
kept_mad_outlives_no_view() {
	client_module "$tmp/client-ok" \
		'if let Ok(k) = r.keep() { pr_info!("{}\n", k.mad().len()); }' || return 1
	if client_module "$tmp/client-misuse" \
		'let m = r.mad(); if let Ok(k) = r.keep() { drop(k); } pr_info!("{}\n", m.len());' \
		>"$tmp/misuse.log" 2>&1; then
		echo "the misuse built: a view of the MAD outlives the kept buffer"
		return 1
	fi
	grep -q 'E0505' "$tmp/misuse.log" || {
		tail -n 20 "$tmp/misuse.log"
		return 1
	}
}
check binding_kept_mad_outlives_no_view kept_mad_outlives_no_view

# The binding reads rmad.h beside it and asserts that its version is the binding's: a copy of
# both whose header says another minor version does not build; the copy as it is does.
other_header_version() {
	local copy="$tmp/version/include"
	mkdir -p "$copy"
	cp "$RMAD_ROOT/include/rmad_binding.rs" "$RMAD_ROOT/include/rmad_binding_ffi.rs" \
		"$RMAD_ROOT/include/rmad.h" "$copy/"
	client_module "$tmp/version-same" 'drop(r);' "$copy/rmad_binding.rs" || return 1
	sed -i 's/^#define RMAD_API_VERSION_MINOR \([0-9]*\)$/#define RMAD_API_VERSION_MINOR 1\1/' \
		"$copy/rmad.h"
	grep -q '^#define RMAD_API_VERSION_MINOR 1[0-9]*$' "$copy/rmad.h" || return 1
	if client_module "$tmp/version-other" 'drop(r);' "$copy/rmad_binding.rs" \
		>"$tmp/version.log" 2>&1; then
		echo "the binding built against a header of another version"
		return 1
	fi
	grep -q "rmad.h: another RMAD_API_VERSION_MINOR" "$tmp/version.log" || {
		tail -n 20 "$tmp/version.log"
		return 1
	}
}
check binding_refuses_other_header_version other_header_version

python3 - "$cases" "$out" <<'PY'
import json, sys
cases = []
for line in open(sys.argv[1]):
    name, status, log = line.rstrip("\n").split("\t", 2)
    cases.append({"suite": "rmad_build", "name": name, "status": status,
                  "log": [log] if status != "PASS" else []})
json.dump({"cases": cases}, open(sys.argv[2], "w"))
PY
