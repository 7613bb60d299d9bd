/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A responder in ib_core's own MAD layer (src/testing/ib_responder.c), for
 * the test flavour's Rust side (src/testing/ib_responder.rs).
 */

#ifndef RMAD_TEST_IB_RESPONDER_H
#define RMAD_TEST_IB_RESPONDER_H

#include <linux/types.h>

struct ib_device;

/* Registers a responder for GETs of @mgmt_class on QP1 of @dev/@port; NULL if refused. */
void *rmad_test_responder_start(struct ib_device *dev, u32 port, u8 mgmt_class);
/* Unregisters a responder from rmad_test_responder_start(); NULL is ignored. */
void rmad_test_responder_stop(void *responder);

#endif /* RMAD_TEST_IB_RESPONDER_H */
