#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The kernel's connection manager on rmad, against a stock one: node a runs
# cm.c built unedited against include/rmad_ib_mad.h (rmad_cm.ko, on the
# production rmad.ko), node b the kernel's own ib_cm. Unmodified rdmacm-utils
# connect across in both directions: rping (data verified), udaddy (SIDR),
# ucmatose (several connections at once), cmtime (hundreds of connections).
# Then the CM's own errors: a REQ to a port nobody listens on is rejected; an
# MRA from the peer extends the REQ's wait; a REQ nobody answers ends with the
# CM's own timeout, after exactly rdma_cm's 15 retries. Last, node a unloads
# rdma_ucm, rdma_cm, rmad_cm and rmad in that order, and kmemleak finds
# nothing (KASAN and lockdep reports fail the run through the kernel log).
#
# The end of tests/vm/fabric.sh (sourced there, after the link is up); run
# alone as a pair scenario too (scripts/vm/vm-pair.sh NAME tests/vm/cm.sh).
# Each tool's exit status and output are checked; the output of every run
# goes to the console as well.
. /lib.sh
. /pair.sh

kmod="/lib/modules/$(uname -r)/kernel/drivers/infiniband/core"

# The link, when this runs alone.
ip addr show eth0 2>/dev/null | grep -q "10.0.1.$me/" || vm_case cm_setup_link setup_link
[ -e /sys/class/infiniband/rxe0 ] || vm_case cm_rxe0 add_rxe

# wait_listen: waits until a connection tool of this node listens (an
# rdma_cm id in state LISTEN).
wait_listen() {
	i=0
	until rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN"; do
		i=$((i + 1))
		[ $i -lt 600 ] || return 1
		sleep 0.1
	done
}

# run LOG CMD...: runs CMD (at most 10 minutes), its output in /tmp/LOG and on
# the console; the exit status is CMD's.
run() {
	log="/tmp/$1"
	shift
	rc=0
	timeout 600 "$@" >"$log" 2>&1 || rc=$?
	sed "s|^|cm: $(basename "$log"): |" "$log" >/dev/kmsg
	echo "cm: $(basename "$log"): exit $rc" >/dev/kmsg
	return $rc
}

# rping_ok LOG N: the rping run of LOG verified N pings.
rping_ok() {
	n="$(grep -c "ping data: rdma-ping-" "/tmp/$1")"
	[ "$n" = "$2" ] || {
		echo "$1: $n pings, not $2"
		cat "/tmp/$1"
		return 1
	}
}

# said LOG TEXT...: each TEXT is a line (a regular expression) of the output in LOG.
said() {
	log="/tmp/$1"
	shift
	for text in "$@"; do
		grep -q "$text" "$log" || {
			echo "no \"$text\" in $log:"
			cat "$log"
			return 1
		}
	done
}

# serve NAME CMD...: (the server's node) runs the server CMD in the
# background, tells the peer at barrier NAME once it listens, and at barrier
# NAME-done whether it exited 0; the case is the server's exit status.
serve() {
	name="$1"
	shift
	run "$name-server" "$@" &
	pid=$!
	wait_listen
	barrier "$name" >/dev/null
	rc=0
	wait $pid || rc=$?
	barrier "$name-done" "$rc" >/dev/null
	[ $rc = 0 ] || cat "/tmp/$name-server"
	return $rc
}

# serve_until_asked NAME PROG ARGS...: as serve, for a server PROG that never
# exits by itself (cmtime's): it must still be serving when the peer's client
# is done, and is stopped then.
serve_until_asked() {
	name="$1"
	prog="$2"
	shift
	run "$name-server" "$@" &
	pid=$!
	wait_listen || return 1
	barrier "$name" >/dev/null
	barrier "$name-done" 0 >/dev/null
	pids="$(pidof "$prog")" || {
		echo "$prog stopped before its client was done"
		cat "/tmp/$name-server"
		return 1
	}
	# shellcheck disable=SC2086 # a list of process ids
	kill $pids
	wait $pid || true
}

# ask NAME CMD...: (the client's node) runs the client CMD once the peer's
# server listens; then the server's status must be 0 too.
ask() {
	name="$1"
	shift
	barrier "$name" >/dev/null || return 1
	rc=0
	run "$name-client" "$@" || rc=$?
	server="$(barrier "$name-done")"
	[ $rc = 0 ] || {
		cat "/tmp/$name-client"
		return 1
	}
	[ "$server" = 0 ] || {
		echo "the server exited $server"
		return 1
	}
}

# Node a loads the CM on rmad by path: modprobe would pull the stock ib_cm in.
if [ "$node" = a ]; then
	vm_case cm_insmod_rmad insmod /modules/rmad.ko
	vm_case cm_insmod_rmad_cm insmod /modules/rmad_cm.ko
	vm_case cm_insmod_rdma_cm insmod "$kmod/rdma_cm.ko"
	vm_case cm_insmod_rdma_ucm insmod "$kmod/rdma_ucm.ko"
	vm_case cm_no_stock_cm sh -c '! grep -q "^ib_cm " /proc/modules'
else
	vm_case cm_stock_cm grep -q "^ib_cm " /proc/modules
fi
barrier cm-up >/dev/null

# Each tool once with node a as the client and once as the server.
for dir in ab ba; do
	if [ "$dir" = ab ]; then
		client=a server_ip=10.0.1.2
	else
		client=b server_ip=10.0.1.1
	fi
	if [ "$node" = "$client" ]; then
		vm_case "cm_rping_$dir" ask "rping-$dir" rping -c -a "$server_ip" -C 10 -v -V
		vm_case "cm_rping_${dir}_10_verified" rping_ok "rping-$dir-client" 10
		vm_case "cm_udaddy_$dir" ask "udaddy-$dir" udaddy -s "$server_ip" -c 2 -C 10
		vm_case "cm_udaddy_${dir}_complete" said "udaddy-$dir-client" \
			"^data transfers complete" "^test complete" "^return status 0"
		vm_case "cm_ucmatose_$dir" ask "ucmatose-$dir" ucmatose -s "$server_ip" -c 4 -C 10
		vm_case "cm_ucmatose_${dir}_complete" said "ucmatose-$dir-client" \
			"^data transfers complete" "^test complete" "^return status 0"
		vm_case "cm_cmtime_$dir" ask "cmtime-$dir" cmtime -s "$server_ip" -c 200
		vm_case "cm_cmtime_${dir}_every_step" said "cmtime-$dir-client" \
			"^connect  *: " "^disconnect  *: " "^destroy  *: "
	else
		vm_case "cm_rping_server_$dir" serve "rping-$dir" rping -s -a "$server_ip" -C 10 -v -V
		vm_case "cm_rping_server_${dir}_10_verified" rping_ok "rping-$dir-server" 10
		vm_case "cm_udaddy_server_$dir" serve "udaddy-$dir" udaddy -c 2 -C 10
		vm_case "cm_ucmatose_server_$dir" serve "ucmatose-$dir" ucmatose -c 4 -C 10
		vm_case "cm_cmtime_server_$dir" serve_until_asked "cmtime-$dir" cmtime -c 200
	fi
done

# rejected DIR ADDR: rping to port 9999 of ADDR, where nobody listens, fails:
# the peer's CM rejected the REQ.
rejected() {
	rc=0
	run "rej-$1" rping -c -a "$2" -p 9999 -C 1 -d || rc=$?
	[ $rc != 0 ] && said "rej-$1" "cma event RDMA_CM_EVENT_REJECTED" || {
		echo "exit $rc"
		cat "/tmp/rej-$1"
		return 1
	}
}

# A REQ to a port nobody listens on: the peer's CM rejects it (both ways).
for dir in ab ba; do
	if [ "$dir" = ab ]; then
		client=a server_ip=10.0.1.2
	else
		client=b server_ip=10.0.1.1
	fi
	if [ "$node" = "$client" ]; then
		vm_case "cm_rejected_$dir" rejected "$dir" "$server_ip"
	fi
	barrier "rej-$dir" >/dev/null
done

# counter GROUP NAME: the CM's counter of this node's port (ib_cm's sysfs files,
# which the CM on rmad has too).
counter() {
	cat "/sys/class/infiniband/rxe0/ports/1/$1/$2"
}

# An MRA from the peer: node b's server is stopped (SIGSTOP) once it listens, so
# that its CM has the REQ but no accept. Node a's REQ waits 4.6 s (twice the
# path's packet life time plus the response timeout rdma_cm asks for) and is
# sent again; the duplicate makes b's CM answer with an MRA, whose service
# timeout (68 s) node a's CM sets with ib_modify_mad(). b's server goes on
# 12 s after it stopped: without the MRA, node a would have sent the REQ twice
# more by then; with it, once, and the connection is made.
mra() {
	retries="$(counter cm_tx_retries req)"
	mras="$(counter cm_rx_msgs mra)"
	ask rping-mra rping -c -a 10.0.1.2 -C 2 -v -V || return 1
	retries=$(($(counter cm_tx_retries req) - retries))
	mras=$(($(counter cm_rx_msgs mra) - mras))
	echo "REQ retries $retries, MRAs received $mras" >/dev/kmsg
	[ "$retries" = 1 ] && [ "$mras" = 1 ] || {
		echo "REQ retries $retries, MRAs received $mras: expected 1 and 1"
		return 1
	}
}

# serve_slowly: node b's side of mra.
serve_slowly() {
	run rping-mra-server rping -s -a 10.0.1.2 -C 2 -v -V &
	pid=$!
	wait_listen || return 1
	kill -STOP "$(pidof rping)"
	barrier rping-mra >/dev/null
	sleep 12
	kill -CONT "$(pidof rping)"
	rc=0
	wait $pid || rc=$?
	barrier rping-mra-done "$rc" >/dev/null
	return $rc
}

# A REQ to a node that never answers: node b drops everything it sends (node a
# knows its MAC, so that the address still resolves). Node a's CM sends the
# REQ 16 times (rdma_cm's 15 retries), then rdma_cm reports the CM's timeout.
unanswered() {
	retries="$(counter cm_tx_retries req)"
	barrier mute >/dev/null
	rc=0
	run unanswered timeout 300 rping -c -a 10.0.1.2 -C 1 || rc=$?
	barrier muted-done >/dev/null
	retries=$(($(counter cm_tx_retries req) - retries))
	echo "REQ retries $retries" >/dev/kmsg
	[ $rc != 0 ] && said unanswered "RDMA_CM_EVENT_UNREACHABLE, error -110" &&
		[ "$retries" = 15 ] || {
		echo "exit $rc, REQ retries $retries (expected 15)"
		cat /tmp/unanswered
		return 1
	}
}

peer_mac="$(barrier cm-mac "$(cat /sys/class/net/eth0/address)")"
if [ "$node" = a ]; then
	vm_case cm_mra_extends_the_wait mra
	vm_case cm_peer_mac_fixed /bin/ip neigh replace 10.0.1.2 lladdr "$peer_mac" dev eth0 nud permanent
	vm_case cm_unanswered_req_times_out unanswered
else
	vm_case cm_mra_sent serve_slowly
	# Muted before node a may send (the barriers go over eth1).
	netem loss 100%
	barrier mute >/dev/null
	barrier muted-done >/dev/null
	netem
fi

if [ "$node" = a ]; then
	vm_case cm_rmmod_rdma_ucm rmmod rdma_ucm
	vm_case cm_rmmod_rdma_cm rmmod rdma_cm
	vm_case cm_rmmod_rmad_cm rmmod rmad_cm
	vm_case cm_rmmod_rmad rmmod rmad
	vm_case cm_kmemleak_reports_nothing kmemleak_clean
fi
emit_vm_suite "rmad_fabric_${node}_cm" >"$RESULTS"
