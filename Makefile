# SPDX-License-Identifier: GPL-2.0
#
# rmad's entry points. The kernel build itself reads Kbuild, not this file.
#
#   make run      boot the test VM with rmad loaded and show what it does
#   make test     host tests plus the KUnit suites in the VM; summary line at the end
#   make module   build build/module/rmad.ko (KDIR=<Rust-enabled kernel build tree>
#                 to build against your own kernel; KMAKEFLAGS for LLVM=/RUSTC=)
#   make bench    benchmark figures (cost of cancel, modify, matching vs outstanding sends)
#   make stress   longer stress runs (DURATION=seconds each, default 60), not in make test
#   make test-kcsan  the suites and stress on a second kernel with KCSAN (not in CI)
#   make host-test  only the host tests
#   make clean    remove build/ (the cache under ~/.cache/rmad stays)

.PHONY: all module run test test-kcsan stress bench host-test clean

all: module

module:
	@KDIR="$(KDIR)" KMAKEFLAGS="$(KMAKEFLAGS)" scripts/build-module.sh

run:
	@scripts/run.sh

test:
	@scripts/test.sh

test-kcsan:
	@scripts/test-kcsan.sh

stress:
	@DURATION="$(DURATION)" scripts/stress.sh

bench:
	@scripts/bench.sh

host-test:
	@scripts/host-tests.sh

clean:
	rm -rf build
