#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make run`: boot the VM with rmad loaded and show, on this terminal, what
# rmad is doing (tests/vm/demo.sh: the loopback demonstration, then rxe0).
# KUnit does not run here; see `make test`.
set -euo pipefail
exec "$(dirname "$0")/vm/vm-scenario.sh" demo -
