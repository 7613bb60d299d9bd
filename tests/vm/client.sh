#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# `make vm` (scripts/vm/vm-client.sh): rxe0 up on a dummy netdev, the production
# rmad.ko loaded, then the client modules in /modules/client/ in the order
# given (their file names are listed in /modules/client/order), then the
# user's script /modules/client/script.sh if any; then the clients are
# unloaded in reverse order, and rmad. Each step's kernel messages are shown
# on the console as they come.
. /lib.sh
echo 7 >/proc/sys/kernel/printk
step() { echo "make vm: $*"; }

setup_rxe || step "no rxe0"
step "rxe0: $(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)"
insmod /modules/rmad.ko || exit 1
step "rmad loaded"
loaded=""
for ko in $(cat /modules/client/order 2>/dev/null); do
	if insmod "/modules/client/$ko"; then
		step "loaded $ko"
		loaded="${ko%.ko} $loaded"
	else
		step "insmod $ko failed"
	fi
done
if [ -x /modules/client/script.sh ]; then
	step "running the script"
	/modules/client/script.sh
	step "the script exited with $?"
fi
for m in $loaded; do
	rmmod "$m" && step "unloaded $m" || step "rmmod $m failed"
done
rmmod rmad && step "rmad unloaded"
