/* SPDX-License-Identifier: GPL-2.0 */
/* The C MAD layer's side of the two-node checks (src/testing/fabric/c_client.c). */
#ifndef RMAD_TEST_FABRIC_C_CLIENT_H
#define RMAD_TEST_FABRIC_C_CLIENT_H

#include <linux/types.h>

struct ib_device;

/* The figures of a burst: struct Figures in src/testing/fabric.rs. */
struct rmad_fabric_tally {
	u32 completed, success, timeout, flushed, other, twice, never, retries;
	u32 responses, status_ok, status_unsupported, status_other;
};

int rmad_fabric_c_burst(struct ib_device *dev, const u8 *dgid, u8 sgid_index, u8 class, u8 method,
			u32 count, int timeout_ms, int retries, int action, int action_ms,
			s64 wait_ms, struct rmad_fabric_tally *out);

#endif /* RMAD_TEST_FABRIC_C_CLIENT_H */
