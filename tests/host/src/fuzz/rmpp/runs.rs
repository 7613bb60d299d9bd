// SPDX-License-Identifier: GPL-2.0

//! The three runs of the `rmpp` target (garbage, window, channel) and the random values they
//! draw; each compares rmad's machines with the models of [`super`] at every step.

use super::{
    ref_sizing,
    to_u32,
    Coverage,
    ModelRx,
    ModelTx,
    ACTIVE,
    FIRST,
    LAST, //
};
use crate::fuzz::Rng;
use crate::mad::rmpp::recv::{
    Config,
    Phase,
    Transfer,
    Verdict,
    MAX_WINDOW, //
};
use crate::mad::rmpp::send::{
    AckVerdict,
    AfterSend,
    Sizing,
    Timeout,
    Window, //
};
use crate::mad::rmpp::{
    Ack,
    RmppHdr,
    Status, //
};
use std::format;
use std::string::String;
use std::vec::Vec;

// ---------------------------------------------------------------------------------------------
// Random values.

/// A window: mostly small or C's, sometimes anything allowed.
fn random_window(rng: &mut Rng) -> u32 {
    if rng.chance(3, 4) {
        rng.pick(&[1, 2, 3, 4, 5, 8, 16, 63, 64, 65, 128, 1024])
    } else {
        1 + u32::try_from(rng.below(u64::from(MAX_WINDOW))).unwrap_or(0)
    }
}

/// A class header size: the real ones, or anything a `Config` takes.
fn random_hdr(rng: &mut Rng) -> usize {
    if rng.chance(3, 4) {
        rng.pick(&[36, 40, 56, 64])
    } else {
        36 + rng.index(220)
    }
}

/// A PayloadLength near the interesting values.
fn random_paylen(rng: &mut Rng, count_hint: u32) -> u32 {
    let k = u32::try_from(rng.below(u64::from(count_hint) + 2)).unwrap_or(0);
    match rng.below(6) {
        0 => 0,
        1 => k.saturating_mul(220),
        2 => k
            .saturating_mul(220)
            .saturating_sub(u32::try_from(rng.below(221)).unwrap_or(0)),
        3 => u32::try_from(rng.below(260)).unwrap_or(0),
        4 => rng.edgy_u32(),
        _ => 220 - u32::try_from(rng.below(221)).unwrap_or(0),
    }
}

/// A random DATA segment, often plausible for a receiver in `m`'s state.
fn random_segment(rng: &mut Rng, m: Option<&ModelRx>) -> RmppHdr {
    let (frontier, newwin, count) = match m {
        Some(m) => (m.frontier(), m.newwin, m.count.unwrap_or(m.newwin)),
        None => (0, 1, 10),
    };
    let near =
        |rng: &mut Rng, base: i64| to_u32(base + i64::try_from(rng.below(9)).unwrap_or(0) - 4);
    let seg_num = match rng.below(8) {
        0 => 1,
        1 => to_u32(frontier + 1),
        2 => near(rng, frontier),
        3 => near(rng, newwin),
        4 => near(rng, count),
        5 => rng.edgy_u32(),
        6 => rng.pick(&[0, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF]),
        _ => to_u32(frontier + 1 + i64::try_from(rng.below(70)).unwrap_or(0)),
    };
    let mut flags = ACTIVE;
    if (seg_num == 1) != rng.chance(1, 16) {
        flags |= FIRST;
    }
    if i64::from(seg_num) == count || rng.chance(1, 8) {
        flags |= LAST;
    }
    if rng.chance(1, 16) {
        flags = rng.byte() & 0x7;
    }
    RmppHdr {
        version: 1,
        rmpp_type: 1,
        resp_time: rng.byte() & 0x1F,
        flags,
        status: if rng.chance(1, 16) { rng.byte() } else { 0 },
        seg_num,
        paylen_newwin: random_paylen(rng, to_u32(count)),
    }
}

/// A random segment limit, often small enough to be reached.
fn random_max(rng: &mut Rng) -> u32 {
    if rng.chance(1, 2) {
        rng.pick(&[1, 2, 3, 5, 10, 64, 100, 1000])
    } else {
        1 + u32::try_from(rng.below(3000)).unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------------
// The three runs.

/// Compares one receiver step: the verdicts, then the state.
fn same(what: &str, mine: Verdict, model: Verdict) -> Result<(), String> {
    if mine != model {
        return Err(format!("{what}: rmad {mine:?}, model {model:?}"));
    }
    Ok(())
}

/// Garbage: random segments against the receiver model.
fn run_garbage(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    let window = random_window(rng);
    let hdr = random_hdr(rng);
    let max = random_max(rng);
    garbage(rng, window, hdr, max, cov)
        .map_err(|e| format!("garbage, Config::new({window}, {hdr}, {max}): {e}"))
}

/// One garbage run on a receiver configured with `window`, `hdr` and `max`.
fn garbage(
    rng: &mut Rng,
    window: u32,
    hdr: usize,
    max: u32,
    cov: &mut Coverage,
) -> Result<(), String> {
    let cfg = Config::new(window, hdr, max).ok_or("Config refused a valid configuration")?;
    let mut pair: Option<(Transfer, ModelRx)> = None;
    let steps = 1 + rng.below(200);
    for k in 0..steps {
        let h = random_segment(rng, pair.as_ref().map(|(_, m)| m));
        let ctx = |s: &str| format!("step {k}, {s} {h:?}");
        match &mut pair {
            None => {
                let mine = Transfer::start(cfg, &h);
                let model = ModelRx::start(window, hdr, max, &h);
                match (mine, model) {
                    (Ok((t, v)), Ok((m, mv))) => {
                        same(&ctx("start"), v, mv)?;
                        cov.verdict(&v);
                        m.agrees(&t, h.seg_num).map_err(|e| ctx(&e))?;
                        pair = Some((t, m));
                    }
                    (Err(v), Err(mv)) => {
                        same(&ctx("refused start"), v, mv)?;
                        cov.verdict(&v);
                    }
                    (mine, model) => {
                        return Err(ctx(&format!(
                            "start: rmad {:?}, model {:?}",
                            mine.map(|(_, v)| v),
                            model.map(|(_, v)| v)
                        )))
                    }
                }
            }
            Some((t, m)) => {
                let (v, mv) = if rng.chance(1, 50) {
                    (t.expire(), m.expire())
                } else {
                    (t.on_segment(&h), m.segment(&h))
                };
                same(&ctx("segment"), v, mv)?;
                cov.verdict(&v);
                let probe = if rng.chance(1, 2) {
                    h.seg_num
                } else {
                    to_u32(m.frontier() + i64::try_from(rng.below(5)).unwrap_or(0))
                };
                m.agrees(t, probe).map_err(|e| ctx(&e))?;
                // The caller drops an ended transfer, and sometimes a completed one (its
                // linger is over); the next FIRST starts afresh.
                let gone = match t.phase() {
                    Phase::Ended => rng.chance(3, 4),
                    Phase::Complete => rng.chance(1, 8),
                    Phase::Active => false,
                };
                if gone {
                    pair = None;
                }
            }
        }
    }
    Ok(())
}

/// A random ACK header for a sender in `m`'s state.
fn random_ack(rng: &mut Rng, m: &ModelTx) -> RmppHdr {
    let around =
        |rng: &mut Rng, base: i64| to_u32(base + i64::try_from(rng.below(7)).unwrap_or(0) - 3);
    let seg = match rng.below(5) {
        0 => around(rng, m.last_ack),
        1 => around(rng, m.sent),
        2 => around(rng, m.count),
        3 => rng.edgy_u32(),
        _ => to_u32(m.last_ack + i64::try_from(rng.below(70)).unwrap_or(0)),
    };
    let win = match rng.below(5) {
        0 => around(rng, m.newwin),
        1 => seg.saturating_add(u32::try_from(rng.below(70)).unwrap_or(0)),
        2 => around(rng, i64::from(seg)),
        3 => rng.edgy_u32(),
        _ => to_u32(m.count + i64::try_from(rng.below(5)).unwrap_or(0)),
    };
    RmppHdr {
        version: 1,
        rmpp_type: 2,
        flags: ACTIVE,
        status: if rng.chance(1, 16) { rng.byte() } else { 0 },
        seg_num: seg,
        paylen_newwin: win,
        ..RmppHdr::default()
    }
}

/// Window: random calls against the sender model.
fn run_window(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    let count = if rng.chance(3, 4) {
        1 + u32::try_from(rng.below(40)).unwrap_or(0)
    } else {
        rng.edgy_u32()
    };
    let pad = if rng.chance(3, 4) {
        u32::try_from(rng.below(221)).unwrap_or(0)
    } else {
        rng.edgy_u32()
    };
    let retries = u32::try_from(rng.below(5)).unwrap_or(0);
    let repwin = if rng.chance(1, 2) {
        None
    } else {
        Some(rng.edgy_u32())
    };
    let mine = Window::new(count, pad, retries, repwin);
    let model = ModelTx::new(count, pad, retries, repwin);
    let (mut w, mut m) = match (mine, model) {
        (None, None) => return Ok(()),
        (Some(w), Some(m)) => (w, m),
        (w, m) => {
            return Err(format!(
                "Window::new({count}, {pad}, {retries}, {repwin:?}): rmad {}, model {}",
                w.is_some(),
                m.is_some()
            ))
        }
    };
    m.agrees(&w)?;
    for k in 0..1 + rng.below(120) {
        let what = match rng.below(7) {
            0 => {
                let (a, b) = (w.next(), m.next());
                (a != b).then(|| format!("next: rmad {a:?}, model {b:?}"))
            }
            6 => {
                let (a, b) = (w.probe(), m.probe());
                (a != b).then(|| format!("probe: rmad {a:?}, model {b:?}"))
            }
            1 => {
                let (a, b) = (w.after_send(), m.after_send());
                (a != b).then(|| format!("after_send: rmad {a:?}, model {b:?}"))
            }
            2 => {
                let (a, b) = (w.on_timeout(), m.on_timeout());
                cov.timeout(&a);
                (a != b).then(|| format!("on_timeout: rmad {a:?}, model {b:?}"))
            }
            3 => {
                let n = match rng.below(3) {
                    0 => 1,
                    1 => to_u32(m.count),
                    _ => rng.edgy_u32(),
                };
                let (a, b) = (w.segment(n), m.segment(n));
                (a != b).then(|| format!("segment({n}): rmad {a:?}, model {b:?}"))
            }
            _ => {
                let h = random_ack(rng, &m);
                let (a, b) = (w.on_ack(&h), m.on_ack(&h));
                cov.ack(&a);
                (a != b).then(|| format!("on_ack({h:?}): rmad {a:?}, model {b:?}"))
            }
        };
        if let Some(what) = what {
            return Err(format!(
                "window, call {k} on Window::new({count}, {pad}, {retries}, {repwin:?}): {what}"
            ));
        }
        m.agrees(&w).map_err(|e| format!("call {k}: {e}"))?;
    }
    Ok(())
}

/// A packet in the channel.
#[derive(Clone, Copy, Debug)]
enum Pkt {
    /// DATA segment n, from the sender.
    Seg(u32),
    /// An ACK, from the receiver.
    Ack(Ack),
    /// A STOP or ABORT, from the receiver.
    Stop(Status),
}

/// The parameters of one channel run.
#[derive(Clone, Copy, Debug)]
struct Channel {
    hdr: usize,
    data_len: usize,
    window: u32,
    max: u32,
    retries: u32,
    repwin: Option<u32>,
    /// Losses, duplicates, early timeouts, per 1000 packets.
    loss: u64,
    dup: u64,
    early: u64,
    /// Packets are taken in random order, not first-in first-out.
    reorder: bool,
}

/// Byte `i` of the message a channel run sends.
fn message_byte(i: usize) -> u8 {
    u8::try_from(i.wrapping_mul(131).wrapping_add(7) % 251).unwrap_or(0)
}

/// Channel: a sender and a receiver over a lossy channel.
fn run_channel(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    let hdr = random_hdr(rng);
    let seg_size = 256 - hdr;
    let segments = if rng.chance(3, 4) {
        1 + rng.index(12)
    } else {
        1 + rng.index(300)
    };
    let data_len = (segments - 1) * seg_size + rng.index(seg_size + 1);
    let c = Channel {
        hdr,
        data_len,
        window: random_window(rng),
        max: if rng.chance(7, 8) {
            3000
        } else {
            random_max(rng)
        },
        retries: u32::try_from(rng.below(12)).unwrap_or(0),
        repwin: if rng.chance(7, 8) {
            None
        } else {
            Some(rng.edgy_u32())
        },
        loss: if segments <= 12 {
            rng.pick(&[0, 0, 10, 50, 200, 500])
        } else {
            rng.pick(&[0, 0, 10, 50])
        },
        dup: rng.pick(&[0, 0, 10, 100, 300]),
        early: rng.pick(&[0, 0, 0, 5, 20]),
        reorder: rng.chance(1, 2),
    };
    channel(rng, c, cov).map_err(|e| format!("channel, {c:?}: {e}"))
}

/// One channel run with the parameters `c`.
fn channel(rng: &mut Rng, c: Channel, cov: &mut Coverage) -> Result<(), String> {
    let sizing = Sizing::new(c.hdr, c.data_len).ok_or("Sizing refused an RMPP size")?;
    let reference = ref_sizing(c.hdr, c.data_len);
    if Some((sizing.seg_size, sizing.seg_count, sizing.pad)) != reference {
        return Err(format!("sizing: rmad {sizing:?}, model {reference:?}"));
    }
    let count = sizing.seg_count;
    let mut tx = Window::new(count, sizing.pad, c.retries, c.repwin).ok_or("Window refused")?;
    let mut mtx = ModelTx::new(count, sizing.pad, c.retries, c.repwin).ok_or("model refused")?;
    let cfg = Config::new(c.window, c.hdr, c.max).ok_or("Config refused")?;
    let mut rx: Option<(Transfer, ModelRx)> = None;

    let message: Vec<u8> = (0..c.data_len).map(message_byte).collect();
    let total = usize::try_from(count).unwrap_or(0) * sizing.seg_size;
    let mut buf = std::vec![0xA5u8; total];
    let mut copies = std::vec![0u32; usize::try_from(count).unwrap_or(0) + 1];
    let mut flight: Vec<Pkt> = Vec::new();
    let (mut delivered, mut acks, mut moving_acks) = (0u64, 0u64, 0u64);
    let mut completed: Option<usize> = None;
    let mut ended = false;
    let mut rejected = false;
    let mut first_delivered = false;
    let mut last_ack = 0u32;

    // Sends what the window allows: C sends one segment per completion, which is the same.
    let pump = |tx: &mut Window, mtx: &mut ModelTx, flight: &mut Vec<Pkt>| loop {
        let (a, b) = (tx.after_send(), mtx.after_send());
        if a != b {
            return Err(format!("after_send: rmad {a:?}, model {b:?}"));
        }
        match a {
            AfterSend::Send(n) => flight.push(Pkt::Seg(n)),
            _ => return Ok(()),
        }
    };
    pump(&mut tx, &mut mtx, &mut flight)?;

    // Every timeout uses a retry unless an ACK made progress, so the run ends; this is a
    // ceiling far above that bound's typical use.
    let budget = 10_000 + 4 * (u64::from(c.retries) + 2) * (u64::from(count) + 1).pow(2);
    let mut step = 0u64;
    while !ended {
        step += 1;
        if step > budget {
            return Err(format!("no end after {budget} steps"));
        }
        let early = !flight.is_empty() && rng.below(1000) < c.early;
        if flight.is_empty() || early {
            if tx.all_acked() {
                break;
            }
            let (a, b) = (tx.on_timeout(), mtx.on_timeout());
            cov.timeout(&a);
            if a != b {
                return Err(format!("on_timeout: rmad {a:?}, model {b:?}"));
            }
            match a {
                Timeout::Retry { from } => {
                    flight.push(Pkt::Seg(from));
                    pump(&mut tx, &mut mtx, &mut flight)?;
                }
                Timeout::NoResponse => return Err(String::from("NoResponse before all ACKed")),
                Timeout::Fail => break,
            }
            continue;
        }
        let i = if c.reorder {
            rng.index(flight.len())
        } else {
            0
        };
        let p = flight.remove(i);
        if rng.below(1000) < c.dup && flight.len() < 4096 {
            flight.push(p);
        }
        if rng.below(1000) < c.loss {
            continue;
        }
        match p {
            Pkt::Seg(n) => {
                delivered += 1;
                first_delivered |= n == 1;
                let s = tx
                    .segment(n)
                    .ok_or("the window sent a segment it has not")?;
                if Some(s) != mtx.segment(n) {
                    return Err(format!(
                        "segment({n}): rmad {s:?}, model {:?}",
                        mtx.segment(n)
                    ));
                }
                let h = RmppHdr {
                    version: 1,
                    rmpp_type: 1,
                    flags: s.flags,
                    seg_num: n,
                    paylen_newwin: s.paylen,
                    ..RmppHdr::default()
                };
                let v = match &mut rx {
                    None => {
                        let mine = Transfer::start(cfg, &h);
                        let model = ModelRx::start(c.window, c.hdr, c.max, &h);
                        match (mine, model) {
                            (Ok((t, v)), Ok((m, mv))) => {
                                same("start", v, mv)?;
                                m.agrees(&t, n)?;
                                rx = Some((t, m));
                                v
                            }
                            (Err(v), Err(mv)) => {
                                same("refused start", v, mv)?;
                                v
                            }
                            (a, b) => {
                                return Err(format!(
                                    "start: rmad {:?}, model {:?}",
                                    a.map(|(_, v)| v),
                                    b.map(|(_, v)| v)
                                ))
                            }
                        }
                    }
                    Some((t, m)) => {
                        let (v, mv) = (t.on_segment(&h), m.segment(&h));
                        same(&format!("segment {n}"), v, mv)?;
                        m.agrees(t, n)?;
                        v
                    }
                };
                cov.verdict(&v);
                let stored = match v {
                    Verdict::Store { n } => Some((n, None)),
                    Verdict::StoreAndAck { n, ack } | Verdict::Complete { n, ack, .. } => {
                        Some((n, Some(ack)))
                    }
                    Verdict::Ack(a) => {
                        flight.push(Pkt::Ack(a));
                        acks += 1;
                        None
                    }
                    Verdict::Drop => None,
                    Verdict::Reject(s) => {
                        flight.push(Pkt::Stop(s));
                        rejected = true;
                        None
                    }
                };
                if let Some((k, ack)) = stored {
                    if k != n {
                        return Err(format!("verdict for segment {n} names {k}"));
                    }
                    let slot = copies
                        .get_mut(usize::try_from(n).unwrap_or(usize::MAX))
                        .ok_or("stored a segment beyond the count")?;
                    *slot += 1;
                    let at = cfg.offset(n).ok_or("no offset for a stored segment")?;
                    let from = usize::try_from(n - 1).unwrap_or(0) * sizing.seg_size;
                    for j in 0..sizing.seg_size {
                        let byte = message.get(from + j).copied().unwrap_or(0);
                        *buf.get_mut(at + j).ok_or("offset beyond the message")? = byte;
                    }
                    if let Some(a) = ack {
                        flight.push(Pkt::Ack(a));
                        acks += 1;
                        moving_acks += 1;
                    }
                }
                if let Verdict::Complete { len, .. } = v {
                    completed = Some(len);
                }
            }
            Pkt::Ack(a) => {
                let h = a.hdr();
                let (v, mv) = (tx.on_ack(&h), mtx.on_ack(&h));
                cov.ack(&v);
                if v != mv {
                    return Err(format!("on_ack({a:?}): rmad {v:?}, model {mv:?}"));
                }
                mtx.agrees(&tx)?;
                match v {
                    AckVerdict::Abort(s) => {
                        return Err(format!("a clean channel drew ABORT({s:?}) for {a:?}"))
                    }
                    AckVerdict::Progress { .. } | AckVerdict::AllAcked => {
                        pump(&mut tx, &mut mtx, &mut flight)?;
                    }
                    AckVerdict::AlreadyAcked | AckVerdict::Ignore => {}
                }
            }
            // Only the segment limit refuses a clean transfer. The sender ends its send with
            // REM_ABORT_ERR.
            Pkt::Stop(Status::Resx) => ended = true,
            Pkt::Stop(s) => return Err(format!("a clean channel drew {s:?}")),
        }
        if tx.last_ack() < last_ack {
            return Err(format!(
                "last_ack went back from {last_ack} to {}",
                tx.last_ack()
            ));
        }
        last_ack = tx.last_ack();
        if tx.all_acked() && completed.is_none() {
            return Err(String::from(
                "all ACKed, but the receiver has not completed",
            ));
        }
    }

    // What the receiver delivered.
    if let Some(len) = completed {
        if len != c.hdr + c.data_len {
            return Err(format!("length {len}, sent {} + {}", c.hdr, c.data_len));
        }
        if copies.first() != Some(&0) || copies.iter().skip(1).any(|k| *k != 1) {
            return Err(format!("segments not stored exactly once: {copies:?}"));
        }
        let (data, pad) = buf.split_at(c.data_len);
        if data != message.as_slice() || pad.iter().any(|b| *b != 0) {
            return Err(String::from("the reassembled message differs"));
        }
    }
    if acks > delivered {
        return Err(format!("{acks} ACKs for {delivered} segments delivered"));
    }
    let bound = u64::from(count) / u64::from(c.window) + 2;
    if moving_acks > bound {
        return Err(format!(
            "{moving_acks} window ACKs, more than N / W + 2 = {bound}"
        ));
    }
    // Refusals: only the segment limit may draw one on a clean channel.
    if rejected {
        let resx = count > c.max;
        if !resx {
            return Err(String::from(
                "a clean transfer within the limit was refused",
            ));
        }
    } else if count > c.max && first_delivered {
        return Err(String::from("a transfer beyond the limit was not refused"));
    }
    // Liveness: no loss, no early timeout and no double-sided window means completion.
    let clean = c.loss == 0 && c.early == 0 && c.repwin.is_none() && count <= c.max;
    if clean && !(tx.all_acked() && completed.is_some()) {
        return Err(String::from("a lossless transfer did not complete"));
    }
    cov.channel[usize::from(completed.is_none())] += 1;
    Ok(())
}

/// One input: one of the three runs.
pub(super) fn run_one(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    match rng.below(3) {
        0 => run_garbage(rng, cov),
        1 => run_window(rng, cov),
        _ => run_channel(rng, cov),
    }
}
