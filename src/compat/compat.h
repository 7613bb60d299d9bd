/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the ib_mad interface's glue (src/compat/ib_mad.c) calls in Rust
 * (src/capi/compat.rs) besides rmad.h: registration on a device named by its
 * struct ib_device, the port's private QP, and how a received MAD arrived.
 */
#ifndef RMAD_COMPAT_H
#define RMAD_COMPAT_H

#include <linux/types.h>

#include "../../include/rmad.h"

struct ib_device;
struct ib_grh;
struct ib_qp;
struct ib_wc;

/*
 * How a MAD arrived: the fields of its struct ib_wc that ib_init_ah_attr_from_wc()
 * and the connection manager read, and with IB_WC_GRH in @wc_flags the 40 bytes
 * before the MAD as received (mirrored by CompatWc in src/capi/compat.rs; both
 * assert the layout).
 */
struct rmad_compat_wc {
	u32 src_qp;
	u32 slid;
	u16 pkey_index;
	u8 dlid_path_bits;
	u8 sl;
	u8 port;
	u8 network_hdr_type;
	u16 vlan_id;
	u32 wc_flags;
	u8 grh[40];
};

/*
 * rmad_register_agent() on port @port of @dev: @hi_tid gets the agent's hi_tid
 * before any MAD can reach it; @owner_send and @owner_recv are the client's own
 * handlers, so that the agent belongs to the client's module (rmad.h, "Client
 * modules that unload").
 */
struct rmad_agent *rmad_compat_register(struct ib_device *dev, u32 port, int qp_type,
					const struct rmad_reg_req *reg_req, u8 rmpp_version,
					rmad_send_handler send_handler,
					rmad_recv_handler recv_handler, void *context, u32 flags,
					const void *owner_send, const void *owner_recv,
					u32 *hi_tid);
/* The private QP of rmad's port @port of @dev; NULL without such an open port. */
struct ib_qp *rmad_compat_port_qp(struct ib_device *dev, u32 port);
/* How the MAD of @recv_buf arrived: 0, or -EINVAL for a bad handle. */
int rmad_compat_recv_wc(struct rmad_recv_buf *recv_buf, struct rmad_compat_wc *wc);

/*
 * The struct ib_wc (its @qp @qp) and GRH of a MAD of @mad_len bytes that arrived
 * as @cw says: what ib_core's completion of it had, in every field ib_core's
 * clients read.
 */
void rmad_compat_fill_wc(struct ib_wc *wc, struct ib_grh *grh, const struct rmad_compat_wc *cw,
			 struct ib_qp *qp, u32 mad_len);

#endif /* RMAD_COMPAT_H */
