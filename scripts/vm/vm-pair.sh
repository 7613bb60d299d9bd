#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot two test VMs (nodes a and b) joined by two emulated Ethernet links, each
# running SCENARIO with RMAD_NODE=a or b on its kernel command line, and turn
# what each reported into a verdict: build/NAME/a/vm.json against column NAME-a
# of tests/suites.txt, build/NAME/b/vm.json against column NAME-b (their own
# checks in suites rmad_fabric_a_run and rmad_fabric_b_run). The links are QEMU socket netdevs:
# node a listens on two free local ports, node b connects to them; eth0 of both
# carries RoCE, eth1 the scenario's coordination. acpi=noirq: under emulation
# the ACPI interpreter can time out while it routes the NICs' interrupts
# (AE_AML_LOOP_TIMEOUT, "no GSI"), and the NICs then never complete a
# transmission; the legacy routing table has no such loop.
#
# Usage: vm-pair.sh NAME SCENARIO
# Environment: RMAD_VM_TIMEOUT (seconds the pair may take, default 900);
# RMAD_PAIR_VERDICT=0 skips the verdict (a pair that measures, not tests);
# RMAD_PAIR_ARGS, more kernel command-line words for both nodes (VAR=VALUE
# words reach the scenario as environment variables).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

[ $# -eq 2 ] || die "usage: $0 NAME SCENARIO"
name="$1" scenario="$2"
out="$RMAD_ROOT/build/$name"
rm -rf "$out"
mkdir -p "$out/a" "$out/b"

# A failed set-up is recorded as a failed case of node a, so the report shows it.
fail_step() {
	python3 - "$out/a/vm.json" "$1" "$2" <<'PY'
import json, sys
path, name, log = sys.argv[1:4]
json.dump({"cases": [{"suite": "build", "name": name, "status": "FAIL",
                      "log": log.splitlines()}]}, open(path, "w"))
PY
	echo '{"cases": []}' >"$out/b/vm.json"
}

vm_prepare "$out" "$scenario" || exit 0
kbuild="$KBUILD"

# Two free local TCP ports (the kernel picks them; QEMU binds them again at once).
read -r port0 port1 < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

boot() { # boot NODE ROLE: ROLE is listen (node a) or connect (node b)
	local node="$1" role="$2"
	# shellcheck disable=SC2086 # RMAD_PAIR_ARGS is a list of words.
	RMAD_VM_CPUS=1 RMAD_VM_MEM=1024 RMAD_VM_QEMU="\
-netdev socket,id=n0,$role=127.0.0.1:$port0 \
-device virtio-net-pci,netdev=n0,mac=52:54:00:00:01:0${node/a/1} \
-netdev socket,id=n1,$role=127.0.0.1:$port1 \
-device virtio-net-pci,netdev=n1,mac=52:54:00:00:02:0${node/a/1}" \
		"$RMAD_ROOT/scripts/vm/run-vm.sh" "$kbuild/arch/x86/boot/bzImage" \
		"$out/initramfs.cpio.gz" "$out/$node/console.log" "$out/$node/results.log" \
		"${RMAD_VM_TIMEOUT:-900}" "loglevel=${RMAD_LOGLEVEL:-5}" acpi=noirq "RMAD_NODE=$node" \
		${RMAD_PAIR_ARGS:-}
}

step "VM pair: booting nodes a and b with tests/vm/$(basename "$scenario")"
start=$SECONDS
rc_a=0 rc_b=0
boot a listen &
pid_a=$!
# Node b connects once node a's QEMU listens on both ports (looked up, not
# probed: QEMU takes the first connection as its peer).
for _ in $(seq 200); do
	n="$(ss -Hltn "( sport = :$port0 or sport = :$port1 )" | wc -l)"
	[ "$n" -lt 2 ] || break
	sleep 0.1
done
boot b connect || rc_b=$?
wait "$pid_a" || rc_a=$?
step "VM pair: finished in $((SECONDS - start)) s (qemu exit a $rc_a, b $rc_b)"
# A pair that measures (RMAD_PAIR_VERDICT=0: tests/vm/cm-bench.sh) leaves its consoles only.
[ "${RMAD_PAIR_VERDICT:-1}" = 1 ] || exit 0
for node in a b; do
	RMAD_RUN_SUITE="rmad_fabric_${node}_run" python3 "$RMAD_ROOT/scripts/report/vm-verdict.py" \
		"$LINUX_TREE/tools/testing/kunit/kunit.py" "$out/$node/results.log" \
		"$out/$node/console.log" "$out/$node/vm.json" "$RMAD_ROOT/tests/suites.txt" "$name-$node"
done
