// SPDX-License-Identifier: GPL-2.0

//! Creating send buffers: `ib_create_send_mad`'s size rules and validation
//! (Documentation/behaviour.md §1.5).

use super::{
    Agent,
    SendSpec, //
};
use crate::{
    engine::{
        record::RecordOwner,
        send::{
            BodyBox,
            MadInit,
            Segments,
            SendBody,
            SendBuf, //
        },
    },
    mad::wire, //
};
use kernel::{
    alloc::Flags,
    prelude::*,
    sync::{
        atomic::{
            Full,
            Relaxed, //
        },
        Arc, //
    },
};

/// The sizes of a send buffer, as [`Agent::layout`] checked them.
struct Layout {
    /// Length of the headers.
    hdr: usize,
    /// Length of the data after them.
    data: usize,
    /// Data bytes per segment: a MAD less its headers.
    seg_size: usize,
    /// Segments of an RMPP transfer (0 for one MAD).
    seg_count: usize,
}

impl Agent {
    /// The sizes `spec` asks for, checked as `ib_create_send_mad` checks them (`EINVAL`): the
    /// headers' length against the MAD and RMPP headers, and a message of more than one MAD
    /// only for an RMPP transfer of a kernel-RMPP agent.
    fn layout(&self, spec: &SendSpec) -> Result<Layout> {
        let mad_size = wire::IB_MGMT_MAD_SIZE;
        let rmpp_active = spec.rmpp_active;
        let hdr = usize::try_from(spec.hdr_len).map_err(|_| EINVAL)?;
        let data = usize::try_from(spec.data_len).map_err(|_| EINVAL)?;
        if hdr > mad_size
            || (rmpp_active && hdr < wire::IB_MGMT_RMPP_HDR)
            || (!rmpp_active && hdr < wire::IB_MGMT_MAD_HDR)
            || (rmpp_active && hdr == mad_size && data > 0)
        {
            return Err(EINVAL);
        }
        let seg_size = mad_size - hdr;
        let pad = if data != 0 && seg_size != 0 {
            match seg_size - data % seg_size {
                p if p == seg_size => 0,
                p => p,
            }
        } else {
            seg_size
        };
        let message_size = hdr
            .checked_add(data)
            .and_then(|v| v.checked_add(pad))
            .ok_or(EINVAL)?;
        if self.kernel_rmpp() {
            if !rmpp_active && message_size > mad_size {
                return Err(EINVAL);
            }
        } else if rmpp_active || message_size > mad_size {
            return Err(EINVAL);
        }
        let seg_count = if rmpp_active {
            (message_size - hdr).div_ceil(seg_size.max(1))
        } else {
            0
        };
        Ok(Layout {
            hdr,
            data,
            seg_size,
            seg_count,
        })
    }

    /// A send buffer for one MAD to QP `remote_qpn` ([`SendSpec::mad`]), allocated with
    /// `gfp`.
    #[cfg_attr(
        not(rmad_test),
        allow(
            dead_code,
            reason = "the Rust API's common case; the C API passes every argument"
        )
    )]
    pub(crate) fn create_mad(self: &Arc<Self>, remote_qpn: u32, gfp: Flags) -> Result<SendBuf> {
        self.create_send(SendSpec::mad(remote_qpn), gfp)
    }

    /// `ib_create_send_mad`: allocates a zeroed send buffer with the size rules and all the
    /// validation of Documentation/behaviour.md §1.5; every case the C layer leaves undefined is
    /// `EINVAL`. Allocates with `gfp` only, so `GFP_ATOMIC` makes it usable in atomic context.
    pub(crate) fn create_send(self: &Arc<Self>, spec: SendSpec, gfp: Flags) -> Result<SendBuf> {
        let SendSpec {
            remote_qpn,
            pkey_index,
            rmpp_active,
            ..
        } = spec;
        let Layout {
            hdr,
            data,
            seg_size,
            seg_count,
        } = self.layout(&spec)?;
        let mad_size = wire::IB_MGMT_MAD_SIZE;
        // A caller may ask for any length up to 2 GiB: what the allocator cannot give is a
        // quiet ENOMEM, not a page-allocator warning.
        let gfp = gfp | __GFP_NOWARN;
        let segments = if rmpp_active {
            Segments::zeroed(seg_count.checked_mul(seg_size).ok_or(EINVAL)?, gfp)?
        } else {
            Segments::none()
        };
        // Zeroed where the record lives, not built here and copied there.
        let mad = MadInit::zeroed(mad_size, gfp)?;
        // Count the buffer without the lock. Full: unregistration sets `dying` and then reads
        // the count (both Full as well), so either it sees this buffer counted, or this sees
        // `dying` and gives the count back (waking it if it sleeps, as a dropped buffer does);
        // so does a failed allocation below.
        self.buffers.fetch_add(1, Full);
        if self.dying.load(Relaxed) {
            self.buffer_freed();
            return Err(ESHUTDOWN);
        }
        // The record and its body: one object of rmad's slab cache.
        let body = BodyBox::new(
            self,
            mad,
            SendBody {
                segments,
                hdr_len: hdr,
                data_len: data,
                seg_count,
                seg_size: if rmpp_active { seg_size } else { 0 },
                internal: false,
                remote_qpn,
                pkey_index,
                timeout_ms: 0,
                retries: 0,
                retry: self.retry_default,
                retry_clock: Default::default(),
                ah: None,
                context: [0; 2],
                seg: None,
            },
            gfp,
        )?;
        let mut buf = SendBuf { body };
        if rmpp_active {
            // Not posted yet: the MAD can be written.
            if let Ok(r) = wire::rmpp_hdr_mut(buf.body.mad_mut()) {
                // RMPP version and type DATA; the header is at least 12 bytes long.
                if let [version, kind, ..] = r {
                    *version = self.rmpp_version;
                    *kind = wire::IB_MGMT_RMPP_TYPE_DATA;
                }
                let _ = wire::ib_set_rmpp_flags(r, wire::IB_MGMT_RMPP_FLAG_ACTIVE);
            }
        }
        Ok(buf)
    }
}
