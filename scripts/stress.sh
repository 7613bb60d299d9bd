#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make stress DURATION=SECONDS` (not part of `make test`): the stress runs of
# `make test` for DURATION seconds each (default 60), with RMAD_HANDLE_CYCLES
# create/free cycles through the C API (default a million: about half an hour
# under emulation), on the test kernel; then a leak scan. Prints the summary
# line; the counts are in build/stress/results.log.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

seconds="${DURATION:-60}"
case "$seconds" in
'' | *[!0-9]*) die "DURATION must be a number of seconds" ;;
esac
cycles="${RMAD_HANDLE_CYCLES:-1000000}"
# Each cycle takes about 2 ms in the VM; leave room for it.
export RMAD_VM_TIMEOUT="${RMAD_VM_TIMEOUT:-$((seconds * 3 + 9 + cycles / 250 + 600))}"
# KUnit stays off: the test flavour's suites are `make test`'s business.
"$RMAD_ROOT/scripts/vm/vm-suite.sh" stress "$RMAD_ROOT/tests/vm/stress.sh" \
	"RMAD_STRESS_SECONDS=$seconds" \
	"RMAD_HANDLE_CYCLES=$cycles" "kunit.filter_glob=rmad_none_"
rc=0
python3 "$RMAD_ROOT/scripts/report/report.py" --junit "$RMAD_ROOT/build/stress-results.xml" \
	--vm "$RMAD_ROOT/build/stress/vm.json" || rc=$?
grep -h '^ *# threads\|^ *# post errors\|cycles in' "$RMAD_ROOT/build/stress/results.log" || true
exit "$rc"
