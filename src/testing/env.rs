// SPDX-License-Identifier: GPL-2.0

//! A test's world: a fresh engine and loopback fabric per test ([`Env`]), agent registration,
//! the `rxe0` port of the test VM, and the small waits every suite uses.

use crate::{
    engine::{
        agent::Engine, //
        agent::{
            Agent,
            AgentConfig,
            RecvHandler,
            SendHandler, //
        },
        send::{
            SendBuf,
            SendHandle, //
        },
        transport::{
            PortAttr,
            Transport, //
        },
    },
    mad::{
        state::SendState,
        wire,
        QpType,
        RegReq, //
    },
    sys::workqueue::DEFAULT_ACTIVE,
    testing::{
        loopback::{
            Fabric,
            Loopback, //
        },
        recorder::{
            Behaviour,
            Recorder,
            WAIT_MS, //
        },
    },
    verbs::{
        self,
        VerbsPort, //
    },
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, //
    },
    time::{
        Instant,
        Monotonic, //
    },
};

/// A test's world: an engine and a loopback fabric of its own.
pub(crate) struct Env {
    /// The engine.
    pub(crate) engine: Arc<Engine>,
    /// The transport.
    pub(crate) lb: Arc<Loopback>,
    /// The transport, as agents see it.
    pub(crate) transport: Arc<dyn Transport<Agent>>,
}

impl Env {
    /// A fresh engine and fabric with the default ports.
    pub(crate) fn new() -> Result<Self> {
        Self::with_ports(Fabric::DEFAULT_PORTS)
    }

    /// A fresh engine and fabric with `ports`.
    pub(crate) fn with_ports(ports: [PortAttr; 2]) -> Result<Self> {
        let engine = Engine::new(c"rmad_test", c"rmad_test_cq")?;
        let lb = Loopback::new(&engine, ports)?;
        let transport: Arc<dyn Transport<Agent>> = lb.clone();
        Ok(Self {
            engine,
            lb,
            transport,
        })
    }

    /// The fabric.
    pub(crate) fn fabric(&self) -> &Arc<Fabric> {
        &self.lb.fabric
    }

    /// Registers an agent on GSI `port` with `rec` as both handlers and an optional class
    /// registration.
    pub(crate) fn agent(
        &self,
        port: u8,
        rec: &Arc<Recorder>,
        reg: Option<RegReq>,
    ) -> Result<Arc<Agent>> {
        register_gsi(&self.engine, &self.transport, port, rec, reg)
    }

    /// Registers an agent of `qp_type` on `port` with `rec` as its send handler, as its
    /// receive handler too if `recv`, and an optional class registration.
    pub(crate) fn agent_of(
        &self,
        qp_type: QpType,
        port: u8,
        rec: &Arc<Recorder>,
        recv: bool,
        reg: Option<RegReq>,
    ) -> Result<Arc<Agent>> {
        register_qp(&self.engine, &self.transport, port, qp_type, rec, recv, reg)
    }

    /// Registers a responder for `class` (methods GET and SET) on `port` that answers every
    /// request.
    pub(crate) fn responder(&self, port: u8, class: u8) -> Result<(Arc<Agent>, Arc<Recorder>)> {
        let rec = Recorder::new(Behaviour {
            respond: true,
            ..Behaviour::default()
        })?;
        let a = self.agent(port, &rec, Some(reg(class)))?;
        Ok((a, rec))
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.lb.fabric.shutdown();
        self.engine.quiesce();
    }
}

/// Registers a GSI agent on `port` of `transport` with `rec` as both handlers.
pub(crate) fn register_gsi<H: SendHandler + RecvHandler + 'static>(
    engine: &Arc<Engine>,
    transport: &Arc<dyn Transport<Agent>>,
    port: u8,
    rec: &Arc<H>,
    reg: Option<RegReq>,
) -> Result<Arc<Agent>> {
    register_qp(engine, transport, port, QpType::Gsi, rec, true, reg)
}

/// Registers an agent of `qp_type` on `port` of `transport` with `rec` as its send handler,
/// as its receive handler too if `recv`, and an optional class registration.
pub(crate) fn register_qp<H: SendHandler + RecvHandler + 'static>(
    engine: &Arc<Engine>,
    transport: &Arc<dyn Transport<Agent>>,
    port: u8,
    qp_type: QpType,
    rec: &Arc<H>,
    recv: bool,
    reg: Option<RegReq>,
) -> Result<Arc<Agent>> {
    let recv_handler: Option<Arc<dyn RecvHandler>> = if recv { Some(rec.clone()) } else { None };
    Agent::register(
        engine,
        transport,
        AgentConfig {
            port,
            qp_type,
            reg,
            rmpp_version: 0,
            flags: 0,
            retry: Default::default(),
            send_handler: Some(rec.clone()),
            recv_handler,
        },
    )
}

/// Port 1 of `rxe0` and an agent on it whose handlers are `rec`; `None` without `rxe0`.
pub(crate) fn rxe_agent(rec: &Arc<Recorder>) -> Result<Option<(Arc<VerbsPort>, Arc<Agent>)>> {
    let Some(port) = verbs::find_port(c"rxe0", 1) else {
        return Ok(None);
    };
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port.clone();
    let a = register_gsi(&engine, &transport, 1, rec, None)?;
    Ok(Some((port, a)))
}

/// Waits (at most [`WAIT_MS`]) until the send `h` is in `state`.
pub(crate) fn wait_state(a: &Arc<Agent>, h: &SendHandle, state: SendState) -> bool {
    wait_for(|| a.send_state(h) == Some(state))
}

/// Waits (at most [`WAIT_MS`], polling every millisecond) until `cond` holds; returns whether
/// it does.
pub(crate) fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::<Monotonic>::now();
    while start.elapsed().as_millis() < WAIT_MS {
        if cond() {
            return true;
        }
        sleep_ms(1);
    }
    false
}

/// A registration for GET and SET requests of `class`, version 1.
pub(crate) fn reg(class: u8) -> RegReq {
    RegReq {
        mgmt_class: class,
        class_version: 1,
        oui: [0; 3],
        methods: (1 << wire::IB_MGMT_METHOD_GET) | (1 << wire::IB_MGMT_METHOD_SET),
    }
}

/// What [`block_queue`] returns: while it is shut, no agent work of its engine runs.
pub(crate) struct Gate {
    /// Opened with a store of 1.
    open: Arc<Atomic<i32>>,
    /// The engine whose queue it holds.
    engine: Arc<Engine>,
}

impl Gate {
    /// Lets the engine's work run again: the blocking item returns, and the queue runs as many
    /// items at once as before.
    pub(crate) fn open(&self) {
        self.open.store(1, Relaxed);
        self.engine.wq.set_max_active(DEFAULT_ACTIVE);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
    }
}

/// Keeps `engine`'s queue busy (so that no agent work and no send handler runs) until the
/// returned gate is opened: the queue runs one item at a time, and the first is one that waits
/// for the gate.
pub(crate) fn block_queue(engine: &Arc<Engine>) -> Result<Gate> {
    let open = Arc::new(Atomic::<i32>::new(0), GFP_KERNEL)?;
    let o2 = open.clone();
    engine.wq.set_max_active(1);
    let gate = Gate {
        open,
        engine: engine.clone(),
    };
    let started = Arc::new(Atomic::<bool>::new(false), GFP_KERNEL)?;
    let s2 = started.clone();
    engine
        .wq
        .queue()
        .try_spawn(GFP_KERNEL, move || {
            s2.store(true, Relaxed);
            while o2.load(Relaxed) == 0 {
                sleep_ms(1);
            }
        })
        .map_err(|_| ENOMEM)?;
    // Items queued before it may still be running: the queue is held once the blocker runs.
    if !wait_for(|| started.load(Relaxed)) {
        return Err(ETIMEDOUT);
    }
    Ok(gate)
}

/// Posts `buf`, turning a failure into its error.
pub(crate) fn post(buf: SendBuf) -> Result<SendHandle> {
    Agent::post(buf).map_err(|e| e.err)
}

/// Sleeps for `ms` milliseconds.
pub(crate) fn sleep_ms(ms: i64) {
    kernel::time::delay::fsleep(kernel::time::Delta::from_millis(ms));
}
