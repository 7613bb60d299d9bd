// SPDX-License-Identifier: GPL-2.0

//! Observability: `/sys/kernel/debug/rmad/agents` lists every agent on the RDMA devices with
//! its counters (outstanding, backlogged, sent, retried, timed out, cancelled, early
//! responses) and what its RMPP reassembly holds, against its own bounds and its port's, one
//! line per agent; `rmad/ports` lists every RDMA port rmad opened, with its
//! private QP's number, what arrived there that rmad dropped, its destination resolutions,
//! and its LID, LMC and MAC as rmad last read them.

use crate::{
    engine::{
        agent::{
            RMPP_MAX_BYTES,
            RMPP_MAX_TRANSFERS, //
        },
        rmpp_budget::{
            PORT_MAX_BYTES,
            PORT_MAX_TRANSFERS, //
        },
    },
    verbs, //
};
use core::fmt::{
    self,
    Formatter, //
};
use kernel::{
    debugfs::{
        Dir,
        File, //
    },
    prelude::*,
};

/// The debugfs directory and its file; dropping it removes them.
pub(crate) struct Debugfs {
    // Fields drop in declaration order: the files before their directory.
    _agents: Pin<KBox<File<()>>>,
    _ports: Pin<KBox<File<()>>>,
    _dir: Dir,
}

impl Debugfs {
    /// The `rmad` directory, for the test build's files (`rmad/stress`, `rmad/control`): it is
    /// private to [`Debugfs`], which the product creates, so its accessor lives here.
    #[cfg(rmad_test)]
    pub(crate) fn dir(&self) -> &Dir {
        &self._dir
    }
}

/// Creates `rmad/agents` and `rmad/ports`.
pub(crate) fn create() -> Result<Debugfs> {
    let dir = Dir::new(c"rmad");
    let agents = KBox::pin_init(
        dir.read_callback_file(c"agents", (), &write_agents),
        GFP_KERNEL,
    )?;
    let ports = KBox::pin_init(
        dir.read_callback_file(c"ports", (), &write_ports),
        GFP_KERNEL,
    )?;
    Ok(Debugfs {
        _agents: agents,
        _ports: ports,
        _dir: dir,
    })
}

/// The contents of `rmad/agents`: one line per agent on the RDMA devices.
fn write_agents(_: &(), f: &mut Formatter<'_>) -> fmt::Result {
    let Some(engine) = verbs::verbs_engine() else {
        return Ok(());
    };
    let Ok(agents) = engine.agents() else {
        return writeln!(f, "(out of memory)");
    };
    for a in agents.iter() {
        let s = a.stats();
        let r = a.rmpp_stats();
        writeln!(
            f,
            "device {} port {} hi_tid {:#x} outstanding {} posted {} sent {} retried {} timed_out {} cancelled {} backlogged {} responses {} early {} dropped {} completed {} unsolicited {} rmpp {}/{} bytes {}/{} port_rmpp {}/{} port_bytes {}/{} reassembled {} acks {} aborts {} refused {} expired {}",
            a.device_name().to_str().unwrap_or("?"),
            a.port(),
            a.hi_tid,
            a.outstanding(),
            s.posted,
            s.transmitted,
            s.retried,
            s.timed_out,
            s.cancelled,
            s.backlogged,
            s.responses,
            s.early_responses,
            s.dropped_responses,
            s.completed,
            s.user_rmpp_unmatched,
            r.active,
            RMPP_MAX_TRANSFERS,
            r.bytes,
            RMPP_MAX_BYTES,
            r.port_active,
            PORT_MAX_TRANSFERS,
            r.port_bytes,
            PORT_MAX_BYTES,
            r.completed,
            r.acks,
            r.aborts,
            r.refused,
            r.expired
        )?;
    }
    Ok(())
}

/// The contents of `rmad/ports`: one line per RDMA port, and what reached no agent.
fn write_ports(_: &(), f: &mut Formatter<'_>) -> fmt::Result {
    let Ok(ports) = verbs::ports() else {
        return writeln!(f, "(out of memory)");
    };
    for p in ports.iter() {
        let (name, port) = p.id();
        let (resolved, failed) = p.resolutions();
        let (lid, lmc, m) = p.lid_lmc_mac();
        let (sent_now, sent_queued) = p.transmissions();
        writeln!(
            f,
            "device {} port {} qpn {} short_dropped {} requests_dropped {} \
             resolved {} unresolved {} lid {} lmc {} qp_resets {} \
             sent_now {} sent_queued {} \
             mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            name.to_str().unwrap_or("?"),
            port,
            p.qp_num().unwrap_or(0),
            p.drops().short,
            p.drops().requests,
            resolved,
            failed,
            lid,
            lmc,
            p.qp_resets().unwrap_or(0),
            sent_now,
            sent_queued,
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5]
        )?;
    }
    // What reached no agent: no MAD, invalid, or for nobody.
    if let Some(e) = verbs::verbs_engine() {
        writeln!(f, "unrouted {}", e.unrouted())?;
    }
    Ok(())
}
