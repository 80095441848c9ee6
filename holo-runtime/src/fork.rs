//! What a forked child may not use.
//!
//! The seed: "Use a fresh process for CUDA transport; forking after CUDA or worker
//! initialization is unsupported." `fork()` copies the memory of every thread but runs
//! only the one that called it. In the child, a session started by the parent has no
//! partition threads, no retirement worker and no listener threads; the parent's foreign
//! retirement worker is gone too. Joining one of those threads aborted the child (glibc
//! marks the parent's other threads ended in the fork, so `JoinHandle::join` finds no
//! result, panics with "threads should not terminate unexpectedly", inside the session's
//! `Drop`: a panic in a destructor during cleanup, SIGABRT; `tests/tests/fork.rs` with
//! the check removed), and a slot handed to a missing worker is never returned. So each
//! of them remembers the process that started it, and in any other process refuses with
//! `NotSupported` instead of aborting or losing slots: a session's `join` (and its
//! `Drop`, which leaks what the parent's threads and device objects own rather than
//! touching them), and a device-memory DLPack import, which needs the foreign retirement
//! worker.
//!
//! What a child starts itself (a session, an import once the parent never imported device
//! memory) is its own and works; so does anything started after the child `exec`s.

use std::sync::Once;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Error, ErrorCode, Result};

/// Forks this process's memory has been through: a `pthread_atfork` child handler adds one
/// in each child, so a check is one relaxed load, not a `getpid` system call (a
/// device-memory DLPack import checks on every import).
static FORKS: AtomicU32 = AtomicU32::new(0);

extern "C" fn in_the_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

fn count_forks() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic (async-signal-safe,
        // as a fork child handler must be); it stays valid for the process (a static fn).
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_the_child)) };
        debug_assert_eq!(rc, 0, "pthread_atfork");
    });
}

/// This process's id.
fn pid() -> u32 {
    rustix::process::getpid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs()
}

/// The process that started something holo runs threads for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner {
    pid: u32,
    forks: u32,
}

impl Owner {
    /// The calling process.
    pub(crate) fn current() -> Self {
        count_forks();
        Self {
            pid: pid(),
            forks: FORKS.load(Ordering::Relaxed),
        }
    }

    /// `Ok` in the process that started `what`; in a fork of it, `NotSupported` naming
    /// both processes.
    pub(crate) fn check(self, what: &str) -> Result<()> {
        if FORKS.load(Ordering::Relaxed) == self.forks {
            return Ok(());
        }
        Err(Error::new(
            ErrorCode::NotSupported,
            format!(
                "{what} was started by process {}, and this process ({}) is a fork of it, where its threads do not exist: use it in the process that started it, and fork before holo starts any session or worker (or spawn a fresh process)",
                self.pid,
                pid()
            ),
        ))
    }
}
