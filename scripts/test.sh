#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make test`: everything that must pass. Host tests first, then both builds
# of the module (production and test flavour) against the cached test kernel
# (KASAN, kmemleak, lockdep, hang detectors, failslab), booted in the VM with
# tests/vm/test.sh: the KUnit suites, the stress runs, the production module
# with the samples, device removal, a leak scan and the detectors' positive
# controls. Ends with one line "N passed, N failed, N skipped" summing
# everything, writes build/test-results.xml (JUnit), and exits non-zero on any
# failure or when no test ran. tests/suites.txt lists the suites expected.
#
# Environment: RMAD_VM_TIMEOUT (seconds the VM may take, default 1500),
# RMAD_KUNIT_FILTER (a kunit filter_glob such as 'rmad_wire.*' to run one suite),
# RMAD_KUNIT_TIMEOUT (seconds per KUnit test case, default 300), RMAD_LOGLEVEL
# (console log level, default 5; 7 shows KUnit's progress in build/test/console.log).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

out="$RMAD_ROOT/build/test"
rm -rf "$out"
mkdir -p "$out"
verdicts=()

# Record a failed step as a test case so it shows in the summary and XML.
fail_step() {
	python3 - "$out/$1.json" "$1" "$2" <<'PY'
import json, sys
path, name, log = sys.argv[1:4]
json.dump({"cases": [{"suite": "build", "name": name, "status": "FAIL",
                      "log": log.splitlines()}]}, open(path, "w"))
PY
	verdicts+=(--vm "$out/$1.json")
}

step "host tests (cargo test)"
"$RMAD_ROOT/scripts/host-tests.sh" >"$out/host.log" || true
grep -E '^test result:' "$out/host.log" >&2 || tail -n 20 "$out/host.log" >&2

kbuild=""
if kbuild="$("$RMAD_ROOT/scripts/bootstrap.sh")" &&
	"$RMAD_ROOT/scripts/build-module.sh" >"$out/module.log" 2>&1; then
	mods=("$RMAD_ROOT/build/module/rmad.ko"
		"$RMAD_ROOT/build/module-test/rmad.ko=test/rmad.ko"
		"$RMAD_ROOT/build/samples/c/rmad_sample_c.ko"
		"$RMAD_ROOT/build/samples/rust/rmad_sample_rust.ko")
	"$RMAD_ROOT/scripts/make-initramfs.sh" "$out/initramfs.cpio.gz" \
		"$RMAD_ROOT/tests/vm/test.sh" "${mods[@]}"
	args=("loglevel=${RMAD_LOGLEVEL:-5}" "kunit.timeout=${RMAD_KUNIT_TIMEOUT:-300}")
	if [ -n "${RMAD_HANDLE_CYCLES:-}" ]; then
		args+=("RMAD_HANDLE_CYCLES=$RMAD_HANDLE_CYCLES")
	fi
	if [ -n "${RMAD_KUNIT_FILTER:-}" ]; then
		args+=("kunit.filter_glob=$RMAD_KUNIT_FILTER")
	fi
	step "VM: booting the test kernel and loading rmad (KUnit runs at insmod)"
	start=$SECONDS
	vm_rc=0
	"$RMAD_ROOT/scripts/run-vm.sh" "$kbuild/arch/x86/boot/bzImage" "$out/initramfs.cpio.gz" \
		"$out/console.log" "$out/results.log" "${RMAD_VM_TIMEOUT:-1500}" "${args[@]}" || vm_rc=$?
	step "VM: finished in $((SECONDS - start)) s (qemu exit $vm_rc)"
	python3 "$RMAD_ROOT/scripts/vm-verdict.py" "$LINUX_TREE/tools/testing/kunit/kunit.py" \
		"$out/results.log" "$out/console.log" "$out/vm.json" \
		"$RMAD_ROOT/tests/suites.txt" "${RMAD_KUNIT_FILTER:-}"
	verdicts+=(--vm "$out/vm.json")
else
	fail_step module "$(tail -n 40 "$out/module.log" 2>/dev/null || echo 'bootstrap failed')"
fi

python3 "$RMAD_ROOT/scripts/report.py" --junit "$RMAD_ROOT/build/test-results.xml" \
	--host "$out/host.log" "${verdicts[@]}"
