/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rmad_ib_mad.h - run code written for ib_core's MAD layer on rmad, unchanged
 *
 * Include it after <rdma/ib_mad.h> (it includes that header itself), or force
 * it into every file of a module with `ccflags-y += -include .../rmad_ib_mad.h`.
 * From there on, the module's calls of the MAD layer go to rmad:
 * ib_register_mad_agent(), ib_unregister_mad_agent(), ib_create_send_mad(),
 * ib_free_send_mad(), ib_post_send_mad(), ib_modify_mad(), ib_cancel_mad()
 * (inline in <rdma/ib_mad.h>, so redefined here), ib_free_recv_mad() and
 * ib_get_rmpp_segment(). They take and give ib_core's own structures: a
 * struct ib_mad_agent whose @qp is rmad's QP on the port (so address handles
 * made on @qp->pd are what a send's @ah takes), a struct ib_mad_send_buf whose
 * @mad, @context, @ah, @timeout_ms and @retries are the client's to read and
 * write as under ib_core, and a struct ib_mad_recv_wc with the packet's
 * struct ib_wc and GRH, as ib_init_ah_attr_from_wc() and
 * ib_create_ah_from_wc() read them, and a writable MAD that the client owns
 * until ib_free_recv_mad().
 *
 * Everything else stays ib_core's: the verbs (rdma_create_ah(),
 * ib_create_ah_from_wc(), ib_init_ah_attr_from_wc()), and the MAD helpers
 * that only read bytes or the agent's fields (ib_response_mad(),
 * ib_get_mad_data_offset(), ib_is_mad_class_rmpp(),
 * ib_mad_kernel_rmpp_agent()).
 *
 * Behaviour is ib_core's (Documentation/behaviour.md), with rmad's
 * differences (Documentation/c-api.md, "Porting ib_mad code"). Link against
 * rmad's Module.symvers (KBUILD_EXTRA_SYMBOLS); load rmad.ko first.
 */
#ifndef RMAD_IB_MAD_H
#define RMAD_IB_MAD_H

#include <rdma/ib_mad.h>

/* ib_register_mad_agent(): -ENODEV too for a port rmad has not opened. */
struct ib_mad_agent *rmad_ib_register_mad_agent(struct ib_device *device, u32 port_num,
						enum ib_qp_type qp_type,
						struct ib_mad_reg_req *mad_reg_req,
						u8 rmpp_version,
						ib_mad_send_handler send_handler,
						ib_mad_recv_handler recv_handler,
						void *context, u32 registration_flags);
/* ib_unregister_mad_agent(): also from the agent's own handler, which ib_core deadlocks on. */
void rmad_ib_unregister_mad_agent(struct ib_mad_agent *mad_agent);
/* ib_create_send_mad(). */
struct ib_mad_send_buf *rmad_ib_create_send_mad(struct ib_mad_agent *mad_agent, u32 remote_qpn,
						u16 pkey_index, int rmpp_active, int hdr_len,
						int data_len, gfp_t gfp_mask, u8 base_version);
/* ib_free_send_mad(): an outstanding buffer is not freed (and reported). */
void rmad_ib_free_send_mad(struct ib_mad_send_buf *send_buf);
/* ib_post_send_mad(): -EINVAL too without @ah or with one of another device. */
int rmad_ib_post_send_mad(struct ib_mad_send_buf *send_buf,
			  struct ib_mad_send_buf **bad_send_buf);
/* ib_modify_mad(). */
int rmad_ib_modify_mad(struct ib_mad_send_buf *send_buf, u32 timeout_ms);
/* ib_free_recv_mad(). */
void rmad_ib_free_recv_mad(struct ib_mad_recv_wc *mad_recv_wc);
/* ib_get_rmpp_segment(). */
void *rmad_ib_get_rmpp_segment(struct ib_mad_send_buf *send_buf, int seg_num);

#define ib_register_mad_agent(device, port_num, qp_type, reg_req, rmpp_version, send_handler, \
			      recv_handler, context, flags)                                  \
	rmad_ib_register_mad_agent(device, port_num, qp_type, reg_req, rmpp_version,        \
				   send_handler, recv_handler, context, flags)
#define ib_unregister_mad_agent(mad_agent) rmad_ib_unregister_mad_agent(mad_agent)
#define ib_create_send_mad(mad_agent, remote_qpn, pkey_index, rmpp_active, hdr_len, data_len, \
			   gfp_mask, base_version)                                           \
	rmad_ib_create_send_mad(mad_agent, remote_qpn, pkey_index, rmpp_active, hdr_len,     \
				data_len, gfp_mask, base_version)
#define ib_free_send_mad(send_buf) rmad_ib_free_send_mad(send_buf)
#define ib_post_send_mad(send_buf, bad_send_buf) rmad_ib_post_send_mad(send_buf, bad_send_buf)
#define ib_modify_mad(send_buf, timeout_ms) rmad_ib_modify_mad(send_buf, timeout_ms)
#define ib_cancel_mad(send_buf) ((void)rmad_ib_modify_mad(send_buf, 0))
#define ib_free_recv_mad(mad_recv_wc) rmad_ib_free_recv_mad(mad_recv_wc)
#define ib_get_rmpp_segment(send_buf, seg_num) rmad_ib_get_rmpp_segment(send_buf, seg_num)

#endif /* RMAD_IB_MAD_H */
