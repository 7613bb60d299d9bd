#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The scenario of `make test`, in the guest. Each block ends by emitting one
# suite on the results channel; tests/suites.txt lists every suite expected.
#
#  1. the test flavour of rmad (its KUnit suites run inside insmod), on rxe0;
#  2. the stress driver: loopback, loopback with failslab, rxe0 with the
#     device deleted under load, and a million create/free cycles; then
#     100 000 simultaneous timeouts (rmad_scale);
#  3. the production module users install, with the two sample clients;
#  4. device removal and unload with sends outstanding;
#  5. kmemleak: nothing left behind;
#  6. positive controls: each detector of the test kernel fires once, so a
#     clean log means something (last: lockdep turns itself off after one
#     report).
. /lib.sh

# A KUnit filter (RMAD_KUNIT_FILTER) asks for some suites only: the stress runs
# are left out too. The VM's own default, every rmad suite (scripts/vm/run-vm.sh),
# is no filter.
filter="$(sed -n 's/.*kunit.filter_glob=\([^ ]*\).*/\1/p' /proc/cmdline)"
if [ "$filter" = "rmad*" ]; then
	filter=""
fi
# Create/free cycles through the C API of the stale-handle run (`make stress`
# sets a million through the kernel command line; each cycle costs about 2 ms
# under emulation with KASAN, kmemleak and lockdep, and rmad_handles runs a
# million cycles of the handle table itself).
RMAD_HANDLE_CYCLES="${RMAD_HANDLE_CYCLES:-5000}"

# Forget what the boot left for kmemleak: from here on, every leak is ours.
echo clear >/sys/kernel/debug/kmemleak

# 1. KUnit.
vm_case setup_rxe0 setup_rxe
# A second IPv6 GID: rmad_peer's "other source GID" (src/testing/suites/peer/differential.rs).
vm_case second_ipv6_gid add_ipv6_gid fd00:2::1 rmad0 fd00:0002:0000:0000:0000:0000:0000:0001
mark RMAD-TEST-LOAD
vm_case insmod_rmad insmod /modules/test/rmad.ko
# What the production module must not have, the test flavour has.
vm_case test_flavour_has_kunit_suites sh -c '[ -e /sys/module/rmad/sections/.kunit_test_suites ]'
for dir in /sys/kernel/debug/kunit/rmad_*; do
	[ -d "$dir" ] && emit_suite "$(basename "$dir")" >"$RESULTS"
done
# No port query per answered request (issue 32 B): rxe0's netdev, a dummy, has no link
# settings, so each query of its port logs "speed is unknown" (tens of thousands of lines in a
# run before). rmad reads its port at open and after port events only; the suites answer
# hundreds of requests on rxe0 (rmad_rxe.rxe_answers_query_no_port alone 100).
# rmad_rxe.rxe_handle_in_use_at_a_gid_change_is_retired changes rxe0's addresses about ten
# times, each a port event that rmad answers with at most one query.
vm_case suites_logged_no_port_query_per_answer sh -c 'dmesg | grep -q RMAD-TEST-LOAD &&
	n="$(dmesg | sed -n "/RMAD-TEST-LOAD/,\$p" | grep -c "speed is unknown")";
	echo "rmad-test: $n port-query log lines since the load" | tee /dev/kmsg; [ "$n" -le 30 ]'

# 2. Stress with exactly-once accounting (the stress driver reports KTAP).
if [ -z "$filter" ]; then
	stress_runs 5 "$RMAD_HANDLE_CYCLES"
	# 100 000 sends time out together, 2 000 are cancelled at once, 2 000 flushed by
	# unregistration: each exactly once, at most one batch of sends per lock hold.
	stress "scale 100000"
	emit_stress
fi
# Tracepoints: the exact event sequences of a post → response and a post → cancel.
vm_case trace_sends_completed trace_run
tids="$(sed -n 's/^tids \([^ ]*\) \([^ ]*\) .*/\1 \2/p' /sys/kernel/debug/rmad/stress)"
vm_case trace_post_response_sequence trace_sequence_is "${tids% *}" \
	"rmad_post:0 rmad_send_to_device:0 rmad_send_completion:0 rmad_response_matched:0 rmad_send_handler:0"
vm_case trace_post_cancel_sequence trace_sequence_is "${tids#* }" \
	"rmad_post:0 rmad_send_to_device:0 rmad_send_completion:0 rmad_cancel:0 rmad_send_handler:5"
vm_case rmmod_rmad rmmod rmad
vm_case no_rmad_after_rmmod sh -c '! grep -q "^rmad " /proc/modules'
emit_vm_suite rmad_vm >"$RESULTS"

# Later loads of the test flavour skip the suites.
echo "rmad_none_" >/sys/module/kunit/parameters/filter_glob

# 3. The production module, as users install it, with the sample clients.
mark RMAD-PRODUCTION-LOAD
vm_case insmod_production insmod /modules/rmad.ko
vm_case logs_one_line_at_load one_line_since RMAD-PRODUCTION-LOAD
vm_case no_kunit_suites sh -c '[ ! -e /sys/module/rmad/sections/.kunit_test_suites ]'
vm_case no_module_parameters sh -c '[ ! -d /sys/module/rmad/parameters ]'
vm_case no_test_files sh -c '[ -e /sys/kernel/debug/rmad/agents ] && [ ! -e /sys/kernel/debug/rmad/stress ]'
vm_case no_test_code sh -c '! grep -E "rmad_test_|test_responder|bench_ib_cancel|demo|conformance" /proc/kallsyms | grep -q "\[rmad\]"'
for lang in c rust; do
	vm_case "insmod_sample_$lang" insmod "/modules/rmad_sample_$lang.ko"
	vm_case "sample_${lang}_reports_pass" sh -c "dmesg | grep -q 'rmad_sample_$lang: PASS'"
	vm_case "rmmod_sample_$lang" rmmod "rmad_sample_$lang"
done
# The template of samples/template: its GET answered by ib_core (0x000C), its
# send completed successfully.
vm_case template_client_runs sh -c 'insmod /modules/rmad_client.ko && rmmod rmad_client &&
	dmesg | grep -q "rmad_client: answer, MAD status 0x000c" &&
	dmesg | grep -q "rmad_client: send done, status 0" && dmesg | grep -q "rmad_client: done (0)"'
# rmad.h's contexts, from a client module: the atomic-safe calls from a timer and from a
# default-mode hrtimer (hard interrupt), with lockdep judging (rmad_vm_run.kernel_log_clean).
vm_case hrtimer_client_reports_pass sh -c 'insmod /modules/rmad_hrtimer_client.ko &&
	rmmod rmad_hrtimer_client && dmesg | grep "rmad_hrtimer_client: " | tail -n 1 &&
	dmesg | grep -q "rmad_hrtimer_client: PASS"'
# The safe Rust binding, from a Rust client module: an agent dropped inside its own handler
# is unregistered once the handler returns (its class then answered by ib_core, 0x000C) and
# its client dropped, also with every slab allocation of the handler's task failing there
# (failslab); an agent dropped before a buffer of it returns, and the buffer is inert
# (tests/clients/rust_drop). Once the client is unloaded, a GET of its class is answered by
# ib_core as after a clean unregistration: no agent left behind calls into the unloaded
# module (which would be a KASAN report or an oops: rmad_vm_run.kernel_log_clean). Then the
# same with an agent the client leaves registered at its unload: rmad ends it there.
rust_drop_probe() {
	insmod /modules/rmad_rust_drop_client.ko probe=1 &&
		dmesg | grep "rmad_rust_drop_client: PROBE" | tail -n 1 |
		grep "rmad_rust_drop_client: PROBE PASS" && rmmod rmad_rust_drop_client
}
failslab_on 100
vm_case rust_drop_client_reports_pass sh -c 'insmod /modules/rmad_rust_drop_client.ko failslab=1 &&
	dmesg | grep "rmad_rust_drop_client: " | tail -n 1 | grep "rmad_rust_drop_client: PASS"'
failslab_off
vm_case rust_drop_client_rmmod rmmod rmad_rust_drop_client
vm_case rust_drop_class_answered_by_ib_core_after_rmmod rust_drop_probe
vm_case rust_drop_client_leaves_an_agent sh -c 'insmod /modules/rmad_rust_drop_client.ko leak=1 &&
	dmesg | grep "rmad_rust_drop_client: " | tail -n 1 | grep "rmad_rust_drop_client: LEAK PASS"'
vm_case rust_drop_leaving_client_rmmod rmmod rmad_rust_drop_client
vm_case rust_drop_left_agent_ended_at_unload sh -c \
	'dmesg | grep "rmad: module rmad_rust_drop_client left 1 agents registered at its unload"'
vm_case rust_drop_class_answered_by_ib_core_after_leaving_client rust_drop_probe
vm_case production_has_tracepoints sh -c '[ -d /sys/kernel/debug/tracing/events/rmad/rmad_post ]'
# debugfs rmad/ports: rxe0's port, its private QP and its drop counter; the clients above
# had sends handed to the device from their own context (sent_now: the hrtimer client's,
# posted from a hard interrupt, among them) and by the transmit work (the first to each
# destination).
vm_case production_lists_ports sh -c 'cat /sys/kernel/debug/rmad/ports &&
	grep -Eq "^device rxe0 port 1 qpn [1-9][0-9]* short_dropped 0 requests_dropped 0 resolved [0-9]+ unresolved 0 lid 0 lmc 0 qp_resets 0 sent_now [1-9][0-9]* sent_queued [1-9][0-9]* mac [0-9a-f:]{17}$" /sys/kernel/debug/rmad/ports'
# rmad.h: rmad_free_send_mad is atomic-safe, also when it frees the last of a removed device.
# A client keeps a buffer of an RMAD_DETACH_BUFFERS agent, rxe0 is deleted, the agent
# unregistered, and the buffer, the last reference to the agent and through it to rxe0's
# port, freed from an hrtimer (hard interrupt): DEBUG_ATOMIC_SLEEP reports anything there
# that may sleep (rmad_vm_run.kernel_log_clean; before the fix, the port's workqueue was
# destroyed there). rxe0 is made again for what follows.
vm_case detached_buffer_freed_from_hrtimer_after_removal sh -c '
	insmod /modules/rmad_hrtimer_client.ko detached=1 && rdma link delete rxe0 &&
	echo 1 >/sys/module/rmad_hrtimer_client/parameters/finish &&
	rmmod rmad_hrtimer_client && dmesg | grep "rmad_hrtimer_client: detached: [PF]" |
	tail -n 1 | grep -q "rmad_hrtimer_client: detached: PASS"'
vm_case setup_rxe0_after_detached setup_rxe
vm_case rmmod_production rmmod rmad
emit_vm_suite rmad_production >"$RESULTS"

# 3b. Two RDMA devices (rxe0 and rxe1, on netdevs of their own) and the production module:
# the same class served on both, every answer from the device asked, an unreachable
# destination that delays nothing else, and rxe1 removed with sends outstanding while rxe0
# goes on working (tests/clients/two_hca). rxe1's link is a veth whose peer answers no ARP.
vm_case setup_rxe1 setup_rxe rxe1 rmad1 10.0.3.1/24 veth
vm_case two_hca_insmod_production insmod /modules/rmad.ko
vm_case two_hca_lists_both_ports sh -c 'cat /sys/kernel/debug/rmad/ports &&
	grep -q "^device rxe0 port 1 " /sys/kernel/debug/rmad/ports &&
	grep -q "^device rxe1 port 1 " /sys/kernel/debug/rmad/ports'
vm_case same_class_registered_on_both sh -c 'insmod /modules/rmad_two_hca_client.ko &&
	dmesg | grep -q "rxe0: class 0x0a responder and requester registered: 0" &&
	dmesg | grep -q "rxe1: class 0x0a responder and requester registered: 0"'
vm_case answers_never_cross_devices two_hca_pass "round 1:"
# A renamed device is known by its new name only (registration, rmad_port_gid, debugfs),
# and its agents go on working under it; then it gets its old name back.
vm_case rename_rxe0 rdma dev set rxe0 name rxe7
vm_case renamed_listed_by_new_name sh -c 'cat /sys/kernel/debug/rmad/ports &&
	grep -q "^device rxe7 port 1 " /sys/kernel/debug/rmad/ports &&
	! grep -q "^device rxe0 " /sys/kernel/debug/rmad/ports'
vm_case renamed_found_by_new_name two_hca_action "lookup rxe7 found" "lookup rxe7:"
vm_case renamed_not_found_by_old_name two_hca_action "lookup rxe0 absent" "lookup rxe0:"
vm_case rename_rxe0_back rdma dev set rxe7 name rxe0
vm_case agents_serve_after_renames two_hca_action round "round 2:"
vm_case unreachable_destination_delays_no_other two_hca_action unreachable "unreachable: [PF]"
# One resolution for the ten sends to the unreachable address: the failure is remembered.
vm_case unreachable_resolved_once sh -c 'cat /sys/kernel/debug/rmad/ports &&
	grep -q "^device rxe1 port 1 .* resolved 0 unresolved 1 " /sys/kernel/debug/rmad/ports'
# A request sent straight to rmad's private QP (here by rmad itself, from rxe0 to rxe0) is
# dropped, counted and traced, and never reaches the responder of its class: the GET and
# its two retries, three drops.
vm_case request_at_private_qp_dropped_counted_traced sh -c '
	qpn="$(sed -n "s/^device rxe0 port 1 qpn \([0-9]*\) .*/\1/p" /sys/kernel/debug/rmad/ports)"
	t=/sys/kernel/debug/tracing && echo > $t/trace &&
	echo 1 > $t/events/rmad/rmad_request_dropped/enable &&
	echo "private $qpn" >/sys/module/rmad_two_hca_client/parameters/action &&
	echo 0 > $t/events/rmad/rmad_request_dropped/enable &&
	dmesg | grep "rmad_two_hca_client: GET to the private QP" | tail -n 1 | grep PASS &&
	grep "rmad_request_dropped: dev=rxe0 port=1 qp=$qpn class=0x0a method=0x01 " $t/trace &&
	[ "$(grep -c "rmad_request_dropped: dev=rxe0 port=1 qp=$qpn " $t/trace)" = 3 ] &&
	grep "^device rxe0 port 1 .* requests_dropped 3 " /sys/kernel/debug/rmad/ports'
# A receive handler (in rmad's receive completion thread) unregisters another agent whose
# send is in the device: it returns, the send flushed (ib_unregister_mad_agent hangs there).
vm_case recv_handler_unregisters_a_sibling two_hca_action sibling "sibling unregistered"
# A transmission the netdev refuses (here rxe1's qdisc drops every packet: pfifo limit 0)
# makes rxe move rmad's private QP to the error state, where every later send and receive of
# the port would be flushed. rmad resets the QP (RESET, then RTS) before its next send: the
# refused sends complete once each, and once the qdisc is gone rxe1's agents serve again.
refused_by_netdev() {
	/bin/ip neigh replace 10.0.3.2 lladdr 02:00:00:00:03:02 dev rmad1 nud permanent &&
		/bin/tc qdisc add dev rmad1 root pfifo limit 0 || return 1
	echo refused >/sys/module/rmad_two_hca_client/parameters/action
	/bin/tc qdisc del dev rmad1 root || return 1
	two_hca_pass "refused:"
}
vm_case sends_refused_by_the_netdev_complete_once refused_by_netdev
vm_case rxe1_serves_after_its_qp_was_reset two_hca_action round "round 3:"
vm_case qp_reset_counted_and_ready sh -c 'cat /sys/kernel/debug/rmad/ports &&
	grep -q "^device rxe1 port 1 .* qp_resets [1-9][0-9]* " /sys/kernel/debug/rmad/ports &&
	rdma res show qp link rxe1/1 | grep "comm \[rmad\]" | grep -q "state RTS"'
# RoCE address churn: an address handle must not keep a deleted address's GID entry.
vm_case deleted_gid_entry_not_kept_by_address_handles gid_churn
vm_case sends_parked_on_rxe1 two_hca_action park "parked"
vm_case remove_rxe1 rdma link delete rxe1
vm_case removal_flushed_each_rxe1_send_once two_hca_action flushed "parked sends after removal"
vm_case rxe0_serves_after_rxe1_removed two_hca_action round "round 4:"
# A new MAC on rxe0's netdev (ib_core deletes and adds its GIDs, and reports it) reaches
# rmad's port, which reads its LID, LMC and MAC again: a GET from and to rxe0's IPv4 GID,
# wherever the table put it now, with the new MAC (sends to rxe0's own GIDs carry it; rxe
# drops them with the old one); then the old MAC comes back. Last in this section: the GID
# table's order is not what it was, and rxe0 is made again below.
vm_case served_with_a_new_mac mac_change rmad0 rxe0 02:00:00:00:07:03 \
	'k="$(wait_gid_index_of 10.0.0.1)" && two_hca_action "from $k" "GET from GID $k:"'
vm_case two_hca_rmmod_client rmmod rmad_two_hca_client
vm_case two_hca_rmmod_production rmmod rmad
vm_case rxe0_made_again remake_rxe0
ip link delete rmad1
emit_vm_suite rmad_two_hca >"$RESULTS"

# 4. Device removal with sends outstanding: every send completes once, flushed.
vm_case removal_insmod_probe insmod /modules/test/rmad.ko rxe_probe=8
# The line names the device and port; "sent" counts what the device took; the RMPP
# reassembly bounds of the agent and of its port show, with nothing held.
vm_case debugfs_shows_outstanding sh -c 'for i in $(seq 100); do
	grep -q "^device rxe0 port 1 hi_tid 0x[0-9a-f]* outstanding 8 posted 8 sent 8 .* rmpp 0/32 bytes 0/16777216 port_rmpp 0/64 port_bytes 0/33554432 " \
		/sys/kernel/debug/rmad/agents && exit 0; sleep 0.2; done; cat /sys/kernel/debug/rmad/agents; exit 1'
vm_case removal_rdma_link_delete rdma link delete rxe0
sleep 1
vm_case removal_rmmod rmmod rmad
vm_case removal_each_send_flushed_once probe_flushed 8 1
# Unload with sends outstanding: the same, through rmmod alone.
vm_case unload_setup_rxe0 setup_rxe
vm_case unload_insmod_probe insmod /modules/test/rmad.ko rxe_probe=8
vm_case unload_rmmod rmmod rmad
vm_case unload_each_send_flushed_once probe_flushed 8 2
# Nothing of rmad may run after it is gone (a late work item would oops here).
sleep 1
vm_case unload_no_rmad_left sh -c '! grep -q "^rmad " /proc/modules'
emit_vm_suite rmad_rxe_removal >"$RESULTS"

# 5. Device hot-plug: rdma_rxe is a module. rmad loaded first finds no device,
# and gets rxe0's port when the driver comes. The driver cannot be unloaded
# while rxe0 exists: under lockdep every rxe QP pins it (ib_core's QP1, rmad's
# private QP); rmmod is refused and rmad's sends stay as they were. Once
# the device is deleted, rmad has flushed each send once, has let go of the
# driver, and rmmod succeeds with rmad's agent still registered.
vm_case hotplug_delete_rxe0 rdma link delete rxe0
vm_case hotplug_rmmod_rdma_rxe sh -c 'rmmod rdma_rxe && ! grep -q "^rdma_rxe " /proc/modules'
vm_case hotplug_insmod_rmad_before_driver insmod /modules/rmad.ko
vm_case hotplug_client_refused_without_device sh -c \
	'! insmod /modules/rmad_client.ko 2>/tmp/err && grep -q "No such device" /tmp/err'
vm_case hotplug_modprobe_rdma_rxe_after_rmad setup_rxe
vm_case hotplug_client_runs_on_new_device sh -c 'insmod /modules/rmad_client.ko &&
	rmmod rmad_client && [ "$(dmesg | grep -c "rmad_client: done (0)")" = 2 ]'
vm_case hotplug_rmmod_production rmmod rmad
vm_case hotplug_insmod_probe insmod /modules/test/rmad.ko rxe_probe=8
# outstanding N: rmad's debugfs shows the probe agent on rxe0 with N sends outstanding.
outstanding() {
	for i in $(seq 100); do
		grep -q "^device rxe0 port 1 hi_tid 0x[0-9a-f]* outstanding $1 " \
			/sys/kernel/debug/rmad/agents && return 0
		sleep 0.2
	done
	cat /sys/kernel/debug/rmad/agents
	return 1
}
vm_case hotplug_sends_outstanding outstanding 8
vm_case hotplug_rmmod_rdma_rxe_refused_while_rxe0_exists sh -c \
	'! rmmod rdma_rxe 2>/tmp/err && grep -q "Resource temporarily unavailable" /tmp/err &&
	grep -q "^rdma_rxe " /proc/modules'
vm_case hotplug_refusal_left_sends_alone outstanding 8
vm_case hotplug_delete_rxe0_under_agent rdma link delete rxe0
vm_case hotplug_rmmod_rdma_rxe_under_agent sh -c \
	'grep -q "^rmad " /proc/modules && rmmod rdma_rxe && ! grep -q "^rdma_rxe " /proc/modules'
sleep 1
vm_case hotplug_rmmod_rmad rmmod rmad
vm_case hotplug_each_send_flushed_once probe_flushed 8 3
emit_vm_suite rmad_hotplug >"$RESULTS"

# 5. Leaks: everything rmad allocated is gone.
vm_case kmemleak_reports_nothing kmemleak_clean
emit_vm_suite rmad_leaks >"$RESULTS"

# 6. Positive controls. Lockdep goes before KASAN: a KASAN report taints the
# kernel, which turns lock debugging off.
vm_case controls_insmod insmod /modules/test/rmad.ko
vm_case kmemleak_sees_a_leak control_leak
vm_case lockdep_sees_lock_inversion control lockdep "possible circular locking dependency"
echo 0 >/proc/sys/kernel/hung_task_panic
echo 2 >/proc/sys/kernel/hung_task_timeout_secs
echo 1 >/proc/sys/kernel/hung_task_check_interval_secs
# One report: the blocked task would be reported again at every check.
echo 1 >/proc/sys/kernel/hung_task_warnings
vm_case hung_task_detector_sees_a_hang control "hung 6" "blocked for more than"
vm_case kasan_sees_out_of_bounds control kasan "BUG: KASAN: slab-out-of-bounds"
vm_case controls_rmmod rmmod rmad
emit_vm_suite rmad_detectors >"$RESULTS"
