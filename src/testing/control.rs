// SPDX-License-Identifier: GPL-2.0

//! The test flavour's control files in debugfs, and the commands they take.
//!
//! - `rmad/stress` takes one command per write and shows the last command's report (a KTAP
//!   document or result lines) when read:
//!   - `DEVICE SECONDS [failslab]`: the stress driver ([`stress::run`]) on `rxe0` or `lb0`;
//!   - `handles DEVICE N`: N create/free cycles with a stale handle ([`stress::handles`]);
//!   - `scale N`: N sends at once, KTAP suite `rmad_scale` ([`scale::run`]);
//!   - `trace`: the traced sends ([`traced_sends::run`]);
//!   - `fabric ...`, `serve [CLASS]`, `unserve`, `respond [CLASS]`, `unrespond`: the two-node
//!     checks ([`fabric`]).
//! - `rmad/control` makes a detector of the test kernel report once (`leak`, `kasan`,
//!   `lockdep`, `hung SECONDS`, `race`): the positive controls of a run's verdict.

use crate::testing::{
    bench,
    fabric,
    lb0::Lb0,
    scale,
    stress,
    traced_sends, //
};
use core::fmt::Write;
use kernel::{
    debugfs::File,
    ffi::{
        c_char,
        c_int, //
    },
    new_mutex,
    prelude::*,
    str::CString,
    sync::Mutex,
    uaccess::UserSliceReader,
};

extern "C" {
    fn rmad_test_control(what: *const c_char, arg: core::ffi::c_long) -> c_int;
}

/// The test flavour's debugfs files and the loopback device `lb0`; dropping it removes them.
pub(crate) struct Control {
    // Fields drop in declaration order: the files first, so no command runs while the rest
    // goes.
    _file: Pin<KBox<File<Report>>>,
    _control: Pin<KBox<File<()>>>,
    /// The loopback device offered to the C API.
    _lb0: Lb0,
    /// The two-node checks' state ([`fabric::init`]), dropped after the files.
    _fabric: FabricState,
}

/// The last report, as the file shows it.
#[pin_data]
struct Report {
    #[pin]
    text: Mutex<KVec<u8>>,
}

impl Control {
    /// Creates `lb0`, `rmad/stress` and `rmad/control` in `dir`.
    pub(crate) fn new(dir: &kernel::debugfs::Dir) -> Result<Self> {
        let fabric = FabricState::new();
        let lb0 = Lb0::new()?;
        let file = KBox::pin_init(
            dir.read_write_callback_file(
                c"stress",
                pin_init!(Report {
                    text <- new_mutex!(KVec::new()),
                }),
                &|r: &Report, f: &mut core::fmt::Formatter<'_>| {
                    let t = r.text.lock();
                    f.write_str(core::str::from_utf8(&t).unwrap_or("(bad report)\n"))
                },
                &|r: &Report, reader: &mut UserSliceReader| command(r, reader),
            ),
            GFP_KERNEL,
        );
        let control = KBox::pin_init(
            dir.write_callback_file(c"control", (), &|(): &(), reader: &mut UserSliceReader| {
                detector_control(reader)
            }),
            GFP_KERNEL,
        );
        Ok(Self {
            _file: file?,
            _control: control?,
            _lb0: lb0,
            _fabric: fabric,
        })
    }
}

/// The two-node checks' state and the bench's removal row's, from module load to unload.
struct FabricState(());

impl FabricState {
    fn new() -> Self {
        fabric::init();
        bench::hold::init();
        Self(())
    }
}

impl Drop for FabricState {
    fn drop(&mut self) {
        bench::hold::exit();
        fabric::exit();
    }
}

/// `rmad/control`: makes a detector of the test kernel report once (`leak`, `kasan`,
/// `lockdep`, `hung SECONDS`, `race`), a positive control for the run's verdict.
fn detector_control(reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 32];
    let n = reader.len().min(buf.len());
    reader.read_slice(buf.get_mut(..n).ok_or(EINVAL)?)?;
    let line = core::str::from_utf8(buf.get(..n).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
    let mut words = line.split_whitespace();
    let what = CString::try_from_fmt(fmt!("{}", words.next().ok_or(EINVAL)?))?;
    let arg: core::ffi::c_long = match words.next() {
        Some(a) => a.parse().map_err(|_| EINVAL)?,
        None => 0,
    };
    // SAFETY: `what` is NUL-terminated.
    kernel::error::to_result(unsafe { rmad_test_control(what.as_char_ptr(), arg) })
}

/// Runs a command written to the file.
fn command(r: &Report, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 160];
    let n = reader.len().min(buf.len());
    reader.read_slice(buf.get_mut(..n).ok_or(EINVAL)?)?;
    let line = core::str::from_utf8(buf.get(..n).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
    let mut words = line.split_whitespace();
    let mut out = KVec::new();
    if line.starts_with("fabric ") {
        words.next();
        fabric::command(words, &mut out)?;
        *r.text.lock() = out;
        return Ok(());
    }
    if line.starts_with("rate ") {
        words.next();
        fabric::rate(words, &mut out)?;
        *r.text.lock() = out;
        return Ok(());
    }
    if line.starts_with("rmpp ") {
        words.next();
        fabric::rmpp::command(words, &mut out)?;
        *r.text.lock() = out;
        return Ok(());
    }
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("serve"), Some(class), dev, None) => {
            let dev = CString::try_from_fmt(fmt!("{}", dev.unwrap_or("rxe0")))?;
            fabric::serve(Some((class, &dev)), &mut out)?;
        }
        (Some("serve"), None, None, None) => fabric::serve(None, &mut out)?,
        (Some("unserve"), None, None, None) => fabric::serve(None, &mut out)?,
        (Some("serve-rmpp"), Some(class), Some(bytes), dev) => {
            let dev = CString::try_from_fmt(fmt!("{}", dev.unwrap_or("rxe0")))?;
            fabric::serve_rmpp(class, bytes, &dev, &mut out)?;
        }
        (Some("respond-rmpp"), Some(class), Some(bytes), dev) => {
            let dev = CString::try_from_fmt(fmt!("{}", dev.unwrap_or("rxe0")))?;
            fabric::respond_rmpp(Some((class, bytes, &dev)), &mut out)?;
        }
        (Some("unrespond-rmpp"), None, None, None) => fabric::respond_rmpp(None, &mut out)?,
        (Some("respond"), Some(class), dev, None) => {
            let dev = CString::try_from_fmt(fmt!("{}", dev.unwrap_or("rxe0")))?;
            fabric::respond(Some((class, &dev)), &mut out)?;
        }
        (Some("respond"), None, None, None) => fabric::respond(None, &mut out)?,
        (Some("unrespond"), None, None, None) => fabric::respond(None, &mut out)?,
        (Some("hold"), Some(who), Some(n), None) => bench::hold::hold(who, n, &mut out)?,
        (Some("unhold"), None, None, None) => bench::hold::unhold(&mut out)?,
        (Some("trace"), None, None, None) => traced_sends::run(&mut out)?,
        (Some("goodput"), Some(policy), Some(secs), Some(rep)) => {
            let secs = secs.parse().map_err(|_| EINVAL)?;
            bench::goodput(policy, secs, rep.parse().map_err(|_| EINVAL)?)?;
            let _ = writeln!(Writer(&mut out), "goodput {policy}: done");
        }
        (Some("scale"), Some(n), None, None) => {
            scale::run(n.parse().map_err(|_| EINVAL)?, &mut out)?;
        }
        (Some("handles"), Some(dev), Some(n), None) => {
            let n: usize = n.parse().map_err(|_| EINVAL)?;
            stress::handles(&CString::try_from_fmt(fmt!("{dev}"))?, n, &mut out)?;
        }
        (Some(dev), Some(secs), flag, None) => {
            let secs: u32 = secs.parse().map_err(|_| EINVAL)?;
            let failslab = match flag {
                None => false,
                Some("failslab") => true,
                Some(_) => return Err(EINVAL),
            };
            stress::run(
                &CString::try_from_fmt(fmt!("{dev}"))?,
                secs,
                failslab,
                &mut out,
            )?;
        }
        _ => return Err(EINVAL),
    }
    *r.text.lock() = out;
    Ok(())
}

/// `fmt::Write` into a byte vector (allocation failures drop text).
pub(crate) struct Writer<'a>(pub(crate) &'a mut KVec<u8>);

impl Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0
            .extend_from_slice(s.as_bytes(), GFP_KERNEL)
            .map_err(|_| core::fmt::Error)
    }
}
