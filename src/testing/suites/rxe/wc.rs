// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_rxe`: from what rmad keeps of a received packet ([`RecvWc`], with its
//! [`LinkHdr`]), the `struct ib_wc` and GRH rebuilt (`wc.c`) give ib_core's
//! `ib_init_ah_attr_from_wc` the address back to the packet's sender, as the packet's own did
//! for ib_core's responder: what a client of the `ib_mad` interface (the connection manager)
//! needs of a received MAD (issue 43). Without the link header, on RoCE, it gives nothing.
//!
//! rmad's agent sends a GET from GID index `i` of `rxe0` port 1 to the same GID, where an
//! ib_core agent answers from the address `ib_create_ah_from_wc` made of the request; the
//! answer comes back to rmad's private QP with a GRH from that GID to that GID, over IPv4
//! (index 1, IPv4-mapped) and IPv6 (index 0, link-local): RoCE v2, on both.

use crate::{
    engine::{
        agent::{
            Agent,
            RecvHandler,
            SendHandler, //
        },
        send::{
            SendBuf,
            SendCompletion,
            SendHandle, //
        },
        transport::{
            LinkHdr,
            RecvMad,
            RecvWc,
            Transport, //
        },
    },
    mad::{
        wire,
        Gid, //
    },
    testing::{
        ib_responder::IbResponder,
        post, register_gsi,
        requests::{
            gid_address,
            mad, //
        },
        wait_for,
    },
    verbs::{
        self,
        IbDevice,
        VerbsPort, //
    },
};
use kernel::{
    error::to_result,
    ffi::c_int,
    new_spinlock,
    prelude::*,
    sync::{
        Arc,
        SpinLock, //
    },
};

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_rxe", c"src/testing/suites/rxe/wc.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!("rmad_rxe", c"src/testing/suites/rxe/wc.rs", 0, $l, $r);
    }};
}

/// `IB_GID_TYPE_ROCE_UDP_ENCAP`: a RoCE v2 entry of the GID table.
const ROCE_V2: u8 = 2;

/// What rmad kept of a received packet (`struct rmad_test_wc` of `wc.h`).
#[repr(C)]
struct TestWc {
    src_qp: u32,
    slid: u32,
    pkey_index: u16,
    dlid_path_bits: u8,
    sl: u8,
    network_hdr_type: u8,
    pad: u8,
    vlan_id: u16,
    wc_flags: u32,
    grh: [u8; 40],
}

/// The address `ib_init_ah_attr_from_wc` gave (`struct rmad_test_ah` of `wc.h`).
#[repr(C)]
#[derive(Debug, Default)]
struct TestAh {
    dgid: Gid,
    sgid: Gid,
    own_mac: [u8; 6],
    dmac: [u8; 6],
    flow_label: u32,
    dlid: u16,
    sgid_index: u8,
    traffic_class: u8,
    sl: u8,
    has_grh: u8,
    gid_type: u8,
    pad: u8,
}

// The layouts `wc.c` checks too.
const _: () = {
    core::assert!(core::mem::size_of::<TestWc>() == 60);
    core::assert!(core::mem::offset_of!(TestWc, grh) == 20);
    core::assert!(core::mem::size_of::<TestAh>() == 56);
    core::assert!(core::mem::offset_of!(TestAh, flow_label) == 44);
    core::assert!(core::mem::offset_of!(TestAh, gid_type) == 54);
};

extern "C" {
    fn rmad_test_ah_from_wc(
        dev: *mut IbDevice,
        port: u32,
        wc: *const TestWc,
        out: *mut TestAh,
    ) -> c_int;
}

/// `ib_init_ah_attr_from_wc` on port `port` for the packet `wc` and `link` describe.
fn ah_from(port: &VerbsPort, wc: &RecvWc, link: &LinkHdr) -> Result<TestAh> {
    let input = TestWc {
        src_qp: wc.src_qp,
        slid: u32::from(wc.slid),
        pkey_index: wc.pkey_index,
        dlid_path_bits: wc.dlid_path_bits,
        sl: wc.sl,
        network_hdr_type: link.network_hdr_type,
        pad: 0,
        vlan_id: link.vlan_id,
        wc_flags: link.wc_flags,
        grh: link.grh,
    };
    let mut out = TestAh::default();
    let num = u32::from(port.port);
    // SAFETY: `with_device` holds a registration reference on `dev` across the call; `input`
    // and `out` are valid for the call, laid out as `wc.h` says (checked above).
    let ret = port
        .with_device(|dev| unsafe { rmad_test_ah_from_wc(dev, num, &input, &mut out) })
        .ok_or(ENODEV)?;
    to_result(ret)?;
    Ok(out)
}

/// Handlers that keep the last received MAD's arrival.
#[pin_data]
struct Keeper {
    #[pin]
    wc: SpinLock<Option<RecvWc>>,
}

impl SendHandler for Keeper {
    fn send_done(&self, _agent: &Arc<Agent>, _buf: SendBuf, _wc: SendCompletion) {}
}

impl RecvHandler for Keeper {
    fn recv(&self, _agent: &Arc<Agent>, _send: Option<&SendHandle>, mad: RecvMad) {
        *self.wc.lock() = Some(mad.wc);
    }
}

/// One GET from GID index `index` to the same GID, answered by ib_core: how the answer arrived.
fn answer_from(a: &Arc<Agent>, keeper: &Keeper, gid: Gid, index: u8) -> Result<Option<RecvWc>> {
    *keeper.wc.lock() = None;
    let lo = 0x100u32 + u32::from(index);
    let mut buf = mad(
        a,
        wire::IB_MGMT_CLASS_CONG_MGMT,
        wire::IB_MGMT_METHOD_GET,
        lo,
    )?;
    buf.set_ah(Some(gid_address(gid, index)));
    buf.set_timeout_ms(5000);
    buf.set_retries(1);
    post(buf)?;
    wait_for(|| keeper.wc.lock().is_some());
    Ok(*keeper.wc.lock())
}

/// The case: see the module's documentation.
pub(super) fn kept_wc_gives_the_senders_address() -> Result {
    let Some(port) = verbs::find_port(c"rxe0", 1) else {
        assert!(false);
        return Ok(());
    };
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port.clone();
    let keeper = Arc::pin_init(
        pin_init!(Keeper {
            wc <- new_spinlock!(None, "rxe::wc::Keeper"),
        }),
        GFP_KERNEL,
    )?;
    let a = register_gsi(&engine, &transport, 1, &keeper, None)?;
    let responder = IbResponder::start(&port, wire::IB_MGMT_CLASS_CONG_MGMT);
    let mut seen = KVec::new();
    for index in [1u8, 0] {
        let gid = port.gid(1, index).ok_or(ENODEV)?;
        let wc = answer_from(&a, &keeper, gid, index)?;
        let kept = wc.map(|wc| (ah_from(&port, &wc, &wc.link), wc));
        let bare = wc.map(|wc| ah_from(&port, &wc, &LinkHdr::default()).err());
        seen.push((index, gid, kept, bare), GFP_KERNEL)?;
    }
    drop(responder);
    a.unregister()?;
    for (index, gid, kept, bare) in seen {
        assert!(kept.is_some());
        let Some((ah, wc)) = kept else {
            continue;
        };
        assert!(ah.is_ok());
        let Ok(ah) = ah else {
            continue;
        };
        // Back to the GID the request went to, from the GID it came from.
        assert_eq!(ah.has_grh, 1);
        assert_eq!(ah.dgid, gid);
        assert_eq!(ah.sgid_index, index);
        assert_eq!(ah.sgid, gid);
        assert_eq!(ah.gid_type, ROCE_V2);
        // The answer's own GRH fields, as rmad decoded them.
        assert_eq!(ah.traffic_class, wc.grh_fields.traffic_class);
        assert_eq!(ah.flow_label, wc.grh_fields.flow_label);
        assert_eq!(ah.sl, wc.sl);
        // To this port's own netdev.
        assert!(ah.dmac != [0; 6]);
        assert_eq!(ah.dmac, ah.own_mac);
        // Without the link header, RoCE has no GRH to read: EPROTOTYPE.
        assert_eq!(bare, Some(Some(EPROTOTYPE)));
    }
    Ok(())
}
