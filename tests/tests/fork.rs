//! A fork of a process that started holo's threads refuses what would wait for them
//! (the seed: "forking after CUDA or worker initialization is unsupported").
//!
//! The parent starts a session with a device pool (partition threads, a retirement
//! worker) and the foreign retirement worker (a device-memory DLPack import), then forks.
//! The child, where none of those threads exist, checks:
//! - `join` of the parent's session is `NotSupported` naming the fork, at once. Before,
//!   the child aborted: std's `JoinHandle::join` found the parent's thread ended without
//!   a result ("threads should not terminate unexpectedly"), a panic inside the session's
//!   `Drop`, so SIGABRT;
//! - a device-memory DLPack import is `NotSupported`: its slot would go to the parent's
//!   foreign retirement worker and never come back;
//! - a session the child starts itself runs and joins.
//!
//! The child reports through its exit status (it prints nothing: another thread of the
//! parent may have held the stdout lock when it forked); the parent kills it after 20 s,
//! so a child that waits fails the test instead of hanging it. Then the parent's own session
//! joins as usual. Linux only.
#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::device::{DeviceBackend, SoftwareDevice};
use holo_runtime::{
    CompileOptions, ConnectionOptions, EmitOptions, ErrorCode, ExecutionContext, Graph, Input,
    Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor, compile, operator,
};

#[operator]
struct Count {
    out: Output<u64>,
    n: u64,
}

impl Operator for Count {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        self.out.emit(self.n, EmitOptions::default())
    }
}

#[operator]
struct Sum {
    input: Input<u64>,
    sum: Arc<AtomicU64>,
}

impl Operator for Sum {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            self.sum.fetch_add(v, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A host session of 100 frames, run to its end: the sum of 1..=100.
fn host_session_sum() -> u64 {
    let sum = Arc::new(AtomicU64::new(0));
    let mut g = Graph::new();
    let params = || ParamSet::defaults().unwrap();
    let c = g
        .add_operator(
            "count",
            Count {
                out: Output::default(),
                n: 0,
            },
            params(),
        )
        .unwrap();
    let s = g
        .add_operator(
            "sum",
            Sum {
                input: Input::default(),
                sum: Arc::clone(&sum),
            },
            params(),
        )
        .unwrap();
    g.add_flow(c.out, s.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(100)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(10)));
    session.join().unwrap();
    sum.load(Ordering::SeqCst)
}

/// The child's checks; its exit status says which failed (0: none).
fn in_the_child(parent_session: RunSession) -> i32 {
    // 1. The parent's session: refused at once, not waited for.
    let t0 = Instant::now();
    match parent_session.join() {
        Err(e) if e.code() == ErrorCode::NotSupported && e.message().contains("fork") => {}
        _ => return 10,
    }
    if t0.elapsed() > Duration::from_secs(1) {
        return 11;
    }
    // 2. A device-memory import needs the parent's foreign retirement worker. (The child's
    //    own software device, whose stream workers exist here, makes the buffer.)
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let stream = device.create_stream().unwrap();
    let (dl, _deleted) =
        holo_tests::foreign::foreign_device_bytes(&device, 64, stream, Duration::ZERO, 0, 1);
    match Tensor::from_dlpack(dl, Some(&device)) {
        Err(e) if e.code() == ErrorCode::NotSupported && e.message().contains("fork") => {}
        _ => return 20,
    }
    // 3. What the child starts itself works.
    if host_session_sum() != 5050 {
        return 30;
    }
    0
}

#[test]
fn a_fork_refuses_the_parents_threads_and_runs_its_own() {
    // CUDA device 0 where it opens (the child must then make no driver call), else the
    // software device; `HOLO_REQUIRE_DEVICE=cuda` fails without CUDA.
    let device = holo_tests::ipc_frames::cuda_or_software();
    // The foreign retirement worker, started by a device-memory import.
    let stream = device.create_stream().unwrap();
    let (dl, _deleted) =
        holo_tests::foreign::foreign_device_bytes(&device, 64, stream, Duration::ZERO, 0, 1);
    let imported = Tensor::from_dlpack(dl, Some(&device)).unwrap();
    // A running session with partition threads and a retirement worker.
    let session = holo_tests::device_pipeline::device_session(&device);

    // SAFETY: the child runs only `in_the_child` and leaves with `_exit`; glibc's fork
    // handlers leave its allocator usable.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = in_the_child(session);
        // SAFETY: ends the child without running the parent's copied destructors.
        unsafe { libc::_exit(code) };
    }

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &raw mut status, 0);
            }
            panic!("the child did not end within 20 s: it waited for something of the parent's");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(libc::WIFEXITED(status), "the child died: status {status}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "the child's failed check (10/11: the parent's session's join; 20: the device import; 30: its own session)"
    );

    // The parent is untouched: its session stops and joins, its import drops.
    session.stop();
    session.join().unwrap();
    drop(imported);
}
