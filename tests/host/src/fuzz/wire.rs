// SPDX-License-Identifier: GPL-2.0

//! Fuzz target `wire`: every helper of `src/mad/wire.rs` on arbitrary byte buffers of 0..=300
//! bytes, against references written from the C definitions (`include/rdma/ib_mad.h`,
//! `drivers/infiniband/core/mad.c` of Linux 7.3.4) over raw bytes, never through the helpers:
//!
//! - `MadHdr::parse` decodes the 24 header bytes big-endian, and refuses a shorter buffer with
//!   `TooShort { need: 24, have }`; `MadHdr::write` writes exactly those bytes, leaves the rest of
//!   the buffer alone and refuses (touching nothing) a short one; both round trips hold
//!   (bytes → header → bytes, header → bytes → header);
//! - `is_response` and `ib_response_mad` are C's `ib_response_mad` on the raw bytes (method bit
//!   0x80, or TRAP_REPRESS 0x07, or class BM 0x05 with `attr_mod & cpu_to_be32(1)`, the last byte
//!   of the header);
//! - `rmpp_hdr`/`rmpp_hdr_mut` are bytes 24..36 of the buffer itself (`TooShort` below 36);
//! - the RMPP getters and setters on an arbitrary `ib_rmpp_hdr` (`TooShort` below 3 bytes): the
//!   `u8` truncation of `rtime << 3`, the flag mask, every other byte untouched, get after set;
//! - the ClassPortInfo getters and setters (`TooShort` below 8 bytes): `cap_mask2_resp_time` at
//!   bytes 4..8, the five-bit mask, the shift that loses the top five bits of `capmask2`, every
//!   other byte untouched, get after set, and `opa_get_cpi_capmask2` equal to the IB getter;
//! - `ib_get_mad_data_offset`, `ib_is_mad_class_rmpp` and `ib_mad_kernel_rmpp_agent` against
//!   tables written from the C functions; `make_tid`/`tid_hi` (the routing of responses by
//!   `hi_tid`) as shifts.
//!
//! One input is one buffer (length and contents chosen to hit the edges often) with one random
//! header, one random value per setter and one random class.

use super::{
    Disagreement,
    Rng, //
};
use crate::mad::wire::*;
use std::format;
use std::string::String;
use std::vec::Vec;

/// The name of this target.
const NAME: &str = "wire";

/// The longest buffer tried.
const MAX_LEN: usize = 300;

/// Lengths that sit on an edge of some structure.
const EDGE_LENS: [usize; 20] = [
    0, 1, 2, 3, 4, 7, 8, 9, 11, 12, 23, 24, 25, 35, 36, 37, 72, 255, 256, 300,
];

/// Class bytes worth trying more often than the others.
const CLASSES: [u8; 20] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x10, 0x11, 0x12, 0x21, 0x2F, 0x30, 0x4F,
    0x50, 0x81, 0x80, 0xFF,
];

/// Method bytes worth trying more often than the others.
const METHODS: [u8; 14] = [
    0x00, 0x01, 0x02, 0x03, 0x05, 0x06, 0x07, 0x12, 0x7F, 0x80, 0x81, 0x86, 0x87, 0xFF,
];

/// `TooShort` as the helpers must report it.
fn short(need: usize, have: usize) -> WireError {
    WireError::TooShort { need, have }
}

/// Big-endian value of `bytes`, written as a fold so that it shares nothing with the helpers.
fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// The reference decode of a 24-byte header (struct `ib_mad_hdr`).
fn ref_parse(b: &[u8]) -> Result<MadHdr, WireError> {
    if b.len() < 24 {
        return Err(short(24, b.len()));
    }
    let n16 = |o: usize| u16::try_from(be(&b[o..o + 2])).unwrap_or(0);
    Ok(MadHdr {
        base_version: b[0],
        mgmt_class: b[1],
        class_version: b[2],
        method: b[3],
        status: n16(4),
        class_specific: n16(6),
        tid: be(&b[8..16]),
        attr_id: n16(16),
        resv: n16(18),
        attr_mod: u32::try_from(be(&b[20..24])).unwrap_or(0),
    })
}

/// The reference encoding of a header: the 24 bytes C's structure has on the wire.
fn ref_encode(h: &MadHdr) -> [u8; 24] {
    let mut out = [0u8; 24];
    let mut put = |off: usize, v: u64, n: usize| {
        for i in 0..n {
            out[off + i] = u8::try_from((v >> (8 * (n - 1 - i))) & 0xFF).unwrap_or(0);
        }
    };
    put(0, u64::from(h.base_version), 1);
    put(1, u64::from(h.mgmt_class), 1);
    put(2, u64::from(h.class_version), 1);
    put(3, u64::from(h.method), 1);
    put(4, u64::from(h.status), 2);
    put(6, u64::from(h.class_specific), 2);
    put(8, h.tid, 8);
    put(16, u64::from(h.attr_id), 2);
    put(18, u64::from(h.resv), 2);
    put(20, u64::from(h.attr_mod), 4);
    out
}

/// C's `ib_response_mad` on the raw header bytes: `attr_mod` stays big-endian and is tested
/// against `cpu_to_be32(1)`, which is bit 0 of the header's last byte.
fn ref_response(b: &[u8]) -> bool {
    let method = b[3];
    (method & 0x80) != 0 || method == 0x07 || (b[1] == 0x05 && (b[23] & 0x01) != 0)
}

/// C's `ib_is_mad_class_rmpp`.
fn ref_class_rmpp(c: u8) -> bool {
    c == 0x03 || c == 0x06 || c == 0x10 || c == 0x12 || (0x30..=0x4F).contains(&c)
}

/// C's `ib_get_mad_data_offset`.
fn ref_data_offset(c: u8) -> usize {
    if c == 0x03 {
        56
    } else if c == 0x06 || c == 0x10 || c == 0x12 {
        64
    } else if (0x30..=0x4F).contains(&c) {
        40
    } else {
        24
    }
}

/// A random header whose class and method are often the interesting ones.
fn random_hdr(rng: &mut Rng) -> MadHdr {
    let next16 = |rng: &mut Rng| u16::try_from(rng.next() & 0xFFFF).unwrap_or(0);
    MadHdr {
        base_version: if rng.chance(1, 2) {
            rng.pick(&[0x01, 0x80, 0x00, 0xFF])
        } else {
            rng.byte()
        },
        mgmt_class: if rng.chance(3, 4) {
            rng.pick(&CLASSES)
        } else {
            rng.byte()
        },
        class_version: rng.byte(),
        method: if rng.chance(3, 4) {
            rng.pick(&METHODS)
        } else {
            rng.byte()
        },
        status: next16(rng),
        class_specific: next16(rng),
        tid: if rng.chance(1, 2) {
            rng.next()
        } else {
            make_ref_tid(rng.u32() & 0x00FF_FFFF, rng.edgy_u32())
        },
        attr_id: next16(rng),
        resv: next16(rng),
        attr_mod: rng.edgy_u32(),
    }
}

/// `make_tid` as the reference writes it.
fn make_ref_tid(hi: u32, lo: u32) -> u64 {
    u64::from(hi) * (1u64 << 32) + u64::from(lo)
}

/// A buffer: its length is often at an edge, its contents random, sparse, all ones or shaped
/// like a header.
fn random_buf(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(4) {
        0 | 1 => rng.index(MAX_LEN + 1),
        2 => rng.pick(&EDGE_LENS),
        _ => rng.index(41),
    };
    let mut b: Vec<u8> = match rng.below(4) {
        0 => (0..len).map(|_| rng.byte()).collect(),
        1 => (0..len)
            .map(|_| {
                if rng.chance(1, 8) {
                    rng.pick(&[0x01, 0x05, 0x07, 0x80, 0x81, 0xF8, 0xFF])
                } else {
                    0
                }
            })
            .collect(),
        2 => std::vec![if rng.chance(1, 2) { 0xFF } else { 0x00 }; len],
        _ => (0..len).map(|_| rng.byte()).collect(),
    };
    // Often a plausible header: interesting class and method, the BM bit either way.
    if rng.chance(1, 2) {
        if let Some(c) = b.get_mut(1) {
            *c = rng.pick(&CLASSES);
        }
        if let Some(m) = b.get_mut(3) {
            *m = rng.pick(&METHODS);
        }
        if let Some(last) = b.get_mut(23) {
            *last = if rng.chance(1, 2) { 0x01 } else { 0x80 };
        }
    }
    b
}

/// Hex of a buffer, for reproducers.
fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// Everything one input checks; `Err` is a description of what disagreed.
fn check_one(
    buf: &[u8],
    hdr: &MadHdr,
    v8: u8,
    v32: u32,
    class: u8,
    rmpp_v: u8,
) -> Result<(), String> {
    let len = buf.len();
    // Fails the input with the message built by the remaining arguments.
    macro_rules! expect {
        ($cond:expr, $($fmt:tt)+) => {
            if !$cond {
                return Err(format!($($fmt)+));
            }
        };
    }

    // The header: decode, kind, re-encode.
    let parsed = MadHdr::parse(buf);
    expect!(
        parsed == ref_parse(buf),
        "MadHdr::parse gave {parsed:?}, C layout gives {:?}",
        ref_parse(buf)
    );
    let resp = ib_response_mad(buf);
    let want_resp = if len < 24 {
        Err(short(24, len))
    } else {
        Ok(ref_response(buf))
    };
    expect!(
        resp == want_resp,
        "ib_response_mad gave {resp:?}, C gives {want_resp:?}"
    );
    if let Ok(h) = parsed {
        expect!(
            h.is_response() == ref_response(buf),
            "is_response gave {}, C gives {}",
            h.is_response(),
            ref_response(buf)
        );
        let mut again = buf.to_vec();
        again.iter_mut().take(24).for_each(|b| *b = !*b);
        let w = h.write(&mut again);
        expect!(
            w.is_ok() && again == buf,
            "bytes -> parse -> write is not the identity ({w:?})"
        );
    }

    // Writing a random header into the buffer.
    let mut out = buf.to_vec();
    let w = hdr.write(&mut out);
    if len < 24 {
        expect!(
            w == Err(short(24, len)) && out == buf,
            "write into {len} bytes gave {w:?} (buffer changed: {})",
            out != buf
        );
    } else {
        let enc = ref_encode(hdr);
        expect!(w.is_ok(), "write into {len} bytes gave {w:?}");
        expect!(
            out[..24] == enc,
            "write gave {} for {hdr:?}, C layout is {}",
            hex(&out[..24]),
            hex(&enc)
        );
        expect!(
            out[24..] == buf[24..],
            "write touched bytes past the header"
        );
        let back = MadHdr::parse(&out);
        expect!(back == Ok(*hdr), "header -> write -> parse gave {back:?}");
        expect!(
            hdr.is_response() == ref_response(&enc),
            "is_response of {hdr:?} is {}, C gives {}",
            hdr.is_response(),
            ref_response(&enc)
        );
        expect!(
            ib_response_mad(&out) == Ok(ref_response(&enc)),
            "ib_response_mad after write disagrees with C"
        );
    }

    // The RMPP header inside a MAD.
    let r = rmpp_hdr(buf);
    if len < 36 {
        expect!(
            r == Err(short(36, len)),
            "rmpp_hdr of {len} bytes gave {r:?}"
        );
    } else {
        let ok = r.is_ok_and(|s| s.len() == 12 && core::ptr::eq(s.as_ptr(), buf[24..].as_ptr()));
        expect!(ok, "rmpp_hdr of {len} bytes is not bytes 24..36 ({r:?})");
    }
    let mut out = buf.to_vec();
    let r = rmpp_hdr_mut(&mut out).map(|s| {
        let n = s.len();
        if let Some(x) = s.get_mut(2) {
            *x ^= 0xA5;
        }
        n
    });
    if len < 36 {
        expect!(
            r == Err(short(36, len)) && out == buf,
            "rmpp_hdr_mut of {len} bytes gave {r:?}"
        );
    } else {
        let mut want = buf.to_vec();
        want[26] ^= 0xA5;
        expect!(
            r == Ok(12) && out == want,
            "a write through rmpp_hdr_mut did not land on byte 26 alone"
        );
    }

    // The RMPP accessors on the buffer taken as an `ib_rmpp_hdr`.
    let rt = ib_get_rmpp_resptime(buf);
    let fl = ib_get_rmpp_flags(buf);
    if len < 3 {
        expect!(
            rt == Err(short(3, len)) && fl == Err(short(3, len)),
            "RMPP getters on {len} bytes gave {rt:?}, {fl:?}"
        );
    } else {
        expect!(
            rt == Ok(buf[2] >> 3) && fl == Ok(buf[2] & 7),
            "RMPP getters on byte {:#04x} gave {rt:?}, {fl:?}",
            buf[2]
        );
    }
    let mut out = buf.to_vec();
    let s = ib_set_rmpp_resptime(&mut out, v8);
    if len < 3 {
        expect!(
            s == Err(short(3, len)) && out == buf,
            "ib_set_rmpp_resptime on {len} bytes gave {s:?}"
        );
    } else {
        let mut want = buf.to_vec();
        // C: rmpp_rtime_flags = ib_get_rmpp_flags(hdr) | (rtime << 3), stored in a u8.
        want[2] =
            u8::try_from(((u32::from(buf[2]) & 7) | (u32::from(v8) << 3)) & 0xFF).unwrap_or(0);
        expect!(
            s.is_ok() && out == want,
            "ib_set_rmpp_resptime({v8:#04x}) on {:#04x} gave {:#04x}, C gives {:#04x}",
            buf[2],
            out[2],
            want[2]
        );
        expect!(
            ib_get_rmpp_resptime(&out) == Ok(v8 & 0x1F)
                && ib_get_rmpp_flags(&out) == Ok(buf[2] & 7),
            "RMPP response time does not read back after set({v8:#04x})"
        );
    }
    let mut out = buf.to_vec();
    let s = ib_set_rmpp_flags(&mut out, v8);
    if len < 3 {
        expect!(
            s == Err(short(3, len)) && out == buf,
            "ib_set_rmpp_flags on {len} bytes gave {s:?}"
        );
    } else {
        let mut want = buf.to_vec();
        want[2] = (buf[2] & 0xF8) | (v8 & 0x7);
        expect!(
            s.is_ok() && out == want,
            "ib_set_rmpp_flags({v8:#04x}) on {:#04x} gave {:#04x}, C gives {:#04x}",
            buf[2],
            out[2],
            want[2]
        );
        expect!(
            ib_get_rmpp_flags(&out) == Ok(v8 & 7) && ib_get_rmpp_resptime(&out) == Ok(buf[2] >> 3),
            "RMPP flags do not read back after set({v8:#04x})"
        );
    }

    // The ClassPortInfo accessors on the buffer taken as an `ib_class_port_info`.
    let word = (len >= 8).then(|| u32::try_from(be(&buf[4..8])).unwrap_or(0));
    let g_rt = ib_get_cpi_resp_time(buf);
    let g_cm = ib_get_cpi_capmask2(buf);
    let g_opa = opa_get_cpi_capmask2(buf);
    match word {
        None => expect!(
            g_rt == Err(short(8, len)) && g_cm == Err(short(8, len)) && g_opa == Err(short(8, len)),
            "ClassPortInfo getters on {len} bytes gave {g_rt:?}, {g_cm:?}, {g_opa:?}"
        ),
        Some(w) => expect!(
            g_rt == Ok(u8::try_from(w & 0x1F).unwrap_or(0))
                && g_cm == Ok(w >> 5)
                && g_opa == Ok(w >> 5),
            "ClassPortInfo getters on word {w:#010x} gave {g_rt:?}, {g_cm:?}, {g_opa:?}"
        ),
    }
    let mut out = buf.to_vec();
    let s = ib_set_cpi_resp_time(&mut out, v8);
    match word {
        None => expect!(
            s == Err(short(8, len)) && out == buf,
            "ib_set_cpi_resp_time on {len} bytes gave {s:?}"
        ),
        Some(w) => {
            let nw = (w & !0x1F) | (u32::from(v8) & 0x1F);
            let mut want = buf.to_vec();
            want[4..8].copy_from_slice(&nw.to_be_bytes());
            expect!(
                s.is_ok() && out == want,
                "ib_set_cpi_resp_time({v8:#04x}) on word {w:#010x} disagrees with C ({nw:#010x})"
            );
            expect!(
                ib_get_cpi_resp_time(&out) == Ok(v8 & 0x1F)
                    && ib_get_cpi_capmask2(&out) == Ok(w >> 5),
                "ClassPortInfo response time does not read back after set({v8:#04x})"
            );
        }
    }
    let mut out = buf.to_vec();
    let s = ib_set_cpi_capmask2(&mut out, v32);
    match word {
        None => expect!(
            s == Err(short(8, len)) && out == buf,
            "ib_set_cpi_capmask2 on {len} bytes gave {s:?}"
        ),
        Some(w) => {
            // C: cpu_to_be32(capmask2 << 5) in 32 bits: the top five bits are lost.
            let nw = (w & 0x1F) | u32::try_from((u64::from(v32) << 5) & 0xFFFF_FFFF).unwrap_or(0);
            let mut want = buf.to_vec();
            want[4..8].copy_from_slice(&nw.to_be_bytes());
            expect!(
                s.is_ok() && out == want,
                "ib_set_cpi_capmask2({v32:#010x}) on word {w:#010x} disagrees with C ({nw:#010x})"
            );
            expect!(
                ib_get_cpi_capmask2(&out) == Ok(v32 & 0x07FF_FFFF)
                    && ib_get_cpi_resp_time(&out) == Ok(u8::try_from(w & 0x1F).unwrap_or(0)),
                "ClassPortInfo capmask2 does not read back after set({v32:#010x})"
            );
        }
    }

    // The class tables, for a random class and for the buffer's own.
    for c in [class, buf.get(1).copied().unwrap_or(class)] {
        expect!(
            ib_is_mad_class_rmpp(c) == ref_class_rmpp(c),
            "ib_is_mad_class_rmpp({c:#04x}) is {}",
            ib_is_mad_class_rmpp(c)
        );
        expect!(
            ib_get_mad_data_offset(c) == ref_data_offset(c),
            "ib_get_mad_data_offset({c:#04x}) is {}, C gives {}",
            ib_get_mad_data_offset(c),
            ref_data_offset(c)
        );
    }
    // ib_mad_kernel_rmpp_agent: agent->rmpp_version && !(agent->flags & IB_MAD_USER_RMPP).
    let want = rmpp_v != 0 && v32 & 1 == 0;
    expect!(
        ib_mad_kernel_rmpp_agent(rmpp_v, v32) == want,
        "ib_mad_kernel_rmpp_agent({rmpp_v}, {v32:#x}) is {}",
        !want
    );

    // TIDs: the upper half routes a response to its agent.
    let tid = hdr.tid;
    let hi = u32::try_from(tid / (1u64 << 32)).unwrap_or(0);
    let lo = u32::try_from(tid % (1u64 << 32)).unwrap_or(0);
    expect!(tid_hi(tid) == hi, "tid_hi({tid:#x}) is {:#x}", tid_hi(tid));
    expect!(
        make_tid(hi, lo) == tid && make_tid(v32, lo) == make_ref_tid(v32, lo),
        "make_tid does not put hi_tid in the upper 32 bits"
    );
    Ok(())
}

/// Runs inputs `first..first + inputs` of seed `seed`.
pub(crate) fn run_range(seed: u64, first: u64, inputs: u64) -> Result<u64, Disagreement> {
    for i in first..first.saturating_add(inputs) {
        let mut rng = Rng::for_input(seed, i);
        let buf = random_buf(&mut rng);
        let hdr = random_hdr(&mut rng);
        let v8 = if rng.chance(1, 2) {
            rng.pick(&[0, 1, 0x07, 0x1F, 0x20, 0x21, 0x3F, 0x80, 0xFF])
        } else {
            rng.byte()
        };
        let v32 = rng.edgy_u32();
        let class = rng.byte();
        let rmpp_v = rng.pick(&[0, 1, 2, 0xFF]);
        let res = std::panic::catch_unwind(|| check_one(&buf, &hdr, v8, v32, class, rmpp_v))
            .unwrap_or_else(|_| Err(String::from("a wire helper panicked")));
        if let Err(what) = res {
            return Err(Disagreement {
                target: NAME,
                seed,
                input: i,
                what,
                reproducer: format!(
                    "buffer ({} bytes) {}, header {hdr:?}, value8 {v8:#04x}, value32 {v32:#010x}, \
                     class {class:#04x}, rmpp_version {rmpp_v}",
                    buf.len(),
                    hex(&buf)
                ),
            });
        }
    }
    Ok(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The references agree with the literal values of the C headers on a few fixed points, so
    /// that a wrong reference cannot hide a wrong helper.
    #[test]
    fn references_match_c_literals() {
        let mut b = [0u8; 24];
        b[1] = 0x05;
        b[3] = 0x03;
        assert!(!ref_response(&b));
        b[23] = 1;
        assert!(ref_response(&b));
        b[20] = 0x80;
        b[23] = 0;
        assert!(!ref_response(&b));
        b[1] = 0x04;
        b[3] = 0x07;
        assert!(ref_response(&b));
        assert_eq!(ref_data_offset(0x03), IB_MGMT_SA_HDR);
        assert_eq!(ref_data_offset(0x12), IB_MGMT_DEVICE_HDR);
        assert_eq!(ref_data_offset(0x4F), IB_MGMT_VENDOR_HDR);
        assert_eq!(ref_data_offset(0x81), IB_MGMT_MAD_HDR);
        assert!(ref_class_rmpp(0x30) && !ref_class_rmpp(0x50) && !ref_class_rmpp(0x11));
        let h = MadHdr {
            tid: 0x0102_0304_0506_0708,
            attr_mod: 0x99AA_BBCC,
            ..MadHdr::default()
        };
        assert_eq!(ref_encode(&h)[8..16], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ref_parse(&ref_encode(&h)), Ok(h));
        assert_eq!(make_ref_tid(0xAB, 0xCD), 0xAB_0000_00CD);
    }
}
