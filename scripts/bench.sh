#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: boot the VM with rmad loaded with bench=1 and print the
# figures (mean cost of modify, response matching and cancel as the number of
# outstanding sends grows). Figures only; nothing is asserted.
set -euo pipefail
here="$(dirname "$0")"
"$here/vm-scenario.sh" bench console.log || true
grep -h 'bench:' "$here/../build/bench/console.log" | sed 's/^\[[^]]*\] //'
