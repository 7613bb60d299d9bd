// SPDX-License-Identifier: GPL-2.0

//! Table-driven checks of the wire helpers, shared by the host tests (`tests/host`) and the
//! KUnit suite `rmad_wire`.
//!
//! Each check returns `Err(Failure)` naming the row that disagreed instead of panicking, so the
//! same code can run in the kernel (where a panic kills the VM) and on the host. The expected
//! values are the C layer's results (Documentation/behaviour.md §1.2 and `include/rdma/ib_mad.h`),
//! written out independently of the implementation: as literal tables, or as the specification's
//! own predicate evaluated over every possible input byte.

use crate::mad::wire::*;
use crate::testing::cases::{
    ensure,
    CheckResult, //
};

/// Sizes and offsets agree with each other as the C headers define them.
pub(crate) fn constants() -> CheckResult {
    const C: &str = "constants";
    let rows: [(usize, usize); 6] = [
        (IB_MGMT_MAD_HDR + IB_MGMT_MAD_DATA, IB_MGMT_MAD_SIZE),
        (IB_MGMT_RMPP_HDR + IB_MGMT_RMPP_DATA, IB_MGMT_MAD_SIZE),
        (IB_MGMT_SA_HDR + IB_MGMT_SA_DATA, IB_MGMT_MAD_SIZE),
        (IB_MGMT_MAD_HDR + IB_RMPP_HDR_LEN, IB_MGMT_RMPP_HDR),
        (IB_MGMT_VENDOR_HDR, 40),
        (IB_MGMT_DEVICE_HDR, 64),
    ];
    for (i, (a, b)) in rows.iter().enumerate() {
        ensure!(C, i, a == b);
    }
    ensure!(C, 6, OPA_MGMT_MAD_SIZE == 2048);
    ensure!(
        C,
        7,
        IB_QP1_QKEY == 0x8001_0000 && IB_QP_SET_QKEY == 0x8000_0000
    );
    Ok(())
}

/// A header written by [`MadHdr::write`] has every field at its C offset in network order,
/// and parses back unchanged.
pub(crate) fn header_layout() -> CheckResult {
    const C: &str = "header_layout";
    let hdr = MadHdr {
        base_version: 0x01,
        mgmt_class: 0x03,
        class_version: 0x02,
        method: 0x81,
        status: 0x1122,
        class_specific: 0x3344,
        tid: 0x0102_0304_0506_0708,
        attr_id: 0x5566,
        resv: 0x7788,
        attr_mod: 0x99AA_BBCC,
    };
    let expect: [u8; 24] = [
        0x01, 0x03, 0x02, 0x81, 0x11, 0x22, 0x33, 0x44, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
        0x08, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC,
    ];
    let mut buf = [0xEEu8; 30];
    ensure!(C, 0, hdr.write(&mut buf).is_ok());
    for (i, b) in expect.iter().enumerate() {
        ensure!(C, i, buf.get(i) == Some(b));
    }
    // Bytes past the header are untouched.
    ensure!(C, 24, buf.get(24..) == Some(&[0xEE; 6][..]));
    ensure!(C, 25, MadHdr::parse(&buf) == Ok(hdr));
    ensure!(
        C,
        26,
        make_tid(0x00AB_CDEF, 0x1234_5678) == 0x00AB_CDEF_1234_5678
    );
    ensure!(C, 27, tid_hi(0x00AB_CDEF_1234_5678) == 0x00AB_CDEF);
    Ok(())
}

/// Every helper refuses a buffer shorter than its structure, naming the sizes.
pub(crate) fn short_buffers() -> CheckResult {
    const C: &str = "short_buffers";
    /// The error every helper must give for a buffer of `have` bytes when it needs `need`.
    fn too_short<T>(need: usize, have: usize) -> Result<T, WireError> {
        Err(WireError::TooShort { need, have })
    }
    let b = [0u8; 23];
    ensure!(C, 0, MadHdr::parse(&b) == too_short(24, 23));
    ensure!(
        C,
        1,
        MadHdr::default().write(&mut [0u8; 23]) == too_short(24, 23)
    );
    ensure!(C, 2, ib_response_mad(&b) == too_short(24, 23));
    ensure!(C, 3, ib_get_cpi_resp_time(&[0u8; 7]) == too_short(8, 7));
    ensure!(C, 4, ib_get_cpi_capmask2(&[0u8; 7]) == too_short(8, 7));
    ensure!(C, 5, opa_get_cpi_capmask2(&[]) == too_short(8, 0));
    ensure!(
        C,
        6,
        ib_set_cpi_resp_time(&mut [0u8; 7], 1) == too_short(8, 7)
    );
    ensure!(
        C,
        7,
        ib_set_cpi_capmask2(&mut [0u8; 7], 1) == too_short(8, 7)
    );
    ensure!(C, 8, ib_get_rmpp_resptime(&[0u8; 2]) == too_short(3, 2));
    ensure!(C, 9, ib_get_rmpp_flags(&[0u8; 2]) == too_short(3, 2));
    ensure!(
        C,
        10,
        ib_set_rmpp_resptime(&mut [0u8; 2], 1) == too_short(3, 2)
    );
    ensure!(
        C,
        11,
        ib_set_rmpp_flags(&mut [0u8; 2], 1) == too_short(3, 2)
    );
    ensure!(C, 12, rmpp_hdr(&[0u8; 35]) == too_short(36, 35));
    ensure!(C, 13, rmpp_hdr(&[0u8; 36]).map(<[u8]>::len) == Ok(12));
    Ok(())
}

/// Builds a MAD header with the given class, method and attribute modifier.
fn mad_with(mgmt_class: u8, method: u8, attr_mod: u32) -> [u8; IB_MGMT_MAD_HDR] {
    let mut b = [0u8; IB_MGMT_MAD_HDR];
    let h = MadHdr {
        base_version: IB_MGMT_BASE_VERSION,
        mgmt_class,
        method,
        attr_mod,
        ..MadHdr::default()
    };
    let _ = h.write(&mut b);
    b
}

/// `ib_response_mad` over every method of a plain class, the named methods, and the
/// baseboard-management attribute-modifier rule.
pub(crate) fn response_mad() -> CheckResult {
    const C: &str = "response_mad";
    // Every method byte for class 0x04: a response iff bit 7 is set or it is TRAP_REPRESS.
    for m in 0..=u8::MAX {
        let want = m >= 0x80 || m == 0x07;
        ensure!(
            C,
            usize::from(m),
            ib_response_mad(&mad_with(0x04, m, 0)) == Ok(want)
        );
    }
    // (class, method, attr_mod, response?)
    let rows: [(u8, u8, u32, bool); 12] = [
        (0x04, IB_MGMT_METHOD_GET, 0, false),
        (0x04, IB_MGMT_METHOD_SET, 0, false),
        (0x04, IB_MGMT_METHOD_GET_RESP, 0, true),
        (0x04, IB_MGMT_METHOD_REPORT_RESP, 0, true),
        (0x04, IB_MGMT_METHOD_TRAP_REPRESS, 0, true),
        (0x04, IB_MGMT_METHOD_TRAP, 1, false),
        (IB_MGMT_CLASS_BM, IB_MGMT_METHOD_SEND, 0, false),
        (IB_MGMT_CLASS_BM, IB_MGMT_METHOD_SEND, 1, true),
        (IB_MGMT_CLASS_BM, IB_MGMT_METHOD_SEND, 3, true),
        // Only bit 0 of the host-order modifier counts, not the top bit of the first byte.
        (IB_MGMT_CLASS_BM, IB_MGMT_METHOD_SEND, 0x8000_0000, false),
        (IB_MGMT_CLASS_BM, IB_MGMT_METHOD_SEND, 0x0000_0100, false),
        (IB_SA_METHOD_GET_TABLE, IB_SA_METHOD_GET_TABLE, 1, false),
    ];
    for (i, (class, method, attr_mod, want)) in rows.iter().enumerate() {
        ensure!(
            C,
            256 + i,
            ib_response_mad(&mad_with(*class, *method, *attr_mod)) == Ok(*want)
        );
    }
    // The modifier's bit 0 is the last byte of the header on the wire.
    let mut raw = mad_with(IB_MGMT_CLASS_BM, IB_MGMT_METHOD_SEND, 0);
    if let Some(last) = raw.last_mut() {
        *last = 0x01;
    }
    ensure!(C, 300, ib_response_mad(&raw) == Ok(true));
    Ok(())
}

/// Builds a ClassPortInfo of `len` bytes whose `cap_mask2_resp_time` is `word`.
fn cpi_with(word: u32) -> [u8; 72] {
    let mut b = [0u8; 72];
    if let Some(d) = b.get_mut(4..8) {
        d.copy_from_slice(&word.to_be_bytes());
    }
    b
}

/// Reads `cap_mask2_resp_time` back out of a ClassPortInfo.
fn cpi_word(b: &[u8]) -> u32 {
    b.get(4..8)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_be_bytes)
}

/// The ClassPortInfo getters and setters, including the bits that the C setters shift or
/// mask away.
pub(crate) fn cpi_fields() -> CheckResult {
    const C: &str = "cpi_fields";
    // (cap_mask2_resp_time, resp_time, capmask2)
    let gets: [(u32, u8, u32); 6] = [
        (0x0000_0000, 0, 0),
        (0x0000_001F, 31, 0),
        (0x0000_0020, 0, 1),
        (0xFFFF_FFFF, 31, 0x07FF_FFFF),
        (0x0002_4692, 18, 0x1234),
        (0x8000_0001, 1, 0x0400_0000),
    ];
    for (i, (word, rt, cm)) in gets.iter().enumerate() {
        let cpi = cpi_with(*word);
        ensure!(C, i, ib_get_cpi_resp_time(&cpi) == Ok(*rt));
        ensure!(C, i, ib_get_cpi_capmask2(&cpi) == Ok(*cm));
        // The OPA structure is 80 bytes with the field at the same offset.
        let mut opa = [0u8; 80];
        opa[..72].copy_from_slice(&cpi);
        ensure!(C, i, opa_get_cpi_capmask2(&opa) == Ok(*cm));
    }
    // (old word, rtime, new word): set_resp_time keeps the upper 27 bits and masks rtime.
    let set_rt: [(u32, u8, u32); 4] = [
        (0x0000_0000, 5, 0x0000_0005),
        (0xFFFF_FFE0, 0x1F, 0xFFFF_FFFF),
        (0xFFFF_FFFF, 0, 0xFFFF_FFE0),
        (0x0000_0040, 0xFF, 0x0000_005F),
    ];
    for (i, (old, rt, new)) in set_rt.iter().enumerate() {
        let mut cpi = cpi_with(*old);
        ensure!(C, 10 + i, ib_set_cpi_resp_time(&mut cpi, *rt).is_ok());
        ensure!(C, 10 + i, cpi_word(&cpi) == *new);
    }
    // (old word, capmask2, new word): set_capmask2 keeps the low five bits and loses the
    // top five bits of capmask2 to the shift.
    let set_cm: [(u32, u32, u32); 5] = [
        (0x0000_0012, 0x1234, 0x0002_4692),
        (0xFFFF_FFFF, 0, 0x0000_001F),
        (0x0000_0000, 0x07FF_FFFF, 0xFFFF_FFE0),
        (0x0000_0003, 0x0800_0000, 0x0000_0003),
        (0x0000_0000, 0xFFFF_FFFF, 0xFFFF_FFE0),
    ];
    for (i, (old, cm, new)) in set_cm.iter().enumerate() {
        let mut cpi = cpi_with(*old);
        ensure!(C, 20 + i, ib_set_cpi_capmask2(&mut cpi, *cm).is_ok());
        ensure!(C, 20 + i, cpi_word(&cpi) == *new);
    }
    // Setters touch nothing but their word.
    let mut cpi = [0xA5u8; 72];
    let _ = ib_set_cpi_capmask2(&mut cpi, 0);
    let _ = ib_set_cpi_resp_time(&mut cpi, 0);
    ensure!(C, 30, cpi[..4] == [0xA5; 4] && cpi[8..] == [0xA5; 64]);
    Ok(())
}

/// The RMPP response-time and flag accessors over every `rmpp_rtime_flags` byte, and the
/// setters' truncation.
pub(crate) fn rmpp_fields() -> CheckResult {
    const C: &str = "rmpp_fields";
    for v in 0..=u8::MAX {
        let rmpp = [1, 1, v, 0];
        ensure!(C, usize::from(v), ib_get_rmpp_resptime(&rmpp) == Ok(v >> 3));
        ensure!(C, usize::from(v), ib_get_rmpp_flags(&rmpp) == Ok(v & 7));
    }
    // (old byte, rtime, new byte) for set_resptime: flags kept, rtime truncated to 5 bits.
    let set_rt: [(u8, u8, u8); 5] = [
        (0x00, 1, 0x08),
        (0x07, 0x1F, 0xFF),
        (0xFF, 0, 0x07),
        (0x05, 0x20, 0x05),
        (0x03, 0x21, 0x0B),
    ];
    for (i, (old, rt, new)) in set_rt.iter().enumerate() {
        let mut rmpp = [9, 9, *old, 9];
        ensure!(C, 300 + i, ib_set_rmpp_resptime(&mut rmpp, *rt).is_ok());
        ensure!(C, 300 + i, rmpp == [9, 9, *new, 9]);
    }
    // (old byte, flags, new byte) for set_flags: response time kept, flags masked to 3 bits.
    let set_fl: [(u8, u8, u8); 4] = [
        (0x00, IB_MGMT_RMPP_FLAG_ACTIVE, 0x01),
        (0xF8, 0xFF, 0xFF),
        (0xFF, 0, 0xF8),
        (
            0x10,
            IB_MGMT_RMPP_FLAG_FIRST | IB_MGMT_RMPP_FLAG_LAST | 0x08,
            0x16,
        ),
    ];
    for (i, (old, fl, new)) in set_fl.iter().enumerate() {
        let mut rmpp = [9, 9, *old, 9];
        ensure!(C, 310 + i, ib_set_rmpp_flags(&mut rmpp, *fl).is_ok());
        ensure!(C, 310 + i, rmpp == [9, 9, *new, 9]);
    }
    // Through a whole MAD: the RMPP header starts at byte 24.
    let mut mad = [0u8; IB_MGMT_MAD_SIZE];
    if let Ok(r) = rmpp_hdr_mut(&mut mad) {
        let _ = ib_set_rmpp_flags(r, IB_MGMT_RMPP_FLAG_ACTIVE);
    }
    ensure!(C, 320, mad[26] == IB_MGMT_RMPP_FLAG_ACTIVE);
    Ok(())
}

/// `ib_is_mad_class_rmpp` and `ib_get_mad_data_offset` for every class byte.
pub(crate) fn class_tables() -> CheckResult {
    const C: &str = "class_tables";
    for c in 0..=u8::MAX {
        let vendor2 = (0x30..=0x4F).contains(&c);
        let rmpp = c == 0x03 || c == 0x06 || c == 0x10 || c == 0x12 || vendor2;
        ensure!(C, usize::from(c), ib_is_mad_class_rmpp(c) == rmpp);
        let off = match c {
            0x03 => 56,
            0x06 | 0x10 | 0x12 => 64,
            _ if vendor2 => 40,
            _ => 24,
        };
        ensure!(C, usize::from(c), ib_get_mad_data_offset(c) == off);
    }
    // The edges named in the specification, spelled out.
    let rows: [(u8, bool, usize); 8] = [
        (0x2F, false, 24),
        (0x30, true, 40),
        (0x4F, true, 40),
        (0x50, false, 24),
        (0x81, false, 24),
        (0x01, false, 24),
        (0x07, false, 24),
        (0x11, false, 24),
    ];
    for (i, (c, rmpp, off)) in rows.iter().enumerate() {
        ensure!(C, 256 + i, ib_is_mad_class_rmpp(*c) == *rmpp);
        ensure!(C, 256 + i, ib_get_mad_data_offset(*c) == *off);
    }
    Ok(())
}

/// `ib_mad_kernel_rmpp_agent` for each version and flag combination.
pub(crate) fn kernel_rmpp_agent() -> CheckResult {
    const C: &str = "kernel_rmpp_agent";
    let rows: [(u8, u32, bool); 6] = [
        (0, 0, false),
        (0, IB_MAD_USER_RMPP, false),
        (1, 0, true),
        (1, IB_MAD_USER_RMPP, false),
        (1, 2, true),
        (2, 3, false),
    ];
    for (i, (v, f, want)) in rows.iter().enumerate() {
        ensure!(C, i, ib_mad_kernel_rmpp_agent(*v, *f) == *want);
    }
    Ok(())
}

/// The self-description that `make run` prints answers what the helpers answer.
pub(crate) fn self_description_values() -> CheckResult {
    const C: &str = "self_description_values";
    let want: [u64; 10] = [1, 18, 0x1234, 0x1234, 19, 5, 1, 56, 1, 0];
    for (i, (d, w)) in self_description().iter().zip(want.iter()).enumerate() {
        ensure!(C, i, d.output == *w);
    }
    Ok(())
}

/// Every check with its name, for runners that iterate (the host tests).
#[cfg(test)]
pub(crate) const ALL: [(&str, fn() -> CheckResult); 9] = [
    ("constants", constants),
    ("header_layout", header_layout),
    ("short_buffers", short_buffers),
    ("response_mad", response_mad),
    ("cpi_fields", cpi_fields),
    ("rmpp_fields", rmpp_fields),
    ("class_tables", class_tables),
    ("kernel_rmpp_agent", kernel_rmpp_agent),
    ("self_description_values", self_description_values),
];
