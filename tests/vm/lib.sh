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

# Create soft-RoCE device $1 (default rxe0) on netdev $2 (default rmad0) of type $4
# (default dummy; dummy0 exists already; veth: with a peer that is up and has no address,
# so that nobody answers ARP on the link) with address $3 (default 10.0.0.1/24),
# and wait until its port has the IPv4-mapped GID (index 1) that MADs to the same port are
# addressed with.
setup_rxe() {
	dev="${1:-rxe0}"
	netdev="${2:-rmad0}"
	addr="${3:-10.0.0.1/24}"
	kind="${4:-dummy}"
	# rdma_rxe is a module of the test kernel (a no-op once loaded).
	modprobe rdma_rxe || return 1
	if ! ip link show "$netdev" >/dev/null 2>&1; then
		if [ "$kind" = veth ]; then
			# Busybox's ip names the peer itself (vethN), shown as "vethN@$netdev".
			ip link add "$netdev" type veth || return 1
			peer="$(ip -o link show | sed -n "s/^[0-9]*: \([^@:]*\)@$netdev:.*/\1/p")"
			[ -n "$peer" ] && ip link set "$peer" up || return 1
		else
			ip link add "$netdev" type dummy || return 1
		fi
		ip link set "$netdev" up &&
			ip addr add "$addr" dev "$netdev" || return 1
	fi
	rdma link add "$dev" type rxe netdev "$netdev" || return 1
	wait_gid "$dev" 1 >/dev/null
}

# wait_gid DEV INDEX: waits (at most 10 s) until port 1 of DEV has a GID at INDEX, and
# prints it as sysfs spells it.
wait_gid() {
	i=0
	while [ $i -lt 100 ]; do
		gid="$(cat "/sys/class/infiniband/$1/ports/1/gids/$2" 2>/dev/null || true)"
		case "$gid" in
		"" | 0000:0000:0000:0000:0000:0000:0000:0000) ;;
		*)
			echo "$gid"
			return 0
			;;
		esac
		i=$((i + 1))
		sleep 0.1
	done
	return 1
}

# The index of IPv4 address $1's GID in rxe0's GID table (empty if none). One grep
# reads the whole table (a process per entry would take minutes under emulation).
gid_index_of() {
	want="$(echo "$1" | awk -F. '{ printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4 }')"
	f="$(grep -lx "$want" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null | head -n 1)"
	[ -z "$f" ] || basename "$f"
}

# Prints the index of IPv4 address $1's GID in rxe0's table once it has one.
wait_gid_index_of() {
	i=0
	until [ -n "$(gid_index_of "$1")" ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || return 1
		sleep 0.1
	done
	gid_index_of "$1"
}

# Adds IPv4 address $1 to rmad0 and prints its GID's index once rxe0 has it.
add_address_gid() {
	ip addr add "$1/24" dev rmad0 || return 1
	wait_gid_index_of "$1"
}

# Adds IPv6 address $1 (/64, without duplicate detection) to netdev $2 and waits until
# rxe0's GID table has its GID, $3 (as sysfs spells it).
add_ipv6_gid() {
	echo 0 >"/proc/sys/net/ipv6/conf/$2/accept_dad" || return 1
	ip -6 addr add "$1/64" dev "$2" || return 1
	i=0
	until grep -qx "$3" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 300 ] || return 1
		sleep 0.1
	done
}

# Waits until rmad's port 1 of device $1 shows MAC $2 in debugfs.
wait_port_mac() {
	i=0
	until grep -q "^device $1 port 1 .* mac $2$" /sys/kernel/debug/rmad/ports; do
		i=$((i + 1))
		[ $i -lt 300 ] || { cat /sys/kernel/debug/rmad/ports; return 1; }
		sleep 0.1
	done
}

# Sets netdev $1's MAC to $3 and waits until rmad's port of device $2 shows it; runs $4 (a
# command line) with the new MAC; then sets the old MAC again, whatever $4 said, and waits
# the same way.
mac_change() {
	old="$(cat "/sys/class/net/$1/address")"
	rc=0
	ip link set "$1" address "$3" || return 1
	wait_port_mac "$2" "$3" && eval "$4" || rc=1
	ip link set "$1" address "$old" || return 1
	wait_port_mac "$2" "$old" || return 1
	cat /sys/kernel/debug/rmad/ports
	return $rc
}

# Deletes rxe0 and its netdev and makes them again as setup_rxe does (a GID table in its
# first order).
remake_rxe0() {
	rdma link delete rxe0 && ip link delete rmad0 && setup_rxe
}

# RoCE address churn: an address's GID is used by rmad (a GET from and to it, so that a
# cached address handle references its GID entry), then the address is deleted and added
# again. Its GID gets its old index back only if nothing kept the deleted entry allocated.
# The GID change event, rmad's sweep and ib_core's deferred free of the entry take a moment:
# the address is added again, up to 20 times a second apart, until its old index is free
# (with a handle keeping the entry, it never is).
gid_churn() {
	k1="$(add_address_gid 10.0.0.50)" || return 1
	two_hca_action "from $k1" "GET from GID $k1:" || return 1
	ip addr del 10.0.0.50/24 dev rmad0 || return 1
	i=0
	while [ $i -lt 20 ]; do
		sleep 1
		k2="$(add_address_gid 10.0.0.50)" || return 1
		ip addr del 10.0.0.50/24 dev rmad0 || return 1
		[ "$k1" = "$k2" ] && break
		i=$((i + 1))
	done
	echo "GID index before $k1, after $k2 (attempt $((i + 1)))"
	[ "$k1" = "$k2" ]
}

# Asks the loaded rmad_two_hca_client for action $1, then checks its line with $2 (two_hca_pass).
two_hca_action() {
	echo "$1" >/sys/module/rmad_two_hca_client/parameters/action || return 1
	two_hca_pass "$2"
}

# Whether the last line of rmad_two_hca_client that has $1 says PASS.
two_hca_pass() {
	line="$(dmesg | grep "rmad_two_hca_client: .*$1" | tail -n 1)"
	echo "$line"
	dmesg | grep "rmad_two_hca_client: round" | tail -n 3
	case "$line" in
	*PASS*) return 0 ;;
	*) return 1 ;;
	esac
}

# Whether the kernel log has the line "probe: ... each once: yes" with all
# $1 sends flushed, at least $2 times.
probe_flushed() {
	n="$(dmesg | grep -c "probe: posted $1, handler calls $1, flushed $1, each once: yes")"
	[ "$n" -ge "$2" ]
}

# Write a line into the kernel log.
mark() {
	echo "$*" >/dev/kmsg
}

# Whether the kernel log has exactly one line from rmad after the mark $1.
one_line_since() {
	n="$(dmesg | sed -n "/$1/,\$p" | grep -c ' rmad: ')"
	[ "$n" -eq 1 ] || {
		dmesg | sed -n "/$1/,\$p" | grep ' rmad: '
		return 1
	}
}

# Run one stress-driver command (see src/testing/stress.rs), e.g. stress "lb0 5".
stress() {
	echo "$1" >/sys/kernel/debug/rmad/stress
}

# Emit the last stress report as a suite.
emit_stress() {
	name="$(sed -n 's/^ *# Subtest: //p' /sys/kernel/debug/rmad/stress)"
	[ -n "$name" ] || return 0
	echo "RMAD-SUITE-BEGIN $name"
	cat /sys/kernel/debug/rmad/stress
	echo "RMAD-SUITE-END $name"
} >"$RESULTS"

# The stress runs, each reported as a suite: $1 seconds on the loopback fabric,
# the same with failslab failing 10 % of the workers' allocations, then $1 + 3
# seconds on rxe0, which is deleted under load after 3 s (and made again),
# then $2 create/free cycles with a stale handle checked in each.
stress_runs() {
	stress "lb0 $1"
	emit_stress
	failslab_on 10
	stress "lb0 $1 failslab"
	failslab_off
	emit_stress
	stress "rxe0 $(($1 + 3))" &
	sleep 3
	vm_case stress_rdma_link_delete_under_load rdma link delete rxe0
	wait
	emit_stress
	vm_case setup_rxe0_again setup_rxe
	stress "handles rxe0 $2"
	emit_stress
}

# failslab fails $1 percent of the allocations of tasks that ask for it.
failslab_on() {
	f=/sys/kernel/debug/failslab
	echo Y >$f/task-filter
	echo N >$f/ignore-gfp-wait
	echo N >$f/cache-filter
	echo 0 >$f/verbose
	echo 0 >$f/space
	echo 1 >$f/interval
	echo -1 >$f/times
	echo "$1" >$f/probability
}

failslab_off() {
	echo 0 >/sys/kernel/debug/failslab/probability
}

# Scan for leaks and print what kmemleak found: it reports objects older than
# 5 s that two scans in a row found unreferenced (one scan found none of the
# positive control's 16).
kmemleak_report() {
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	echo scan >/sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak
}

# Whether kmemleak finds nothing at all.
kmemleak_clean() {
	out="$(kmemleak_report)"
	[ -z "$out" ] || {
		echo "$out" | head -n 60
		return 1
	}
}

# Positive control: run detector control $1 between markers in the kernel
# log, and wait (at most 20 s) until the log shows $2 between them.
control() {
	mark "RMAD-CONTROL-BEGIN $1"
	echo "$1" >/sys/kernel/debug/rmad/control || return 1
	i=0
	found=1
	while [ $i -lt 40 ]; do
		if dmesg | sed -n "/RMAD-CONTROL-BEGIN $1/,\$p" | grep -q "$2"; then
			found=0
			break
		fi
		i=$((i + 1))
		sleep 0.5
	done
	# Let the rest of the report reach the log before the section closes.
	sleep 1
	mark "RMAD-CONTROL-END $1"
	return $found
}

# Positive control for kmemleak: the 64 small objects that the control leaks
# are found (each report block names its allocation's backtrace). A stale copy
# of a pointer left on some kernel stack or in a reused slab object hides some,
# which kmemleak rightly counts as referenced (20 of 64 once, after many runs
# with fewer): half of them are required.
control_leak() {
	echo clear >/sys/kernel/debug/kmemleak
	mark "RMAD-CONTROL-BEGIN leak"
	echo leak >/sys/kernel/debug/rmad/control || return 1
	report="$(kmemleak_report)"
	mark "RMAD-CONTROL-END leak"
	echo clear >/sys/kernel/debug/kmemleak
	n="$(echo "$report" | awk '/^unreferenced object/ { if (hit) n++; hit = 0 }
		/rmad_test_control|rmad_control_leak/ { hit = 1 }
		END { if (hit) n++; print n + 0 }')"
	echo "kmemleak found $n of the 64 leaked objects"
	[ "$n" -ge 32 ] || {
		echo "kmemleak found $n of the 64 leaked objects:"
		echo "$report" | head -n 20
		return 1
	}
}

# The rmad trace events of requester port 1 of lb0 for TID $1, as
# "event:status ...", must be exactly $2.
trace_sequence_is() {
	got="$(grep " dev=loopback port=1 .* tid=$1 " /sys/kernel/debug/tracing/trace |
		sed 's/.* \(rmad_[a-z_]*\): .* status=\([0-9]*\) .*/\1:\2/' | tr '\n' ' ')"
	[ "$got" = "$2 " ] || {
		echo "events: $got; expected: $2"
		return 1
	}
}

# Runs the traced sends (src/testing/traced_sends.rs) with the rmad events enabled.
trace_run() {
	t=/sys/kernel/debug/tracing
	echo >$t/trace
	echo 1 >$t/events/rmad/enable
	stress trace
	echo 0 >$t/events/rmad/enable
	grep -q "^tids .* ok$" /sys/kernel/debug/rmad/stress
}

