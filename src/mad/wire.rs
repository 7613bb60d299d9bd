// SPDX-License-Identifier: GPL-2.0

//! MAD wire format: the common header, management classes and methods, and the helper
//! functions of `include/rdma/ib_mad.h` and `drivers/infiniband/core/mad.c`.
//!
//! Everything here is a pure function over byte buffers (network byte order on the wire) and
//! uses only `core`, so the same file is compiled into the kernel module and into the host
//! tests under `tests/host`. Each helper gives exactly the result of its C namesake, including
//! the C layer's truncations (for example [`ib_set_rmpp_resptime`] drops the bits of `rtime`
//! that do not fit in five bits, as the C `u8` assignment does). Where C takes a pointer to a
//! structure, the Rust helper takes the bytes of that structure and returns
//! [`WireError::TooShort`] instead of reading past the end.

/// Size of an InfiniBand MAD (`IB_MGMT_MAD_SIZE`).
pub(crate) const IB_MGMT_MAD_SIZE: usize = 256;
/// Size of an Omni-Path MAD (`OPA_MGMT_MAD_SIZE`).
pub(crate) const OPA_MGMT_MAD_SIZE: usize = 2048;

/// Length of the common MAD header (`IB_MGMT_MAD_HDR`).
pub(crate) const IB_MGMT_MAD_HDR: usize = 24;
/// Length of the common header plus the RMPP header (`IB_MGMT_RMPP_HDR`).
pub(crate) const IB_MGMT_RMPP_HDR: usize = 36;
/// Length of the headers of a vendor-range-2 MAD (`IB_MGMT_VENDOR_HDR`).
pub(crate) const IB_MGMT_VENDOR_HDR: usize = 40;
/// Length of the headers of a subnet administration MAD (`IB_MGMT_SA_HDR`).
pub(crate) const IB_MGMT_SA_HDR: usize = 56;
/// Length of the headers of a device management MAD (`IB_MGMT_DEVICE_HDR`).
pub(crate) const IB_MGMT_DEVICE_HDR: usize = 64;

/// Payload of a MAD after the common header (`IB_MGMT_MAD_DATA`).
pub(crate) const IB_MGMT_MAD_DATA: usize = 232;
/// Payload of an RMPP segment (`IB_MGMT_RMPP_DATA`).
pub(crate) const IB_MGMT_RMPP_DATA: usize = 220;
/// Payload of a subnet administration MAD (`IB_MGMT_SA_DATA`).
pub(crate) const IB_MGMT_SA_DATA: usize = 200;

/// Base version of InfiniBand MADs (`IB_MGMT_BASE_VERSION`).
pub(crate) const IB_MGMT_BASE_VERSION: u8 = 1;
/// Base version of Omni-Path MADs (`OPA_MGMT_BASE_VERSION`).
pub(crate) const OPA_MGMT_BASE_VERSION: u8 = 0x80;

/// Subnet management, LID routed (`IB_MGMT_CLASS_SUBN_LID_ROUTED`).
pub(crate) const IB_MGMT_CLASS_SUBN_LID_ROUTED: u8 = 0x01;
/// Subnet management, directed route (`IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE`).
pub(crate) const IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE: u8 = 0x81;
/// Subnet administration (`IB_MGMT_CLASS_SUBN_ADM`).
pub(crate) const IB_MGMT_CLASS_SUBN_ADM: u8 = 0x03;
/// Performance management (`IB_MGMT_CLASS_PERF_MGMT`).
pub(crate) const IB_MGMT_CLASS_PERF_MGMT: u8 = 0x04;
/// Baseboard management (`IB_MGMT_CLASS_BM`).
pub(crate) const IB_MGMT_CLASS_BM: u8 = 0x05;
/// Device management (`IB_MGMT_CLASS_DEVICE_MGMT`).
pub(crate) const IB_MGMT_CLASS_DEVICE_MGMT: u8 = 0x06;
/// Communication management (`IB_MGMT_CLASS_CM`).
pub(crate) const IB_MGMT_CLASS_CM: u8 = 0x07;
/// SNMP tunnelling (`IB_MGMT_CLASS_SNMP`).
pub(crate) const IB_MGMT_CLASS_SNMP: u8 = 0x08;
/// Device administration (`IB_MGMT_CLASS_DEVICE_ADM`).
pub(crate) const IB_MGMT_CLASS_DEVICE_ADM: u8 = 0x10;
/// Boot management (`IB_MGMT_CLASS_BOOT_MGMT`).
pub(crate) const IB_MGMT_CLASS_BOOT_MGMT: u8 = 0x11;
/// Boot information service (`IB_MGMT_CLASS_BIS`).
pub(crate) const IB_MGMT_CLASS_BIS: u8 = 0x12;
/// Congestion management (`IB_MGMT_CLASS_CONG_MGMT`).
pub(crate) const IB_MGMT_CLASS_CONG_MGMT: u8 = 0x21;
/// First class of vendor range 2 (`IB_MGMT_CLASS_VENDOR_RANGE2_START`).
pub(crate) const IB_MGMT_CLASS_VENDOR_RANGE2_START: u8 = 0x30;
/// Last class of vendor range 2 (`IB_MGMT_CLASS_VENDOR_RANGE2_END`).
pub(crate) const IB_MGMT_CLASS_VENDOR_RANGE2_END: u8 = 0x4F;

/// Get (`IB_MGMT_METHOD_GET`).
pub(crate) const IB_MGMT_METHOD_GET: u8 = 0x01;
/// Set (`IB_MGMT_METHOD_SET`).
pub(crate) const IB_MGMT_METHOD_SET: u8 = 0x02;
/// Response to a get or set (`IB_MGMT_METHOD_GET_RESP`).
pub(crate) const IB_MGMT_METHOD_GET_RESP: u8 = 0x81;
/// Send (`IB_MGMT_METHOD_SEND`).
pub(crate) const IB_MGMT_METHOD_SEND: u8 = 0x03;

/// Attribute ID of ClassPortInfo (`IB_MGMT_CLASSPORTINFO_ATTR_ID`, 0x0001 on the wire).
pub(crate) const IB_MGMT_CLASSPORTINFO_ATTR_ID: u16 = 0x0001;
/// Trap (`IB_MGMT_METHOD_TRAP`).
pub(crate) const IB_MGMT_METHOD_TRAP: u8 = 0x05;
/// Report (`IB_MGMT_METHOD_REPORT`).
pub(crate) const IB_MGMT_METHOD_REPORT: u8 = 0x06;
/// Response to a report (`IB_MGMT_METHOD_REPORT_RESP`).
pub(crate) const IB_MGMT_METHOD_REPORT_RESP: u8 = 0x86;
/// Trap repress, which counts as a response (`IB_MGMT_METHOD_TRAP_REPRESS`).
pub(crate) const IB_MGMT_METHOD_TRAP_REPRESS: u8 = 0x07;
/// Subnet administration get-table (`IB_SA_METHOD_GET_TABLE`).
pub(crate) const IB_SA_METHOD_GET_TABLE: u8 = 0x12;
/// The response bit of the method byte (`IB_MGMT_METHOD_RESP`).
pub(crate) const IB_MGMT_METHOD_RESP: u8 = 0x80;
/// Baseboard management: bit 0 of the attribute modifier marks a response
/// (`IB_BM_ATTR_MOD_RESP`, in host order).
pub(crate) const IB_BM_ATTR_MOD_RESP: u32 = 1;

/// RMPP protocol version (`IB_MGMT_RMPP_VERSION`).
pub(crate) const IB_MGMT_RMPP_VERSION: u8 = 1;
/// RMPP type DATA (`IB_MGMT_RMPP_TYPE_DATA`).
pub(crate) const IB_MGMT_RMPP_TYPE_DATA: u8 = 1;
/// RMPP type ACK (`IB_MGMT_RMPP_TYPE_ACK`).
pub(crate) const IB_MGMT_RMPP_TYPE_ACK: u8 = 2;
/// RMPP type STOP (`IB_MGMT_RMPP_TYPE_STOP`).
pub(crate) const IB_MGMT_RMPP_TYPE_STOP: u8 = 3;
/// RMPP type ABORT (`IB_MGMT_RMPP_TYPE_ABORT`).
pub(crate) const IB_MGMT_RMPP_TYPE_ABORT: u8 = 4;
/// RMPP flag: the transfer uses RMPP (`IB_MGMT_RMPP_FLAG_ACTIVE`).
pub(crate) const IB_MGMT_RMPP_FLAG_ACTIVE: u8 = 1;
/// RMPP flag: first segment (`IB_MGMT_RMPP_FLAG_FIRST`).
pub(crate) const IB_MGMT_RMPP_FLAG_FIRST: u8 = 2;
/// RMPP flag: last segment (`IB_MGMT_RMPP_FLAG_LAST`).
pub(crate) const IB_MGMT_RMPP_FLAG_LAST: u8 = 4;

/// Length of the RMPP header that follows the common header.
pub(crate) const IB_RMPP_HDR_LEN: usize = 12;
/// Offset of `cap_mask2_resp_time` in both `ib_class_port_info` and `opa_class_port_info`.
const CPI_CAP_MASK2_RESP_TIME: usize = 4;
/// Mask of the response-time field of `cap_mask2_resp_time`
/// (`IB_CLASS_PORT_INFO_RESP_TIME_MASK`).
pub(crate) const IB_CLASS_PORT_INFO_RESP_TIME_MASK: u32 = 0x1F;
/// Width of the response-time field (`IB_CLASS_PORT_INFO_RESP_TIME_FIELD_SIZE`).
pub(crate) const IB_CLASS_PORT_INFO_RESP_TIME_FIELD_SIZE: u32 = 5;

/// Registration flag: the client does RMPP itself (`IB_MAD_USER_RMPP`).
pub(crate) const IB_MAD_USER_RMPP: u32 = 1;

/// Q_Key of QP1, the general services QP (`IB_QP1_QKEY`).
pub(crate) const IB_QP1_QKEY: u32 = 0x8001_0000;
/// A work-request Q_Key with this bit set means "use the QP's own Q_Key" (`IB_QP_SET_QKEY`).
pub(crate) const IB_QP_SET_QKEY: u32 = 0x8000_0000;

/// Why a wire helper could not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireError {
    /// The buffer is shorter than the structure the helper reads or writes.
    TooShort {
        /// Bytes the helper needs.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
}

/// Returns the first `need` bytes of `buf`, or [`WireError::TooShort`].
fn at_least(buf: &[u8], need: usize) -> Result<&[u8], WireError> {
    buf.get(..need).ok_or(WireError::TooShort {
        need,
        have: buf.len(),
    })
}

/// Mutable variant of [`at_least`].
fn at_least_mut(buf: &mut [u8], need: usize) -> Result<&mut [u8], WireError> {
    let have = buf.len();
    buf.get_mut(..need)
        .ok_or(WireError::TooShort { need, have })
}

/// Copies the `N` bytes at `off` out of `buf`.
fn field<const N: usize>(buf: &[u8], off: usize) -> Result<[u8; N], WireError> {
    let end = off.saturating_add(N);
    buf.get(off..end)
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or(WireError::TooShort {
            need: end,
            have: buf.len(),
        })
}

/// Copies `bytes` into `buf` at `off`.
fn set_field(buf: &mut [u8], off: usize, bytes: &[u8]) -> Result<(), WireError> {
    let end = off.saturating_add(bytes.len());
    let have = buf.len();
    let dst = buf
        .get_mut(off..end)
        .ok_or(WireError::TooShort { need: end, have })?;
    // Element-wise, so that no length-mismatch panic path is compiled in.
    for (d, s) in dst.iter_mut().zip(bytes) {
        *d = *s;
    }
    Ok(())
}

/// Reads the big-endian `u32` at `off`.
fn read_be32(buf: &[u8], off: usize) -> Result<u32, WireError> {
    Ok(u32::from_be_bytes(field(buf, off)?))
}

/// Writes `v` big-endian at `off`.
fn write_be32(buf: &mut [u8], off: usize, v: u32) -> Result<(), WireError> {
    set_field(buf, off, &v.to_be_bytes())
}

/// The MAD common header (`struct ib_mad_hdr`), decoded to host order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MadHdr {
    /// Base version: 1 for InfiniBand, 0x80 for Omni-Path.
    pub(crate) base_version: u8,
    /// Management class.
    pub(crate) mgmt_class: u8,
    /// Version of the management class.
    pub(crate) class_version: u8,
    /// Method; bit 7 marks a response.
    pub(crate) method: u8,
    /// Status.
    pub(crate) status: u16,
    /// Class-specific field.
    pub(crate) class_specific: u16,
    /// Transaction ID: the agent's `hi_tid` in the upper 32 bits for routed responses.
    pub(crate) tid: u64,
    /// Attribute ID.
    pub(crate) attr_id: u16,
    /// Reserved.
    pub(crate) resv: u16,
    /// Attribute modifier.
    pub(crate) attr_mod: u32,
}

impl MadHdr {
    /// Decodes the first [`IB_MGMT_MAD_HDR`] bytes of `mad`.
    pub(crate) fn parse(mad: &[u8]) -> Result<Self, WireError> {
        let h = at_least(mad, IB_MGMT_MAD_HDR)?;
        let [base_version, mgmt_class, class_version, method] = field(h, 0)?;
        Ok(Self {
            base_version,
            mgmt_class,
            class_version,
            method,
            status: u16::from_be_bytes(field(h, 4)?),
            class_specific: u16::from_be_bytes(field(h, 6)?),
            tid: u64::from_be_bytes(field(h, 8)?),
            attr_id: u16::from_be_bytes(field(h, 16)?),
            resv: u16::from_be_bytes(field(h, 18)?),
            attr_mod: read_be32(h, 20)?,
        })
    }

    /// Encodes the header into the first [`IB_MGMT_MAD_HDR`] bytes of `mad`.
    pub(crate) fn write(&self, mad: &mut [u8]) -> Result<(), WireError> {
        let h = at_least_mut(mad, IB_MGMT_MAD_HDR)?;
        let fields: [(usize, &[u8]); 10] = [
            (0, &[self.base_version]),
            (1, &[self.mgmt_class]),
            (2, &[self.class_version]),
            (3, &[self.method]),
            (4, &self.status.to_be_bytes()),
            (6, &self.class_specific.to_be_bytes()),
            (8, &self.tid.to_be_bytes()),
            (16, &self.attr_id.to_be_bytes()),
            (18, &self.resv.to_be_bytes()),
            (20, &self.attr_mod.to_be_bytes()),
        ];
        for (off, bytes) in fields {
            set_field(h, off, bytes)?;
        }
        Ok(())
    }

    /// Whether this header describes a response ([`ib_response_mad`]).
    pub(crate) fn is_response(&self) -> bool {
        self.method & IB_MGMT_METHOD_RESP != 0
            || self.method == IB_MGMT_METHOD_TRAP_REPRESS
            || (self.mgmt_class == IB_MGMT_CLASS_BM && self.attr_mod & IB_BM_ATTR_MOD_RESP != 0)
    }
}

/// Builds a 64-bit TID from an agent's `hi_tid` and the client's low 32 bits.
pub(crate) fn make_tid(hi_tid: u32, lo: u32) -> u64 {
    (u64::from(hi_tid) << 32) | u64::from(lo)
}

/// The upper 32 bits of a TID, which route a response to its agent.
pub(crate) fn tid_hi(tid: u64) -> u32 {
    // The shift leaves exactly 32 significant bits, so the conversion cannot fail.
    u32::try_from(tid >> 32).unwrap_or(u32::MAX)
}

/// `ib_response_mad`: whether the MAD whose header starts `mad` is a response.
///
/// A MAD is a response if its method has the response bit, if it is a trap repress, or if it
/// is a baseboard-management MAD with bit 0 of the attribute modifier set.
pub(crate) fn ib_response_mad(mad: &[u8]) -> Result<bool, WireError> {
    Ok(MadHdr::parse(mad)?.is_response())
}

/// `ib_get_cpi_resp_time`: the response time (low five bits of `cap_mask2_resp_time`) of the
/// `ib_class_port_info` in `cpi`.
pub(crate) fn ib_get_cpi_resp_time(cpi: &[u8]) -> Result<u8, WireError> {
    let v = read_be32(cpi, CPI_CAP_MASK2_RESP_TIME)? & IB_CLASS_PORT_INFO_RESP_TIME_MASK;
    // Masked to five bits, so it fits.
    Ok(u8::try_from(v).unwrap_or(0))
}

/// `ib_set_cpi_resp_time`: sets the response time, keeping the capability mask; bits of
/// `rtime` above the five-bit field are dropped, as in C.
pub(crate) fn ib_set_cpi_resp_time(cpi: &mut [u8], rtime: u8) -> Result<(), WireError> {
    let old = read_be32(cpi, CPI_CAP_MASK2_RESP_TIME)?;
    let new = (old & !IB_CLASS_PORT_INFO_RESP_TIME_MASK)
        | (u32::from(rtime) & IB_CLASS_PORT_INFO_RESP_TIME_MASK);
    write_be32(cpi, CPI_CAP_MASK2_RESP_TIME, new)
}

/// `ib_get_cpi_capmask2`: the 27-bit CapabilityMask2 of the `ib_class_port_info` in `cpi`.
pub(crate) fn ib_get_cpi_capmask2(cpi: &[u8]) -> Result<u32, WireError> {
    Ok(read_be32(cpi, CPI_CAP_MASK2_RESP_TIME)? >> IB_CLASS_PORT_INFO_RESP_TIME_FIELD_SIZE)
}

/// `ib_set_cpi_capmask2`: sets CapabilityMask2, keeping the response time. As in C, the top
/// five bits of `capmask2` are shifted out.
pub(crate) fn ib_set_cpi_capmask2(cpi: &mut [u8], capmask2: u32) -> Result<(), WireError> {
    let old = read_be32(cpi, CPI_CAP_MASK2_RESP_TIME)?;
    // A shift by 5 of a u32 never panics; the bits shifted out are lost exactly as in C.
    let new = (old & IB_CLASS_PORT_INFO_RESP_TIME_MASK)
        | (capmask2 << IB_CLASS_PORT_INFO_RESP_TIME_FIELD_SIZE);
    write_be32(cpi, CPI_CAP_MASK2_RESP_TIME, new)
}

/// `opa_get_cpi_capmask2`: CapabilityMask2 of the `opa_class_port_info` in `cpi` (the field
/// sits at the same offset as in the InfiniBand structure).
pub(crate) fn opa_get_cpi_capmask2(cpi: &[u8]) -> Result<u32, WireError> {
    Ok(read_be32(cpi, CPI_CAP_MASK2_RESP_TIME)? >> IB_CLASS_PORT_INFO_RESP_TIME_FIELD_SIZE)
}

/// The RMPP header of `mad` (bytes 24 to 35).
pub(crate) fn rmpp_hdr(mad: &[u8]) -> Result<&[u8], WireError> {
    let b = at_least(mad, IB_MGMT_RMPP_HDR)?;
    Ok(b.get(IB_MGMT_MAD_HDR..).unwrap_or(&[]))
}

/// Mutable variant of [`rmpp_hdr`].
pub(crate) fn rmpp_hdr_mut(mad: &mut [u8]) -> Result<&mut [u8], WireError> {
    let b = at_least_mut(mad, IB_MGMT_RMPP_HDR)?;
    Ok(b.get_mut(IB_MGMT_MAD_HDR..).unwrap_or(&mut []))
}

/// Offset of `rmpp_rtime_flags` within `struct ib_rmpp_hdr`.
const RMPP_RTIME_FLAGS: usize = 2;

/// Reads `rmpp_rtime_flags` of the RMPP header `rmpp`.
fn rtime_flags(rmpp: &[u8]) -> Result<u8, WireError> {
    let [b] = field(rmpp, RMPP_RTIME_FLAGS)?;
    Ok(b)
}

/// Writes `rmpp_rtime_flags` of the RMPP header `rmpp`.
fn set_rtime_flags(rmpp: &mut [u8], v: u8) -> Result<(), WireError> {
    set_field(rmpp, RMPP_RTIME_FLAGS, &[v])
}

/// `ib_get_rmpp_resptime`: the response time (upper five bits of `rmpp_rtime_flags`) of the
/// RMPP header `rmpp`.
pub(crate) fn ib_get_rmpp_resptime(rmpp: &[u8]) -> Result<u8, WireError> {
    Ok(rtime_flags(rmpp)? >> 3)
}

/// `ib_get_rmpp_flags`: the three flag bits (ACTIVE, FIRST, LAST) of the RMPP header `rmpp`.
pub(crate) fn ib_get_rmpp_flags(rmpp: &[u8]) -> Result<u8, WireError> {
    Ok(rtime_flags(rmpp)? & 0x7)
}

/// `ib_set_rmpp_resptime`: sets the response time, keeping the flags. The C code assigns
/// `flags | (rtime << 3)` to a `u8`, so the top three bits of `rtime` are lost; so are they here.
pub(crate) fn ib_set_rmpp_resptime(rmpp: &mut [u8], rtime: u8) -> Result<(), WireError> {
    let flags = ib_get_rmpp_flags(rmpp)?;
    // A `u8` shifted by 3 drops its top bits without panicking, like the C truncation.
    set_rtime_flags(rmpp, flags | (rtime << 3))
}

/// `ib_set_rmpp_flags`: sets the three flag bits, keeping the response time; other bits of
/// `flags` are ignored.
pub(crate) fn ib_set_rmpp_flags(rmpp: &mut [u8], flags: u8) -> Result<(), WireError> {
    let old = rtime_flags(rmpp)?;
    set_rtime_flags(rmpp, (old & 0xF8) | (flags & 0x7))
}

/// `ib_is_mad_class_rmpp`: whether MADs of `mgmt_class` may use RMPP (SA, device management,
/// device administration, BIS and vendor range 2).
pub(crate) fn ib_is_mad_class_rmpp(mgmt_class: u8) -> bool {
    matches!(
        mgmt_class,
        IB_MGMT_CLASS_SUBN_ADM
            | IB_MGMT_CLASS_DEVICE_MGMT
            | IB_MGMT_CLASS_DEVICE_ADM
            | IB_MGMT_CLASS_BIS
            | IB_MGMT_CLASS_VENDOR_RANGE2_START..=IB_MGMT_CLASS_VENDOR_RANGE2_END
    )
}

/// `ib_get_mad_data_offset`: where the class's data starts, i.e. the length of all its headers
/// (56 for SA, 64 for device management/administration and BIS, 40 for vendor range 2, 24
/// otherwise).
pub(crate) fn ib_get_mad_data_offset(mgmt_class: u8) -> usize {
    match mgmt_class {
        IB_MGMT_CLASS_SUBN_ADM => IB_MGMT_SA_HDR,
        IB_MGMT_CLASS_DEVICE_MGMT | IB_MGMT_CLASS_DEVICE_ADM | IB_MGMT_CLASS_BIS => {
            IB_MGMT_DEVICE_HDR
        }
        IB_MGMT_CLASS_VENDOR_RANGE2_START..=IB_MGMT_CLASS_VENDOR_RANGE2_END => IB_MGMT_VENDOR_HDR,
        _ => IB_MGMT_MAD_HDR,
    }
}

/// `ib_mad_kernel_rmpp_agent`: whether an agent registered with `rmpp_version` and `flags`
/// has the kernel do RMPP for it (a non-zero version without [`IB_MAD_USER_RMPP`]).
pub(crate) fn ib_mad_kernel_rmpp_agent(rmpp_version: u8, flags: u32) -> bool {
    rmpp_version != 0 && flags & IB_MAD_USER_RMPP == 0
}

/// One line of the self-description that `make run` prints: a helper and what it answered
/// for a sample input.
pub(crate) struct Demo {
    /// The helper's C name.
    pub(crate) name: &'static str,
    /// The sample input, in words.
    pub(crate) input: &'static str,
    /// The helper's answer.
    pub(crate) output: u64,
}

/// Runs every helper on a fixed sample and returns what each answered, so the module can show
/// at load time that its wire helpers work (`make run`).
pub(crate) fn self_description() -> [Demo; 10] {
    let mut cpi = [0u8; 72];
    let _ = ib_set_cpi_capmask2(&mut cpi, 0x1234);
    let _ = ib_set_cpi_resp_time(&mut cpi, 18);
    let mut mad = [0u8; IB_MGMT_MAD_SIZE];
    let hdr = MadHdr {
        base_version: IB_MGMT_BASE_VERSION,
        mgmt_class: IB_MGMT_CLASS_SUBN_ADM,
        class_version: 2,
        method: IB_MGMT_METHOD_GET_RESP,
        tid: make_tid(7, 1),
        ..MadHdr::default()
    };
    let _ = hdr.write(&mut mad);
    if let Ok(r) = rmpp_hdr_mut(&mut mad) {
        let _ = ib_set_rmpp_flags(r, IB_MGMT_RMPP_FLAG_ACTIVE | IB_MGMT_RMPP_FLAG_LAST);
        let _ = ib_set_rmpp_resptime(r, 19);
    }
    let rmpp = rmpp_hdr(&mad).unwrap_or(&[]);
    let num = |r: Result<u8, WireError>| r.map(u64::from).unwrap_or(u64::MAX);
    let num32 = |r: Result<u32, WireError>| r.map(u64::from).unwrap_or(u64::MAX);
    [
        Demo {
            name: "ib_response_mad",
            input: "SA GetResp",
            output: u64::from(ib_response_mad(&mad).unwrap_or(false)),
        },
        Demo {
            name: "ib_get_cpi_resp_time",
            input: "cpi after set_resp_time(18)",
            output: num(ib_get_cpi_resp_time(&cpi)),
        },
        Demo {
            name: "ib_get_cpi_capmask2",
            input: "cpi after set_capmask2(0x1234)",
            output: num32(ib_get_cpi_capmask2(&cpi)),
        },
        Demo {
            name: "opa_get_cpi_capmask2",
            input: "same bytes as OPA cpi",
            output: num32(opa_get_cpi_capmask2(&cpi)),
        },
        Demo {
            name: "ib_get_rmpp_resptime",
            input: "rmpp after set_resptime(19)",
            output: num(ib_get_rmpp_resptime(rmpp)),
        },
        Demo {
            name: "ib_get_rmpp_flags",
            input: "rmpp after set_flags(ACTIVE|LAST)",
            output: num(ib_get_rmpp_flags(rmpp)),
        },
        Demo {
            name: "ib_is_mad_class_rmpp",
            input: "class 0x03 (SA)",
            output: u64::from(ib_is_mad_class_rmpp(IB_MGMT_CLASS_SUBN_ADM)),
        },
        Demo {
            name: "ib_get_mad_data_offset",
            input: "class 0x03 (SA)",
            // A `usize` offset of at most 64 always fits.
            output: u64::try_from(ib_get_mad_data_offset(IB_MGMT_CLASS_SUBN_ADM)).unwrap_or(0),
        },
        Demo {
            name: "ib_mad_kernel_rmpp_agent",
            input: "rmpp_version 1, flags 0",
            output: u64::from(ib_mad_kernel_rmpp_agent(1, 0)),
        },
        Demo {
            name: "ib_mad_kernel_rmpp_agent",
            input: "rmpp_version 1, IB_MAD_USER_RMPP",
            output: u64::from(ib_mad_kernel_rmpp_agent(1, IB_MAD_USER_RMPP)),
        },
    ]
}
