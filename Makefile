# SPDX-License-Identifier: GPL-2.0
#
# rmad's entry points. The kernel build itself reads Kbuild, not this file.
#
#   make run      boot the test VM with rmad loaded and show what it does
#   make test     host tests plus the KUnit suites in the VM; summary line at the end
#   make module   build build/module/rmad.ko against KDIR (default: the running
#                 kernel's build tree if it is Rust-enabled, else the cached test
#                 kernel, with the test flavour and the samples); KMAKEFLAGS
#                 overrides the LLVM=/RUSTC= settings read from KDIR
#   make modules_install  the same, installed (INSTALL_MOD_PATH=<staging root>)
#   make bench    benchmark figures (cost of cancel, modify, matching vs outstanding sends)
#   make stress   longer stress runs (DURATION=seconds each, default 60), not in make test
#   make test-kcsan  the suites and stress on a second kernel with KCSAN (not in CI)
#   make host-test  only the host tests
#   make fuzz     the long fuzz runs of the pure parts (10 million inputs per target;
#                 make test runs a short seeded run of each)
#   make vm MODULES="my.ko ..." [SCRIPT=my.sh]  boot the test VM with rxe0, the
#                 production rmad.ko and your modules loaded, run SCRIPT, show the log
#   make lint     clippy, checkpatch --strict, kernel-doc and rustfmt: zero findings
#   make rust-analyzer  rust-project.json indexing src/ and the Rust sample
#   make clean    remove build/ and what `make -C $KDIR M=$PWD` left in the tree
#                 (the cache under ~/.cache/rmad stays)

.PHONY: all module modules_install run test test-kcsan stress bench host-test fuzz vm lint \
	rust-analyzer clean

# The kernel build tree to build against, as in rust-out-of-tree-module: the running
# kernel's by default. Left at that default, `make module` uses it only if it is
# Rust-enabled, and the cached test kernel otherwise; a KDIR given on the command line or
# in the environment is used as given.
KDIR ?= /lib/modules/$(shell uname -r)/build
ifeq ($(origin KDIR),file)
GIVEN_KDIR :=
else
GIVEN_KDIR := $(KDIR)
endif

all: module

module:
	@KDIR="$(GIVEN_KDIR)" KMAKEFLAGS="$(KMAKEFLAGS)" RMAD_DEFAULT_KDIR="$(KDIR)" \
		scripts/setup/build-module.sh

modules_install:
	@KDIR="$(GIVEN_KDIR)" KMAKEFLAGS="$(KMAKEFLAGS)" RMAD_DEFAULT_KDIR="$(KDIR)" \
		INSTALL_MOD_PATH="$(INSTALL_MOD_PATH)" scripts/setup/install-module.sh

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
	@scripts/check/host-tests.sh

fuzz:
	@scripts/check/fuzz.sh

vm:
	@MODULES="$(MODULES)" SCRIPT="$(SCRIPT)" scripts/vm/vm-client.sh

lint:
	@scripts/lint.sh

rust-analyzer:
	@KDIR="$(GIVEN_KDIR)" KMAKEFLAGS="$(KMAKEFLAGS)" scripts/setup/rust-analyzer.sh

# The classic `make -C $KDIR M=$PWD` builds in the source tree; its outputs go
# too (the kernel's own `M=... clean` removes the same list).
clean:
	rm -rf build
	find . \( -path ./.git -o -path ./tests/host/target \) -prune -o -type f \
		\( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
		-o -name '.*.cmd' -o -name '*.rmeta' -o -name '*.d' -o -name modules.order \
		-o -name Module.symvers -o -name rust-project.json \) -exec rm -f {} +
