#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make test-kcsan` (not part of `make test` or CI): the KUnit suites and the
# stress runs on the second test kernel, which has the data-race detector
# KCSAN instead of KASAN (the two exclude each other). Builds that kernel on
# first use (another 15 to 30 minutes). Prints the usual summary line, then
# every distinct data race KCSAN reported, the ones in rmad's code first.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export RMAD_KERNEL=kcsan

mkdir -p "$RMAD_ROOT/build"
rc=0
"$RMAD_ROOT/scripts/vm/vm-suite.sh" kcsan "$RMAD_ROOT/tests/vm/kcsan.sh"
python3 "$RMAD_ROOT/scripts/report/report.py" --junit "$RMAD_ROOT/build/kcsan-results.xml" \
	--vm "$RMAD_ROOT/build/kcsan/vm.json" || rc=$?
python3 "$RMAD_ROOT/scripts/report/kcsan-summary.py" "$RMAD_ROOT/build/kcsan/console.log"
exit "$rc"
