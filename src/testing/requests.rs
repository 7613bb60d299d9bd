// SPDX-License-Identifier: GPL-2.0

//! The MADs tests send: requests, and the answers a responder posts.

use crate::{
    engine::{
        agent::{
            Agent,
            SendSpec, //
        },
        send::SendBuf,
        transport::{
            GrhFields,
            LinkHdr,
            RecvMad,
            RecvWc,
            Transport, //
        },
    },
    mad::{
        wire::{
            self,
            MadHdr, //
        },
        Address,
        Gid,
        GrhAttr, //
    },
    verbs::VerbsPort, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// A send buffer of `agent` for QP1 with a request header: base version 1, `class` version
/// 1, `method`, TID `hi_tid:lo`. Every request the tests send starts here.
pub(crate) fn mad(agent: &Arc<Agent>, class: u8, method: u8, lo: u32) -> Result<SendBuf> {
    mad_in(agent, class, method, lo, 0)
}

/// [`mad`], sent with P_Key index `pkey_index`.
pub(crate) fn mad_in(
    agent: &Arc<Agent>,
    class: u8,
    method: u8,
    lo: u32,
    pkey_index: u16,
) -> Result<SendBuf> {
    let mut buf = agent.create_send(
        SendSpec {
            pkey_index,
            ..SendSpec::mad(1)
        },
        GFP_KERNEL,
    )?;
    let hdr = MadHdr {
        base_version: 1,
        mgmt_class: class,
        class_version: 1,
        method,
        tid: wire::make_tid(agent.hi_tid, lo),
        ..MadHdr::default()
    };
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    Ok(buf)
}

/// The address of GID `dgid` from the port's GID `sgid_index`, hop limit 64.
pub(crate) fn gid_address(dgid: Gid, sgid_index: u8) -> Address {
    Address {
        sl: 0,
        dlid: 0,
        src_path_bits: 0,
        grh: Some(GrhAttr {
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            dgid,
            sgid_index,
        }),
    }
}

/// A GET request of `class` from `agent` to LID `dlid`, tagged `tag` (also the TID's low
/// word), with `timeout_ms` and `retries`.
pub(crate) fn request(
    agent: &Arc<Agent>,
    class: u8,
    tag: usize,
    dlid: u16,
    timeout_ms: i32,
    retries: i32,
) -> Result<SendBuf> {
    let lo = u32::try_from(tag).unwrap_or(0);
    let mut buf = mad(agent, class, wire::IB_MGMT_METHOD_GET, lo)?;
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
    let lo = u32::try_from(tag).unwrap_or(0);
    let mut buf = mad(a, wire::IB_MGMT_CLASS_PERF_MGMT, method, lo)?;
    buf.set_ah(Some(gid_address(gid, 1)));
    buf.set_timeout_ms(timeout_ms);
    buf.set_retries(retries);
    buf.set_context([tag, 0]);
    Ok(buf)
}

/// The answer of `agent` to the request `req` that came from QP `src_qp` with P_Key index
/// `pkey_index`: a GET_RESP with the request's header otherwise, to `ah`, in the request's
/// partition (as C responders do with `wc->pkey_index`).
pub(crate) fn answer(
    agent: &Arc<Agent>,
    req: &MadHdr,
    src_qp: u32,
    pkey_index: u16,
    ah: Address,
) -> Result<SendBuf> {
    let mut buf = agent.create_send(
        SendSpec {
            pkey_index,
            ..SendSpec::mad(src_qp)
        },
        GFP_KERNEL,
    )?;
    let hdr = MadHdr {
        method: wire::IB_MGMT_METHOD_GET_RESP,
        ..*req
    };
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    buf.set_ah(Some(ah));
    Ok(buf)
}

/// Posts a GET_RESP to `req`, back to where it came from on the loopback fabric (by LID).
pub(crate) fn respond(agent: &Arc<Agent>, req: &MadHdr, mad: &RecvMad) -> Result {
    let ah = Address {
        sl: 0,
        dlid: mad.wc.slid,
        src_path_bits: mad.wc.dlid_path_bits,
        grh: None,
    };
    let mut buf = answer(agent, req, mad.wc.src_qp, mad.wc.pkey_index, ah)?;
    buf.set_context([usize::MAX, 0]);
    Agent::post(buf).map(|_| ()).map_err(|e| e.err)
}

/// How a MAD from QP1 of LID `slid` arrives at port `port` without a GRH, in P_Key index 0, as
/// the loopback fabric hands one to the engine.
pub(crate) fn plain_arrival(port: u8, slid: u16) -> RecvWc {
    RecvWc {
        port,
        slid,
        dlid_path_bits: 0,
        src_qp: 1,
        dst_qp: 1,
        pkey_index: 0,
        sl: 0,
        grh: None,
        grh_fields: GrhFields::default(),
        link: LinkHdr::default(),
        private_request: false,
    }
}
