// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_partitions`: P_Keys on the loopback fabric. A send carries the P_Key at
//! its P_Key index in the sender's table; a port receives it only if its own table has that
//! partition (and not both as limited members), with the index of the matching P_Key, which
//! a responder answers with. A P_Key index the sender's table lacks fails the post (`EINVAL`),
//! as the device fails the work request in C.

#[kernel::prelude::kunit_tests(rmad_partitions)]
mod tests {
    use crate::{
        engine::agent::Agent,
        mad::{
            state::WcStatus,
            wire, //
        },
        testing::{
            post,
            requests::mad_in,
            Behaviour,
            Env,
            Recorder, //
        },
    };
    use crate::{
        engine::send::SendBuf,
        mad::Address, //
    };
    use kernel::{
        prelude::*,
        sync::Arc, //
    };

    /// The served class.
    const CLASS: u8 = wire::IB_MGMT_CLASS_DEVICE_MGMT;

    /// A GET of [`CLASS`] from `a` to LID `dlid` with P_Key index `pkey_index`, tagged `tag`.
    fn get(
        a: &Arc<Agent>,
        tag: usize,
        dlid: u16,
        pkey_index: u16,
        timeout_ms: i32,
    ) -> Result<SendBuf> {
        let lo = u32::try_from(tag).map_err(|_| EINVAL)?;
        let mut buf = mad_in(a, CLASS, wire::IB_MGMT_METHOD_GET, lo, pkey_index)?;
        buf.set_ah(Some(Address {
            sl: 0,
            dlid,
            src_path_bits: 0,
            grh: None,
        }));
        buf.set_timeout_ms(timeout_ms);
        buf.set_retries(0);
        buf.set_context([tag, 0]);
        Ok(buf)
    }

    #[test]
    fn a_send_in_one_partition_never_reaches_a_member_of_another() -> Result {
        // Port 1 is a member of the default partition, of A (0x8001) and of B (0x8002); port 2
        // of B only, where a responder serves the class.
        let env = Env::new()?;
        env.fabric().set_pkeys(1, [0xffff, 0x8001, 0x8002, 0]);
        env.fabric().set_pkeys(2, [0x8002, 0, 0, 0]);
        let (resp, served) = env.responder(2, CLASS)?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        // In A, then in the default partition: port 2 is in neither.
        let in_a = post(get(&a, 1, 2, 1, 100)?).is_ok();
        let a_done = rec.wait_sends(1);
        let in_default = post(get(&a, 2, 2, 0, 100)?).is_ok();
        let default_done = rec.wait_sends(2);
        let after_two = served.recv_count();
        // In B: served, and the answer (sent with the index of B in port 2's table) comes back.
        let in_b = post(get(&a, 3, 2, 2, 10_000)?).is_ok();
        let b_done = rec.wait_sends(3);
        let sends = rec.sends()?;
        let dropped = env.fabric().stats().pkey_dropped;
        a.unregister()?;
        resp.unregister()?;
        assert!(in_a && in_default && in_b);
        assert!(a_done && default_done && b_done);
        assert_eq!(after_two, 0);
        assert_eq!(served.recv_count(), 1);
        assert_eq!(
            &sends[..],
            &[
                (1, WcStatus::RespTimeoutErr, 0),
                (2, WcStatus::RespTimeoutErr, 0),
                (3, WcStatus::Success, 0)
            ][..]
        );
        assert_eq!(dropped, 2);
        Ok(())
    }

    #[test]
    fn limited_members_never_talk() -> Result {
        // Both ports limited members of partition 3: nothing passes; with port 2 a full member,
        // it does.
        let env = Env::new()?;
        env.fabric().set_pkeys(1, [0x0003, 0, 0, 0]);
        env.fabric().set_pkeys(2, [0x0003, 0, 0, 0]);
        let (resp, served) = env.responder(2, CLASS)?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let first = post(get(&a, 1, 2, 0, 100)?).is_ok() && rec.wait_sends(1);
        let before = served.recv_count();
        env.fabric().set_pkeys(2, [0x8003, 0, 0, 0]);
        let second = post(get(&a, 2, 2, 0, 10_000)?).is_ok() && rec.wait_sends(2);
        let sends = rec.sends()?;
        a.unregister()?;
        resp.unregister()?;
        assert!(first && second);
        assert_eq!(before, 0);
        assert_eq!(served.recv_count(), 1);
        assert_eq!(sends.get(1).map(|s| s.1), Some(WcStatus::Success));
        Ok(())
    }

    #[test]
    fn a_pkey_index_the_table_lacks_is_refused() -> Result {
        // Index 3 is an empty entry, index 9 beyond the table: the post fails, the buffer comes
        // back, and nothing is sent.
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let sent_before = env.fabric().stats().transmitted;
        let empty = post(get(&a, 1, 2, 3, 100)?).err();
        let beyond = post(get(&a, 2, 2, 9, 100)?).err();
        let sent_after = env.fabric().stats().transmitted;
        a.unregister()?;
        assert_eq!(empty, Some(EINVAL));
        assert_eq!(beyond, Some(EINVAL));
        assert_eq!(sent_after, sent_before);
        assert_eq!(rec.send_count(), 0);
        Ok(())
    }
}
