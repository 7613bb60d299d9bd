#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark scenario for `make bench`: create rxe0, then load rmad with
# bench=1 per number of outstanding sends (KUnit off): on the bench kernel for
# the times (bench_reps repetitions), which has no irqsoff tracer; on the
# bench-irqsoff kernel (bench_irqsoff_only=1, a second boot) with the tracer on
# for the interrupts-off figures (bench_irqsoff_reps repetitions, 0: none). The
# tracer's hooks charge every interrupt save and restore, which no kernel users
# run does, so no time is taken on that kernel. Each load prints its figures as
# "bench-json:" lines. bench_ns (comma-separated), bench_reps, bench_sample and
# bench_min_ops come from the kernel command line (scripts/bench.sh).
# Then, on two devices, the responder row (bench_served_n GETs, 0: none; see bench_served)
# and the RMPP row (bench_rmpp_reps repetitions, 0: none; see bench_rmpp).
. /lib.sh
setup_rxe || {
	echo "bench: no rxe0"
	exit 1
}
echo 7 >/proc/sys/kernel/printk
echo "bench: clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) (available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource))"
# The irqsoff tracer, on the bench kernel (the test kernel has none): in the interrupts-off
# pass the driver reads and resets its maximum around each part of a round
# (src/testing/bench/irqsoff.c).
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
# Not the functions called with interrupts off: tracing them would lengthen what is measured.
echo 0 >/sys/kernel/tracing/options/function-trace 2>/dev/null
T=/sys/kernel/tracing
# The reader of the interrupts-off figures (src/testing/bench/irqsoff.c), while the tracer is on:
# for each request on IRQSOFF_ASK (a figure's label, or "-" to reset only) it reads the maximum,
# resets it and answers with it on IRQSOFF_ANSWER. From the reset to its next answer it runs only
# shell builtins, so no process is created or ends inside a measured window (under emulation a
# process's creation and exit hold interrupts off for milliseconds).
IRQSOFF_ASK=/.bench-irqsoff-ask
IRQSOFF_ANSWER=/.bench-irqsoff-answer
# irqsoff_where LABEL US: with bench_irqsoff_where=1 (BENCH_IRQSOFF_WHERE=1), one line to the
# kernel log: where the longest stretch started and ended and the stack at its end, as the tracer
# recorded them. It starts processes: only before a reset.
irqsoff_where() {
	[ "${bench_irqsoff_where:-0}" = 1 ] || return 0
	echo "bench-irqsoff-where: $1: $2 us:" \
		$(sed -n 's/^# *=> \(started\|ended\) at: *\(.*\)/\1 \2;/p; s/^ => \(.*\)/< \1/p' \
			$T/trace | head -n 12) >/dev/kmsg
}
irqsoff_reader() {
	while [ -p $IRQSOFF_ASK ]; do
		read -r label <$IRQSOFF_ASK || continue
		read -r us <$T/tracing_max_latency
		[ "$label" = - ] || irqsoff_where "$label" "$us"
		echo 0 >$T/tracing_max_latency
		echo "$us" >$IRQSOFF_ANSWER
	done
}
# irqsoff_on, irqsoff_off: the tracer and its reader, around one load of the interrupts-off pass.
irqsoff_on() {
	tracer irqsoff
	mkfifo $IRQSOFF_ASK $IRQSOFF_ANSWER
	irqsoff_reader &
	irqsoff_pid=$!
}
irqsoff_off() {
	rm -f $IRQSOFF_ASK $IRQSOFF_ANSWER
	kill $irqsoff_pid 2>/dev/null
	wait $irqsoff_pid 2>/dev/null
	tracer nop
}
# tracer NAME: selects the tracer NAME (irqsoff or nop); fails if there is no such tracer.
tracer() {
	echo "$1" >/sys/kernel/tracing/current_tracer 2>/dev/null
}
irqsoff=""
if tracer irqsoff && tracer nop; then
	irqsoff=1
	echo "bench: irqsoff tracer available (on for the interrupts-off pass only)"
else
	echo "bench: no irqsoff tracer: no irqoff figures"
fi
# With bench_profile=1 (BENCH_PROFILE=1), perf samples each run on every CPU; its report is
# printed before rmmod, while /sys/module still says where rmad's code is.
profile=""
if [ "${bench_profile:-0}" = 1 ]; then
	if [ -x /bin/perf ]; then
		echo 0 >/proc/sys/kernel/kptr_restrict
		echo -1 >/proc/sys/kernel/perf_event_paranoid
		profile=1
	else
		echo "bench: bench_profile=1 but no /bin/perf: no profile"
	fi
fi

# bench_profile_report N: the report of the run of N outstanding sends: by function alone
# (self), then with what each calls (children).
bench_profile_report() {
	# Where each module's code is, for scripts/report/profile-symbols.py: this perf names no
	# function of an out-of-tree module.
	for m in /sys/module/*/sections/.text; do
		name="${m#/sys/module/}"
		echo "bench-profile: module ${name%%/*} $(cat "$m")"
	done
	for mode in --no-children --children; do
		echo "bench-profile: == n=$1 $mode"
		HOME=/tmp /bin/perf report -i "/tmp/perf-$1.data" --stdio $mode --sort sym -g none \
			--percent-limit 0.5 2>&1 | grep -v '^#' | grep -v '^$' | head -n 80 |
			sed 's/^/bench-profile: /'
	done
	# A sample taken with interrupts off lands where they come back on: who re-enabled them.
	echo "bench-profile: == n=$1 interrupts back on, by caller"
	HOME=/tmp /bin/perf report -i "/tmp/perf-$1.data" --stdio --no-children --sort sym \
		-g graph,0.5,callee --symbols _raw_spin_unlock_irqrestore,_raw_spin_unlock_irq_enable \
		2>&1 | grep -v '^#' | grep -v '^$' | head -n 160 | sed 's/^/bench-profile: /'
	rm -f "/tmp/perf-$1.data"
}

# With bench_insn=1 (BENCH_INSN=1) the driver marks its timed windows for QEMU's instruction
# counter (src/testing/bench/insn.h); with bench_insn_profile=1 too, each load is followed by
# the guest's text symbols as "bench-ksym:" lines, printed while rmad is still loaded, for the
# per-function profile (scripts/report/insn-report.py).
bench_ksyms() {
	[ "${bench_insn_profile:-0}" = 1 ] || return 0
	echo 0 >/proc/sys/kernel/kptr_restrict
	grep ' [tT] ' /proc/kallsyms | sed 's/^/bench-ksym: /'
}

# bench_load N REPS SCALE [PROFILE]: one load of the benchmark for N outstanding sends, REPS
# repetitions, SCALE sends per scaling round (0: none); sampled by perf if PROFILE is 1.
bench_load() {
	n="$1" profile_this="${4:-}"
	set -- insmod /modules/rmad.ko bench=1 bench_n="$1" bench_reps="$2" \
		bench_sample="${bench_sample:-1000}" bench_min_ops="${bench_min_ops:-10000}" \
		bench_scale="$3" bench_insn="${bench_insn:-0}"
	if [ "$profile_this" = 1 ]; then
		set -- env HOME=/tmp /bin/perf record -q -N -a -g -F 499 -o "/tmp/perf-$n.data" -- "$@"
	fi
	"$@" || echo "bench: n=$n: the run failed"
	[ "$profile_this" != 1 ] || bench_profile_report "$n"
	bench_ksyms
	grep -q '^rmad ' /proc/modules && rmmod rmad
}

ns="$(echo "${bench_ns:-10,100,1000,10000,100000}" | tr ',' ' ')"
for n in $ns; do
	echo "bench: n=$n: start $(cut -d' ' -f1 /proc/uptime) s"
	# The scaling rounds run in one load: their own number of sends, not N's.
	scale=0
	[ "$n" != "${bench_scale_n:-10000}" ] || scale="$n"
	# bench_irqsoff_only=1: the interrupts-off pass only (on the bench-irqsoff kernel).
	[ "${bench_irqsoff_only:-0}" = 1 ] || bench_load "$n" "${bench_reps:-5}" "$scale" "$profile"
	if [ -n "$irqsoff" ] && [ "${bench_irqsoff_reps:-3}" -gt 0 ]; then
		irqsoff_on
		bench_load "$n" "${bench_irqsoff_reps:-3}" 0
		irqsoff_off
	fi
	echo "bench: n=$n: end $(cut -d' ' -f1 /proc/uptime) s"
done

# bench_stress CMD: one command of rmad's stress file; prints its answer.
bench_stress() {
	echo "$1" >/sys/kernel/debug/rmad/stress && cat /sys/kernel/debug/rmad/stress
}

# The removal row: for each N of bench_removal_ns, bench_removal_reps times, an agent of the C
# MAD layer, then one of rmad, holds N sends on rxe0 that the device took, and rxe0 is removed:
# the irqsoff tracer's maximum while `rdma link delete` ran (as the driver reads it), and
# whether each send's handler ran once, flushed (src/testing/bench/hold.rs).

# removal_once IMPL N REP: one removal; prints its bench-json line or why there is none, and
# creates rxe0 again.
removal_once() {
	if ! bench_stress "hold $1 $2" >/dev/null; then
		echo "bench: removal: $1 n=$2: the run failed (hold)"
		return 0
	fi
	echo 0 >$T/tracing_max_latency
	rdma link delete rxe0 || echo "bench: removal: $1 n=$2: the run failed (rdma link delete)"
	us="$(cat $T/tracing_max_latency)"
	irqsoff_where "$1/irqoff_removal/$2" "$us"
	line="$(bench_stress unhold)" || line="failed"
	if [ "$line" = "posted $2 flushed $2 other 0" ]; then
		echo "bench-json: {\"impl\": \"$1\", \"op\": \"irqoff_removal\", \"n\": $2, \"rep\": $3, \"value\": $((us * 1000)), \"unit\": \"ns\"}"
	else
		echo "bench: removal: $1 n=$2: the sends ended so: $line (expected: posted $2 flushed $2 other 0)"
	fi
	setup_rxe && wait_gid rxe0 0 >/dev/null || echo "bench: removal: rxe0 did not come back"
}

bench_removal() {
	[ -n "${bench_removal_ns-1000,100000}" ] && [ "${bench_removal_reps:-3}" -gt 0 ] 2>/dev/null ||
		return 0
	if ! tracer irqsoff; then
		echo "bench: removal: no irqsoff tracer: no removal row"
		return 0
	fi
	echo "bench: removal: start $(cut -d' ' -f1 /proc/uptime) s"
	insmod /modules/rmad.ko || {
		echo "bench: removal: the run failed (insmod)"
		return 1
	}
	for n in $(echo "${bench_removal_ns-1000,100000}" | tr ',' ' '); do
		r=1
		while [ $r -le "${bench_removal_reps:-3}" ]; do
			removal_once c "$n" $r
			removal_once rmad "$n" $r
			r=$((r + 1))
		done
	done
	rmmod rmad
	tracer nop
	echo "bench: removal: end $(cut -d' ' -f1 /proc/uptime) s"
}
bench_removal
echo "bench: console lines 'unsupported base version': $(dmesg | grep -c 'unsupported base version')"

# The RMPP row: one GET answered with 64 KiB or 1 MiB, both ends the same layer (the C MAD
# layer's kernel RMPP on both, or rmad's on both), with no loss and with 1 % each way.
#
# On one device rxe loops a packet back before any qdisc sees it, so the two ends are two
# devices on a veth pair, one end in a network namespace of its own: rxe0 on vb0 asks, rxe1
# on vb1 (namespace "peer") answers, and netem on vb0 and vb1 drops. The GETs use the
# IPv6 link-local GIDs (index 0): over IPv4 ib_core's RMPP sender never matches an ACK
# (Documentation/behaviour.md §8.14). Each result is one "bench-rmpp:" JSON line.

# iproute2's tools by their paths: busybox's sh prefers its own applets.
IP=/bin/ip
TC=/bin/tc

# rmpp_loss PCT: netem drops PCT % on both ends. Only called when no transfer is on the
# way: a qdisc change drops what the device is sending, and rxe moves a QP whose
# transmission fails to the error state.
rmpp_loss() {
	$TC qdisc change dev vb0 root netem loss "$1%" &&
		$IP netns exec peer $TC qdisc change dev vb1 root netem loss "$1%"
}

# rmpp_quiet: waits (at most 60 s) until no rmad agent has a send outstanding, then 2 s
# more for ib_core's (they are not listed).
rmpp_quiet() {
	k=0
	while grep -q "outstanding [1-9]" /sys/kernel/debug/rmad/agents; do
		k=$((k + 1))
		[ $k -lt 600 ] || break
		sleep 0.1
	done
	sleep 2
}

# rmpp_step CMD...: runs CMD; on failure says which step failed.
rmpp_step() {
	"$@" || {
		echo "bench: rmpp: the run failed at: $*"
		return 1
	}
}

# rmpp_setup: the veth pair, the namespace, netem on both ends and the two devices.
rmpp_setup() {
	# ip netns keeps its namespaces under /run/netns, which the initramfs lacks.
	rmpp_step mkdir -p /run/netns &&
		rmpp_step $IP link add vb0 type veth peer name vb1 &&
		rmpp_step $IP netns add peer &&
		rmpp_step $IP link set vb1 netns peer &&
		rmpp_step $IP link set vb0 up &&
		rmpp_step $IP addr add 10.0.9.1/24 dev vb0 &&
		rmpp_step $IP -n peer link set vb1 up &&
		rmpp_step $IP -n peer addr add 10.0.9.2/24 dev vb1 &&
		rmpp_step $TC qdisc add dev vb0 root netem &&
		rmpp_step $IP netns exec peer $TC qdisc add dev vb1 root netem &&
		rmpp_step rdma link delete rxe0 &&
		rmpp_step rdma link add rxe0 type rxe netdev vb0 &&
		rmpp_step $IP netns exec peer rdma link add rxe1 type rxe netdev vb1 || return 1
	peer_gid="$(wait_gid rxe1 0)" || {
		echo "bench: rmpp: the run failed: rxe1 has no GID"
		return 1
	}
}

# rmpp_drops LOSS: what netem dropped on each end so far.
rmpp_drops() {
	a="$($TC -s qdisc show dev vb0 | sed -n 's/.* \([0-9]*\) pkt (dropped \([0-9]*\),.*/\2 of \1/p')"
	b="$($IP netns exec peer $TC -s qdisc show dev vb1 |
		sed -n 's/.* \([0-9]*\) pkt (dropped \([0-9]*\),.*/\2 of \1/p')"
	echo "bench: rmpp: after the transfers at $1 %, netem dropped $a packets on vb0, $b on vb1"
}

# rmpp_get IMPL BYTES LOSS REP: one GET through IMPL's requester on rxe0 (its responder on
# rxe1 answers with BYTES); prints its bench-rmpp line.
rmpp_get() {
	# The response timeout covers the whole answer (45 s: the C layer's receiver ends a
	# transfer 40 s after its first segment anyway; rmad's slowest took 29 s, on the sanitizer
	# kernel). No retry: a lost GET (1 % at most) counts as a transfer that did not complete.
	line="$(bench_stress "rmpp $1 $peer_gid 0x03 45000 0")" || line="failed"
	status="$(echo "$line" | sed -n 's/.* status \(-*[0-9]*\) .*/\1/p')"
	intact="$(echo "$line" | sed -n 's/.* intact \([0-9]*\) .*/\1/p')"
	retries="$(echo "$line" | sed -n 's/.* retries \([0-9]*\) .*/\1/p')"
	ms="$(echo "$line" | sed -n 's/.* ms \([0-9]*\)$/\1/p')"
	echo "bench-rmpp: {\"impl\":\"$1\",\"bytes\":$2,\"loss_pct\":$3,\"rep\":$4,\"status\":${status:--1},\"intact\":${intact:-0},\"retries\":${retries:-0},\"ms\":${ms:-0}}"
	rmpp_quiet
}

# rmpp_reps IMPL BYTES LOSS: $reps GETs through IMPL.
rmpp_reps() {
	r=1
	while [ $r -le "$reps" ]; do
		rmpp_get "$1" "$2" "$3" $r
		r=$((r + 1))
	done
}

# served_run IMPL REP: bench_served_n GETs through ib_core's requester on rxe0, 16
# outstanding at once, answered by what runs on rxe1; prints its bench-json line (requests
# answered per second), or says why there is none.
served_run() {
	count="${bench_served_n}"
	line="$(bench_stress "rate $peer_gid 0x0a $count 16")" || {
		echo "bench: served: $1: the run failed"
		return 0
	}
	answered="$(echo "$line" | sed -n 's/.* answered \([0-9]*\) .*/\1/p')"
	retries="$(echo "$line" | sed -n 's/.* retries \([0-9]*\) .*/\1/p')"
	ns="$(echo "$line" | sed -n 's/.* ns \([0-9]*\)$/\1/p')"
	if [ "${answered:-0}" != "$count" ] || [ "${ns:-0}" -le 0 ]; then
		echo "bench: served: $1: answered ${answered:-0} of $count; no figure"
		return 0
	fi
	[ "${retries:-0}" = 0 ] || echo "bench: served: $1: $retries retries (lost datagrams)"
	echo "bench-json: {\"impl\": \"$1\", \"op\": \"served\", \"n\": $count, \"rep\": $2, \"value\": $((count * 1000000000 / ns)), \"unit\": \"requests/s\"}"
}

# bench_served: the responder row. The same GETs (class 0x0a) answered on rxe1 first by an
# ib_core agent (serve), then by an rmad agent there, which ib_core's forwarding agent hands
# them to (respond); bench_reps runs each.
bench_served() {
	[ "${bench_served_n:-0}" -gt 0 ] 2>/dev/null || return 0
	echo "bench: served: start $(cut -d' ' -f1 /proc/uptime) s"
	rmpp_step bench_stress "serve 0x0a rxe1" >/dev/null || return 1
	r=1
	while [ $r -le "${bench_reps:-5}" ]; do
		served_run c $r
		r=$((r + 1))
	done
	bench_stress unserve >/dev/null
	[ "$(bench_stress "respond 0x0a rxe1")" = responding ] || {
		echo "bench: served: the run failed (respond 0x0a rxe1)"
		return 1
	}
	r=1
	while [ $r -le "${bench_reps:-5}" ]; do
		served_run rmad $r
		r=$((r + 1))
	done
	echo "bench: served: rmad's responder: $(bench_stress unrespond)"
	echo "bench: served: end $(cut -d' ' -f1 /proc/uptime) s"
}

# bench_rmpp: the RMPP rows (bench_rmpp_reps repetitions of each).
bench_rmpp() {
	reps="${bench_rmpp_reps:-2}"
	[ "$reps" -gt 0 ] 2>/dev/null || return 0
	echo "bench: rmpp: start $(cut -d' ' -f1 /proc/uptime) s"
	for loss in 0 1; do
		rmpp_loss $loss || echo "bench: rmpp: the run failed (netem loss $loss %)"
		for bytes in 65536 1048576; do
			bench_stress "serve-rmpp 0x03 $bytes rxe1" >/dev/null ||
				echo "bench: rmpp: the run failed (serve-rmpp $bytes)"
			rmpp_reps c $bytes $loss
			bench_stress "respond-rmpp 0x03 $bytes rxe1" >/dev/null ||
				echo "bench: rmpp: the run failed (respond-rmpp $bytes)"
			rmpp_reps rmad $bytes $loss
			echo "bench: rmpp: rmad's responder, $bytes bytes at $loss %: $(bench_stress unrespond-rmpp)"
		done
		rmpp_drops $loss
	done
	echo "bench: rmpp: end $(cut -d' ' -f1 /proc/uptime) s"
}

# bench_goodput: the goodput row (src/testing/bench/goodput.c): each retry policy against an
# overloaded responder on rxe0, counted for bench_goodput_secs seconds (0: no row), in turn,
# bench_goodput_reps times.
bench_goodput() {
	[ "${bench_goodput_secs:-0}" -gt 0 ] 2>/dev/null || return 0
	echo "bench: goodput: start $(cut -d' ' -f1 /proc/uptime) s"
	insmod /modules/rmad.ko || {
		echo "bench: goodput: the run failed (insmod)"
		return 1
	}
	rep=0
	while [ "$rep" -lt "${bench_goodput_reps:-2}" ]; do
		for policy in c rmad rmad-backoff; do
			bench_stress "goodput $policy $bench_goodput_secs $rep" ||
				echo "bench: goodput: $policy: the run failed"
		done
		rep=$((rep + 1))
	done
	rmmod rmad
	echo "bench: goodput: end $(cut -d' ' -f1 /proc/uptime) s"
}

# bench_two_nodes: the rows of two devices on the veth pair, the responder row (no loss)
# first, then the RMPP rows.
bench_two_nodes() {
	[ "${bench_served_n:-0}" -gt 0 ] 2>/dev/null ||
		[ "${bench_rmpp_reps:-2}" -gt 0 ] 2>/dev/null || return 0
	rmpp_setup 2>&1 || return 1
	insmod /modules/rmad.ko || {
		echo "bench: two nodes: the run failed (insmod)"
		return 1
	}
	bench_served
	bench_rmpp
	rmmod rmad
}
bench_goodput
bench_two_nodes
echo "bench: done"
