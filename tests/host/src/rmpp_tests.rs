// SPDX-License-Identifier: GPL-2.0

//! The RMPP machines of `src/mad/rmpp/` on the worked cases of Documentation/behaviour.md
//! §1.5, §2.8 and §2.10.
//!
//! The shared helpers and the header tests are here; [`recv`] holds the receiver's cases, [`send`]
//! the send window's and a whole transfer between the two, [`capacity`] the growth of a
//! reassembly buffer within the bounds.

mod capacity;
mod recv;
mod send;

use crate::mad::rmpp::recv::{
    Config,
    Transfer,
    Verdict, //
};
use crate::mad::rmpp::send::Window;
use crate::mad::rmpp::{
    Ack,
    RmppHdr,
    Status,
    IB_MGMT_RMPP_STATUS_ABORT_MAX,
    IB_MGMT_RMPP_STATUS_ABORT_MIN, //
};
use crate::mad::wire::{
    IB_MGMT_RMPP_FLAG_ACTIVE as ACTIVE,
    IB_MGMT_RMPP_TYPE_ABORT,
    IB_MGMT_RMPP_TYPE_ACK,
    IB_MGMT_RMPP_TYPE_DATA,
    IB_MGMT_RMPP_TYPE_STOP, //
};
use std::vec::Vec;

/// A DATA segment header.
fn seg(n: u32, flags: u8, paylen: u32) -> RmppHdr {
    RmppHdr {
        version: 1,
        rmpp_type: IB_MGMT_RMPP_TYPE_DATA,
        flags: ACTIVE | flags,
        seg_num: n,
        paylen_newwin: paylen,
        ..RmppHdr::default()
    }
}

/// An ACK header.
fn ack_hdr(status: u8, n: u32, newwin: u32) -> RmppHdr {
    RmppHdr {
        version: 1,
        rmpp_type: IB_MGMT_RMPP_TYPE_ACK,
        flags: ACTIVE,
        status,
        seg_num: n,
        paylen_newwin: newwin,
        ..RmppHdr::default()
    }
}

/// ACK(s, w).
fn ack(seg_num: u32, newwin: u32) -> Ack {
    Ack { seg_num, newwin }
}

/// Segment `n` of a transfer of `count` segments whose last one has `pad` bytes of
/// padding, as a Linux sender writes it.
fn data(count: u32, pad: u32, n: u32) -> RmppHdr {
    let w = Window::new(count, pad, 0, None).unwrap();
    let s = w.segment(n).unwrap();
    seg(n, s.flags, s.paylen)
}

/// The receiving side as the engine will run it: one transfer for one key, started by a
/// FIRST, every verdict and ACK recorded.
struct Rx {
    cfg: Config,
    t: Option<Transfer>,
    acks: Vec<Ack>,
    verdicts: Vec<Verdict>,
}

impl Rx {
    fn new(window: u32, hdr: usize, max: u32) -> Self {
        Self {
            cfg: Config::new(window, hdr, max).unwrap(),
            t: None,
            acks: Vec::new(),
            verdicts: Vec::new(),
        }
    }

    fn feed(&mut self, h: &RmppHdr) -> Verdict {
        let v = match &mut self.t {
            Some(t) => t.on_segment(h),
            None => match Transfer::start(self.cfg, h) {
                Ok((t, v)) => {
                    self.t = Some(t);
                    v
                }
                Err(v) => v,
            },
        };
        match v {
            Verdict::StoreAndAck { ack, .. } | Verdict::Complete { ack, .. } => self.acks.push(ack),
            Verdict::Ack(a) => self.acks.push(a),
            _ => {}
        }
        self.verdicts.push(v);
        v
    }

    /// Feeds segments `ns` of a transfer of `count` segments with no padding.
    fn feed_all(&mut self, count: u32, ns: impl IntoIterator<Item = u32>) {
        for n in ns {
            self.feed(&data(count, 0, n));
        }
    }

    fn t(&self) -> &Transfer {
        self.t.as_ref().unwrap()
    }

    fn complete_len(&self) -> Option<usize> {
        self.verdicts.iter().find_map(|v| match v {
            Verdict::Complete { len, .. } => Some(*len),
            _ => None,
        })
    }
}

#[test]
fn headers_and_statuses() {
    let h = RmppHdr {
        version: 1,
        rmpp_type: 2,
        resp_time: 0x1F,
        flags: 0x7,
        status: 0x80,
        seg_num: 0x0102_0304,
        paylen_newwin: 0xA0B0_C0D0,
    };
    let mut mad = [0xEEu8; 256];
    h.write(&mut mad).unwrap();
    assert_eq!(
        mad[24..36],
        [1, 2, 0xFF, 0x80, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0]
    );
    assert!(mad[..24].iter().chain(&mad[36..]).all(|b| *b == 0xEE));
    assert_eq!(RmppHdr::parse(&mad), Ok(h));
    assert!(RmppHdr::parse(&mad[..35]).is_err());
    assert!(h.write(&mut mad[..35]).is_err());
    let mut odd = h;
    odd.resp_time = 0xFF;
    odd.flags = 0xFF;
    odd.write(&mut mad).unwrap();
    assert_eq!(mad[26], 0xFF);
    let a = ack(3, 67).hdr();
    assert_eq!(
        (a.rmpp_type, a.flags, a.status, a.seg_num, a.paylen_newwin),
        (IB_MGMT_RMPP_TYPE_ACK, ACTIVE, 0, 3, 67)
    );
    let all = [
        Status::Resx,
        Status::T2l,
        Status::BadLen,
        Status::BadSeg,
        Status::Badt,
        Status::W2s,
        Status::S2b,
        Status::BadStatus,
        Status::Unv,
        Status::Tmr,
        Status::Unspec,
    ];
    let codes = all.map(Status::code);
    assert_eq!(codes, [1, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]);
    for code in 0..=255u8 {
        let s = Status::from_code(code);
        assert_eq!(s.is_some(), codes.contains(&code));
        if let Some(s) = s {
            assert_eq!(s.code(), code);
            let h = s.hdr();
            assert_eq!(
                (h.status, h.seg_num, h.paylen_newwin, h.flags),
                (code, 0, 0, ACTIVE)
            );
            let abort =
                (IB_MGMT_RMPP_STATUS_ABORT_MIN..=IB_MGMT_RMPP_STATUS_ABORT_MAX).contains(&code);
            let kind = if abort {
                IB_MGMT_RMPP_TYPE_ABORT
            } else {
                IB_MGMT_RMPP_TYPE_STOP
            };
            assert_eq!(h.rmpp_type, kind);
        }
    }
}
