#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: boot the VM once, create rxe0 and measure the C MAD layer,
# rmad's Rust API and rmad's C API (and the floor) side by side, for each
# number of outstanding sends, then one RMPP transfer at a time through each
# layer (tests/vm/bench.sh); then write build/bench/results.json,
# results.md and cost-vs-n.svg (scripts/report/bench-report.py). Figures only;
# nothing is asserted.
#
# Knobs (environment):
#   BENCH_NS      numbers of outstanding sends (default "10 100 1000 10000"; 100000
#                 takes roughly 15 minutes per repetition here, see README.md)
#   BENCH_REPS    repetitions of each figure (default 5)
#   BENCH_SAMPLE  timed modifies, cancels and matched responses per round (default 1000)
#   BENCH_RMPP_REPS  repetitions of each RMPP transfer (default 3; 0: no RMPP row)
#   RMAD_VM_MEM   guest memory in MB (default 4096 here)
#   RMAD_VM_TIMEOUT  seconds before the guest is killed (default 7200 here)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ns="${BENCH_NS:-10 100 1000 10000}"
reps="${BENCH_REPS:-5}"
sample="${BENCH_SAMPLE:-1000}"
rmpp_reps="${BENCH_RMPP_REPS:-3}"
for v in $ns $reps $sample; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "bench: not a positive number: $v"
done
[[ "$rmpp_reps" =~ ^[0-9]+$ ]] || die "bench: not a number: $rmpp_reps"
out="$RMAD_ROOT/build/bench"
export RMAD_VM_MEM="${RMAD_VM_MEM:-4096}"
export RMAD_VM_TIMEOUT="${RMAD_VM_TIMEOUT:-7200}"
export RMAD_VM_ARGS="bench_ns=$(echo $ns | tr ' ' ,) bench_reps=$reps bench_sample=$sample bench_rmpp_reps=$rmpp_reps"
start="$(date +%s)"
"$RMAD_ROOT/scripts/vm/vm-scenario.sh" bench console.log || true
grep -h '^bench: \|\] bench: ' "$out/console.log" | grep -v 'bench-json:' |
	sed 's/^\[[^]]*\] //' || true
python3 "$RMAD_ROOT/scripts/report/bench-report.py" "$out/console.log" "$out"
step "bench: $(($(date +%s) - start)) s in all; $out/results.md, results.json, cost-vs-n.svg"
