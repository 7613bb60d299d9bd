/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interface between rmad's verbs glue (src/verbs/shim.c) and its Rust side
 * (verbs.rs, which declares the same functions in an extern "C" block).
 */
#ifndef RMAD_VERBS_SHIM_H
#define RMAD_VERBS_SHIM_H

#include <linux/types.h>

struct ib_device;
struct ib_qp;
struct ib_wc;
struct rmad_vport;

/* How a MAD arrived (mirrored by VerbsRecvInfo in src/verbs.rs; both assert the layout). */
struct rmad_recv_info {
	u32 src_qp;
	u32 slid;
	u16 pkey_index;
	u8 dlid_path_bits;
	u8 has_grh;
	u8 sgid[16];
	u8 dgid[16];
	u32 flow_label;
	u8 hop_limit;
	u8 traffic_class;
	u8 sl;
	/* 1: a request ib_core received on QP1 and forwarded; 0: arrived at the private QP. */
	u8 via_qp1;
	/*
	 * What ib_init_ah_attr_from_wc reads besides the fields above: the
	 * work completion's IB_WC_GRH, IB_WC_WITH_NETWORK_HDR_TYPE and
	 * IB_WC_WITH_VLAN flags, the network header's type and the VLAN as the
	 * device reported them, and with IB_WC_GRH the 40 bytes before the MAD
	 * as received (the GRH, or on RoCEv2 over IPv4 the IP header in the last
	 * 20).
	 */
	u8 network_hdr_type;
	u16 vlan_id;
	u32 wc_flags;
	u8 grh[40];
};

/* Called by Rust. */
/*
 * One transmission, framed by Rust (TxFrame in src/verbs/tx.rs): the MAD, its
 * work-request id, the destination QP and P_Key index, and the address by its
 * parts: with has_grh, dgid, sgid_index, hop_limit, traffic_class and
 * flow_label, otherwise dlid and src_path_bits; the SL; on RoCE the
 * destination MAC (zero for rmad_shim_vport_send_now, which takes it from the
 * cached address handle).
 */
struct rmad_tx {
	const u8 *mad;
	u64 wr_id;
	u32 len;
	u32 remote_qpn;
	u32 dlid;
	u32 flow_label;
	u16 pkey_index;
	u8 src_path_bits;
	u8 sl;
	u8 has_grh;
	u8 sgid_index;
	u8 hop_limit;
	u8 traffic_class;
	u8 dgid[16];
	u8 dmac[6];
};

int rmad_shim_register_client(void);
void rmad_shim_unregister_client(void);
const char *rmad_shim_dev_name(struct ib_device *dev);
u32 rmad_shim_port_count(struct ib_device *dev);
int rmad_shim_port_has_gsi(struct ib_device *dev, u32 port);
int rmad_shim_query_port(struct ib_device *dev, u32 port, u32 *lid, u8 *lmc, u8 *has_smi);
int rmad_shim_query_gid(struct ib_device *dev, u32 port, int index, u8 *gid);
int rmad_shim_query_pkey(struct ib_device *dev, u32 port, u16 index, u16 *pkey);
int rmad_shim_find_gid(struct ib_device *dev, u32 port, const u8 *gid);
int rmad_shim_reply_hop_limit(struct ib_device *dev, u32 port, u8 sgid_index, const u8 *dgid);
int rmad_shim_port_mac(struct ib_device *dev, u32 port, u8 *mac);
int rmad_shim_dev_try_get(struct ib_device *dev);
void rmad_shim_dev_put(struct ib_device *dev);
struct rmad_vport *rmad_shim_vport_open(struct ib_device *dev, u32 port, void *ctx);
void rmad_shim_vport_close(struct rmad_vport *vp);
void rmad_shim_vport_sweep(struct rmad_vport *vp);
bool rmad_shim_vport_recover(struct rmad_vport *vp);
u32 rmad_shim_vport_resets(struct rmad_vport *vp);
u32 rmad_shim_vport_qp_num(struct rmad_vport *vp);
struct ib_qp *rmad_shim_vport_qp(struct rmad_vport *vp);
void *rmad_shim_forward_start(struct ib_device *dev, u32 port, void *ctx, u8 mgmt_class,
			      u8 class_version, const u8 *oui, u64 mask_lo, u64 mask_hi);
void rmad_shim_forward_stop(void *fwd);
int rmad_shim_vport_send(struct rmad_vport *vp, const struct rmad_tx *tx);
int rmad_shim_vport_send_now(struct rmad_vport *vp, const struct rmad_tx *tx);
/* What rmad keeps of how a MAD arrived (@grh: the 40 bytes before it), from its completion. */
void rmad_shim_fill_info(const struct ib_wc *wc, const void *grh, struct rmad_recv_info *info);
int rmad_shim_resolve_dmac(struct ib_device *dev, u32 port, u8 sgid_index, const u8 *dgid,
			   u8 *dmac, u8 *hop_limit);

/* Implemented in Rust (src/verbs.rs). */
void rmad_rust_device_add(struct ib_device *dev);
void rmad_rust_device_remove(struct ib_device *dev);
void rmad_rust_device_renamed(struct ib_device *dev);
void rmad_rust_send_done(void *ctx, u64 wr_id, int status, u32 vendor_err);
void rmad_rust_port_changed(void *ctx);
void rmad_rust_kick(void *ctx);
void rmad_rust_recv(void *ctx, const u8 *mad, u32 len, const struct rmad_recv_info *info);

#endif /* RMAD_VERBS_SHIM_H */
