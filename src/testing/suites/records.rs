// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_records`: a send's record in rmad's slab cache and the pointers to it
//! ([`crate::engine::send`]): a record outlives its buffer while a handle holds it and is
//! freed once, with its last reference; a transmission has one holder at a time, a transmit
//! queue keeps its order, a MAD is not written while a transport holds its transmission, and a
//! body parked in its record (the C API's completions) is taken back once.

#[kernel::prelude::kunit_tests(rmad_records)]
mod tests {
    use crate::{
        engine::send::{
            BodyBox,
            SendRef,
            TxDest,
            TxQueue,
            TxRef, //
        },
        mad::Address,
        testing::{
            allocs,
            Behaviour,
            Env,
            Recorder, //
        },
    };
    use kernel::prelude::*;

    #[test]
    fn a_record_outlives_its_buffer_until_its_last_reference() -> Result {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let buf = a.create_mad(1, GFP_KERNEL)?;
        let kept: SendRef = buf.rec().clone();
        let counted = a.buffers();
        // The buffer goes (its count with it); the record stays, for the reference kept.
        let ((), dropped) = allocs::count(|| drop(buf))?;
        let after_drop = a.buffers();
        let agent_seen = core::ptr::eq(&*kept.agent, &*a);
        let ((), released) = allocs::count(|| drop(kept))?;
        a.unregister()?;
        assert_eq!((counted, after_drop), (1, 0));
        assert_eq!(dropped.frees, 0);
        assert!(agent_seen);
        assert_eq!((released.frees, released.allocs), (1, 0));
        Ok(())
    }

    #[test]
    fn one_hold_per_transmission_and_queue_order() -> Result {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let bufs = [
            a.create_mad(1, GFP_KERNEL)?,
            a.create_mad(1, GFP_KERNEL)?,
            a.create_mad(1, GFP_KERNEL)?,
        ];
        let [x, y, z] = [&bufs[0].body, &bufs[1].body, &bufs[2].body];
        let tx = TxRef::take(x).ok_or(EINVAL)?;
        let second = TxRef::take(x).is_some();
        let mut q = TxQueue::new();
        q.push_back(tx);
        q.push_back(TxRef::take(y).ok_or(EINVAL)?);
        q.push_front(TxRef::take(z).ok_or(EINVAL)?);
        // Queued, each still has its one hold.
        let held = TxRef::take(y).is_some();
        let is = |t: Option<TxRef>, b: &BodyBox| t.is_some_and(|t| core::ptr::eq(&*t, &**b.rec()));
        let front = is(q.pop_front(), z);
        let back = is(q.pop_back(), y);
        let middle = is(q.pop_front(), x);
        let empty = q.is_empty() && q.pop_front().is_none() && q.pop_back().is_none();
        // Popped and dropped, the holds are free again; a queue dropped with holds in it
        // gives them back too.
        let again = TxRef::take(x).is_some();
        q.push_back(TxRef::take(y).ok_or(EINVAL)?);
        drop(q);
        let freed_by_drop = TxRef::take(y).is_some();
        drop(bufs);
        a.unregister()?;
        assert!(!second);
        assert!(!held);
        assert!(front && back && middle && empty);
        assert!(again);
        assert!(freed_by_drop);
        Ok(())
    }

    #[test]
    fn a_mad_is_not_written_while_its_transmission_is_held() -> Result {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let mut buf = a.create_mad(1, GFP_KERNEL)?;
        if let Some(b) = buf.mad_mut().get_mut(8) {
            *b = 0x5a;
        }
        let mut tx = TxRef::take(&buf.body).ok_or(EINVAL)?;
        let dest_before = tx.dest().is_none();
        let dest = TxDest {
            ah: Address {
                dlid: 7,
                src_path_bits: 0,
                grh: None,
                sl: 3,
            },
            remote_qpn: 1,
            pkey_index: 2,
            timeout_ms: 100,
            retries: 0,
        };
        tx.set_dest(dest);
        let kept = tx
            .dest()
            .is_some_and(|d| d.ah == dest.ah && d.pkey_index == 2);
        // The holder reads what the client wrote; the client cannot write it meanwhile.
        let read = tx.mad().get(8).copied();
        let writable_held = buf.mad_mut().len();
        drop(tx);
        let writable_after = buf.mad_mut().len();
        drop(buf);
        a.unregister()?;
        assert!(dest_before && kept);
        assert_eq!(read, Some(0x5a));
        assert_eq!(writable_held, 0);
        assert_eq!(writable_after, 256);
        Ok(())
    }

    #[test]
    fn a_parked_body_is_taken_back_once_and_still_counted() -> Result {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let buf = a.create_mad(1, GFP_KERNEL)?;
        let kept: SendRef = buf.rec().clone();
        buf.body.park();
        // Parked, the buffer is still the agent's; taken back once, it is a buffer again.
        let counted_parked = a.buffers();
        let back = BodyBox::unpark(&kept);
        let twice = BodyBox::unpark(&kept).is_some();
        let ((), freed) = allocs::count(|| drop(back))?;
        let counted_after = a.buffers();
        let ((), released) = allocs::count(|| drop(kept))?;
        a.unregister()?;
        assert_eq!(counted_parked, 1);
        assert!(!twice);
        assert_eq!((freed.frees, counted_after), (0, 0));
        assert_eq!(released.frees, 1);
        Ok(())
    }
}
