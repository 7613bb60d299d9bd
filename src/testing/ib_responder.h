/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A responder in ib_core's own MAD layer (src/testing/ib_responder.c), for
 * the test flavour's Rust side (src/testing/ib_responder.rs) and the
 * benchmark (src/testing/bench/).
 */

#ifndef RMAD_TEST_IB_RESPONDER_H
#define RMAD_TEST_IB_RESPONDER_H

#include <linux/types.h>

struct ib_device;
struct rmad_test_responder;

/*
 * Registers a responder for GETs of @mgmt_class (version 1) on QP1 of
 * @dev/@port, which can hold up to @hold_max answers; NULL if refused.
 */
struct rmad_test_responder *rmad_test_responder_start(struct ib_device *dev, u32 port,
						      u8 mgmt_class, u32 hold_max);
/*
 * Registers a kernel-RMPP responder (rmpp_version 1) for GETs of @mgmt_class
 * that answers each with one RMPP transfer of @len data bytes; NULL if refused.
 */
struct rmad_test_responder *rmad_test_responder_start_rmpp(struct ib_device *dev, u32 port,
							   u8 mgmt_class, u32 len);
/* How many answers completed with IB_WC_SUCCESS (@ok) and otherwise (@bad). */
void rmad_test_responder_sent(struct rmad_test_responder *r, u32 *ok, u32 *bad);
/* Keeps the answers (up to hold_max) from now on, until released. */
void rmad_test_responder_hold(struct rmad_test_responder *r);
/* Posts every held answer and goes back to answering at once. */
void rmad_test_responder_release(struct rmad_test_responder *r);
/* How many answers are held now. */
u32 rmad_test_responder_held(struct rmad_test_responder *r);
/* How many requests the responder has seen. */
u32 rmad_test_responder_seen(struct rmad_test_responder *r);
/* Answer each GET with @n RMPP DATA segments (1..n) instead of one GET_RESP. */
void rmad_test_responder_segments(struct rmad_test_responder *r, u32 n);
/* Releases what is held and unregisters; NULL is ignored. */
void rmad_test_responder_stop(struct rmad_test_responder *r);

#endif /* RMAD_TEST_IB_RESPONDER_H */
