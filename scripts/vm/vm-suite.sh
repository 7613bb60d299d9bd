#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build everything for the test kernel RMAD_KERNEL (default "test"), boot it
# with a scenario of tests/vm/ and turn what the guest reported into a verdict
# (scripts/report/vm-verdict.py, against column NAME of tests/suites.txt, the
# suites expected of each run). The verdict
# goes to build/NAME/vm.json; a failed set-up or build is recorded there as a
# failed case, so the caller's report always has something to say.
#
# Usage: vm-suite.sh NAME SCENARIO [KERNEL ARGS...]
# Environment: RMAD_VM_TIMEOUT (seconds the VM may take, default 1500),
# RMAD_KUNIT_FILTER (a kunit filter_glob), RMAD_KUNIT_TIMEOUT (seconds per KUnit
# test case, default 300), RMAD_LOGLEVEL (console log level, default 5).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

[ $# -ge 2 ] || die "usage: $0 NAME SCENARIO [KERNEL ARGS...]"
name="$1" scenario="$2"
shift 2
out="$RMAD_ROOT/build/$name"
rm -rf "$out"
mkdir -p "$out"

# Record a failed step as a test case so it shows in the summary and XML.
fail_step() {
	python3 - "$out/vm.json" "$1" "$2" <<'PY'
import json, sys
path, name, log = sys.argv[1:4]
json.dump({"cases": [{"suite": "build", "name": name, "status": "FAIL",
                      "log": log.splitlines()}]}, open(path, "w"))
PY
}

vm_prepare "$out" "$scenario" || exit 0
kbuild="$KBUILD"
args=("loglevel=${RMAD_LOGLEVEL:-5}" "kunit.timeout=${RMAD_KUNIT_TIMEOUT:-300}" "$@")
if [ -n "${RMAD_KUNIT_FILTER:-}" ]; then
	args+=("kunit.filter_glob=$RMAD_KUNIT_FILTER")
fi
step "VM: booting the $RMAD_KERNEL kernel with tests/vm/$(basename "$scenario")"
start=$SECONDS
vm_rc=0
"$RMAD_ROOT/scripts/vm/run-vm.sh" "$kbuild/arch/x86/boot/bzImage" "$out/initramfs.cpio.gz" \
	"$out/console.log" "$out/results.log" "${RMAD_VM_TIMEOUT:-1500}" "${args[@]}" || vm_rc=$?
step "VM: finished in $((SECONDS - start)) s (qemu exit $vm_rc)"
python3 "$RMAD_ROOT/scripts/report/vm-verdict.py" "$LINUX_TREE/tools/testing/kunit/kunit.py" \
	"$out/results.log" "$out/console.log" "$out/vm.json" "$RMAD_ROOT/tests/suites.txt" "$name" \
	"${RMAD_KUNIT_FILTER:-}"
