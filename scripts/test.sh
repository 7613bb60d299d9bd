#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make test`: everything that must pass. Host tests first, then both builds
# of the module (production and test flavour) against the cached test kernel
# (KASAN, kmemleak, lockdep, hang detectors, failslab), booted in the VM with
# tests/vm/test.sh: the KUnit suites, the stress runs, the production module
# with the samples, device removal, a leak scan and the detectors' positive
# controls; then two VMs joined by an emulated Ethernet link run the two-node
# suites (tests/vm/fabric.sh); last, suite rmad_build (scripts/check/build-checks.sh):
# the build, install and header promises of the README. Ends with one line "N passed, N failed, N skipped" summing
# everything, writes build/test-results.xml (JUnit), and exits non-zero on any
# failure or when no test ran. Columns test, fabric-a and fabric-b of
# tests/suites.txt list the suites expected.
#
# Environment: as scripts/vm/vm-suite.sh, and RMAD_HANDLE_CYCLES (create/free
# cycles of the stale-handle stress run, default 5000).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mkdir -p "$RMAD_ROOT/build"
step "host tests (cargo test)"
"$RMAD_ROOT/scripts/check/host-tests.sh" >"$RMAD_ROOT/build/host.log" || true
grep -E '^test result:' "$RMAD_ROOT/build/host.log" >&2 || tail -n 20 "$RMAD_ROOT/build/host.log" >&2

args=()
if [ -n "${RMAD_HANDLE_CYCLES:-}" ]; then
	args+=("RMAD_HANDLE_CYCLES=$RMAD_HANDLE_CYCLES")
fi
"$RMAD_ROOT/scripts/vm/vm-suite.sh" test "$RMAD_ROOT/tests/vm/test.sh" "${args[@]}"
# Two nodes on one emulated Ethernet: the rmad_fabric_* suites.
"$RMAD_ROOT/scripts/vm/vm-pair.sh" fabric "$RMAD_ROOT/tests/vm/fabric.sh"

step "build checks (suite rmad_build)"
rm -f "$RMAD_ROOT/build/build-checks.json"
"$RMAD_ROOT/scripts/check/build-checks.sh" "$RMAD_ROOT/build/build-checks.json" || true

python3 "$RMAD_ROOT/scripts/report/report.py" --junit "$RMAD_ROOT/build/test-results.xml" \
	--host "$RMAD_ROOT/build/host.log" --vm "$RMAD_ROOT/build/test/vm.json" \
	--vm "$RMAD_ROOT/build/fabric/a/vm.json" --vm "$RMAD_ROOT/build/fabric/b/vm.json" \
	--vm "$RMAD_ROOT/build/build-checks.json"
