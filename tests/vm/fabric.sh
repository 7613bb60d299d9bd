#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The two-node scenario, in each of two guests joined by two emulated Ethernet
# links (scripts/vm-pair.sh): eth0 carries RoCE, eth1 only the scenario's own
# coordination, so that netem on eth0 never delays a barrier. RMAD_NODE (from
# the kernel command line) says which node this is: node a (10.0.1.1) runs the
# requests, node b (10.0.1.2) is the peer that answers them and changes the
# link. Each guest has rxe0 on its eth0 and
# the test flavour of rmad loaded (its KUnit suites left out: `make test` runs
# them in the one-node VM).
#
# The two guests go through the same numbered steps; `barrier` makes each wait
# for the other. Loss, delay and duplication are netem qdiscs on a node's
# eth0, so they act on what that node sends. Every check on node a is one
# numbered case with exact counts; the rmad lines ("rmad: completed 8 ...")
# and the C MAD layer's ("c: ...") come from src/fabric_check.rs and
# src/fabric_glue.c.
. /lib.sh

node="${RMAD_NODE:-a}"
if [ "$node" = a ]; then
	me=1 peer=2
else
	me=2 peer=1
fi
peer_ip=10.0.1.$peer

# barrier NAME [WORD]: waits until the other node reached barrier NAME too and
# prints the word the other node gave (node b connects to node a's port 7000
# until node a listens), over eth1. At most 10 minutes: a peer that died
# fails the run.
barrier() {
	if [ "$node" = a ]; then
		got="$(echo "$1 ${2:--}" | timeout 600 nc -l -p 7000)"
	else
		i=0
		until got="$(echo "$1 ${2:--}" | nc 10.0.2.1 7000 2>/dev/null)" && [ -n "$got" ]; do
			i=$((i + 1))
			[ $i -lt 3000 ] || return 1
			sleep 0.2
		done
	fi
	[ "${got% *}" = "$1" ] || {
		echo "barrier $1: the peer is at ${got% *}" >&2
		return 1
	}
	echo "${got#* }"
}

# Brings up eth1 for the barriers, and eth0 with this node's address and rxe0
# on it; waits until rxe0 has its IPv6 link-local GID (index 0) and its
# IPv4-mapped GID (index 1).
setup_link() {
	ip link set eth1 up &&
		ip addr add "10.0.2.$me/24" dev eth1 &&
		ip link set eth0 up &&
		ip addr add "10.0.1.$me/24" dev eth0 &&
		rdma link add rxe0 type rxe netdev eth0 || return 1
	i=0
	while [ $i -lt 300 ]; do
		g0="$(cat /sys/class/infiniband/rxe0/ports/1/gids/0 2>/dev/null || true)"
		g1="$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null || true)"
		case "$g0$g1" in
		*0000:0000:0000:0000:0000:0000:0000:0000* | "") ;;
		*) return 0 ;;
		esac
		i=$((i + 1))
		sleep 0.1
	done
	return 1
}

# netem ARGS...: what this node sends from now on goes through netem ARGS
# (none: straight out again).
netem() {
	# iproute2's tc by its path: busybox's sh prefers its own applets, and
	# busybox's tc has no netem.
	/bin/tc qdisc del dev eth0 root 2>/dev/null || true
	[ $# -eq 0 ] || /bin/tc qdisc add dev eth0 root netem "$@"
}

# fabric WHO ARGS...: one burst (see src/fabric_check.rs); prints its line.
fabric() {
	stress "fabric $*" && cat /sys/kernel/debug/rmad/stress
}

# expect LINE FIELDS...: whether LINE has each "name value" pair of FIELDS.
expect() {
	line="$1"
	shift
	while [ $# -ge 2 ]; do
		case " $line " in
		*" $1 $2 "*) ;;
		*)
			echo "expected $1 $2 in: $line"
			return 1
			;;
		esac
		shift 2
	done
}

# burst_is WHO ARGS... -- FIELDS...: runs a burst and checks its line.
burst_is() {
	args=""
	while [ "$1" != "--" ]; do
		args="$args $1"
		shift
	done
	shift
	# shellcheck disable=SC2086 # The burst's words.
	line="$(fabric $args)" || {
		echo "fabric$args failed"
		return 1
	}
	echo "$line" >>/tmp/lines
	expect "$line" "$@"
}

# same_as_c ARGS...: rmad and the C MAD layer report the same figures for the
# same burst (rmad's line also has its count of dropped responses).
same_as_c() {
	c="$(fabric c "$@")" && r="$(fabric rmad "$@")" || return 1
	echo "$r" >>/tmp/lines
	echo "$c" >>/tmp/lines
	r="${r#rmad: }"
	c="${c#c: }"
	[ "${r% dropped *}" = "$c" ] || {
		echo "rmad: $r"
		echo "c:    $c"
		return 1
	}
}

echo "rmad_none_" >/sys/module/kunit/parameters/filter_glob
vm_case setup_link setup_link
vm_case insmod_rmad insmod /modules/test/rmad.ko
gid0="$(cat /sys/class/infiniband/rxe0/ports/1/gids/0)"
peer_gid="$(barrier up "$gid0")"
vm_case peer_reachable ping -c 1 -W 10 "$peer_ip"

if [ "$node" = a ]; then
	P="$peer_gid"
	# Requests to the peer's ib_core, which answers a GET of a class nobody serves
	# there with status 0x000C.
	vm_case get_unserved_class_answered_0x000c \
		burst_is rmad "$P" 0x04 1 8 3000 2 -- completed 8 success 8 twice 0 never 0 \
		retries 0 responses 8 status_unsupported 8 dropped 0
	# A difference: ib_core hands PerfMgmt MADs (class 0x04) arriving at QP1 to
	# the driver's process_mad, which consumes them; so the C layer's requester
	# never sees a 0x04 response, while rmad's own QP receives it.
	vm_case c_layer_never_sees_perf_mgmt_responses \
		burst_is c "$P" 0x04 1 4 1000 0 -- completed 4 timeout 4 responses 0
	# Nobody has 10.0.1.99: its MAC cannot be resolved, and the burst (which
	# resolves the address first, rmad_resolve_ah's path) fails with EHOSTUNREACH.
	vm_case unreachable_destination_refused sh -c \
		'! echo "fabric rmad 10.0.1.99 0x0b 1 1 1000 0" >/sys/kernel/debug/rmad/stress 2>/tmp/err && grep -q "No route to host" /tmp/err'
	vm_case get_unserved_class_through_ipv4_gid \
		burst_is rmad "$peer_ip" 0x04 1 8 3000 2 -- completed 8 success 8 responses 8 \
		status_unsupported 8
	barrier serve >/dev/null
	vm_case get_answered_by_ib_core_agent_on_peer \
		burst_is rmad "$P" 0x0b 1 8 3000 2 -- completed 8 success 8 twice 0 never 0 \
		retries 0 responses 8 status_ok 8
	vm_case c_layer_same_from_ib_core_agent same_as_c "$P" 0x0b 1 8 3000 2
	barrier serve-done >/dev/null
	# The peer's rmad answers GETs of vendor class 0x0a (ib_core forwards them to it).
	barrier respond >/dev/null
	vm_case get_answered_by_rmad_responder_on_peer \
		burst_is rmad "$P" 0x0a 1 8 3000 2 -- completed 8 success 8 twice 0 never 0 \
		retries 0 responses 8 status_ok 8 dropped 0
	vm_case rmad_responder_through_ipv4_gid \
		burst_is rmad "$peer_ip" 0x0a 1 8 3000 2 -- completed 8 success 8 responses 8 \
		status_ok 8
	vm_case c_layer_same_from_rmad_responder same_as_c "$P" 0x0a 1 8 3000 2
	barrier respond-done >/dev/null
	# Unregistered, the responder gets nothing more: the peer's ib_core answers
	# instead, status 0x000C (no agent for the class).
	barrier unresponded >/dev/null
	vm_case forwarding_stops_at_unregister \
		burst_is rmad "$P" 0x0a 1 4 3000 0 -- completed 4 success 4 responses 4 \
		status_ok 0 status_unsupported 4
	# Everything node a sends is lost: every try times out.
	netem loss 100%
	vm_case timeouts_with_exact_retries \
		burst_is rmad "$P" 0x0b 1 4 300 3 -- completed 4 timeout 4 twice 0 never 0 \
		retries 12 responses 0
	vm_case c_layer_same_timeouts same_as_c "$P" 0x0b 1 4 300 3
	netem
	# The peer sends every answer twice: the second is dropped.
	barrier duplicate >/dev/null
	vm_case duplicated_responses_dropped \
		burst_is rmad "$P" 0x0b 1 8 3000 0 -- completed 8 success 8 responses 8 dropped 8
	vm_case c_layer_same_with_duplicates same_as_c "$P" 0x0b 1 8 3000 0
	barrier duplicate-done >/dev/null
	barrier delay >/dev/null
	# The peer answers 1.5 s late.
	vm_case cancel_while_in_flight \
		burst_is rmad "$P" 0x0b 1 4 10000 0 cancel -- completed 4 flushed 4 twice 0 \
		never 0 responses 0
	vm_case modify_extends_the_wait \
		burst_is rmad "$P" 0x0b 1 4 500 0 modify 10000 -- completed 4 success 4 \
		retries 0 responses 4
	vm_case c_layer_same_cancel same_as_c "$P" 0x0b 1 4 10000 0 cancel
	vm_case c_layer_same_modify same_as_c "$P" 0x0b 1 4 500 0 modify 10000
	barrier delay-done >/dev/null
	# 10 % loss each way: every request completes exactly once.
	netem loss 10%
	barrier lossy >/dev/null
	vm_case thousand_requests_at_10pct_loss_each_once \
		burst_is rmad "$P" 0x0b 1 1000 2000 5 -- completed 1000 twice 0 never 0 \
		flushed 0 other 0
	netem
	barrier lossy-done >/dev/null
	# The peer's rmad is unloaded while requests to it are on the way (delayed 2 s
	# by netem here): the peer's ib_core answers them (0x000C), each once.
	respond_again="$(barrier respond-again)"
	netem delay 2000ms
	stress "fabric rmad $P 0x0a 1 8 5000 0" &
	burst=$!
	barrier unload-peer >/dev/null
	wait $burst
	netem
	barrier unloaded-done >/dev/null
	vm_case peer_responder_was_up test "$respond_again" = responding
	vm_case sends_to_unloaded_peer_complete_once \
		expect "$(cat /sys/kernel/debug/rmad/stress)" completed 8 success 8 twice 0 never 0 \
		status_ok 0 status_unsupported 8
	# The peer's device goes away while sends wait (SEND is never answered).
	stress "fabric rmad $P 0x04 3 8 3000 1" &
	burst=$!
	barrier delete >/dev/null
	wait $burst
	vm_case sends_to_removed_peer_time_out_once expect "$(cat /sys/kernel/debug/rmad/stress)" \
		completed 8 timeout 8 twice 0 never 0 retries 8
	barrier done >/dev/null
	emit_vm_suite rmad_fabric_requester >"$RESULTS"
	# Every burst's figures, in the console log (build/fabric/a/console.log).
	sed 's/^/fabric-line: /' /tmp/lines
else
	# Each change is made before the barrier that lets node a go on, and undone
	# after the barrier that says node a is done with it.
	vm_case serve_class_0x0b stress "serve 0x0b"
	barrier serve >/dev/null
	barrier serve-done >/dev/null
	# ib_core's agent serves 0x0b: rmad's registration for it is refused with ib_core's
	# error (EINVAL).
	vm_case rmad_refused_for_class_ib_core_serves sh -c \
		'echo "respond 0x0b" >/sys/kernel/debug/rmad/stress && grep -qx "refused -22" /sys/kernel/debug/rmad/stress'
	vm_case unserve stress unserve
	vm_case respond_class_0x0a sh -c \
		'echo "respond 0x0a" >/sys/kernel/debug/rmad/stress && grep -qx responding /sys/kernel/debug/rmad/stress'
	barrier respond >/dev/null
	barrier respond-done >/dev/null
	# From node a: 8 + 8 + 8 from rmad, 8 from the C layer.
	vm_case unrespond_answered_32 sh -c \
		'echo unrespond >/sys/kernel/debug/rmad/stress && cat /sys/kernel/debug/rmad/stress && grep -qx "answered 32" /sys/kernel/debug/rmad/stress'
	barrier unresponded >/dev/null
	vm_case duplicate_answers netem duplicate 100%
	barrier duplicate >/dev/null
	barrier duplicate-done >/dev/null
	vm_case delay_answers netem delay 1500ms
	barrier delay >/dev/null
	barrier delay-done >/dev/null
	vm_case lossy_answers netem loss 10%
	barrier lossy >/dev/null
	barrier lossy-done >/dev/null
	netem
	stress "respond 0x0a"
	barrier respond-again "$(cat /sys/kernel/debug/rmad/stress)" >/dev/null
	barrier unload-peer >/dev/null
	vm_case rmmod_rmad_with_requests_on_the_way rmmod rmad
	barrier unloaded-done >/dev/null
	# Loaded again with a responder registered, so that the device goes away
	# under a forwarding agent (the port stops it before the QP closes).
	vm_case insmod_rmad_again insmod /modules/test/rmad.ko
	vm_case respond_again stress "respond 0x0a"
	barrier delete >/dev/null
	vm_case rdma_link_delete_under_responder rdma link delete rxe0
	barrier done >/dev/null
	emit_vm_suite rmad_fabric_peer >"$RESULTS"
fi
vm_case rmmod_rmad rmmod rmad
emit_vm_suite "rmad_fabric_${node}_unload" >"$RESULTS"
