#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark scenario for `make bench`: create rxe0, then load rmad with
# bench=1 once per number of outstanding sends (KUnit off); each load prints
# its figures as "bench-json:" lines. bench_ns (comma-separated), bench_reps
# and bench_sample come from the kernel command line (scripts/bench.sh).
. /lib.sh
setup_rxe || {
	echo "bench: no rxe0"
	exit 1
}
echo 7 >/proc/sys/kernel/printk
ns="$(echo "${bench_ns:-10,100,1000,10000}" | tr ',' ' ')"
for n in $ns; do
	echo "bench: n=$n: start $(cut -d' ' -f1 /proc/uptime) s"
	insmod /modules/rmad.ko bench=1 bench_n="$n" bench_reps="${bench_reps:-5}" \
		bench_sample="${bench_sample:-1000}" || echo "bench: n=$n: the run failed"
	grep -q '^rmad ' /proc/modules && rmmod rmad
	echo "bench: n=$n: end $(cut -d' ' -f1 /proc/uptime) s"
done
echo "bench: console lines 'unsupported base version': $(dmesg | grep -c 'unsupported base version')"
echo "bench: done"
