/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Suite rmad_rxe: code written for ib_core's MAD layer on rmad through
 * include/rmad_ib_mad.h (src/testing/suites/rxe/ibmad.c, for ibmad.rs).
 */

#ifndef RMAD_TEST_RXE_IBMAD_H
#define RMAD_TEST_RXE_IBMAD_H

#include <linux/types.h>

struct ib_device;

/*
 * Runs the header's checks on @port of @dev from GID index @gid_index: 0, or
 * the first error (logged with what failed). Process context.
 */
int rmad_test_ib_mad(struct ib_device *dev, u32 port, int gid_index);

#endif /* RMAD_TEST_RXE_IBMAD_H */
