// SPDX-License-Identifier: GPL-2.0

//! The removal probe (module parameter `rxe_probe=N`): at load, an agent on `rxe0` posts N
//! requests that nobody answers (long timeout), so that the test VM can remove the device
//! (`rdma link delete rxe0`) or unload rmad while they are outstanding. At unload the probe
//! reports how its sends ended; the VM scenario checks that each one completed exactly once,
//! with `WR_FLUSH_ERR`.

use crate::{
    engine::agent::Agent,
    mad::{
        state::WcStatus,
        wire, //
    },
    testing::{
        post,
        rxe_agent,
        rxe_request,
        Behaviour,
        Recorder, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// An agent on `rxe0` with sends outstanding.
pub(crate) struct RemovalProbe {
    agent: Arc<Agent>,
    rec: Arc<Recorder>,
    posted: usize,
}

/// Registers the probe agent on `rxe0` port 1 and posts `n` unanswered requests.
pub(crate) fn start(n: u32) -> Result<RemovalProbe> {
    let rec = Recorder::new(Behaviour::default())?;
    let (port, agent) = rxe_agent(&rec)?.ok_or(ENODEV)?;
    let n = usize::try_from(n).map_err(|_| EINVAL)?;
    for tag in 0..n {
        // SEND requests are never answered by ib_core.
        post(rxe_request(
            &port,
            &agent,
            tag,
            wire::IB_MGMT_METHOD_SEND,
            600_000,
            0,
        )?)?;
    }
    pr_info!("probe: {} sends outstanding on rxe0\n", n);
    Ok(RemovalProbe {
        agent,
        rec,
        posted: n,
    })
}

impl Drop for RemovalProbe {
    fn drop(&mut self) {
        // Unregistration flushes whatever is still outstanding and waits for the handlers.
        let _ = self.agent.unregister();
        let sends = self.rec.sends().unwrap_or_default();
        let flushed = sends.iter().filter(|s| s.1 == WcStatus::WrFlushErr).count();
        let mut once = sends.len() == self.posted;
        for tag in 0..self.posted {
            once &= sends.iter().filter(|s| s.0 == tag).count() == 1;
        }
        pr_info!(
            "probe: posted {}, handler calls {}, flushed {}, each once: {}\n",
            self.posted,
            sends.len(),
            flushed,
            if once { "yes" } else { "no" }
        );
    }
}
