// SPDX-License-Identifier: GPL-2.0
/*
 * Suite rmad_rxe (test flavour only): the struct ib_wc and GRH of a packet rmad
 * received, rebuilt from what rmad kept of it, given to ib_core's
 * ib_init_ah_attr_from_wc, as a client of the ib_mad interface gives them
 * (the connection manager, to answer a REQ).
 */

#include <linux/build_bug.h>
#include <linux/etherdevice.h>
#include <linux/rcupdate.h>
#include <linux/string.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "wc.h"

/* The layouts TestWc and TestAh in wc.rs have. */
static_assert(sizeof(struct rmad_test_wc) == 60);
static_assert(offsetof(struct rmad_test_wc, grh) == 20);
static_assert(sizeof(struct rmad_test_ah) == 56);
static_assert(offsetof(struct rmad_test_ah, flow_label) == 44);
static_assert(offsetof(struct rmad_test_ah, gid_type) == 54);

/* The source GID entry of @attr: its GID, type and netdev's MAC. */
static void rmad_test_sgid(const struct ib_gid_attr *sgid_attr, struct rmad_test_ah *out)
{
	struct net_device *ndev;

	memcpy(out->sgid, sgid_attr->gid.raw, sizeof(out->sgid));
	out->gid_type = sgid_attr->gid_type;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(sgid_attr);
	if (!IS_ERR(ndev))
		ether_addr_copy(out->own_mac, ndev->dev_addr);
	rcu_read_unlock();
}

int rmad_test_ah_from_wc(struct ib_device *dev, u32 port, const struct rmad_test_wc *in,
			 struct rmad_test_ah *out)
{
	struct ib_wc wc = {
		.status = IB_WC_SUCCESS,
		.src_qp = in->src_qp,
		.slid = in->slid,
		.pkey_index = in->pkey_index,
		.dlid_path_bits = in->dlid_path_bits,
		.sl = in->sl,
		.wc_flags = in->wc_flags,
		.network_hdr_type = in->network_hdr_type,
		.vlan_id = in->vlan_id,
		.port_num = port,
	};
	const struct ib_global_route *g;
	struct rdma_ah_attr attr;
	struct ib_grh grh;
	int ret;

	BUILD_BUG_ON(sizeof(grh) != sizeof(in->grh));
	memcpy(&grh, in->grh, sizeof(grh));
	memset(out, 0, sizeof(*out));
	ret = ib_init_ah_attr_from_wc(dev, port, &wc, &grh, &attr);
	if (ret)
		return ret;
	out->sl = rdma_ah_get_sl(&attr);
	if (rdma_ah_get_ah_flags(&attr) & IB_AH_GRH) {
		g = rdma_ah_read_grh(&attr);
		out->has_grh = 1;
		memcpy(out->dgid, g->dgid.raw, sizeof(out->dgid));
		out->sgid_index = g->sgid_index;
		out->flow_label = g->flow_label;
		out->traffic_class = g->traffic_class;
		if (g->sgid_attr)
			rmad_test_sgid(g->sgid_attr, out);
	}
	if (attr.type == RDMA_AH_ATTR_TYPE_ROCE)
		ether_addr_copy(out->dmac, attr.roce.dmac);
	else
		out->dlid = rdma_ah_get_dlid(&attr);
	rdma_destroy_ah_attr(&attr);
	return 0;
}
