/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Suite rmad_rxe: what ib_init_ah_attr_from_wc gives for a packet rmad received,
 * from what rmad kept of it (src/testing/suites/rxe/wc.c, for wc.rs).
 */

#ifndef RMAD_TEST_RXE_WC_H
#define RMAD_TEST_RXE_WC_H

#include <linux/types.h>

struct ib_device;

/* What rmad kept of a received packet (mirrored by TestWc in wc.rs). */
struct rmad_test_wc {
	u32 src_qp;
	u32 slid;
	u16 pkey_index;
	u8 dlid_path_bits;
	u8 sl;
	u8 network_hdr_type;
	u8 pad;
	u16 vlan_id;
	u32 wc_flags;
	u8 grh[40];
};

/* The address ib_init_ah_attr_from_wc gave (mirrored by TestAh in wc.rs). */
struct rmad_test_ah {
	u8 dgid[16];
	/* The source GID entry's GID, and its netdev's MAC. */
	u8 sgid[16];
	u8 own_mac[6];
	u8 dmac[6];
	u32 flow_label;
	u16 dlid;
	u8 sgid_index;
	u8 traffic_class;
	u8 sl;
	u8 has_grh;
	/* enum ib_gid_type of the source GID entry. */
	u8 gid_type;
	u8 pad;
};

/*
 * Rebuilds the struct ib_wc and GRH of a packet from @in and asks ib_core's
 * ib_init_ah_attr_from_wc for the address back to its sender, on @port of
 * @dev; fills @out, returns 0 or the function's error. Process context.
 */
int rmad_test_ah_from_wc(struct ib_device *dev, u32 port, const struct rmad_test_wc *in,
			 struct rmad_test_ah *out);

#endif /* RMAD_TEST_RXE_WC_H */
