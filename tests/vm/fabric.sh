#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The two-node scenario, in each of two guests joined by two emulated Ethernet
# links (scripts/vm/vm-pair.sh): eth0 carries RoCE, eth1 only the scenario's own
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
# and the C MAD layer's ("c: ...") come from src/testing/fabric.rs and
# src/testing/fabric/c_client.c. The run ends with tests/vm/cm.sh.
. /lib.sh
. /pair.sh

# unresolvable ADDR: a burst to ADDR fails with EHOSTUNREACH.
unresolvable() {
	! echo "fabric rmad $1 0x0b 1 1 1000 0" >/sys/kernel/debug/rmad/stress 2>/tmp/err &&
		grep -q "No route to host" /tmp/err
}

# add_address ADDR: adds IPv4 address ADDR to eth0 and waits until rxe0 has its
# IPv4-mapped GID.
add_address() {
	ip addr add "$1/24" dev eth0 || return 1
	# The GID as sysfs writes it: ::ffff:a.b.c.d, the address in hex.
	want="$(echo "$1" | awk -F. '{ printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4 }')"
	i=0
	until cat /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null | grep -qx "$want"; do
		i=$((i + 1))
		[ $i -lt 300 ] || return 1
		sleep 0.1
	done
}

# The RoCE packets rxe0 has sent.
sent_pkts() {
	cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts
}

# drop_answers WHO N: drops what this node sends until rxe0 has sent N more
# packets (its answers to node a's first requests, lost), then lets everything
# through. netem changes the qdisc in place, never deletes it: after a deletion,
# rxe's next transmissions were held until the next qdisc change (seen here),
# which would turn this case into a second timeout.
drop_answers() {
	netem loss 100%
	base="$(sent_pkts)"
	barrier "lost-$1" >/dev/null || return 1
	i=0
	while [ "$(sent_pkts)" -lt $((base + $2)) ]; do
		i=$((i + 1))
		[ $i -lt 600 ] || return 1
		sleep 0.1
	done
	netem
	barrier "lost-$1-done" >/dev/null
	# What rxe0 sent while node a's retries came, in the console for a failure.
	(
		sleep 10
		echo "fabric-diag: $1: rxe0 sent $base then $(sent_pkts) packets; $(/bin/tc -s qdisc show dev eth0 | tr '\n' ' ')" >/dev/kmsg
	) &
}

# lost_answer WHO: node a's side of drop_answers: 4 GETs to the peer (4 s
# timeout, 4 retries) whose first answers the peer drops; each completes once,
# successfully, after 1 to 4 retries (one when the peer lets its answers
# through within 4 s, as it does here).
lost_answer() {
	barrier "lost-$1" >/dev/null || return 1
	received="$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts)"
	stress "fabric $1 $peer_gid 0x0b 1 4 4000 4" &
	burst=$!
	barrier "lost-$1-done" >/dev/null || return 1
	wait $burst || return 1
	line="$(cat /sys/kernel/debug/rmad/stress)"
	echo "$line" >>/tmp/lines
	echo "rxe0 received $received then $(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts) packets"
	expect "$line" completed 4 success 4 twice 0 never 0 responses 4 || return 1
	retries="${line#* retries }"
	retries="${retries%% *}"
	[ "$retries" -ge 4 ] && [ "$retries" -le 16 ] || {
		echo "expected 4..16 retries in: $line"
		return 1
	}
}

# fabric WHO ARGS...: one burst (see src/testing/fabric.rs); prints its line.
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

# rmpp_is WHO "TIMEOUT_MS [RETRIES [REQ_BYTES]]" -- FIELDS...: one GET of the SA
# class to the peer, answered by its kernel-RMPP agent (ib_core's or rmad's) with an
# RMPP transfer, asked for by a kernel-RMPP agent of rmad (WHO rmad) or of the C MAD
# layer (WHO c), segmented when REQ_BYTES is given (src/testing/fabric/rmpp.rs);
# checks its line.
rmpp_is() {
	line="$(stress "rmpp $1 $P 0x03 $2" && cat /sys/kernel/debug/rmad/stress)" || {
		echo "rmpp $1 failed"
		return 1
	}
	echo "$line" >>/tmp/lines
	echo "fabric-rmpp: $line" >/dev/kmsg
	shift 3
	# A failure says what this node's qdisc sent and dropped.
	expect "$line" "$@" || {
		echo "eth0: $(/bin/tc -s qdisc show dev eth0 | tr '\n' ' ')"
		return 1
	}
}

# quiet: waits (at most 60 s) until no rmad agent of this node has a send outstanding.
# A qdisc change drops what the device is sending at that moment, and rxe moves a QP
# whose transmission fails to the error state for good; so the qdisc changes only once
# both nodes are quiet.
quiet() {
	k=0
	while grep -q "outstanding [1-9]" /sys/kernel/debug/rmad/agents; do
		k=$((k + 1))
		[ $k -lt 600 ] || return 1
		sleep 0.1
	done
}

# rmad_qp_ready: rmad's private QP on rxe0 is still ready to send (RTS), not in the error
# state a failed transmission leaves it in.
rmad_qp_ready() {
	rdma res show qp | grep "comm \[rmad\]" | tee /dev/stderr | grep -q "state RTS"
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
# The neighbour entries of the peer's two addresses (IPv4 and the IPv6
# link-local one, which is its GID 0) are fixed, so that netem's losses never
# hit an ARP or neighbour-discovery exchange: a lost answer is then a lost MAD,
# not an unresolved address.
peer_mac="$(barrier mac "$(cat /sys/class/net/eth0/address)")"
vm_case peer_neighbours_fixed sh -c \
	"/bin/ip neigh replace $peer_ip lladdr $peer_mac dev eth0 nud permanent &&
	/bin/ip -6 neigh replace $peer_gid lladdr $peer_mac dev eth0 nud permanent"

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
	vm_case unreachable_destination_refused unresolvable 10.0.1.99
	# Nobody has 10.0.1.3 either, until the peer adds it: the failure is not
	# kept, and the next resolution finds it.
	vm_case not_yet_reachable_refused unresolvable 10.0.1.3
	barrier add-address >/dev/null
	barrier address-added >/dev/null
	vm_case resolution_retried_after_failure \
		burst_is rmad 10.0.1.3 0x04 1 4 3000 2 -- completed 4 success 4 responses 4 \
		status_unsupported 4
	vm_case get_unserved_class_through_ipv4_gid \
		burst_is rmad "$peer_ip" 0x04 1 8 3000 2 -- completed 8 success 8 responses 8 \
		status_unsupported 8
	barrier serve >/dev/null
	vm_case get_answered_by_ib_core_agent_on_peer \
		burst_is rmad "$P" 0x0b 1 8 3000 2 -- completed 8 success 8 twice 0 never 0 \
		retries 0 responses 8 status_ok 8
	vm_case c_layer_same_from_ib_core_agent same_as_c "$P" 0x0b 1 8 3000 2
	# Requests with hop limit 9 and traffic class 32: ib_core answers with the
	# request's traffic class and its route's hop limit (ib_create_ah_from_wc);
	# rmad's responder must do the same (below).
	vm_case ib_core_reply_keeps_traffic_class \
		burst_is rmad "$P" 0x0b 1 4 3000 2 grh 9 32 0 -- completed 4 success 4 \
		responses 4 resp_hop_limit 64 resp_traffic_class 32 resp_flow_label 0
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
	# The address's hop limit and traffic class reach the wire (node b's
	# responder reports what arrived), over IPv6 and over IPv4 (TTL and TOS);
	# the answer comes back with the request's traffic class, like ib_core's. The
	# flow label is not on the wire: rxe writes 0 into every IPv6 header.
	vm_case rmad_reply_keeps_traffic_class \
		burst_is rmad "$P" 0x0a 1 4 3000 2 grh 9 32 74565 -- completed 4 success 4 \
		responses 4 resp_hop_limit 64 resp_traffic_class 32 resp_flow_label 0
	vm_case hop_limit_and_tos_over_ipv4 \
		burst_is rmad "$peer_ip" 0x0a 1 4 3000 2 grh 9 32 0 -- completed 4 success 4 \
		responses 4 resp_hop_limit 64 resp_traffic_class 32
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
	# The peer drops its first answers: a retry recovers each.
	vm_case lost_answer_recovered_by_retry lost_answer rmad
	vm_case c_layer_same_lost_answer lost_answer c
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
	# RMPP (over the IPv6 GIDs: on RoCEv2 over IPv4 ib_core's RMPP sender never
	# matches an ACK). The peer's ib_core answers with 64 KiB (328 segments) from
	# its own RMPP sender, windowed by rmad's ACKs: rmad reassembles it, every byte
	# checked.
	barrier rmpp >/dev/null
	vm_case rmpp_64k_reassembled rmpp_is rmad 60000 -- status 0 len 65592 intact 1
	# The differential: the same GETs through a kernel-RMPP agent of the C MAD layer
	# (ib_core's mad_rmpp.c on both ends) end the same way.
	vm_case c_layer_rmpp_64k_reassembled rmpp_is c 60000 -- status 0 len 65592 intact 1 \
		retries 0
	# 5 % loss each way; the GET itself may be lost, so it has 2 retries.
	netem loss 5%
	barrier rmpp-lossy >/dev/null
	vm_case rmpp_64k_at_5pct_loss rmpp_is rmad "30000 2" -- status 0 len 65592 intact 1
	vm_case c_layer_rmpp_64k_at_5pct_loss rmpp_is c "60000 2" -- status 0 len 65592 intact 1
	# A segmented GET of 20 000 bytes (100 segments) that ib_core reassembles, then
	# answers with its 64 KiB; at 5 % loss each way. A segmented sender, C's and rmad's,
	# waits at most 2 s for each window's ACK and ends the send when a window uses up its
	# retries: with 2, a peer that does not answer for 6 s fails the case (in one CI run,
	# on a busy host, the C layer's GET and rmad's both ended so, RESP_TIMEOUT_ERR). So
	# every segmented GET here has 10 retries a window: 22 s without progress.
	vm_case rmpp_segmented_request_to_ib_core_at_5pct_loss \
		rmpp_is rmad "30000 10 20000" -- status 0 len 65592 intact 1
	vm_case c_layer_segmented_request_to_ib_core_at_5pct_loss \
		rmpp_is c "60000 10 20000" -- status 0 len 65592 intact 1
	netem
	barrier rmpp-done >/dev/null
	# rmad on both ends: the peer's kernel-RMPP rmad agent answers with 1 MiB (5 243
	# segments), clean, at 1 % loss each way, and at 5 % to a segmented GET of 64 KiB.
	# Each step starts once the peer's answer is complete (quiet), so that no qdisc change
	# meets a transmission.
	barrier rmpp-rmad >/dev/null
	vm_case rmpp_1m_rmad_to_rmad rmpp_is rmad 120000 -- status 0 len 1048632 intact 1 \
		retries 0
	# The C layer's requester gets the same 1 MiB from rmad's RMPP sender.
	vm_case c_layer_rmpp_1m_from_rmad rmpp_is c 120000 -- status 0 len 1048632 intact 1 \
		retries 0
	barrier rmpp-rmad-ran >/dev/null
	barrier rmpp-rmad-quiet >/dev/null
	netem loss 1%
	barrier rmpp-rmad-1 >/dev/null
	vm_case rmpp_1m_rmad_to_rmad_at_1pct_loss rmpp_is rmad "120000 2" -- status 0 \
		len 1048632 intact 1
	barrier rmpp-rmad-1-ran >/dev/null
	barrier rmpp-rmad-1-quiet >/dev/null
	netem loss 5%
	barrier rmpp-rmad-5 >/dev/null
	# At 5 % the GET itself is segmented (64 KiB), and its answer is the 1 MiB. 6 retries,
	# not 10: each try may wait the whole 240 s response timeout before the case fails.
	vm_case rmpp_64k_request_and_1m_answer_rmad_to_rmad_at_5pct_loss \
		rmpp_is rmad "240000 6 65536" -- status 0 len 1048632 intact 1
	barrier rmpp-rmad-5-ran >/dev/null
	barrier rmpp-rmad-5-quiet >/dev/null
	# Still at 5 %, the peer's rmad answers with 64 KiB (328 segments): a segmented
	# GET of 64 KiB from the C layer, then the same from rmad.
	barrier rmpp-c >/dev/null
	vm_case c_layer_64k_request_and_64k_answer_from_rmad_at_5pct_loss \
		rmpp_is c "60000 10 65536" -- status 0 len 65592 intact 1
	vm_case rmad_same_64k_request_and_64k_answer_at_5pct_loss \
		rmpp_is rmad "30000 10 65536" -- status 0 len 65592 intact 1
	barrier rmpp-c-ran >/dev/null
	barrier rmpp-c-quiet >/dev/null
	# The same with duplicates and reordering each way: 5 % of the packets sent twice,
	# a quarter of them overtaking the others (delayed 2 ms).
	netem delay 2ms reorder 25% duplicate 5%
	barrier rmpp-dup >/dev/null
	vm_case c_layer_64k_request_and_64k_answer_from_rmad_duplicated_and_reordered \
		rmpp_is c "60000 10 65536" -- status 0 len 65592 intact 1
	vm_case rmad_same_64k_request_and_64k_answer_duplicated_and_reordered \
		rmpp_is rmad "30000 10 65536" -- status 0 len 65592 intact 1
	barrier rmpp-dup-ran >/dev/null
	barrier rmpp-dup-quiet >/dev/null
	netem
	vm_case rmad_qp_ready_after_rmpp rmad_qp_ready
	barrier rmpp-rmad-done >/dev/null
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
	barrier add-address >/dev/null
	vm_case add_address_10_0_1_3 add_address 10.0.1.3
	barrier address-added >/dev/null
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
	# From node a: 8 + 8 + 8 + 4 + 4 from rmad, 8 from the C layer; the last
	# requests arrived with node a's hop limit and traffic class.
	vm_case unrespond_answered_40_as_sent sh -c \
		'echo unrespond >/sys/kernel/debug/rmad/stress && cat /sys/kernel/debug/rmad/stress && grep -qx "answered 40 hop_limit 9 traffic_class 32 flow_label 0" /sys/kernel/debug/rmad/stress'
	barrier unresponded >/dev/null
	vm_case duplicate_answers netem duplicate 100%
	barrier duplicate >/dev/null
	barrier duplicate-done >/dev/null
	vm_case drop_first_answers_rmad drop_answers rmad 4
	vm_case drop_first_answers_c drop_answers c 4
	netem
	vm_case delay_answers netem delay 1500ms
	barrier delay >/dev/null
	barrier delay-done >/dev/null
	vm_case lossy_answers netem loss 10%
	barrier lossy >/dev/null
	barrier lossy-done >/dev/null
	netem
	vm_case serve_rmpp_64k stress "serve-rmpp 0x03 65536"
	barrier rmpp >/dev/null
	vm_case lossy_segments netem loss 5%
	barrier rmpp-lossy >/dev/null
	barrier rmpp-done >/dev/null
	netem
	vm_case respond_rmpp_1m_from_rmad sh -c \
		'echo "respond-rmpp 0x03 1048576" >/sys/kernel/debug/rmad/stress && grep -qx responding /sys/kernel/debug/rmad/stress'
	barrier rmpp-rmad >/dev/null
	barrier rmpp-rmad-ran >/dev/null
	vm_case rmpp_rmad_answer_complete quiet
	barrier rmpp-rmad-quiet >/dev/null
	vm_case lossy_segments_1pct netem loss 1%
	barrier rmpp-rmad-1 >/dev/null
	barrier rmpp-rmad-1-ran >/dev/null
	vm_case rmpp_rmad_answer_complete_1pct quiet
	barrier rmpp-rmad-1-quiet >/dev/null
	vm_case lossy_segments_5pct netem loss 5%
	barrier rmpp-rmad-5 >/dev/null
	barrier rmpp-rmad-5-ran >/dev/null
	vm_case rmpp_rmad_answers_complete_5pct quiet
	barrier rmpp-rmad-5-quiet >/dev/null
	# Node a asked four times, rmad and the C layer (a lost GET is asked again: each
	# answer is one); every answer ended with SUCCESS, and the last request was a
	# reassembled 56 + 65 536 bytes.
	vm_case unrespond_rmpp_answered_each sh -c \
		'echo unrespond-rmpp >/sys/kernel/debug/rmad/stress && cat /sys/kernel/debug/rmad/stress | tee /dev/kmsg | grep -q "bad 0 .*request_len 65592"'
	vm_case respond_rmpp_64k_from_rmad sh -c \
		'echo "respond-rmpp 0x03 65536" >/sys/kernel/debug/rmad/stress && grep -qx responding /sys/kernel/debug/rmad/stress'
	barrier rmpp-c >/dev/null
	barrier rmpp-c-ran >/dev/null
	vm_case rmpp_rmad_answers_c_complete_5pct quiet
	barrier rmpp-c-quiet >/dev/null
	netem delay 2ms reorder 25% duplicate 5%
	barrier rmpp-dup >/dev/null
	barrier rmpp-dup-ran >/dev/null
	vm_case rmpp_rmad_answers_complete_duplicated_and_reordered quiet
	barrier rmpp-dup-quiet >/dev/null
	netem
	vm_case rmad_qp_ready_after_rmpp rmad_qp_ready
	barrier rmpp-rmad-done >/dev/null
	# The C layer's segmented GETs and rmad's were each reassembled (56 + 65 536 bytes)
	# and answered. Not every answer need end with SUCCESS: the C layer does not ACK
	# again once it has a whole response, so when its final ACK is lost, rmad's answer
	# to it ends after its retries (Documentation/behaviour.md §8.14); the line goes to
	# the log.
	vm_case unrespond_rmpp_answered_c_and_rmad sh -c \
		'echo unrespond-rmpp >/sys/kernel/debug/rmad/stress && cat /sys/kernel/debug/rmad/stress | tee /dev/kmsg | grep -Eq "^answered ([4-9]|[1-9][0-9]+) ok [1-9].*request_len 65592"'
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

# The two samples across machines, on the production module users install:
# node b serves vendor class 0x0a, first from the C sample (which keeps each
# request and answers it later from a work item), then from the Rust sample
# (which answers from its receive handler); node a asks each server 8 times
# from the C sample and 8 times from the Rust sample, through the IPv4 GIDs.
# Each server also serves a table of 300 records (vendor class 0x30, one RMPP
# transfer of 23 segments that rmad segments), and each of node a's samples
# fetches it once through a kernel-RMPP agent and checks every record.
vm_case insmod_production_rmad insmod /modules/rmad.ko
if [ "$node" = a ]; then
	# asks LANG ARG N: the LANG sample asks the peer (ARG its peer parameter) and
	# reports PASS, for the Nth time.
	asks() {
		insmod "/modules/rmad_sample_$1.ko" "peer=$2" && rmmod "rmad_sample_$1" &&
			dmesg | grep "rmad_sample_$1: .*peer" | tail -n 1 &&
			[ "$(dmesg | grep -c "rmad_sample_$1: PASS: peer .*: 8 answered, 8 right answers, table of 300 records right")" = "$3" ]
	}
	barrier c-serving >/dev/null
	vm_case c_sample_asks_c_server asks c 10.0.1.2 1
	vm_case rust_sample_asks_c_server asks rust 0x0a000102 1
	barrier c-served >/dev/null
	barrier rust-serving >/dev/null
	vm_case c_sample_asks_rust_server asks c 10.0.1.2 2
	vm_case rust_sample_asks_rust_server asks rust 0x0a000102 2
	barrier rust-served >/dev/null
else
	vm_case rxe0_again add_rxe
	vm_case c_sample_serves insmod /modules/rmad_sample_c.ko serve=1
	barrier c-serving >/dev/null
	barrier c-served >/dev/null
	# 8 GETs and a GetTable from each of node a's samples, each answered once,
	# each table ACKed whole.
	vm_case c_server_answered_16_and_2_tables sh -c \
		'rmmod rmad_sample_c && dmesg | grep "rmad_sample_c: served" && dmesg | grep -q "rmad_sample_c: served 16 and 2 tables, 0 freed after unregister, unregister 0"'
	vm_case rust_sample_serves insmod /modules/rmad_sample_rust.ko serve=1
	barrier rust-serving >/dev/null
	barrier rust-served >/dev/null
	vm_case rust_server_answered_16_and_2_tables sh -c \
		'rmmod rmad_sample_rust && dmesg | grep "rmad_sample_rust: served" && dmesg | grep -q "rmad_sample_rust: served 16 and 2 tables"'
fi
vm_case rmmod_production_rmad rmmod rmad
emit_vm_suite "rmad_fabric_${node}_samples" >"$RESULTS"

# The kernel's connection manager on rmad against the stock one (tests/vm/cm.sh).
. /cm.sh
