// SPDX-License-Identifier: GPL-2.0

//! RMPP, the segmentation protocol of kernel-RMPP agents (Documentation/behaviour.md §2.8 and
//! §2.10), as pure, sans-IO state machines.
//!
//! Nothing here sends, receives, allocates, copies payload or keeps time. Each machine is fed
//! one event (a received segment or ACK, a timer expiry) and answers with a decision that the
//! engine carries out: which bytes to copy where, which ACK, STOP or ABORT to send, when to
//! deliver, when to retransmit. Only `core` is used, so the same files compile into the kernel
//! module and into the host tests, which check them against reference models.
//!
//! - [`recv`]: the reassembly of one received transfer (`mad_rmpp.c`'s `start_rmpp` and
//!   `continue_rmpp`, §2.10.3 to §2.10.5), with the validation C lacks;
//! - [`capacity`]: the capacity its buffer grows to, within the bounds (§8.14);
//! - [`send`]: the window of one segmented send (`send_next_seg`, `process_rmpp_ack`,
//!   `ib_retry_rmpp`, §2.8) and the segment sizes of §1.5;
//! - here: the RMPP header as a value ([`RmppHdr`]) and the RMPP status codes ([`Status`]).
//!
//! Sizes are those of InfiniBand (256-byte MADs, 220 bytes of RMPP data per segment): rmad
//! does not carry OPA MADs (§8.17).

#[path = "rmpp/capacity.rs"]
pub(crate) mod capacity;
#[path = "rmpp/recv.rs"]
pub(crate) mod recv;
#[path = "rmpp/send.rs"]
pub(crate) mod send;

use super::wire::{
    ib_get_rmpp_flags,
    ib_get_rmpp_resptime,
    rmpp_hdr,
    rmpp_hdr_mut,
    WireError,
    IB_MGMT_RMPP_DATA,
    IB_MGMT_RMPP_FLAG_ACTIVE,
    IB_MGMT_RMPP_TYPE_ABORT,
    IB_MGMT_RMPP_TYPE_ACK,
    IB_MGMT_RMPP_TYPE_STOP,
    IB_MGMT_RMPP_VERSION, //
};

/// RMPP status: success (`IB_MGMT_RMPP_STATUS_SUCCESS`).
pub(crate) const IB_MGMT_RMPP_STATUS_SUCCESS: u8 = 0;
/// RMPP status: resources exhausted, the status of a STOP (`IB_MGMT_RMPP_STATUS_RESX`).
pub(crate) const IB_MGMT_RMPP_STATUS_RESX: u8 = 1;
/// The lowest status an ABORT may carry (`IB_MGMT_RMPP_STATUS_ABORT_MIN`).
pub(crate) const IB_MGMT_RMPP_STATUS_ABORT_MIN: u8 = 118;
/// RMPP status: total time too long (`IB_MGMT_RMPP_STATUS_T2L`).
pub(crate) const IB_MGMT_RMPP_STATUS_T2L: u8 = 118;
/// RMPP status: inconsistent PayloadLength (`IB_MGMT_RMPP_STATUS_BAD_LEN`).
pub(crate) const IB_MGMT_RMPP_STATUS_BAD_LEN: u8 = 119;
/// RMPP status: inconsistent first and segment numbers (`IB_MGMT_RMPP_STATUS_BAD_SEG`).
pub(crate) const IB_MGMT_RMPP_STATUS_BAD_SEG: u8 = 120;
/// RMPP status: bad RMPP type (`IB_MGMT_RMPP_STATUS_BADT`).
pub(crate) const IB_MGMT_RMPP_STATUS_BADT: u8 = 121;
/// RMPP status: NewWindowLast too small (`IB_MGMT_RMPP_STATUS_W2S`).
pub(crate) const IB_MGMT_RMPP_STATUS_W2S: u8 = 122;
/// RMPP status: SegmentNumber too big (`IB_MGMT_RMPP_STATUS_S2B`).
pub(crate) const IB_MGMT_RMPP_STATUS_S2B: u8 = 123;
/// RMPP status: illegal status (`IB_MGMT_RMPP_STATUS_BAD_STATUS`).
pub(crate) const IB_MGMT_RMPP_STATUS_BAD_STATUS: u8 = 124;
/// RMPP status: unsupported RMPP version (`IB_MGMT_RMPP_STATUS_UNV`).
pub(crate) const IB_MGMT_RMPP_STATUS_UNV: u8 = 125;
/// RMPP status: too many retries (`IB_MGMT_RMPP_STATUS_TMR`).
pub(crate) const IB_MGMT_RMPP_STATUS_TMR: u8 = 126;
/// RMPP status: unspecified error (`IB_MGMT_RMPP_STATUS_UNSPEC`).
pub(crate) const IB_MGMT_RMPP_STATUS_UNSPEC: u8 = 127;
/// The highest status an ABORT may carry (`IB_MGMT_RMPP_STATUS_ABORT_MAX`).
pub(crate) const IB_MGMT_RMPP_STATUS_ABORT_MAX: u8 = 127;

/// RMPP data bytes per segment (`IB_MGMT_RMPP_DATA`, 220), the unit of PayloadLength.
pub(crate) const RMPP_DATA: u32 = {
    // 220 fits in a `u32`; the assertion keeps the conversion below exact.
    assert!(IB_MGMT_RMPP_DATA == 220);
    220
};

/// A non-success RMPP status, as carried by a STOP or an ABORT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(
    clippy::enum_variant_names,
    reason = "BadStatus is the IBA's and C's name (IB_MGMT_RMPP_STATUS_BAD_STATUS)"
)]
pub(crate) enum Status {
    /// RESX (1): resources exhausted; the only status of a STOP.
    Resx,
    /// T2L (118): the transfer took too long.
    T2l,
    /// BAD_LEN (119): PayloadLength or the position of LAST is inconsistent.
    BadLen,
    /// BAD_SEG (120): FIRST and SegmentNumber disagree.
    BadSeg,
    /// BADT (121): unknown RMPP type.
    Badt,
    /// W2S (122): NewWindowLast below SegmentNumber.
    W2s,
    /// S2B (123): SegmentNumber beyond what the transfer has.
    S2b,
    /// BAD_STATUS (124): a status where none is allowed.
    BadStatus,
    /// UNV (125): unsupported RMPP version.
    Unv,
    /// TMR (126): too many retries.
    Tmr,
    /// UNSPEC (127): unspecified.
    Unspec,
}

impl Status {
    /// The status byte on the wire.
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Resx => IB_MGMT_RMPP_STATUS_RESX,
            Self::T2l => IB_MGMT_RMPP_STATUS_T2L,
            Self::BadLen => IB_MGMT_RMPP_STATUS_BAD_LEN,
            Self::BadSeg => IB_MGMT_RMPP_STATUS_BAD_SEG,
            Self::Badt => IB_MGMT_RMPP_STATUS_BADT,
            Self::W2s => IB_MGMT_RMPP_STATUS_W2S,
            Self::S2b => IB_MGMT_RMPP_STATUS_S2B,
            Self::BadStatus => IB_MGMT_RMPP_STATUS_BAD_STATUS,
            Self::Unv => IB_MGMT_RMPP_STATUS_UNV,
            Self::Tmr => IB_MGMT_RMPP_STATUS_TMR,
            Self::Unspec => IB_MGMT_RMPP_STATUS_UNSPEC,
        }
    }

    /// The status whose wire byte is `code`, if it is one of the defined non-success codes.
    pub(crate) fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            IB_MGMT_RMPP_STATUS_RESX => Self::Resx,
            IB_MGMT_RMPP_STATUS_T2L => Self::T2l,
            IB_MGMT_RMPP_STATUS_BAD_LEN => Self::BadLen,
            IB_MGMT_RMPP_STATUS_BAD_SEG => Self::BadSeg,
            IB_MGMT_RMPP_STATUS_BADT => Self::Badt,
            IB_MGMT_RMPP_STATUS_W2S => Self::W2s,
            IB_MGMT_RMPP_STATUS_S2B => Self::S2b,
            IB_MGMT_RMPP_STATUS_BAD_STATUS => Self::BadStatus,
            IB_MGMT_RMPP_STATUS_UNV => Self::Unv,
            IB_MGMT_RMPP_STATUS_TMR => Self::Tmr,
            IB_MGMT_RMPP_STATUS_UNSPEC => Self::Unspec,
            _ => return None,
        })
    }

    /// The RMPP type of the message that carries this status: STOP for RESX (what the IBA
    /// defines STOP for, and the only STOP status a Linux sender accepts, §2.10.1), ABORT for
    /// every other status.
    pub(crate) fn rmpp_type(self) -> u8 {
        match self {
            Self::Resx => IB_MGMT_RMPP_TYPE_STOP,
            _ => IB_MGMT_RMPP_TYPE_ABORT,
        }
    }

    /// The RMPP header of the STOP or ABORT that carries this status, as `nack_recv` builds it
    /// (§2.10.8): version 1, ACTIVE only, SegmentNumber and NewWindowLast 0. The response time
    /// is 0; the caller copies the answered segment's if it wants C's bytes.
    pub(crate) fn hdr(self) -> RmppHdr {
        RmppHdr {
            version: IB_MGMT_RMPP_VERSION,
            rmpp_type: self.rmpp_type(),
            resp_time: 0,
            flags: IB_MGMT_RMPP_FLAG_ACTIVE,
            status: self.code(),
            seg_num: 0,
            paylen_newwin: 0,
        }
    }
}

/// An ACK as the receiver builds it: ACK(`seg_num`, `newwin`) of Documentation/behaviour.md
/// §2.10.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ack {
    /// SegmentNumber: the receiver's frontier, the highest n with segments 1 to n all held.
    pub(crate) seg_num: u32,
    /// NewWindowLast: the highest SegmentNumber the receiver accepts now.
    pub(crate) newwin: u32,
}

impl Ack {
    /// The RMPP header of this ACK, as `format_ack` builds it (§2.10.8): version 1, type ACK,
    /// ACTIVE only, status 0. The response time is 0; the caller copies the answered segment's
    /// if it wants C's bytes.
    pub(crate) fn hdr(self) -> RmppHdr {
        RmppHdr {
            version: IB_MGMT_RMPP_VERSION,
            rmpp_type: IB_MGMT_RMPP_TYPE_ACK,
            resp_time: 0,
            flags: IB_MGMT_RMPP_FLAG_ACTIVE,
            status: IB_MGMT_RMPP_STATUS_SUCCESS,
            seg_num: self.seg_num,
            paylen_newwin: self.newwin,
        }
    }
}

/// The RMPP header (`struct ib_rmpp_hdr`, bytes 24 to 35 of a MAD), decoded to host order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RmppHdr {
    /// `rmpp_version`: 1 for the kernel's RMPP.
    pub(crate) version: u8,
    /// `rmpp_type`: DATA, ACK, STOP or ABORT.
    pub(crate) rmpp_type: u8,
    /// The response time: the upper five bits of `rmpp_rtime_flags`.
    pub(crate) resp_time: u8,
    /// The flags ACTIVE, FIRST and LAST: the lower three bits of `rmpp_rtime_flags`.
    pub(crate) flags: u8,
    /// `rmpp_status`.
    pub(crate) status: u8,
    /// SegmentNumber.
    pub(crate) seg_num: u32,
    /// PayloadLength in DATA segments, NewWindowLast in ACKs.
    pub(crate) paylen_newwin: u32,
}

/// Reads the big-endian `u32` at `off` of the RMPP header `r` (which has 12 bytes).
fn be32(r: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    for (i, d) in b.iter_mut().enumerate() {
        *d = off
            .checked_add(i)
            .and_then(|at| r.get(at))
            .copied()
            .unwrap_or(0);
    }
    u32::from_be_bytes(b)
}

impl RmppHdr {
    /// Decodes the RMPP header of `mad` (which must hold at least 36 bytes).
    pub(crate) fn parse(mad: &[u8]) -> Result<Self, WireError> {
        let r = rmpp_hdr(mad)?;
        let byte = |off: usize| r.get(off).copied().unwrap_or(0);
        Ok(Self {
            version: byte(0),
            rmpp_type: byte(1),
            resp_time: ib_get_rmpp_resptime(r)?,
            flags: ib_get_rmpp_flags(r)?,
            status: byte(3),
            seg_num: be32(r, 4),
            paylen_newwin: be32(r, 8),
        })
    }

    /// Encodes the header into bytes 24 to 35 of `mad`. As in C's `u8` field, only the low five
    /// bits of `resp_time` and the low three of `flags` are kept.
    pub(crate) fn write(&self, mad: &mut [u8]) -> Result<(), WireError> {
        let r = rmpp_hdr_mut(mad)?;
        // A `u8` shifted by 3 drops its top bits without panicking, as C's assignment does.
        let rtime_flags = (self.resp_time << 3) | (self.flags & 0x7);
        let [s0, s1, s2, s3] = self.seg_num.to_be_bytes();
        let [p0, p1, p2, p3] = self.paylen_newwin.to_be_bytes();
        let bytes = [
            self.version,
            self.rmpp_type,
            rtime_flags,
            self.status,
            s0,
            s1,
            s2,
            s3,
            p0,
            p1,
            p2,
            p3,
        ];
        // `rmpp_hdr_mut` gives exactly the 12 header bytes.
        for (d, s) in r.iter_mut().zip(bytes) {
            *d = s;
        }
        Ok(())
    }
}

/// C's view of a SegmentNumber or NewWindowLast: `be32_to_cpu` assigned to an `int`, so 2^31
/// and above are negative. Widened to `i64` so that comparisons with the unsigned counters of
/// the machines are exact.
pub(crate) fn signed(v: u32) -> i64 {
    i64::from(i32::from_ne_bytes(v.to_ne_bytes()))
}

/// The padding of a transfer's last segment as `get_mad_len` derives it from that segment's
/// PayloadLength (§2.10.5): 220 − PayloadLength, taken as 0 when outside [0, 220].
pub(crate) fn last_pad(paylen: u32) -> u32 {
    RMPP_DATA.saturating_sub(paylen)
}
