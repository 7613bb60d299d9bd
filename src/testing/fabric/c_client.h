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

/* What a windowed run of GETs got: struct CRate in src/testing/fabric.rs. */
struct rmad_fabric_rate {
	u64 ns;		/* from the first post until the last send handler */
	u32 answered;	/* send handlers with IB_WC_SUCCESS (a response matched) */
	u32 retries;	/* retries, summed over the GETs */
};

/*
 * Sends @count GETs of @class through ib_core from port 1 of @dev to QP1 at
 * @dgid (from GID @sgid_index), at most @window outstanding at once, each with
 * @timeout_ms and @retries; waits at most @wait_ms for each step and fills @out.
 */
int rmad_fabric_c_rate(struct ib_device *dev, const u8 *dgid, u8 sgid_index, u8 class,
		       u32 count, u32 window, int timeout_ms, int retries, s64 wait_ms,
		       struct rmad_fabric_rate *out);

/* What one RMPP GET got: struct CRmpp in src/testing/fabric/rmpp.rs. */
struct rmad_fabric_rmpp {
	s32 status;	/* the send's completion status; -1 if none */
	u32 retries;	/* the retries the GET used */
	u32 len;	/* the answer's mad_len, 0 if none came */
	u32 intact;	/* every data byte of segment n is n (mod 256) */
};

/*
 * GETs @class from QP1 of @dgid (from GID @sgid_index) through a kernel-RMPP ib_core
 * agent on port 1 of @dev, response timeout @timeout_ms, @retries retries, segmented with
 * @req_bytes of data unless 0; waits at most @wait_ms for its send handler and reports
 * the reassembled answer in @out.
 */
int rmad_fabric_c_rmpp(struct ib_device *dev, const u8 *dgid, u8 sgid_index, u8 class,
		       int timeout_ms, int retries, u32 req_bytes, s64 wait_ms,
		       struct rmad_fabric_rmpp *out);

#endif /* RMAD_TEST_FABRIC_C_CLIENT_H */
