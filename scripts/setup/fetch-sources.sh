#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Fetch the Linux 7.3 source and the Rust library source (rust-src) that match
# rustc exactly, from Debian trixie-backports, without touching the system's
# apt sources: a private apt configuration in the cache folder points at the
# Debian mirror the machine already uses. Both packages are version-pinned and
# SHA-256 verified, then unpacked into the cache.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

# Refuse a rustc whose version differs from the rust-src we pin: the kernel's
# core/alloc must be compiled from exactly the compiler's own library source.
check_rust_pair() {
	local rustc have
	rustc="$(rust_tool rustc)" ||
		die "rustup has no $RUST_VERSION toolchain; install it with: rustup toolchain install $RUST_VERSION"
	have="$("$rustc" --version | awk '{print $2}')"
	if [ "$have" != "$RUST_VERSION" ] || [ "${RUST_SRC_VERSION%%+*}" != "$RUST_VERSION" ]; then
		die "rustc $have and rust-src $RUST_SRC_VERSION do not match. The kernel's Rust
  library must be built from the compiler's own source. Pin a matching pair in
  scripts/lib.sh (RUST_VERSION and RUST_SRC_VERSION/RUST_SRC_SHA256)."
	fi
}

# The machine's own Debian mirror, from its apt configuration (deb822 or
# one-line format). The security archive is skipped.
debian_mirror() {
	local uri
	uri="$(
		{
			awk '/^URIs:/ {u=$2} /^Suites:/ && u != "" && $0 !~ /-security/ {print u; u=""}' \
				/etc/apt/sources.list.d/*.sources 2>/dev/null || true
			awk '$1 == "deb" && $0 !~ /-security/ {
				for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}
			}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true
		} | grep -v -e '-security' | grep '/debian/\?$' | head -n1
	)"
	[ -n "$uri" ] || die "cannot find a Debian mirror in /etc/apt (sources.list or sources.list.d/*.sources)"
	printf '%s\n' "${uri%/}"
}

# Run apt-get against the private trixie-backports configuration only.
private_apt() {
	apt-get \
		-o Dir::Etc::SourceList="$APT_DIR/sources.list" \
		-o Dir::Etc::SourceParts="$APT_DIR/empty" \
		-o Dir::Etc::PreferencesParts="$APT_DIR/empty" \
		-o Dir::State::Lists="$APT_DIR/lists" \
		-o Dir::Cache::Archives="$APT_DIR/archives" \
		-o APT::Sandbox::User=root \
		"$@"
}

# Download one pinned package into the cache, verify its checksum and leave
# its path in DEB.
fetch_deb() {
	local pkg="$1" version="$2" sha="$3" deb
	deb="$APT_DIR/debs/${pkg}_${version//:/%3a}_all.deb"
	DEB="$deb"
	if [ -f "$deb" ] && echo "$sha  $deb" | sha256sum -c --quiet - 2>/dev/null; then
		step "$pkg $version: cached"
		return 0
	fi
	ensure_lists
	step "$pkg $version: downloading"
	if ! (cd "$APT_DIR/debs" && private_apt download -q "$pkg=$version" >&2); then
		die "$pkg=$version is not offered by trixie-backports any more. Choose a newer
  pinned pair in scripts/lib.sh: a linux-source-7.3 version, or a rust-src version
  that equals an installable rustup toolchain (never a mismatched pair)."
	fi
	echo "$sha  $deb" | sha256sum -c --quiet - ||
		die "$deb: SHA-256 mismatch (expected $sha)"
}

LISTS_READY=0
ensure_lists() {
	if [ "$LISTS_READY" = 1 ]; then
		return 0
	fi
	local mirror
	mirror="$(debian_mirror)"
	mkdir -p "$APT_DIR"/{empty,lists/partial,archives/partial,debs}
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie-backports main" \
		>"$APT_DIR/sources.list"
	step "apt: updating the private trixie-backports package lists"
	private_apt update -q >&2
	LISTS_READY=1
}

check_rust_pair
APT_DIR="$RMAD_CACHE/apt"
mkdir -p "$RMAD_SRC_DIR" "$APT_DIR/debs"

if [ ! -f "$RUST_LIB_SRC/core/src/lib.rs" ]; then
	fetch_deb "$RUST_SRC_PKG" "$RUST_SRC_VERSION" "$RUST_SRC_SHA256"
	step "rust-src: unpacking"
	rm -rf "$RMAD_SRC_DIR/rust-src-$RUST_VERSION"
	dpkg-deb -x "$DEB" "$RMAD_SRC_DIR/rust-src-$RUST_VERSION"
fi
step "rust-src: $RUST_LIB_SRC"

if [ ! -f "$LINUX_TREE/.rmad-unpacked" ]; then
	fetch_deb "$LINUX_SRC_PKG" "$LINUX_SRC_VERSION" "$LINUX_SRC_SHA256"
	step "linux source: unpacking"
	tmp="$RMAD_SRC_DIR/linux-deb.tmp"
	rm -rf "$tmp" "$LINUX_TREE"
	dpkg-deb -x "$DEB" "$tmp"
	mkdir -p "$LINUX_TREE"
	tar -xf "$tmp"/usr/src/linux-source-*.tar.xz -C "$LINUX_TREE" --strip-components=1
	rm -rf "$tmp"
	touch "$LINUX_TREE/.rmad-unpacked"
fi
step "linux source: $LINUX_TREE"
