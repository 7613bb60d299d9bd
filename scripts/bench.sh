#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: boot the VM on the bench kernel (built and cached on first
# use: the test kernel's configuration without its debugging options and
# without the TRACE_IRQFLAGS hooks; scripts/setup/build-kernel.sh bench), create rxe0 and
# measure the C MAD layer, rmad's Rust API and rmad's C API (and the floor)
# side by side, for each number of outstanding sends, then one RMPP transfer
# at a time through each layer (tests/vm/bench.sh); then boot again on the
# bench-irqsoff kernel (the same plus the irqsoff tracer) for the
# interrupts-off figures and the removal row; then write
# build/bench/results.json, results.md and cost-vs-n.svg
# (scripts/report/bench-report.py); last the row cm in a VM pair
# (tests/vm/cm-bench.sh: build/bench/cm.md). Figures only; nothing is asserted.
#
# BENCH_INSN=1 counts instructions instead (Documentation/performance.md): one
# boot of the bench kernel under QEMU with one host thread for every vCPU and
# the plugin of tools/insncount/ (built here), the timed windows of the
# driver marked (src/testing/bench/insn.h); writes build/bench/insn.md and
# insn.json, instructions per operation for every row, implementation and N
# (scripts/report/insn-report.py), and the times of the same run.
#
# Knobs (environment):
#   BENCH_INSN    1: the instruction-count mode (default 0). Its defaults: BENCH_NS
#                 "100 10000", BENCH_REPS 1, one vCPU, and none of the rows after the
#                 rounds (scaling, removal, responder, goodput, RMPP, interrupts-off)
#   BENCH_INSN_PROFILE  1: also where each window's instructions went, per function
#                 (build/bench/insn-profile.txt; implies BENCH_INSN=1; several times slower)
#   BENCH_INSN_CPUS  vCPUs of the counting run (default 1: a window then holds only what it
#                 runs; with 2 the device's work on the other vCPU lands in the post window)
#   BENCH_KERNEL  bench (default) or test: the sanitizer kernel of `make test`, whose
#                 figures measure its instrumentation as much as rmad (labelled "test")
#   BENCH_NS      numbers of outstanding sends (default "10 100 1000 10000 100000"; on the
#                 bench kernel 100000 takes about a minute per repetition, on the test kernel
#                 takes roughly 15 minutes per repetition here, see README.md)
#   BENCH_REPS    repetitions of each timed figure (default 5), on the bench kernel, which has
#                 no irqsoff tracer: its hooks charge every interrupt save and restore, as no
#                 kernel users run does
#   BENCH_IRQSOFF_REPS  repetitions of each interrupts-off figure, taken in the second boot, on
#                 the bench-irqsoff kernel, with the tracer on (default 3; 0: no
#                 interrupts-off figures; with BENCH_REMOVAL_NS "" too, no second boot)
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
#   BENCH_CM_REPS  cmtime runs of each layer of the row cm (default 5; 0: no row cm), a VM pair
#                 of its own (tests/vm/cm-bench.sh: the stock CM, then the kernel's CM on rmad,
#                 then the stock one again, in one boot), BENCH_CM_CONNS connections each
#                 (default 500)
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
insn_profile="${BENCH_INSN_PROFILE:-0}"
[[ "$insn_profile" =~ ^[01]$ ]] || {
	echo "error: bench: BENCH_INSN_PROFILE is 0 or 1, not '$insn_profile'" >&2
	exit 1
}
insn="${BENCH_INSN:-$insn_profile}"
[[ "$insn" =~ ^[01]$ ]] || {
	echo "error: bench: BENCH_INSN is 0 or 1, not '$insn'" >&2
	exit 1
}
# What a knob defaults to: $1 normally, $2 in the instruction-count mode.
mode_default() {
	if [ "$insn" = 1 ]; then echo "$2"; else echo "$1"; fi
}
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

ns="${BENCH_NS:-$(mode_default "10 100 1000 10000 100000" "100 10000")}"
reps="${BENCH_REPS:-$(mode_default 5 1)}"
sample="${BENCH_SAMPLE:-1000}"
min_ops="${BENCH_MIN_OPS:-10000}"
rmpp_reps="${BENCH_RMPP_REPS:-$(mode_default 2 0)}"
served="${BENCH_SERVED:-$(mode_default 5000 0)}"
scale_n="${BENCH_SCALE:-$(mode_default 10000 0)}"
removal_ns="${BENCH_REMOVAL_NS-$(mode_default "1000 100000" "")}"
removal_reps="${BENCH_REMOVAL_REPS:-3}"
goodput_secs="${BENCH_GOODPUT_SECS:-$(mode_default 10 0)}"
goodput_reps="${BENCH_GOODPUT_REPS:-2}"
irqsoff_reps="${BENCH_IRQSOFF_REPS:-$(mode_default 3 0)}"
irqsoff_where="${BENCH_IRQSOFF_WHERE:-0}"
cm_reps="${BENCH_CM_REPS:-$(mode_default 5 0)}"
cm_conns="${BENCH_CM_CONNS:-500}"
[[ "$irqsoff_where" =~ ^[01]$ ]] || die "bench: BENCH_IRQSOFF_WHERE is 0 or 1, not '$irqsoff_where'"
for v in $ns $reps $sample $min_ops; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "bench: not a positive number: $v"
done
for v in $removal_ns; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "bench: not a positive number: $v"
done
for v in $rmpp_reps $served $scale_n $removal_reps $irqsoff_reps $goodput_secs $goodput_reps $cm_reps $cm_conns; do
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
[ "$insn" = 0 ] || [ "$kernel" = bench ] || die "bench: BENCH_INSN counts on the bench kernel only"
[ "$insn" = 0 ] || [ "$profile" = 0 ] || die "bench: BENCH_INSN and BENCH_PROFILE do not go together"
start="$(date +%s)"
rm -f "$out/console.log" "$out/console-irqsoff.log" "$out/insn.log"
if [ "$insn" = 1 ]; then
	plugin="$("$RMAD_ROOT/scripts/setup/build-insncount.sh")"
	export RMAD_VM_ACCEL="tcg,thread=single" RMAD_VM_CPUS="${BENCH_INSN_CPUS:-1}"
	[[ "$RMAD_VM_CPUS" =~ ^[12]$ ]] || die "bench: BENCH_INSN_CPUS is 1 or 2, not '$RMAD_VM_CPUS'"
	opts=""
	[ "$insn_profile" = 0 ] || opts=",profile=on"
	# -icount: the guest's clock advances by 1 ns per instruction (shift=0), not with the
	# host's: timer ticks, and the preemptions they bring, fall at the same instructions in
	# every run however loaded the host is; sleep=off: an idle guest's clock jumps to its
	# next timer instead of waiting in real time, which would move them again.
	export RMAD_VM_QEMU="${RMAD_VM_QEMU:-} -icount shift=0,sleep=off -plugin $plugin$opts -d plugin -D $out/insn.log"
	RMAD_VM_ARGS="$RMAD_VM_ARGS bench_insn=1 bench_insn_profile=$insn_profile"
fi
# A guest that fails still leaves figures worth reading; a build that fails leaves none.
status=0
"$RMAD_ROOT/scripts/vm/vm-scenario.sh" bench console.log || status=$?
[ -s "$out/console.log" ] || die "bench: the VM did not run (status $status); see above"
[ "$status" -eq 0 ] || step "bench: the VM exited with status $status; the figures below may be partial"
consoles=("$out/console.log")
# The interrupts-off figures and the removal row: a second boot, on the kernel with the tracer.
if [ "$kernel" = bench ] && [ "$insn" = 0 ] &&
	{ [ "$irqsoff_reps" -gt 0 ] || { [ -n "$removal_ns" ] && [ "$removal_reps" -gt 0 ]; }; }; then
	status=0
	RMAD_KERNEL=bench-irqsoff RMAD_VM_ARGS="$RMAD_VM_ARGS bench_irqsoff_only=1 bench_rmpp_reps=0 bench_served_n=0 bench_goodput_secs=0" \
		"$RMAD_ROOT/scripts/vm/vm-scenario.sh" bench console-irqsoff.log || status=$?
	[ "$status" -eq 0 ] || step "bench: the interrupts-off VM exited with status $status; its figures may be partial"
	consoles+=("$out/console-irqsoff.log")
fi
# The row cm: cmtime against a stock node, in a VM pair of its own, on the same kernel.
if [ "$insn" = 0 ] && [ "$cm_reps" -gt 0 ]; then
	status=0
	RMAD_PAIR_VERDICT=0 RMAD_PAIR_ARGS="BENCH_CM_REPS=$cm_reps BENCH_CM_CONNS=$cm_conns" \
		"$RMAD_ROOT/scripts/vm/vm-pair.sh" cm-bench "$RMAD_ROOT/tests/vm/cm-bench.sh" || status=$?
	[ "$status" -eq 0 ] || step "bench: the cm pair exited with status $status; its figures may be partial"
	python3 "$RMAD_ROOT/scripts/report/cm-report.py" "$RMAD_ROOT/build/cm-bench/a/console.log" "$out/cm.md"
fi
cat "${consoles[@]}" >"$out/console-all.log"
grep -h '^bench: \|\] bench: ' "$out/console-all.log" | grep -v 'bench-json:' |
	sed 's/^\[[^]]*\] //' || true
python3 "$RMAD_ROOT/scripts/report/bench-report.py" "$out/console-all.log" "$out" "$kernel"
if [ "$insn" = 1 ]; then
	python3 "$RMAD_ROOT/scripts/report/insn-report.py" "$out/console.log" "$out/insn.log" "$out"
	step "bench: instructions per operation: $out/insn.md, insn.json"
	[ "$insn_profile" = 0 ] || step "bench: where they went: $out/insn-profile.txt"
fi
if [ "$irqsoff_where" = 1 ]; then
	sed -n 's/^.*bench-irqsoff-where: //p' "$out/console-all.log" >"$out/irqsoff-where.txt"
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
