#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build a test kernel, out of the source tree, into a cache folder keyed by
# everything that produced it: the source version, the configuration
# fragments, the toolchain versions and this script. An existing build with
# the same key is reused. Prints the build folder on stdout.
#
# Usage: build-kernel.sh [FLAVOUR]
#   test  (default) tests/vm/kernel.config + tests/vm/kernel-kasan.config:
#         KASAN, kmemleak, lockdep, the hang detectors, failslab
#   kcsan tests/vm/kernel.config + tests/vm/kernel-kcsan.config
#   bench tests/vm/kernel.config minus what tests/vm/kernel-bench.config turns
#         off (CONFIG_X=n: the debugging options), with no TRACE_IRQFLAGS hooks
#   bench-irqsoff  the same plus the irqsoff tracer (tests/vm/kernel-irqsoff.config)
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

flavour="${1:-test}"
case "$flavour" in
test) extra="$RMAD_ROOT/tests/vm/kernel-kasan.config" ;;
kcsan) extra="$RMAD_ROOT/tests/vm/kernel-kcsan.config" ;;
bench) extra="$RMAD_ROOT/tests/vm/kernel-bench.config" ;;
bench-irqsoff) extra="$RMAD_ROOT/tests/vm/kernel-bench.config" ;;
*) die "unknown kernel flavour '$flavour' (test, kcsan, bench or bench-irqsoff)" ;;
esac
fragments=("$RMAD_ROOT/tests/vm/kernel.config" "$extra")
[ "$flavour" != bench-irqsoff ] || fragments+=("$RMAD_ROOT/tests/vm/kernel-irqsoff.config")
[ -f "$LINUX_TREE/.rmad-unpacked" ] || die "no kernel source; run scripts/setup/fetch-sources.sh first"
[ -x "$BINDGEN_ROOT/bin/bindgen" ] || die "no bindgen; run scripts/setup/install-bindgen.sh first"

key="$(
	{
		echo "$LINUX_SRC_VERSION"
		cat "${fragments[@]}" "$0"
		"$(rust_tool rustc)" --version
		"$BINDGEN_ROOT/bin/bindgen" --version
		"clang$LLVM_SUFFIX" --version | head -n1
	} | sha256sum | cut -c1-16
)"
kbuild="$RMAD_CACHE/kernel-$flavour-$key"

if [ -f "$kbuild/.rmad-built" ]; then
	step "kernel ($flavour): cached build $kbuild"
	echo "$kbuild"
	exit 0
fi

mapfile -t vars < <(kernel_make_vars)
export LIBCLANG_PATH="/usr/lib/llvm$LLVM_SUFFIX/lib"
kmake() {
	make -C "$LINUX_TREE" O="$kbuild" "${vars[@]}" "$@"
}

step "kernel ($flavour): checking the Rust toolchain (make rustavailable)"
mkdir -p "$kbuild"
kmake -s rustavailable >&2 || die "the kernel refuses this Rust toolchain (see above)"

# The options a fragment turns off (its CONFIG_X=n lines), and the lines that
# must be in the result: every other CONFIG_ line whose option is not off.
mapfile -t off < <(cat "${fragments[@]}" | sed -n 's/^\(CONFIG_[A-Z0-9_]*\)=n$/\1/p')
is_off() {
	local o
	for o in "${off[@]}"; do
		[ "${1%%=*}" != "$o" ] || return 0
	done
	return 1
}
wanted() {
	local line
	cat "${fragments[@]}" | grep '^CONFIG_' | while read -r line; do
		is_off "$line" || echo "$line"
	done
}

step "kernel ($flavour): configuring from ${fragments[*]#"$RMAD_ROOT/"}"
# An option turned off is "not set", unless it has a value (a number: it goes
# with the option it belongs to).
{
	wanted
	for o in "${off[@]}"; do
		grep -q "^$o=[0-9]" "${fragments[@]}" || echo "# $o is not set"
	done
} >"$kbuild/.config"
kmake -s olddefconfig >&2
missing="$(wanted | while read -r line; do
	grep -qx "$line" "$kbuild/.config" || echo "$line"
done)"
[ -z "$missing" ] || die "olddefconfig dropped: $missing"
still_on="$(for o in "${off[@]}"; do
	if grep -q "^$o=" "$kbuild/.config"; then echo "$o"; fi
done)"
[ -z "$still_on" ] || die "olddefconfig kept on what $extra turns off: $still_on"
# Times and instruction counts are taken on the bench kernel: no hook on every
# interrupt save and restore, as in a kernel users run.
if [ "$flavour" = bench ] && grep -q '^CONFIG_TRACE_IRQFLAGS=y' "$kbuild/.config"; then
	die "the bench kernel has TRACE_IRQFLAGS (something selects it); see tests/vm/kernel-bench.config"
fi

jobs="$(nproc)"
step "kernel ($flavour): building with -j$jobs (15 to 30 minutes on 2 cores)"
start=$SECONDS
kmake -j"$jobs" >"$kbuild/build.log" 2>&1 || {
	tail -n 40 "$kbuild/build.log" >&2
	die "kernel build failed; full log in $kbuild/build.log"
}
touch "$kbuild/.rmad-built"
step "kernel ($flavour): built in $((SECONDS - start)) s at $kbuild"
echo "$kbuild"
