//! The host-memory runtime: pools, queues, policies, read-only receipt, slot return,
//! failure handling and teardown. Each test provokes its rule and asserts the exact code
//! or count.
#![allow(
    clippy::type_complexity,
    clippy::manual_assert,
    reason = "test fixtures: short names for graph handles, shared result logs"
)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{ByteSink, ByteSource, Forward};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, LifecycleContext, Operator, Output, ParamSet, QueuePolicy, Result, RunSession,
    SessionOptions, Tensor, TensorLoanRequest, compile, operator,
};

fn wait_for(cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn frames(n: u64) -> SessionOptions {
    SessionOptions::frames(n)
}

#[test]
fn a_consumer_sees_the_producers_bytes_and_every_slot_returns() {
    let mut g = Graph::new();
    let (src, s_stats) = ByteSource::new(64, 0x2A);
    let (sink, k_stats) = ByteSink::new(0x2A, 0);
    let a = g
        .add_operator("camera", src, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator("check", sink, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(200)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    let report = session.join().unwrap();
    let emitted = s_stats.emitted.load(Ordering::Relaxed);
    assert_eq!(k_stats.received.load(Ordering::Relaxed), emitted);
    assert_eq!(k_stats.bad_bytes.load(Ordering::Relaxed), 0);
    assert_eq!(
        emitted
            + s_stats.exhausted.load(Ordering::Relaxed)
            + s_stats.backpressured.load(Ordering::Relaxed),
        200
    );
    let pool = &report.pools[0];
    assert_eq!(pool.pool, "camera.frames");
    assert_eq!(pool.free_at_end, pool.slot_count);
    // Every loan granted is counted once, every refused one as exhausted (cargo-mutants
    // found the loan counter's increment unchecked).
    assert_eq!(
        (pool.loans, pool.exhausted),
        (
            emitted + s_stats.backpressured.load(Ordering::Relaxed),
            s_stats.exhausted.load(Ordering::Relaxed)
        )
    );
    assert_eq!(report.activations[0], ("camera".to_owned(), 200));
}

/// A source that emits a fresh tensor each time and reports exactly what emit returned.
#[operator]
struct Strict {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 16, max_loans = 1)]
    frames: Output<Tensor>,
    results: Arc<std::sync::Mutex<Vec<std::result::Result<(), ErrorCode>>>>,
    hold: Vec<holo_runtime::TensorOutputLoan>,
    loans_to_hold: usize,
}

impl Operator for Strict {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let req = TensorLoanRequest {
            shape: &[4],
            dtype: DType::U8,
        };
        while self.hold.len() < self.loans_to_hold {
            match self.frames.allocate_tensor(req) {
                Ok(l) => self.hold.push(l),
                Err(e) => {
                    self.results.lock().unwrap().push(Err(e.code()));
                    return Ok(());
                }
            }
        }
        let r = match self.frames.allocate_tensor(req) {
            Ok(loan) => {
                let c = loan.write_host_and_commit(|b| b.fill(1))?;
                self.frames
                    .emit(c, EmitOptions::default())
                    .map_err(|e| e.code())
            }
            Err(e) => Err(e.code()),
        };
        self.results.lock().unwrap().push(r);
        Ok(())
    }
}

/// A consumer that never takes anything: its queue fills up.
#[operator]
struct Stall {
    #[input(optional)]
    frames: Input<Tensor>,
}
impl Operator for Stall {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

fn stall_graph(
    policy: QueuePolicy,
    depth: u32,
    loans_to_hold: usize,
) -> (
    Graph,
    Arc<std::sync::Mutex<Vec<std::result::Result<(), ErrorCode>>>>,
) {
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let a = g
        .add_operator(
            "src",
            Strict {
                frames: Output::default(),
                results: Arc::clone(&results),
                hold: Vec::new(),
                loans_to_hold,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let b = g
        .add_operator(
            "stall",
            Stall {
                frames: Input::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(
        a.frames,
        b.frames,
        ConnectionOptions::default()
            .with_queue_depth(depth)
            .with_policy(policy),
    );
    (g, results)
}

#[test]
fn a_full_blocking_queue_gives_backpressured_and_publishes_nothing() {
    let (g, results) = stall_graph(QueuePolicy::Block, 2, 0);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    // slots: 2 queued + 1 held + 1 loan + 1 retirement = 5.
    assert_eq!(plan.tensor_allocation("src.frames").unwrap().slot_count, 5);
    let session = RunSession::start(g, &plan, frames(3)).unwrap();
    // The scheduler holds a source back while its blocking edge is full: after the queue
    // filled, the third activation never runs.
    wait_for(|| results.lock().unwrap().len() == 2);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(session.pool_free_slots("src.frames"), Some(3));
    assert!(!session.wait_idle(Duration::from_millis(50)));
    let report = session.join().unwrap();
    assert_eq!(*results.lock().unwrap(), vec![Ok(()), Ok(())]);
    assert_eq!(report.pools[0].free_at_end, 5);
}

#[test]
fn emit_into_a_full_blocking_queue_returns_backpressured() {
    // Two emits per activation with depth 1: the second one finds the queue full.
    #[operator]
    struct Twice {
        #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 16)]
        frames: Output<Tensor>,
        codes: Arc<std::sync::Mutex<Vec<ErrorCode>>>,
    }
    impl Operator for Twice {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            for _ in 0..2 {
                let loan = self.frames.allocate_tensor(TensorLoanRequest {
                    shape: &[1],
                    dtype: DType::U8,
                })?;
                let c = loan.write_host_and_commit(|b| b[0] = 9)?;
                if let Err(e) = self.frames.emit(c, EmitOptions::default()) {
                    self.codes.lock().unwrap().push(e.code());
                }
            }
            Ok(())
        }
    }
    let codes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let a = g
        .add_operator(
            "twice",
            Twice {
                frames: Output::default(),
                codes: Arc::clone(&codes),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let b = g
        .add_operator(
            "stall",
            Stall {
                frames: Input::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(
        a.frames,
        b.frames,
        ConnectionOptions::default()
            .with_queue_depth(1)
            .with_policy(QueuePolicy::Block),
    );
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(1)).unwrap();
    wait_for(|| codes.lock().unwrap().len() == 1);
    let report = session.join().unwrap();
    assert_eq!(*codes.lock().unwrap(), vec![ErrorCode::Backpressured]);
    assert_eq!(report.drops, 1);
    assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
}

#[test]
fn drop_oldest_evicts_and_counts_and_returns_the_evicted_slot() {
    let (g, results) = stall_graph(QueuePolicy::DropOldest, 2, 0);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(10)).unwrap();
    wait_for(|| results.lock().unwrap().len() == 10);
    assert!(
        !session.wait_idle(Duration::from_millis(50)),
        "the stalled queue never drains"
    );
    // Two entries stay queued; the eight evicted ones went back to the pool.
    assert_eq!(session.pool_free_slots("src.frames"), Some(3));
    let report = session.join().unwrap();
    assert_eq!(results.lock().unwrap().len(), 10);
    assert!(results.lock().unwrap().iter().all(Result::is_ok));
    assert_eq!(report.drops, 8);
    assert_eq!(report.pools[0].free_at_end, 5);
}

#[test]
fn allocate_tensor_fails_at_once_with_resource_exhausted() {
    // The producer holds every free slot (5 = 2 queued + 1 held + 1 loan + 1 retirement)
    // as loans, so the next allocation has nothing to borrow.
    let (g, results) = stall_graph(QueuePolicy::Block, 2, 5);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(1)).unwrap();
    wait_for(|| results.lock().unwrap().len() == 1);
    let report = session.join().unwrap();
    assert_eq!(
        *results.lock().unwrap(),
        vec![Err(ErrorCode::ResourceExhausted)]
    );
    assert_eq!(report.pools[0].exhausted, 1);
    assert_eq!(report.pools[0].free_at_end, 5, "abandoned loans went back");
}

/// Tries to mutate what it received.
#[operator]
struct Mutator {
    frames: Input<Tensor>,
    code: Arc<std::sync::Mutex<Option<ErrorCode>>>,
}
impl Operator for Mutator {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if let Some(mut t) = self.frames.receive() {
            *self.code.lock().unwrap() = Some(t.mutable_data().unwrap_err().code());
        }
        Ok(())
    }
}

#[test]
fn a_received_tensor_is_read_only() {
    let code = Arc::new(std::sync::Mutex::new(None));
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator(
            "m",
            Mutator {
                frames: Input::default(),
                code: Arc::clone(&code),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(1)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.join().unwrap();
    assert_eq!(*code.lock().unwrap(), Some(ErrorCode::PermissionDenied));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a deadline calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn a_slot_returns_only_when_every_consumer_and_lease_is_done() {
    // Fan-out to two consumers; one keeps the last 2 tensors. After the run drained, the
    // held tensors keep exactly two slots out of the pool; teardown returns them.
    let mut g = Graph::new();
    let (src, s_stats) = ByteSource::new(8, 7);
    let (fast, f_stats) = ByteSink::new(7, 0);
    let (keeper, k_stats) = ByteSink::new(7, 2);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let f = g
        .add_operator("fast", fast, ParamSet::defaults().unwrap())
        .unwrap();
    let k = g
        .add_operator("keeper", keeper, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.frames, f.frames, ConnectionOptions::default());
    g.add_flow(a.frames, k.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    // A fork: the two legs run in partitions of their own.
    assert_eq!(plan.partitions().len(), 3);
    let terms = &plan.tensor_allocation("src.frames").unwrap().slot_terms;
    assert_eq!(
        (
            terms.queue_entries,
            terms.consumer_holds,
            terms.producer_loans,
            terms.retirement
        ),
        (2, 2, 1, 1)
    );
    let session = RunSession::start(g, &plan, frames(50)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    let slots = plan.tensor_allocation("src.frames").unwrap().slot_count;
    assert_eq!(session.pool_free_slots("src.frames"), Some(slots - 2));
    let report = session.join().unwrap();
    let emitted = s_stats.emitted.load(Ordering::Relaxed);
    assert!(emitted > 0);
    assert_eq!(f_stats.received.load(Ordering::Relaxed), emitted);
    assert_eq!(k_stats.received.load(Ordering::Relaxed), emitted);
    assert_eq!(report.pools[0].free_at_end, slots);
}

#[test]
fn forwarding_keeps_the_backing_and_pass_through_checks_the_consumer_spec() {
    // src (u8 rank 1) → forward (pass-through) → sink requiring u8 rank 1: bytes arrive.
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 3);
    let (sink, k_stats) = ByteSink::new(3, 0);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let f = g
        .add_operator("fwd", Forward::new(), ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator("sink", sink, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.frames, f.input, ConnectionOptions::default());
    g.add_flow(f.output, b.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(20)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    let report = session.join().unwrap();
    assert!(k_stats.received.load(Ordering::Relaxed) > 0);
    assert_eq!(k_stats.bad_bytes.load(Ordering::Relaxed), 0);
    assert_eq!(report.pools.len(), 1, "forwarding allocates no pool");
}

/// Emits a 2-D f32 pass-through tensor where the consumer requires u8 rank 1.
#[operator]
struct WrongShape {
    #[output(storage = pass_through)]
    frames: Output<Tensor>,
}
impl Operator for WrongShape {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let t = Tensor::from_host_vec(&[1, 1], DType::F32, vec![0; 4])?;
        self.frames.emit(t, EmitOptions::default())
    }
}

#[test]
fn a_pass_through_tensor_that_breaks_the_consumer_spec_is_a_protocol_error() {
    let mut g = Graph::new();
    let a = g
        .add_operator(
            "bad",
            WrongShape {
                frames: Output::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let (sink, k_stats) = ByteSink::new(0, 0);
    let b = g
        .add_operator("sink", sink, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    let plan =
        compile(&g, CompileOptions::default()).expect("undeclared pass-through output compiles");
    let session = RunSession::start(g, &plan, frames(1)).unwrap();
    let err = session.join_after_idle();
    assert_eq!(err.code(), ErrorCode::ProtocolError);
    assert_eq!(
        err.location(),
        Some("operator \"bad\": operator \"sink\", port \"frames\"")
    );
    assert_eq!(k_stats.received.load(Ordering::Relaxed), 0);
}

trait JoinAfterIdle {
    fn join_after_idle(self) -> holo_runtime::Error;
}
impl JoinAfterIdle for RunSession {
    fn join_after_idle(self) -> holo_runtime::Error {
        let _ = self.wait_idle(Duration::from_secs(20));
        self.join().expect_err("the session should fail")
    }
}

/// Fails or panics on its third activation.
#[operator]
struct Faulty {
    frames: Input<Tensor>,
    panic: bool,
    seen: u32,
}
impl Operator for Faulty {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let _ = self.frames.receive();
        self.seen += 1;
        if self.seen == 3 {
            if self.panic {
                panic!("sensor unplugged");
            }
            return Err(holo_runtime::Error::new(
                ErrorCode::NotFound,
                "calibration table missing",
            ));
        }
        Ok(())
    }
}

fn faulty_run(panic: bool) -> (holo_runtime::Error, Arc<common::SourceStats>) {
    let mut g = Graph::new();
    let (src, stats) = ByteSource::new(8, 1);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator(
            "faulty",
            Faulty {
                frames: Input::default(),
                panic,
                seen: 0,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !session.is_stopping() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    (
        session
            .join()
            .expect_err("the operator's failure is the session's"),
        stats,
    )
}

#[test]
fn an_operator_error_stops_the_session_with_that_error_and_no_slot_leaks() {
    let (err, _) = faulty_run(false);
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(err.message(), "calibration table missing");
    assert_eq!(err.location(), Some("operator \"faulty\""));
    // join checks every pool is whole before it reports the operator's error; a slot
    // still held would have been reported as ResourceExhausted instead.
}

#[test]
fn an_operator_panic_stops_the_session_as_internal() {
    let (err, _) = faulty_run(true);
    assert_eq!(err.code(), ErrorCode::Internal);
    assert_eq!(err.message(), "compute panicked: sensor unplugged");
    assert_eq!(err.location(), Some("operator \"faulty\""));
}

/// Counts lifecycle calls; can fail its start.
#[operator]
struct Lifecycle {
    fail_start: bool,
    computes: Arc<AtomicU64>,
    stopped: Arc<AtomicBool>,
}
impl Operator for Lifecycle {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        if self.fail_start {
            return Err(holo_runtime::Error::new(
                ErrorCode::DeviceUnavailable,
                "camera not found",
            ));
        }
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.computes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.stopped.store(true, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn a_failing_start_fails_closed_and_stops_the_started_operators() {
    let computes = Arc::new(AtomicU64::new(0));
    let first_stopped = Arc::new(AtomicBool::new(false));
    let second_stopped = Arc::new(AtomicBool::new(false));
    let mut g = Graph::new();
    g.add_operator(
        "a",
        Lifecycle {
            fail_start: false,
            computes: Arc::clone(&computes),
            stopped: Arc::clone(&first_stopped),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    g.add_operator(
        "b",
        Lifecycle {
            fail_start: true,
            computes: Arc::clone(&computes),
            stopped: Arc::clone(&second_stopped),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let err = RunSession::start(g, &plan, frames(5)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceUnavailable);
    assert_eq!(err.location(), Some("operator \"b\""));
    assert_eq!(computes.load(Ordering::Relaxed), 0, "no compute ran");
    assert!(
        first_stopped.load(Ordering::Relaxed),
        "the started operator was stopped"
    );
    assert!(
        !second_stopped.load(Ordering::Relaxed),
        "the one that never started is not stopped"
    );
}

/// A pinned-host pool; `BIG` makes it too large for any machine.
#[operator]
struct PinnedSource {
    #[output(storage = runtime_pool, memory = pinned, dtype = u8, rank = 1, bounds = 64)]
    frames: Output<Tensor>,
    started: Arc<AtomicBool>,
}
impl Operator for PinnedSource {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.started.store(true, Ordering::Relaxed);
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// A pinned pool of 2^62 bytes per slot: 2 slots exceed what any allocator can lay out,
/// so materialization fails the same way on every machine (no memory is touched).
#[operator]
struct HugePinned {
    #[output(storage = runtime_pool, memory = pinned, dtype = u8, rank = 1, bounds = 1 << 62)]
    frames: Output<Tensor>,
    started: Arc<AtomicBool>,
}
impl Operator for HugePinned {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.started.store(true, Ordering::Relaxed);
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_device_pool_without_a_device_fails_startup_before_any_callback() {
    let started = Arc::new(AtomicBool::new(false));
    let mut g = Graph::new();
    g.add_operator(
        "cam",
        PinnedSource {
            frames: Output::default(),
            started: Arc::clone(&started),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let err = RunSession::start(g, &plan, frames(1)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::DeviceUnavailable);
    assert!(err.message().contains("SessionOptions::device"), "{err}");
    assert!(!started.load(Ordering::Relaxed), "no operator started");
}

#[test]
fn a_pool_that_cannot_be_materialized_fails_startup_closed() {
    let started = Arc::new(AtomicBool::new(false));
    let mut g = Graph::new();
    g.add_operator(
        "cam",
        HugePinned {
            frames: Output::default(),
            started: Arc::clone(&started),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let device: Arc<dyn holo_runtime::device::DeviceBackend> =
        holo_runtime::device::SoftwareDevice::new();
    let before = device.counters().snapshot();
    let err = RunSession::start(g, &plan, frames(1).on_device(device.clone())).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ResourceExhausted, "{err}");
    assert_eq!(err.location(), Some("operator \"cam\", port \"frames\""));
    assert!(!started.load(Ordering::Relaxed), "no operator started");
    let after = device.counters().snapshot() - before;
    assert_eq!(after.alloc, after.free, "nothing allocated stays allocated");
    assert_eq!(after.event_create, after.event_destroy);
    assert_eq!(after.stream_create, after.stream_destroy);
}

#[test]
fn a_plan_from_another_graph_is_refused() {
    let mut g1 = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    g1.add_operator("a", src, ParamSet::defaults().unwrap())
        .unwrap();
    let plan = compile(&g1, CompileOptions::default()).unwrap();
    let mut g2 = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    g2.add_operator("renamed", src, ParamSet::defaults().unwrap())
        .unwrap();
    let err = RunSession::start(g2, &plan, frames(1)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
}

#[test]
fn latency_is_measured_from_capture_time_at_the_sinks() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    let (sink, _) = ByteSink::new(1, 0);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator("sink", sink, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(30)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    let r = session.join().unwrap();
    let received = r.received[0].1;
    assert!(received > 0 && received <= 30, "{received}");
    let (p50, p99) = (r.latency_p50.unwrap(), r.latency_p99.unwrap());
    assert!(p50 <= p99);
    assert!(p99 < Duration::from_secs(20));
}

/// Keeps the first tensor it receives in a slot the test can reach.
#[operator]
struct Keeper {
    frames: Input<Tensor>,
    kept: Arc<std::sync::Mutex<Option<Tensor>>>,
}

impl Operator for Keeper {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            let mut kept = self.kept.lock().unwrap();
            if kept.is_none() {
                *kept = Some(t);
            }
        }
        Ok(())
    }
}

#[test]
fn a_tensor_kept_past_the_session_stays_readable_and_the_join_reports_its_slot() {
    let kept = Arc::new(std::sync::Mutex::new(None));
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(16, 0x5C);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator(
            "keeper",
            Keeper {
                frames: Input::default(),
                kept: Arc::clone(&kept),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, frames(20)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    let err = session.join().unwrap_err();
    assert_eq!(err.code(), ErrorCode::ResourceExhausted);
    assert!(
        err.message().contains("1 of") && err.message().contains("still held"),
        "{}",
        err.message()
    );
    // The session and its pool owner are gone; the kept slot still holds the pool.
    let t = kept.lock().unwrap().take().expect("a tensor was kept");
    assert_eq!(t.data().unwrap(), &[0x5C; 16]);
    let reader =
        std::thread::spawn(move || t.data().unwrap().iter().map(|&b| u64::from(b)).sum::<u64>());
    assert_eq!(reader.join().unwrap(), 16 * 0x5C);
}

#[test]
fn sessions_run_to_completion_with_any_idle_spin() {
    for spin in [Duration::ZERO, Duration::from_millis(2)] {
        let mut g = Graph::new();
        let (src, s_stats) = ByteSource::new(32, 7);
        let (sink, k_stats) = ByteSink::new(7, 0);
        let a = g
            .add_operator("camera", src, ParamSet::defaults().unwrap())
            .unwrap();
        let b = g
            .add_operator("check", sink, ParamSet::defaults().unwrap())
            .unwrap();
        g.add_flow(a.frames, b.frames, ConnectionOptions::default());
        let plan = compile(&g, CompileOptions::default()).unwrap();
        let options = frames(300).with_idle_spin(spin);
        let session = RunSession::start(g, &plan, options).unwrap();
        assert!(
            session.wait_idle(Duration::from_secs(20)),
            "idle_spin {spin:?}"
        );
        session.join().unwrap();
        assert_eq!(
            k_stats.received.load(Ordering::Relaxed),
            s_stats.emitted.load(Ordering::Relaxed),
            "idle_spin {spin:?}"
        );
    }
}
