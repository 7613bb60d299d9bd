// SPDX-License-Identifier: GPL-2.0

//! rmad_sample_rust: a Rust driver that uses rmad through its exported API and the Rust
//! binding in `include/rmad_binding.rs`.
//!
//! At load, by default, it registers an agent on rxe0 port 1, sends four GET requests to QP1
//! of the same port (ib_core answers them), sends two SEND requests that nobody answers and
//! cancels them, waits for its send handler and reports what it saw. The test VM checks the
//! report.
//!
//! Across machines (`make test`'s two-node run):
//! - `serve=1` serves GETs of vendor class 0x0a on rxe0 until unloaded, answering each from its
//!   receive handler: the 32-bit number at byte 24 of the request, plus one. It also serves a
//!   table: a kernel-RMPP agent of vendor class 0x30 answers each GetTable with
//!   [`TABLE_RECORDS`] records in one RMPP transfer, which rmad segments and sends one window
//!   at a time.
//! - `peer=0x0a000102` (an IPv4 address as a number) sends 8 such GETs to that node's rxe0,
//!   through the IPv4-mapped GIDs, and checks each answer, then fetches the table with a
//!   kernel-RMPP agent (rmad reassembles it) and checks every record.

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
};

#[path = "../../include/rmad_binding.rs"]
#[allow(dead_code)]
mod rmad;

// Written for rmad's API 4.4 (Documentation/changes.md): refuse to build against another.
const _: () = assert!(
    rmad::API_VERSION_MAJOR == 4 && rmad::API_VERSION_MINOR >= 4,
    "rmad_sample_rust is written for rmad API 4.4"
);

module! {
    type: Sample,
    name: "rmad_sample_rust",
    authors: ["rmad developers"],
    description: "rmad sample: a Rust driver using rmad's exported API",
    license: "GPL",
    params: {
        peer: u32 {
            default: 0,
            description: "IPv4 address (10.0.1.2 = 0x0a000102) of a node serving vendor class 0x0a",
        },
        serve: bool {
            default: false,
            description: "serve GETs of vendor class 0x0a on rxe0 until unloaded",
        },
    },
}

const N_GET: i32 = 4;
const N_CANCEL: i32 = 2;
/// A SEND nobody answers, with more retries than its deadline lets it use: it ends with
/// `RESP_TIMEOUT_ERR` by the deadline, retries left.
const LATE_RETRIES: i32 = 1000;
const LATE_DEADLINE_MS: u32 = 500;

/// What the handlers saw.
struct Counts {
    done: Atomic<i32>,
    succeeded: Atomic<i32>,
    flushed: Atomic<i32>,
    /// Sends that their deadline ended with retries left.
    ended_by_deadline: Atomic<i32>,
    other: Atomic<i32>,
    responses: Atomic<i32>,
    /// Answers from the vendor-class service that carry the right number.
    good: Atomic<i32>,
}

impl Counts {
    /// All zero.
    fn new() -> Self {
        Self {
            done: Atomic::new(0),
            succeeded: Atomic::new(0),
            flushed: Atomic::new(0),
            ended_by_deadline: Atomic::new(0),
            other: Atomic::new(0),
            responses: Atomic::new(0),
            good: Atomic::new(0),
        }
    }
}

/// The vendor class the two-node service uses, and the byte its number is at.
const SERVICE_CLASS: u8 = 0x0a;
const SERVICE_DATA: usize = 24;
/// GETs sent to a peer, and the number the first carries.
const N_PEER: u32 = 8;
const FIRST_NUMBER: u32 = 100;

/// The table service: a vendor class of range 2 (it uses RMPP and carries an OUI, here a
/// made-up one, at bytes 37-39), method GetTable, [`TABLE_RECORDS`] records of [`RECORD_SIZE`]
/// bytes (see [`table_record`]): 4 800 bytes, 23 segments of 216.
const TABLE_CLASS: u8 = 0x30;
const TABLE_OUI_AT: usize = 37;
const TABLE_OUI: [u8; 3] = [0x00, 0x12, 0x34];
const TABLE_METHOD: u8 = 0x12;
const TABLE_RECORDS: usize = 300;
const RECORD_SIZE: usize = 16;

/// Record `i` of the table: `i` and `i * i` (32 bits each, big-endian), 8 bytes of `i` (mod
/// 256).
fn table_record(i: u32) -> [u8; RECORD_SIZE] {
    let mut r = [i.to_le_bytes()[0]; RECORD_SIZE];
    r[..4].copy_from_slice(&i.to_be_bytes());
    r[4..8].copy_from_slice(&i.wrapping_mul(i).to_be_bytes());
    r
}

/// Whether `data` is the whole table.
fn table_right(data: &[u8]) -> bool {
    data.len() == RECORD_SIZE * TABLE_RECORDS
        && (0u32..)
            .zip(data.chunks(RECORD_SIZE))
            .all(|(i, r)| r == table_record(i))
}

/// The big-endian 32-bit number at byte `at` of `mad` (0 if it is too short).
fn number(mad: &[u8], at: usize) -> u32 {
    mad.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

impl rmad::Client for Counts {
    fn send_done(&self, done: rmad::SendDone) {
        // The completion carries the buffer's context: the one a lookup through it returns.
        let c = match done.status {
            _ if done.context != done.buf.context() => &self.other,
            rmad::wc_status::SUCCESS => &self.succeeded,
            rmad::wc_status::WR_FLUSH_ERR => &self.flushed,
            rmad::wc_status::RESP_TIMEOUT_ERR
                if done
                    .buf
                    .retries()
                    .is_ok_and(|r| r > 0 && r < LATE_RETRIES.unsigned_abs()) =>
            {
                &self.ended_by_deadline
            }
            _ => &self.other,
        };
        c.add(1, Relaxed);
        // Freed here, like a C client frees in its handler.
        drop(done.buf);
        self.done.add(1, Relaxed);
    }

    fn recv(&self, r: rmad::Received<'_>) {
        let mad = r.mad();
        if !r.matched() || mad.get(3).is_none_or(|m| m & rmad::mgmt::METHOD_RESP == 0) {
            return;
        }
        self.responses.add(1, Relaxed);
        // A service answer: status 0, and the number of the request it matched (that send's
        // context) plus one.
        let asked = r.matched_context().and_then(|c| u32::try_from(c).ok());
        if mad.get(1) == Some(&SERVICE_CLASS)
            && mad.get(4..6) == Some(&[0, 0][..])
            && asked.is_some_and(|n| number(mad, SERVICE_DATA) == n.wrapping_add(1))
        {
            self.good.add(1, Relaxed);
        }
    }
}

/// The longest a GET may take, retries included.
const GET_DEADLINE_MS: u32 = 20_000;

/// A request of `class` with `method` to QP1 of `ah`, carrying `FIRST_NUMBER + lo`.
fn request(
    agent: &rmad::Agent<Counts>,
    ah: &rmad::Ah,
    class: u8,
    lo: u32,
    method: u8,
    timeout_ms: i32,
    retries: i32,
) -> Result<rmad::SendBuf> {
    let mut buf = agent.create_send(1)?;
    let tid = (u64::from(agent.hi_tid()) << 32) | u64::from(lo);
    let mad = buf.mad_mut();
    if let Some(h) = mad.get_mut(0..16) {
        h[..4].copy_from_slice(&[1, class, 1, method]);
        h[8..16].copy_from_slice(&tid.to_be_bytes());
    }
    let n = FIRST_NUMBER + lo;
    if let Some(d) = mad.get_mut(SERVICE_DATA..SERVICE_DATA + 4) {
        d.copy_from_slice(&n.to_be_bytes());
    }
    // The send's own context: the number, to check its answer against.
    buf.set_with_context(ah, timeout_ms, retries, usize::try_from(n)?)?;
    if method == rmad::mgmt::METHOD_GET {
        // A GET gives up by its deadline, however many retries it has left, and backs off
        // from a responder that does not keep up.
        buf.set_retry(&rmad::Retry {
            backoff: true,
            deadline_ms: GET_DEADLINE_MS,
            ..Default::default()
        })?;
    }
    Ok(buf)
}

/// Waits (at most 30 s) until the handlers have seen `n` completions.
fn wait_done(counts: &Counts, n: i32) {
    let mut waited = 0;
    while counts.done.load(Relaxed) < n && waited < 3000 {
        fsleep(Delta::from_millis(10));
        waited += 1;
    }
}

/// Sends `N_PEER` service GETs to the node with IPv4 address `peer`, then fetches its table;
/// returns (answered, good answers, table records right).
fn run_peer(peer: u32) -> Result<(i32, i32, i32)> {
    // The source: rxe0's IPv4-mapped GID (RoCEv2 over IPv4 needs both ends IPv4).
    let prefix = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
    let sgid_index = (0..16u8)
        .find(|&i| rmad::port_gid(c"rxe0", 1, i32::from(i)).is_ok_and(|g| g[..12] == prefix))
        .ok_or(ENODEV)?;
    let mut dgid = [0u8; 16];
    dgid[..12].copy_from_slice(&prefix);
    dgid[12..].copy_from_slice(&peer.to_be_bytes());
    let ah = rmad::Ah {
        has_grh: 1,
        sgid_index,
        dgid,
        ..rmad::Ah::default()
    };
    let agent = rmad::Agent::register(c"rxe0", 1, Counts::new())?;
    // Resolved once here, in process context, as `rdma_create_ah` callers do.
    agent.resolve(&ah)?;
    for i in 0..N_PEER {
        // A buffer that does not post is dropped (freed) with its error.
        request(
            &agent,
            &ah,
            SERVICE_CLASS,
            i,
            rmad::mgmt::METHOD_GET,
            3000,
            2,
        )?
        .post()
        .map_err(|(e, _)| e)?;
    }
    let counts = agent.client();
    wait_done(counts, N_PEER.try_into()?);
    let figures = (counts.succeeded.load(Relaxed), counts.good.load(Relaxed));
    drop(agent);
    Ok((figures.0, figures.1, fetch_table(&ah)?))
}

/// What the table fetch's handlers saw.
struct TableFetch {
    done: Atomic<i32>,
    /// The records that came right ([`TABLE_RECORDS`] or 0).
    records: Atomic<i32>,
}

impl rmad::Client for TableFetch {
    fn send_done(&self, done: rmad::SendDone) {
        if done.status != rmad::wc_status::SUCCESS {
            pr_info!("the GetTable ended with status {}\n", done.status);
        }
        self.done.add(1, Relaxed);
    }

    /// The answer comes whole: rmad reassembled its segments into one MAD.
    fn recv(&self, r: rmad::Received<'_>) {
        let mad = r.mad();
        let off = usize::try_from(rmad::data_offset(TABLE_CLASS)).unwrap_or(usize::MAX);
        if r.matched()
            && mad.get(1) == Some(&TABLE_CLASS)
            && mad.get(3) == Some(&(TABLE_METHOD | rmad::mgmt::METHOD_RESP))
            && mad.get(4..6) == Some(&[0, 0][..])
            && mad.get(off..).is_some_and(table_right)
        {
            self.records
                .store(i32::try_from(TABLE_RECORDS).unwrap_or(0), Relaxed);
        }
    }
}

/// Fetches the table from QP1 at `ah` with a kernel-RMPP agent; returns the records that came
/// right.
fn fetch_table(ah: &rmad::Ah) -> Result<i32> {
    let fetch = TableFetch {
        done: Atomic::new(0),
        records: Atomic::new(0),
    };
    let agent = rmad::Agent::register_rmpp(c"rxe0", 1, None, fetch)?;
    let mut buf = agent.create_send(1)?;
    let tid = u64::from(agent.hi_tid()) << 32;
    let mad = buf.mad_mut();
    if let Some(h) = mad.get_mut(0..16) {
        h[..4].copy_from_slice(&[1, TABLE_CLASS, 1, TABLE_METHOD]);
        h[8..16].copy_from_slice(&tid.to_be_bytes());
    }
    if let Some(oui) = mad.get_mut(TABLE_OUI_AT..TABLE_OUI_AT + 3) {
        oui.copy_from_slice(&TABLE_OUI);
    }
    // The timeout covers the whole transfer: the answer counts once it is all here.
    buf.set(ah, 10_000, 2)?;
    buf.post().map_err(|(e, _)| e)?;
    let client = agent.client();
    let mut waited = 0;
    while client.done.load(Relaxed) == 0 && waited < 6000 {
        fsleep(Delta::from_millis(10));
        waited += 1;
    }
    Ok(client.records.load(Relaxed))
}

/// Runs the sample; returns the number of failed checks.
fn run() -> Result<(i32, i32, i32, i32, i32)> {
    let gid = rmad::port_gid(c"rxe0", 1, 1)?;
    let ah = rmad::Ah {
        has_grh: 1,
        sgid_index: 1,
        dgid: gid,
        ..rmad::Ah::default()
    };
    // Its buffers back off by default; the GETs add a deadline each (`request`).
    let backoff = rmad::Retry {
        backoff: true,
        ..Default::default()
    };
    let agent = rmad::Agent::register_with_retry(c"rxe0", 1, &backoff, Counts::new())?;
    let mut bad = 0;
    // A deadline is per buffer: an agent's default with one is refused.
    let with_deadline = rmad::Retry {
        deadline_ms: 1000,
        ..Default::default()
    };
    if rmad::Agent::register_with_retry(c"rxe0", 1, &with_deadline, Counts::new()).err()
        != Some(EINVAL)
    {
        bad += 1;
    }
    for i in 0..4u32 {
        if request(
            &agent,
            &ah,
            rmad::mgmt::CLASS_PERF_MGMT,
            i,
            rmad::mgmt::METHOD_GET,
            5000,
            0,
        )?
        .post()
        .is_err()
        {
            bad += 1;
        }
    }
    let mut posted = KVec::new();
    for i in 0..2u32 {
        match request(
            &agent,
            &ah,
            rmad::mgmt::CLASS_PERF_MGMT,
            100 + i,
            rmad::mgmt::METHOD_SEND,
            60_000,
            0,
        )?
        .post()
        {
            Ok(p) => posted.push(p, GFP_KERNEL)?,
            Err(_) => bad += 1,
        }
    }
    for p in posted.iter() {
        if p.cancel().is_err() {
            bad += 1;
        }
    }
    // A SEND with a deadline: it ends by then, retries left.
    let mut late = request(
        &agent,
        &ah,
        rmad::mgmt::CLASS_PERF_MGMT,
        200,
        rmad::mgmt::METHOD_SEND,
        100,
        LATE_RETRIES,
    )?;
    late.set_retry(&rmad::Retry {
        deadline_ms: LATE_DEADLINE_MS,
        ..Default::default()
    })?;
    if late.post().is_err() {
        bad += 1;
    }
    let counts = agent.client();
    wait_done(counts, N_GET + N_CANCEL + 1);
    if counts.ended_by_deadline.load(Relaxed) != 1 {
        bad += 1;
    }
    // The handler has freed them: the handles are stale now.
    for p in posted.iter() {
        if p.cancel() != Err(EINVAL) {
            bad += 1;
        }
    }
    let r = (
        counts.succeeded.load(Relaxed),
        counts.responses.load(Relaxed),
        counts.flushed.load(Relaxed),
        counts.other.load(Relaxed),
        bad,
    );
    drop(agent);
    Ok(r)
}

/// The vendor-class service: answers each GET from its receive handler.
struct Server {
    answered: Atomic<i32>,
}

impl rmad::Client for Server {
    fn send_done(&self, _done: rmad::SendDone) {
        // An answer went out (or failed); dropping the buffer frees it.
    }

    fn recv(&self, r: rmad::Received<'_>) {
        if r.matched() {
            return;
        }
        let n = number(r.mad(), SERVICE_DATA).wrapping_add(1);
        let Ok(mut answer) = r.reply() else {
            return;
        };
        if let Some(d) = answer.mad_mut().get_mut(SERVICE_DATA..SERVICE_DATA + 4) {
            d.copy_from_slice(&n.to_be_bytes());
        }
        if answer.post().is_ok() {
            self.answered.add(1, Relaxed);
        }
    }
}

/// The table service: answers each GetTable from its receive handler with one RMPP transfer.
struct TableServer {
    /// Tables sent whole (every segment ACKed).
    tables: Atomic<i32>,
}

impl TableServer {
    /// The answer to the GetTable `r`: the table in one RMPP buffer, not posted.
    fn answer(r: &rmad::Received<'_>) -> Result<rmad::SendBuf> {
        let mut table = KVec::with_capacity(RECORD_SIZE * TABLE_RECORDS, GFP_KERNEL)?;
        for i in (0u32..).take(TABLE_RECORDS) {
            table.extend_from_slice(&table_record(i), GFP_KERNEL)?;
        }
        // No response to a response: each window waits for its ACK, sent again twice at most.
        let mut answer = r.reply_rmpp(i32::try_from(table.len())?, 2)?;
        answer
            .mad_mut()
            .get_mut(TABLE_OUI_AT..TABLE_OUI_AT + 3)
            .ok_or(EINVAL)?
            .copy_from_slice(&TABLE_OUI);
        answer.fill_segments(&table)?;
        Ok(answer)
    }
}

impl rmad::Client for TableServer {
    fn send_done(&self, done: rmad::SendDone) {
        if done.status == rmad::wc_status::SUCCESS {
            self.tables.add(1, Relaxed);
        }
    }

    fn recv(&self, r: rmad::Received<'_>) {
        if r.matched() {
            return;
        }
        if let Ok(answer) = Self::answer(&r) {
            // A buffer that does not post is dropped (freed).
            let _ = answer.post();
        }
    }
}

/// The module: the services' agents while `serve=1`.
struct Sample {
    server: Option<(rmad::Agent<Server>, rmad::Agent<TableServer>)>,
}

impl Drop for Sample {
    fn drop(&mut self) {
        if let Some((agent, table)) = self.server.take() {
            // Unregistered before the report: every answer has completed.
            let n = agent.client().answered.load(Relaxed);
            drop(agent);
            let t = table.client().tables.load(Relaxed);
            drop(table);
            pr_info!("served {} and {} tables\n", n, t);
        }
    }
}

impl kernel::Module for Sample {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        if module_parameters::serve.value() {
            let reg = rmad::RegReq {
                mgmt_class: SERVICE_CLASS,
                mgmt_class_version: 1,
                method_mask: [1 << rmad::mgmt::METHOD_GET, 0],
                ..rmad::RegReq::default()
            };
            let server = Server {
                answered: Atomic::new(0),
            };
            let agent = rmad::Agent::register_class(c"rxe0", 1, &reg, server)?;
            let table_reg = rmad::RegReq {
                mgmt_class: TABLE_CLASS,
                mgmt_class_version: 1,
                oui: TABLE_OUI,
                method_mask: [1 << TABLE_METHOD, 0],
            };
            let tables = TableServer {
                tables: Atomic::new(0),
            };
            // Kernel RMPP: rmad segments the answers.
            let table = rmad::Agent::register_rmpp(c"rxe0", 1, Some(&table_reg), tables)?;
            pr_info!(
                "serving class {:#04x} and a table of class {:#04x}\n",
                SERVICE_CLASS,
                TABLE_CLASS
            );
            return Ok(Sample {
                server: Some((agent, table)),
            });
        }
        let peer = module_parameters::peer.value();
        if peer != 0 {
            match run_peer(peer) {
                Ok((ok, good, records)) => {
                    let want = i32::try_from(N_PEER)?;
                    let pass =
                        ok == want && good == want && records == i32::try_from(TABLE_RECORDS)?;
                    pr_info!(
                        "{}: peer {:#010x}: {} answered, {} right answers, table of {} records \
                         right\n",
                        if pass { "PASS" } else { "FAIL" },
                        peer,
                        ok,
                        good,
                        records
                    );
                }
                Err(e) => pr_info!("FAIL: peer {:#010x}: {:?}\n", peer, e),
            }
            return Ok(Sample { server: None });
        }
        match run() {
            Ok((ok, resp, flushed, other, bad)) => {
                let pass =
                    ok == N_GET && resp == N_GET && flushed == N_CANCEL && other == 0 && bad == 0;
                pr_info!(
                    "{}: {} answered ({} responses), {} cancelled, {} other, {} bad checks\n",
                    if pass { "PASS" } else { "FAIL" },
                    ok,
                    resp,
                    flushed,
                    other,
                    bad
                );
            }
            Err(e) => pr_info!("FAIL: {:?}\n", e),
        }
        Ok(Sample { server: None })
    }
}
