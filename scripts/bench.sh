#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: boot the VM once on the bench kernel (built and cached on first
# use: the test kernel's configuration without its debugging options, plus the
# irqsoff tracer; scripts/setup/build-kernel.sh bench), create rxe0 and measure the C MAD layer,
# rmad's Rust API and rmad's C API (and the floor) side by side, for each
# number of outstanding sends, then one RMPP transfer at a time through each
# layer (tests/vm/bench.sh); then write build/bench/results.json,
# results.md and cost-vs-n.svg (scripts/report/bench-report.py). Figures only;
# nothing is asserted.
#
# Knobs (environment):
#   BENCH_KERNEL  bench (default) or test: the sanitizer kernel of `make test`, whose
#                 figures measure its instrumentation as much as rmad (labelled "test")
#   BENCH_NS      numbers of outstanding sends (default "10 100 1000 10000 100000"; on the
#                 bench kernel 100000 takes about a minute per repetition, on the test kernel
#                 takes roughly 15 minutes per repetition here, see README.md)
#   BENCH_REPS    repetitions of each timed figure (default 5), taken with the irqsoff tracer
#                 off: it charges every stretch with interrupts off, as no kernel users run does
#   BENCH_IRQSOFF_REPS  repetitions of each interrupts-off figure, taken in a second load per
#                 N with the irqsoff tracer on (default 3; 0: no interrupts-off figures)
#   BENCH_IRQSOFF_WHERE  1: the console also says, for each interrupts-off figure, where its
#                 longest stretch started and ended and the stack at its end
#                 (build/bench/irqsoff-where.txt; default 0)
#   BENCH_SAMPLE  timed modifies, cancels and matched responses per pass (default 1000)
#   BENCH_MIN_OPS  at N <= 100, each figure repeats its part of the round until it has
#                 timed at least this many operations (default 10000): ten or a hundred
#                 alone are noise
#   BENCH_RMPP_REPS  repetitions of each RMPP transfer (default 2; 0: no RMPP row). Each
#                 transfer the C layer cannot complete (1 MiB at 1 %) waits its whole 45 s
#   BENCH_SCALE   sends per scaling round (one and two CPUs posting; default 10000, run in
#                 the load whose N is the same; 0 or an N not in BENCH_NS: no scaling row)
#   BENCH_REMOVAL_NS  numbers of sends held while the device is removed (default
#                 "1000 100000"; "": no removal row), BENCH_REMOVAL_REPS times each (default 3)
#   BENCH_SERVED  GETs per run of the responder row (default 5000; 0: no responder row),
#                 BENCH_REPS runs for each responder
#   BENCH_GOODPUT_SECS  seconds each retry policy of the goodput row is counted (after a
#                 12 s warm-up; default 10; 0: no goodput row), BENCH_GOODPUT_REPS times
#                 (default 2)
#   BENCH_PROFILE 1: sample every run with perf in the guest (cpu-clock, all CPUs) and
#                 write build/bench/profile.txt: where the time of each N went, by
#                 function (installs Debian's linux-perf if the machine lacks perf)
#   RMAD_VM_MEM   guest memory in MB (default 4096 here)
#   RMAD_VM_TIMEOUT  seconds before the guest is killed (default 7200 here)
set -euo pipefail
kernel="${BENCH_KERNEL:-bench}"
case "$kernel" in
bench) debug_args="" ;;
test) debug_args="sysctl.kernel.hung_task_panic=1 slub_debug=U kasan_multi_shot" ;;
*)
	echo "error: bench: BENCH_KERNEL is bench or test, not '$kernel'" >&2
	exit 1
	;;
esac
# lib.sh reads RMAD_KERNEL: the modules for the bench kernel go to build/bench/.
export RMAD_KERNEL="$kernel" RMAD_VM_DEBUG_ARGS="$debug_args"
source "$(dirname "$0")/lib.sh"

ns="${BENCH_NS:-10 100 1000 10000 100000}"
reps="${BENCH_REPS:-5}"
sample="${BENCH_SAMPLE:-1000}"
min_ops="${BENCH_MIN_OPS:-10000}"
rmpp_reps="${BENCH_RMPP_REPS:-2}"
served="${BENCH_SERVED:-5000}"
scale_n="${BENCH_SCALE:-10000}"
removal_ns="${BENCH_REMOVAL_NS-1000 100000}"
removal_reps="${BENCH_REMOVAL_REPS:-3}"
goodput_secs="${BENCH_GOODPUT_SECS:-10}"
goodput_reps="${BENCH_GOODPUT_REPS:-2}"
irqsoff_reps="${BENCH_IRQSOFF_REPS:-3}"
irqsoff_where="${BENCH_IRQSOFF_WHERE:-0}"
[[ "$irqsoff_where" =~ ^[01]$ ]] || die "bench: BENCH_IRQSOFF_WHERE is 0 or 1, not '$irqsoff_where'"
for v in $ns $reps $sample $min_ops; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "bench: not a positive number: $v"
done
for v in $removal_ns; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "bench: not a positive number: $v"
done
for v in $rmpp_reps $served $scale_n $removal_reps $irqsoff_reps $goodput_secs $goodput_reps; do
	[[ "$v" =~ ^[0-9]+$ ]] || die "bench: not a number: $v"
done
out="$RMAD_ROOT/build/bench"
export RMAD_VM_MEM="${RMAD_VM_MEM:-4096}"
export RMAD_VM_TIMEOUT="${RMAD_VM_TIMEOUT:-7200}"
export RMAD_VM_ARGS="bench_ns=$(echo $ns | tr ' ' ,) bench_reps=$reps bench_sample=$sample bench_min_ops=$min_ops bench_rmpp_reps=$rmpp_reps bench_served_n=$served bench_scale_n=$scale_n bench_removal_ns=$(echo $removal_ns | tr ' ' ,) bench_removal_reps=$removal_reps bench_irqsoff_reps=$irqsoff_reps bench_irqsoff_where=$irqsoff_where bench_goodput_secs=$goodput_secs bench_goodput_reps=$goodput_reps"
profile="${BENCH_PROFILE:-0}"
[[ "$profile" =~ ^[01]$ ]] || die "bench: BENCH_PROFILE is 0 or 1, not '$profile'"
if [ "$profile" = 1 ]; then
	command -v perf >/dev/null || "$RMAD_ROOT/scripts/setup/install-packages.sh" linux-perf
	export RMAD_INITRAMFS_TOOLS=perf
	RMAD_VM_ARGS="$RMAD_VM_ARGS bench_profile=1"
fi
start="$(date +%s)"
rm -f "$out/console.log"
# A guest that fails still leaves figures worth reading; a build that fails leaves none.
status=0
"$RMAD_ROOT/scripts/vm/vm-scenario.sh" bench console.log || status=$?
[ -s "$out/console.log" ] || die "bench: the VM did not run (status $status); see above"
[ "$status" -eq 0 ] || step "bench: the VM exited with status $status; the figures below may be partial"
grep -h '^bench: \|\] bench: ' "$out/console.log" | grep -v 'bench-json:' |
	sed 's/^\[[^]]*\] //' || true
python3 "$RMAD_ROOT/scripts/report/bench-report.py" "$out/console.log" "$out" "$kernel"
if [ "$irqsoff_where" = 1 ]; then
	sed -n 's/^.*bench-irqsoff-where: //p' "$out/console.log" >"$out/irqsoff-where.txt"
	step "bench: where each interrupts-off maximum was: $out/irqsoff-where.txt"
fi
if [ "$profile" = 1 ]; then
	sed -n 's/^\(\[[^]]*\] \)*bench-profile: //p' "$out/console.log" >"$out/profile.raw.txt"
	python3 "$RMAD_ROOT/scripts/report/profile-symbols.py" "$out/profile.raw.txt" \
		"$RMAD_OUT/module-test" "$("$RMAD_ROOT/scripts/setup/bootstrap.sh" 2>/dev/null)" \
		>"$out/profile.txt"
	step "bench: profile: $out/profile.txt ($(wc -l <"$out/profile.txt") lines)"
fi
step "bench: $(($(date +%s) - start)) s in all; $out/results.md, results.json, cost-vs-n.svg"
