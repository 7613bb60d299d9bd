# SPDX-License-Identifier: GPL-2.0
#
# Helpers for the VM scenarios, sourced by them inside the guest.

# Emit one KUnit suite's debugfs KTAP document on the results channel.
emit_suite() {
	echo "RMAD-SUITE-BEGIN $1"
	cat "/sys/kernel/debug/kunit/$1/results"
	echo "RMAD-SUITE-END $1"
}

# Collected results of the harness's own checks, as KTAP lines.
VM_CASES=""
VM_COUNT=0

# Record one harness check: vm_case NAME COMMAND...; runs the command and
# records ok/not ok with its output as diagnostics.
vm_case() {
	name="$1"
	shift
	VM_COUNT=$((VM_COUNT + 1))
	if out="$("$@" 2>&1)"; then
		VM_CASES="$VM_CASES    ok $VM_COUNT $name
"
	else
		VM_CASES="$VM_CASES    # $name: $(echo "$out" | tr '\n' ' ')
    not ok $VM_COUNT $name
"
	fi
}

# Emit the harness checks recorded so far as a KTAP document for suite $1,
# and start a new list.
emit_vm_suite() {
	echo "RMAD-SUITE-BEGIN $1"
	echo "KTAP version 1"
	echo "1..1"
	echo "    KTAP version 1"
	echo "    # Subtest: $1"
	echo "    1..$VM_COUNT"
	printf '%s' "$VM_CASES"
	if echo "$VM_CASES" | grep -q "not ok"; then
		echo "not ok 1 $1"
	else
		echo "ok 1 $1"
	fi
	echo "RMAD-SUITE-END $1"
	VM_CASES=""
	VM_COUNT=0
}

# Create soft-RoCE device rxe0 on a dummy netdev (rmad0; dummy0 exists already), and wait until its port has
# the IPv4-mapped GID (index 1) that MADs to the same port are addressed with.
setup_rxe() {
	if ! ip link show rmad0 >/dev/null 2>&1; then
		ip link add rmad0 type dummy &&
			ip link set rmad0 up &&
			ip addr add 10.0.0.1/24 dev rmad0 || return 1
	fi
	rdma link add rxe0 type rxe netdev rmad0 || return 1
	i=0
	while [ $i -lt 100 ]; do
		gid="$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null || true)"
		case "$gid" in
		"" | 0000:0000:0000:0000:0000:0000:0000:0000) ;;
		*) return 0 ;;
		esac
		i=$((i + 1))
		sleep 0.1
	done
	return 1
}

# Whether the kernel log has the line "probe: ... each once: yes" with all
# $1 sends flushed, at least $2 times.
probe_flushed() {
	n="$(dmesg | grep -c "probe: posted $1, handler calls $1, flushed $1, each once: yes")"
	[ "$n" -ge "$2" ]
}
