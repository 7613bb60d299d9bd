#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`'s row cm, in a VM pair on the bench kernel (scripts/bench.sh):
# cmtime's connection set-up and teardown, node a the client, node b a stock
# node serving. Node a runs the stock ib_cm first, then, in the same boot, the
# kernel's CM on rmad (rmad_cm.ko over the production rmad.ko), then the stock
# one again, BENCH_CM_REPS runs of BENCH_CM_CONNS connections each time. Every
# run's table goes to the console as "cm-bench: LAYER RUN: LINE"
# (scripts/report/cm-report.py reads it).
. /lib.sh
. /pair.sh

conns="${BENCH_CM_CONNS:-500}"
reps="${BENCH_CM_REPS:-5}"
kmod="/lib/modules/$(uname -r)/kernel/drivers/infiniband/core"

setup_link || echo "cm-bench: setup failed" >/dev/kmsg
peer_mac="$(barrier mac "$(cat /sys/class/net/eth0/address)")"
/bin/ip neigh replace "$peer_ip" lladdr "$peer_mac" dev eth0 nud permanent

# cm_times LAYER FIRST: BENCH_CM_REPS cmtime runs against node b, on the CM loaded now,
# numbered from FIRST.
cm_times() {
	i=$2
	while [ $i -lt $(($2 + reps)) ]; do
		timeout 600 cmtime -s 10.0.1.2 -c "$conns" >/tmp/cmtime 2>&1 ||
			echo "cm-bench: $1 $i: failed: $(tail -n 3 /tmp/cmtime | tr '\n' ' ')" >/dev/kmsg
		grep ' : ' /tmp/cmtime | sed "s|^|cm-bench: $1 $i: |" >/dev/kmsg
		i=$((i + 1))
	done
}

if [ "$node" = a ]; then
	barrier serving >/dev/null
	echo "cm-bench: conns $conns reps $reps" >/dev/kmsg
	modprobe rdma_ucm && cm_times stock 1
	rmmod rdma_ucm rdma_cm ib_cm &&
		insmod /modules/rmad.ko && insmod /modules/rmad_cm.ko &&
		insmod "$kmod/rdma_cm.ko" && insmod "$kmod/rdma_ucm.ko" && cm_times rmad 1 ||
		echo "cm-bench: the CM on rmad did not load" >/dev/kmsg
	rmmod rdma_ucm rdma_cm rmad_cm rmad && modprobe rdma_ucm && cm_times stock $((reps + 1)) ||
		echo "cm-bench: the stock CM did not load again" >/dev/kmsg
	barrier done >/dev/null
else
	cmtime -c "$conns" >/tmp/server 2>&1 &
	until rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN"; do
		sleep 0.1
	done
	barrier serving >/dev/null
	barrier done >/dev/null
fi

