# SPDX-License-Identifier: GPL-2.0
#
# Helpers of the two-node scenarios (scripts/vm/vm-pair.sh: tests/vm/fabric.sh,
# tests/vm/cm.sh), sourced by them inside the guest after /lib.sh: which node
# this is, the barrier between the nodes, and the link with rxe0 on it. Node a
# is 10.0.1.1, node b 10.0.1.2 on eth0 (RoCE); eth1 (10.0.2.x) carries only the
# barriers.

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

# Brings up eth1 for the barriers, and eth0 with this node's address, its netem
# qdisc (passing everything through) and rxe0 on it.
setup_link() {
	ip link set eth1 up &&
		ip addr add "10.0.2.$me/24" dev eth1 &&
		ip link set eth0 up &&
		ip addr add "10.0.1.$me/24" dev eth0 &&
		netem &&
		add_rxe
}

# Makes rxe0 on eth0 and waits until it has its IPv6 link-local GID (index 0)
# and its IPv4-mapped GID (index 1).
add_rxe() {
	modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0 || return 1
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
# (none: straight out again). The first call (setup_link, before rxe0 exists)
# adds the netem qdisc; later calls change it in place. Replacing or deleting a qdisc drops the packet being sent,
# and rxe moves a QP whose transmission fails to the error state for good (ib_core
# never recovers its QP1 from it; rmad resets its own, Documentation/behaviour.md
# §8.18); changing netem's parameters drops nothing, so no step depends on
# whether a node is still sending.
netem() {
	# iproute2's tc by its path: busybox's sh prefers its own applets, and
	# busybox's tc has no netem. Delay, jitter, loss, duplicate and gap not given
	# are reset to 0; a reorder probability stays, but does nothing without a gap.
	/bin/tc qdisc change dev eth0 root netem "$@" 2>/dev/null ||
		/bin/tc qdisc add dev eth0 root netem "$@"
}

