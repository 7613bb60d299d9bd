// SPDX-License-Identifier: GPL-2.0

// The C side of the binding (`include/rmad_binding.rs` includes this file, which stays beside
// it and `rmad.h`): the completion structures rmad hands the handlers, the layouts of
// `include/rmad.h` checked at compile time, and the exported functions.

/// `struct rmad_send_wc`.
#[repr(C)]
struct SendWc {
    send_buf: *mut c_void,
    post_id: u64,
    context: *mut c_void,
    status: c_int,
    vendor_err: u32,
    buf_context: *mut c_void,
}

/// `struct rmad_recv_wc`.
#[repr(C)]
struct RecvWc {
    mad: *const c_void,
    context: *mut c_void,
    mad_len: u32,
    src_qp: u32,
    slid: u16,
    pkey_index: u16,
    has_grh: u8,
    hop_limit: u8,
    traffic_class: u8,
    recv_buf: *mut c_void,
    sgid: [u8; 16],
    flow_label: u32,
}

// The layouts of `include/rmad.h` (rmad checks the same numbers on its side).
const _: () = {
    use core::mem::{
        offset_of,
        size_of, //
    };
    assert!(size_of::<Ah>() == 28 && offset_of!(Ah, dgid) == 5);
    assert!(offset_of!(Ah, hop_limit) == 21 && offset_of!(Ah, sl) == 23);
    assert!(offset_of!(Ah, flow_label) == 24);
    assert!(size_of::<SendWc>() == 40 && offset_of!(SendWc, context) == 16);
    assert!(offset_of!(SendWc, status) == 24 && offset_of!(SendWc, vendor_err) == 28);
    assert!(offset_of!(SendWc, buf_context) == 32);
    assert!(size_of::<RecvWc>() == 64 && offset_of!(RecvWc, context) == 8);
    assert!(offset_of!(RecvWc, hop_limit) == 29 && offset_of!(RecvWc, traffic_class) == 30);
    assert!(offset_of!(RecvWc, flow_label) == 56);
    assert!(offset_of!(RecvWc, mad_len) == 16 && offset_of!(RecvWc, slid) == 24);
    assert!(offset_of!(RecvWc, pkey_index) == 26 && offset_of!(RecvWc, has_grh) == 28);
    assert!(offset_of!(RecvWc, recv_buf) == 32 && offset_of!(RecvWc, sgid) == 40);
    assert!(size_of::<RegReq>() == 24 && offset_of!(RegReq, method_mask) == 8);
};

type SendFn = Option<unsafe extern "C" fn(*mut c_void, *mut SendWc)>;
type RecvFn = Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *const RecvWc)>;

extern "C" {
    fn rmad_register_agent(
        device: *const c_char,
        port: u32,
        qp_type: c_int,
        reg_req: *const c_void,
        rmpp_version: u8,
        send_handler: SendFn,
        recv_handler: RecvFn,
        context: *mut c_void,
        flags: u32,
    ) -> *mut c_void;
    fn rmad_unregister_agent(agent: *mut c_void) -> c_int;
    fn rmad_unregister_agent_async(
        agent: *mut c_void,
        release: Option<unsafe extern "C" fn(*mut c_void)>,
        arg: *mut c_void,
        owner: *mut c_void,
    ) -> c_int;
    /// This (the client's) module, which every module has (`THIS_MODULE` in C); only its
    /// address is used.
    static __this_module: c_char;
    fn rmad_agent_context(agent: *mut c_void) -> *mut c_void;
    fn rmad_agent_hi_tid(agent: *mut c_void) -> u32;
    fn rmad_resolve_ah(agent: *mut c_void, ah: *const Ah) -> c_int;
    fn rmad_port_gid(device: *const c_char, port: u32, index: c_int, gid: *mut u8) -> c_int;
    fn rmad_create_send_mad(
        agent: *mut c_void,
        remote_qpn: u32,
        pkey_index: u16,
        rmpp_active: c_int,
        hdr_len: c_int,
        data_len: c_int,
        gfp_mask: kernel::bindings::gfp_t,
        base_version: u8,
    ) -> *mut c_void;
    fn rmad_free_send_mad(buf: *mut c_void) -> c_int;
    fn rmad_send_buf_mad(buf: *mut c_void) -> *mut c_void;
    fn rmad_send_buf_len(buf: *mut c_void) -> u32;
    fn rmad_get_rmpp_segment(buf: *mut c_void, seg_num: c_int) -> *mut c_void;
    fn rmad_send_buf_seg_count(buf: *mut c_void, seg_size: *mut u32) -> c_int;
    fn rmad_get_mad_data_offset(mgmt_class: u8) -> c_int;
    fn rmad_send_buf_context(buf: *mut c_void) -> *mut c_void;
    fn rmad_send_buf_retries(buf: *mut c_void) -> c_int;
    fn rmad_send_buf_set(
        buf: *mut c_void,
        ah: *const Ah,
        timeout_ms: c_int,
        retries: c_int,
        context: *mut c_void,
    ) -> c_int;
    fn rmad_send_buf_set_retry(buf: *mut c_void, retry_flags: u32, deadline_ms: u32) -> c_int;
    fn rmad_post_send(buf: *mut c_void, post_id: *mut u64) -> c_int;
    fn rmad_keep_recv_mad(recv_buf: *mut c_void) -> c_int;
    fn rmad_free_recv_mad(recv_buf: *mut c_void) -> c_int;
    fn rmad_recv_buf_mad(recv_buf: *mut c_void, len: *mut u32) -> *const c_void;
    fn rmad_recv_buf_ah(agent: *mut c_void, recv_buf: *mut c_void, ah: *mut Ah) -> c_int;
    fn rmad_modify_post(buf: *mut c_void, post_id: u64, timeout_ms: c_int) -> c_int;
}
