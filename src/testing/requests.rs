// SPDX-License-Identifier: GPL-2.0

//! The MADs tests send: requests, and the answers a responder posts.

use crate::{
    engine::{
        agent::Agent,
        send::SendBuf,
        transport::{
            RecvMad,
            Transport, //
        },
    },
    mad::{
        wire::{
            self,
            MadHdr, //
        },
        Address,
        GrhAttr, //
    },
    verbs::VerbsPort, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// A GET request of `class` from `agent` to LID `dlid`, tagged `tag`, with TID low word
/// `lo`, `timeout_ms` and `retries`.
pub(crate) fn request(
    agent: &Arc<Agent>,
    class: u8,
    tag: usize,
    dlid: u16,
    timeout_ms: i32,
    retries: i32,
) -> Result<SendBuf> {
    let mut buf = agent.create_send(1, 0, false, 24, 232, GFP_KERNEL, 1)?;
    let lo = u32::try_from(tag).unwrap_or(0);
    let hdr = MadHdr {
        base_version: 1,
        mgmt_class: class,
        class_version: 1,
        method: wire::IB_MGMT_METHOD_GET,
        tid: wire::make_tid(agent.hi_tid, lo),
        ..MadHdr::default()
    };
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    buf.set_ah(Some(Address {
        sl: 0,
        dlid,
        src_path_bits: 0,
        grh: None,
    }));
    buf.set_timeout_ms(timeout_ms);
    buf.set_retries(retries);
    buf.set_context([tag, 0]);
    Ok(buf)
}

/// A class-0x04 request with `method` from `a` to QP1 of its own rxe port, through the
/// port's IPv4-mapped GID (index 1). ib_core answers GET itself; it never answers SEND.
pub(crate) fn rxe_request(
    port: &Arc<VerbsPort>,
    a: &Arc<Agent>,
    tag: usize,
    method: u8,
    timeout_ms: i32,
    retries: i32,
) -> Result<SendBuf> {
    let gid = port.gid(1, 1).ok_or(ENODEV)?;
    let mut buf = request(
        a,
        wire::IB_MGMT_CLASS_PERF_MGMT,
        tag,
        0,
        timeout_ms,
        retries,
    )?;
    if let Some(m) = buf.mad_mut().get_mut(3) {
        *m = method;
    }
    buf.set_ah(Some(Address {
        sl: 0,
        dlid: 0,
        src_path_bits: 0,
        grh: Some(GrhAttr {
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            dgid: gid,
            sgid_index: 1,
        }),
    }));
    Ok(buf)
}

/// Posts a GET_RESP to `req`, back to where it came from.
pub(crate) fn respond(agent: &Arc<Agent>, req: &MadHdr, mad: &RecvMad) -> Result {
    let mut buf = agent.create_send(mad.wc.src_qp, 0, false, 24, 232, GFP_KERNEL, 1)?;
    let hdr = MadHdr {
        method: wire::IB_MGMT_METHOD_GET_RESP,
        ..*req
    };
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    buf.set_ah(Some(Address {
        sl: 0,
        dlid: mad.wc.slid,
        src_path_bits: mad.wc.dlid_path_bits,
        grh: None,
    }));
    buf.set_context([usize::MAX, 0]);
    Agent::post(buf).map(|_| ()).map_err(|e| e.err)
}

