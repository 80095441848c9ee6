//! Regression tests of issue 11, "Defects found by trying holo as a hostile user": each
//! provokes a promise that was broken (nothing lost at the end of a run, no abort on an
//! absurd size, no panic on an out-of-range wait, no pool leaked by a tensor kept past
//! its session, an exact declared rank, no data race through a port moved to another
//! thread, teardown on drop, foreign port handles) and asserts the exact code or count.
#![allow(
    clippy::many_single_char_names,
    reason = "test fixtures: short names for graph handles"
)]

mod common;

use common::Counter;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::device::{DeviceBackend, SoftwareDevice};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, LifecycleContext, Operator, Output, ParamSet, Result, RunSession, SessionOptions,
    Tensor, TensorLoanRequest, codes, compile, operator,
};
use holo_tests::device_pipeline::DeviceSource as DevSource;

// ---- 1. wait_idle means every frame arrived -------------------------------------------

/// Receives one value, sleeps, forwards it (the queues are deep enough that an emit is
/// never refused: a refusal fails the session).
#[operator]
struct Slow {
    input: Input<u64>,
    out: Output<u64>,
    sleep: Duration,
}

impl Operator for Slow {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(v) = self.input.receive() else {
            return Ok(());
        };
        std::thread::sleep(self.sleep);
        self.out.emit(v, EmitOptions::default())
    }
}

/// Receives everything, sleeping after each value.
#[operator]
struct SlowSink {
    input: Input<u64>,
    sleep: Duration,
    got: Arc<Mutex<Vec<u64>>>,
}

impl Operator for SlowSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            std::thread::sleep(self.sleep);
            self.got.lock().unwrap().push(v);
        }
        Ok(())
    }
}

fn slow_chain(sleep: Duration, frames: u64, split: bool) -> (Vec<u64>, holo_runtime::RunReport) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            d(),
        )
        .unwrap();
    let slow = |sleep| Slow {
        input: Input::default(),
        out: Output::default(),
        sleep,
    };
    let m1 = g.add_operator("slow1", slow(sleep), d()).unwrap();
    let m2 = g.add_operator("slow2", slow(sleep / 2), d()).unwrap();
    let k = g
        .add_operator(
            "sink",
            SlowSink {
                input: Input::default(),
                sleep,
                got: Arc::clone(&got),
            },
            d(),
        )
        .unwrap();
    let c = ConnectionOptions::default().with_queue_depth(8);
    g.add_flow(s.out, m1.input, c);
    g.add_flow(m1.out, m2.input, c);
    g.add_flow(m2.out, k.input, c);
    let groups: &[&[&str]] = if split {
        &[&["source"], &["slow1"], &["slow2", "sink"]]
    } else {
        &[]
    };
    let plan = compile(&g, common::partitioned(groups)).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(frames)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(30)));
    let report = session.join().unwrap();
    let got = got.lock().unwrap().clone();
    (got, report)
}

#[test]
fn wait_idle_returns_only_once_every_frame_reached_the_sink() {
    for ms in [0, 1, 2, 3, 5, 8] {
        for split in [false, true] {
            let (got, report) = slow_chain(Duration::from_millis(ms), 5, split);
            assert_eq!(got, [1, 2, 3, 4, 5], "sleep {ms} ms, split {split}");
            assert_eq!(report.produced, [("source".to_owned(), 5)]);
            assert_eq!(report.received, [("sink".to_owned(), 5)]);
        }
    }
}

#[test]
fn wait_idle_without_a_deadline_does_not_panic() {
    let (got, _) = slow_chain(Duration::ZERO, 3, true);
    assert_eq!(got.len(), 3);
    let mut g = Graph::new();
    let s = g
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let _ = s;
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(2)).unwrap();
    assert!(session.wait_idle(Duration::MAX));
    session.join().unwrap();
}

// ---- 2. absurd sizes: compile says so, start refuses without aborting ------------------

#[operator]
struct Sink64 {
    input: Input<u64>,
    started: Arc<AtomicU64>,
}

impl Operator for Sink64 {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.started.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
}

#[test]
fn an_absurd_queue_depth_is_a_compile_diagnostic() {
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            d(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "sink",
            Sink64 {
                input: Input::default(),
                started: Arc::default(),
            },
            d(),
        )
        .unwrap();
    g.add_flow(
        s.out,
        k.input,
        ConnectionOptions::default().with_queue_depth(u32::MAX),
    );
    let e = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(e.codes(), vec![codes::QUEUE_DEPTH_LIMIT], "{e}");
    assert!(e.to_string().contains("4294967295"), "{e}");

    let e = compile(
        &g,
        CompileOptions::default().with_max_fanout_release_streams(u32::MAX),
    )
    .unwrap_err();
    assert!(
        e.codes().contains(&codes::OPTION_FANOUT_RELEASE_STREAMS),
        "{e}"
    );
}

/// Adds a `source` counting 1, 2, 3, … and its flow into `input`.
fn counted(g: &mut Graph, input: holo_runtime::InPort<u64>) {
    let s = g
        .add_operator_with_defaults(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
        )
        .unwrap();
    g.add_flow(s.out, input, ConnectionOptions::default());
}

/// How many messages [`Historian`] retains: a deployment parameter.
#[derive(Clone, Debug, holo_runtime::ParamSchema)]
#[param(schema = "holo.tests.Historian", version = 1)]
struct HistorianParams {
    /// Messages retained.
    #[param(default = 2, recompile_required)]
    history: u32,
}

/// Retains its last `history` messages (a message input: no pool bounds the history).
#[operator(params = HistorianParams)]
struct Historian {
    #[input(history = parameter_count(param_ref!(HistorianParams::history)))]
    input: Input<u64>,
}

impl Operator for Historian {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
}

/// A history from a parameter was preallocated at start without a bound: `history =
/// 4294967295` in a config asked for 34 GB, and a failed allocation aborts the process.
/// Now compile refuses a history past `MAX_QUEUE_DEPTH`, as it refuses such a queue.
#[test]
fn an_absurd_history_from_a_parameter_is_a_compile_diagnostic() {
    let build = |history: &str| {
        let mut g = Graph::new();
        let k = g
            .add_operator(
                "historian",
                Historian {
                    input: Input::default(),
                },
                ParamSet::from_toml_str(&format!("history = {history}")).unwrap(),
            )
            .unwrap();
        counted(&mut g, k.input);
        g
    };
    let e = compile(&build("4294967295"), CompileOptions::default()).unwrap_err();
    assert_eq!(e.codes(), vec![codes::QUEUE_DEPTH_LIMIT], "{e}");
    assert_eq!(e.items[0].operator.as_deref(), Some("historian"));
    assert_eq!(e.items[0].port.as_deref(), Some("input"));
    assert!(
        e.to_string().contains("history of 4294967295 entries"),
        "{e}"
    );
    // At the limit it compiles.
    let limit = holo_runtime::MAX_QUEUE_DEPTH.to_string();
    compile(&build(&limit), CompileOptions::default()).unwrap();
}

/// A history read from a signed (or 64-bit) parameter.
#[derive(Clone, Debug, holo_runtime::ParamSchema)]
#[param(schema = "holo.tests.SignedHistorian", version = 1)]
struct SignedHistorianParams {
    /// Messages retained.
    #[param(default = 2, recompile_required)]
    history: i64,
}

#[operator(params = SignedHistorianParams)]
struct SignedHistorian {
    #[input(history = parameter_count(param_ref!(SignedHistorianParams::history)))]
    input: Input<u64>,
}

impl Operator for SignedHistorian {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
}

/// A history parameter of -3 was clamped to 0 (no history, silently), and 5000000000 to
/// 4294967295 (the limit's diagnostic then quoted a number nobody wrote). Now both are
/// `OutOfBounds` at the field when the operator is added, naming the operator and input.
#[test]
fn a_history_parameter_outside_u32_is_refused_at_the_field() {
    for value in ["-3", "5000000000"] {
        let mut g = Graph::new();
        let e = g
            .add_operator(
                "historian",
                SignedHistorian {
                    input: Input::default(),
                },
                ParamSet::from_toml_str(&format!("history = {value}")).unwrap(),
            )
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
        assert_eq!(
            e.param_kind(),
            Some(holo_runtime::ParamErrorKind::OutOfBounds),
            "{e}"
        );
        assert_eq!(e.location(), Some("history"), "{e}");
        assert!(
            e.message().starts_with(&format!(
                "operator \"historian\", input \"input\": `history = parameter_count(history)` is {value}"
            )),
            "{e}"
        );
    }
    let mut g = Graph::new();
    g.add_operator(
        "historian",
        SignedHistorian {
            input: Input::default(),
        },
        ParamSet::from_toml_str("history = 4").unwrap(),
    )
    .unwrap();
}

/// A 1 MiB message: a queue of a million of them (1 TiB) cannot be reserved. (An `Input`
/// holds one inline for `missing = reuse_last`, so the test runs on a large stack.)
#[derive(Clone)]
#[allow(dead_code, reason = "only its size matters: it is never built")]
struct Huge([u8; 1 << 20]);

#[operator]
struct HugeSource {
    out: Output<Huge>,
}
impl Operator for HugeSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[operator]
struct HugeSink {
    input: Input<Huge>,
    started: Arc<AtomicU64>,
}
impl Operator for HugeSink {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.started.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "asks for more memory than a host holds and expects the refusal that reads /proc/meminfo, which Miri isolates"
)]
fn a_queue_that_cannot_be_reserved_is_resource_exhausted_and_nothing_starts() {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(unreservable_queue)
        .unwrap()
        .join()
        .unwrap();
}

fn unreservable_queue() {
    for split in [false, true] {
        let started = Arc::new(AtomicU64::new(0));
        let mut g = Graph::new();
        let d = || ParamSet::defaults().unwrap();
        let s = g
            .add_operator(
                "huge",
                HugeSource {
                    out: Output::default(),
                },
                d(),
            )
            .unwrap();
        let k = g
            .add_operator(
                "sink",
                HugeSink {
                    input: Input::default(),
                    started: Arc::clone(&started),
                },
                d(),
            )
            .unwrap();
        g.add_flow(
            s.out,
            k.input,
            ConnectionOptions::default().with_queue_depth(holo_runtime::MAX_QUEUE_DEPTH),
        );
        let groups: &[&[&str]] = if split { &[&["huge"], &["sink"]] } else { &[] };
        let plan = compile(&g, common::partitioned(groups)).unwrap();
        let e = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{e}");
        let text = e.to_string();
        assert!(text.contains("huge.out -> sink.input"), "{text}");
        assert!(
            text.contains("cannot reserve") && text.contains("bytes"),
            "{text}"
        );
        assert_eq!(started.load(Ordering::SeqCst), 0, "no operator started");
    }
}

/// Retains its last `history` huge messages, from an input nothing feeds.
#[operator(params = HistorianParams)]
struct HugeHistorian {
    #[input(optional, history = parameter_count(param_ref!(HistorianParams::history)))]
    input: Input<Huge>,
    started: Arc<AtomicU64>,
}
impl Operator for HugeHistorian {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.started.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// The history a config gives (at the compile limit, a million entries) of a 1 MiB message
/// is 1 TiB: it was reserved with `VecDeque::with_capacity`, whose failure aborts the
/// process. Now the start fails with `ResourceExhausted` naming the input.
#[test]
#[cfg_attr(
    miri,
    ignore = "asks for more memory than a host holds and expects the refusal that reads /proc/meminfo, which Miri isolates"
)]
fn a_history_that_cannot_be_reserved_is_resource_exhausted_and_nothing_starts() {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(unreservable_history)
        .unwrap()
        .join()
        .unwrap();
}

fn unreservable_history() {
    let started = Arc::new(AtomicU64::new(0));
    let mut g = Graph::new();
    let limit = holo_runtime::MAX_QUEUE_DEPTH;
    g.add_operator(
        "historian",
        HugeHistorian {
            input: Input::default(),
            started: Arc::clone(&started),
        },
        ParamSet::from_toml_str(&format!("history = {limit}")).unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let e = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "a history of {limit} entries of 1048576 bytes each"
        )),
        "{text}"
    );
    assert!(
        text.contains("historian") && text.contains("input"),
        "{text}"
    );
    assert_eq!(started.load(Ordering::SeqCst), 0, "no operator started");
}

// ---- 4. a device tensor kept past its session frees its pool when dropped -------------

/// Keeps the last tensor it received (in a slot the test can reach).
#[operator]
struct Keeper {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    kept: Arc<Mutex<Option<Tensor>>>,
}

impl Operator for Keeper {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            *self.kept.lock().unwrap() = Some(t);
        }
        Ok(())
    }
}

#[test]
fn a_device_tensor_kept_past_its_session_frees_its_pool_when_dropped() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let before = device.counters().snapshot();
    for _ in 0..3 {
        let kept = [Arc::default(), Arc::default()];
        let mut g = Graph::new();
        let d = || ParamSet::defaults().unwrap();
        let s = g.add_operator("src", DevSource::new(), d()).unwrap();
        for (i, slot) in kept.iter().enumerate() {
            let k = g
                .add_operator(
                    &format!("keep{i}"),
                    Keeper {
                        frames: Input::default(),
                        kept: Arc::clone(slot),
                    },
                    d(),
                )
                .unwrap();
            g.add_flow(s.frames, k.frames, ConnectionOptions::default());
        }
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "frames", device.ordinal());
        let plan = compile(&g, options).unwrap();
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(4).on_device(Arc::clone(&device)),
        )
        .unwrap();
        assert!(session.wait_idle(Duration::from_secs(20)));
        // The kept tensors hold slots: join reports them...
        let e = session.join().unwrap_err();
        assert!(e.to_string().contains("still held after teardown"), "{e}");
        // The caller's handles, not a fault of holo's (it said `Internal`).
        assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{e}");
        // ...and dropping them after teardown returns them without the worker.
        for slot in &kept {
            assert!(slot.lock().unwrap().take().is_some());
        }
    }
    let calls = device.counters().snapshot() - before;
    assert_eq!(calls.alloc, 3, "one pool per session");
    assert_eq!(
        calls.free, 3,
        "every pool freed once its last tensor was dropped"
    );
    assert_eq!(calls.event_create, calls.event_destroy);
    assert_eq!(calls.stream_create, calls.stream_destroy);
}

// ---- 5. a declared rank is exact ---------------------------------------------------------

#[operator]
struct Rank2 {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 2, bounds = 64)]
    out: Output<Tensor>,
    codes: Arc<Mutex<Vec<std::result::Result<(), ErrorCode>>>>,
}

impl Operator for Rank2 {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        for shape in [&[16][..], &[], &[4, 4], &[2, 2, 2]] {
            let r = self
                .out
                .allocate_tensor(TensorLoanRequest {
                    shape,
                    dtype: DType::U8,
                })
                .map(drop)
                .map_err(|e| e.code());
            self.codes.lock().unwrap().push(r);
        }
        ctx.request_stop();
        Ok(())
    }
}

#[test]
fn a_loan_of_another_rank_than_the_declared_one_is_refused() {
    let codes = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    g.add_operator(
        "r",
        Rank2 {
            out: Output::default(),
            codes: Arc::clone(&codes),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(10));
    session.join().unwrap();
    assert_eq!(
        *codes.lock().unwrap(),
        [
            Err(ErrorCode::InvalidArgument),
            Err(ErrorCode::InvalidArgument),
            Ok(()),
            Err(ErrorCode::InvalidArgument)
        ]
    );
}

/// Emits a rank-1 host tensor on a pass-through output.
#[operator]
struct PassThrough1 {
    #[output(storage = pass_through, memory = host, dtype = u8)]
    out: Output<Tensor>,
    result: Arc<Mutex<Option<ErrorCode>>>,
}

impl Operator for PassThrough1 {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let t = Tensor::from_host_vec(&[16], DType::U8, vec![1u8; 16])?;
        *self.result.lock().unwrap() = self
            .out
            .emit(t, EmitOptions::default())
            .err()
            .map(|e| e.code());
        ctx.request_stop();
        Ok(())
    }
}

#[operator]
struct NeedsRank2 {
    #[input(memory = host, dtype = u8, rank = 2)]
    input: Input<Tensor>,
}
impl Operator for NeedsRank2 {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
}

#[test]
fn a_pass_through_tensor_of_another_rank_is_a_protocol_error() {
    let result = Arc::new(Mutex::new(None));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let p = g
        .add_operator(
            "p",
            PassThrough1 {
                out: Output::default(),
                result: Arc::clone(&result),
            },
            d(),
        )
        .unwrap();
    let c = g
        .add_operator(
            "c",
            NeedsRank2 {
                input: Input::default(),
            },
            d(),
        )
        .unwrap();
    g.add_flow(p.out, c.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(10));
    session.join().unwrap();
    assert_eq!(*result.lock().unwrap(), Some(ErrorCode::ProtocolError));
}

// ---- 6. a port moved to another thread is refused, never raced -------------------------

#[operator]
struct MovesItsInput {
    input: Input<u64>,
    got: Arc<Mutex<Vec<Option<u64>>>>,
}

impl Operator for MovesItsInput {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let mut input = std::mem::take(&mut self.input);
        let got = std::thread::spawn(move || input.receive()).join().unwrap();
        self.got.lock().unwrap().push(got);
        Ok(())
    }
}

#[test]
fn an_input_moved_to_another_thread_takes_nothing_and_stops_the_session() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            d(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "thief",
            MovesItsInput {
                input: Input::default(),
                got: Arc::clone(&got),
            },
            d(),
        )
        .unwrap();
    g.add_flow(s.out, k.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(3)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(10));
    let e = session.join().unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
    assert!(e.to_string().contains("\"thief\", port \"input\""), "{e}");
    assert_eq!(got.lock().unwrap().first(), Some(&None));
}

#[operator]
struct EmitsFromAThread {
    out: Output<u64>,
    result: Arc<Mutex<Option<ErrorCode>>>,
}

impl Operator for EmitsFromAThread {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let mut out = std::mem::take(&mut self.out);
        let r = std::thread::spawn(move || out.emit(1u64, EmitOptions::default()))
            .join()
            .unwrap();
        *self.result.lock().unwrap() = r.err().map(|e| e.code());
        ctx.request_stop();
        Ok(())
    }
}

#[test]
fn an_output_moved_to_another_thread_publishes_nothing() {
    let result = Arc::new(Mutex::new(None));
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g
        .add_operator(
            "source",
            EmitsFromAThread {
                out: Output::default(),
                result: Arc::clone(&result),
            },
            d(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "sink",
            SlowSink {
                input: Input::default(),
                sleep: Duration::ZERO,
                got: Arc::clone(&got),
            },
            d(),
        )
        .unwrap();
    g.add_flow(s.out, k.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(10));
    let report = session.join().unwrap();
    assert_eq!(*result.lock().unwrap(), Some(ErrorCode::NotSupported));
    assert!(got.lock().unwrap().is_empty());
    assert_eq!(report.received, [("sink".to_owned(), 0)]);
}

// ---- 8. dropping a session without join stops every operator ---------------------------

#[operator]
struct Stops {
    input: Input<u64>,
    stopped: Arc<AtomicU64>,
}

impl Operator for Stops {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.stopped.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn dropping_a_session_without_join_runs_every_stop() {
    let stopped = Arc::new(AtomicU64::new(0));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            d(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "stops",
            Stops {
                input: Input::default(),
                stopped: Arc::clone(&stopped),
            },
            d(),
        )
        .unwrap();
    g.add_flow(s.out, k.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(10)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(10)));
    drop(session);
    assert_eq!(stopped.load(Ordering::SeqCst), 1);
}

// ---- 9. a port handle of another graph is a diagnostic ----------------------------------

#[test]
fn a_port_handle_of_another_graph_is_a_diagnostic_not_a_panic() {
    let d = || ParamSet::defaults().unwrap();
    let mut other = Graph::new();
    for i in 0..3 {
        other
            .add_operator(
                &format!("pad{i}"),
                Counter {
                    out: Output::default(),
                    n: 0,
                },
                d(),
            )
            .unwrap();
    }
    let foreign = other
        .add_operator(
            "foreign",
            Sink64 {
                input: Input::default(),
                started: Arc::default(),
            },
            d(),
        )
        .unwrap();
    let mut g = Graph::new();
    let s = g
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            d(),
        )
        .unwrap();
    g.add_flow(s.out, foreign.input, ConnectionOptions::default());
    let e = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(e.codes(), vec![codes::GRAPH_FOREIGN_PORT], "{e}");
    assert!(e.to_string().contains("the input port"), "{e}");

    // A handle whose index exists in this graph is refused too, never wired to whatever
    // operator has that index here.
    let mut a = Graph::new();
    let src = a
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            d(),
        )
        .unwrap();
    let mut b = Graph::new();
    b.add_operator(
        "sink",
        Sink64 {
            input: Input::default(),
            started: Arc::default(),
        },
        d(),
    )
    .unwrap();
    let b_src = b
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            d(),
        )
        .unwrap();
    let _ = b_src;
    let sink_in_a = a
        .add_operator(
            "sink",
            Sink64 {
                input: Input::default(),
                started: Arc::default(),
            },
            d(),
        )
        .unwrap();
    b.add_flow(src.out, sink_in_a.input, ConnectionOptions::default());
    let e = compile(&b, CompileOptions::default()).unwrap_err();
    assert_eq!(
        e.codes(),
        vec![codes::GRAPH_FOREIGN_PORT, codes::GRAPH_FOREIGN_PORT]
            .into_iter()
            .take(1)
            .collect::<Vec<_>>(),
        "{e}"
    );
    assert!(e.to_string().contains("both ports"), "{e}");
}

/// A session of the one operator `op` (named `name`), its output `port` bound to
/// `device`, running `frames` frames: its plan and the session.
fn one_operator_on<O: Operator>(
    device: &Arc<dyn DeviceBackend>,
    name: &str,
    op: O,
    port: &str,
    frames: u64,
) -> (holo_runtime::plan::ExecutionPlan, RunSession) {
    let mut g = Graph::new();
    g.add_operator_with_defaults(name, op).unwrap();
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device(name, port, device.device_id());
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(frames).on_device(Arc::clone(device)),
    )
    .unwrap();
    (plan, session)
}

/// In `start`, releases a device slot that a caller's stream still reads: the stream is
/// delayed 300 ms, waits on the slot's readiness and records its release there.
#[operator]
struct EarlyRelease {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 64, max_loans = 1)]
    out: Output<Tensor>,
    caller: Arc<Mutex<Option<holo_runtime::device::StreamHandle>>>,
}

impl Operator for EarlyRelease {
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        let device = Arc::clone(cuda.backend());
        let loan = self.out.allocate_tensor(TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        })?;
        let t = loan
            .write_and_commit(cuda.stream(), |d, ptr, n, s| {
                // SAFETY: the slot is the loan's, `n` its byte size.
                unsafe { d.memset_async(ptr, 1, n, s) }
            })?
            .into_tensor();
        let caller = device.create_stream()?;
        device.enqueue_delay(caller, Duration::from_millis(300))?;
        drop(t.device_array(holo_runtime::device::StreamOrQueue::Backend(caller))?);
        *self.caller.lock().unwrap() = Some(caller);
        // `t` is the slot's last handle: it retires here, during `start`.
        Ok(())
    }

    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// The retirement worker started after every operator's `start`: a device slot released
/// in `start` found no worker and went straight back to its pool, while a caller's stream
/// was still to read it (its release event 300 ms away). The worker runs before any
/// `start` now, and the slot comes back only once the release event completed.
#[test]
fn a_slot_released_in_start_waits_for_its_release_event() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let caller = Arc::new(Mutex::new(None));
    let started = std::time::Instant::now();
    let (plan, session) = one_operator_on(
        &device,
        "early",
        EarlyRelease {
            out: Output::default(),
            caller: Arc::clone(&caller),
        },
        "out",
        0,
    );
    let slots = plan.tensor_allocation("early.out").unwrap().slot_count;
    let free = session.pool_free_slots("early.out").unwrap();
    if started.elapsed() < Duration::from_millis(250) {
        assert_eq!(free, slots - 1, "the slot waits for the caller's release");
    }
    assert!(session.wait_idle(Duration::from_secs(20)));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while session.pool_free_slots("early.out").unwrap() < slots {
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never came back"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(started.elapsed() >= Duration::from_millis(300));
    session.join().unwrap();
    let caller = caller.lock().unwrap().take().unwrap();
    device.synchronize_stream(caller).unwrap();
    device.destroy_stream(caller).unwrap();
}

/// Fires on arrival at an optional input nothing feeds: never.
#[operator(trigger = on_arrival(input))]
struct NeverFires {
    #[input(optional)]
    input: Input<u64>,
    fired: Arc<AtomicU64>,
}

impl Operator for NeverFires {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.fired.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Fires when any connected input has data: it has none connected.
#[operator(trigger = any_input)]
struct NeverFiresEither {
    #[input(optional)]
    input: Input<u64>,
    fired: Arc<AtomicU64>,
}

impl Operator for NeverFiresEither {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.fired.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// An operator with no connected input counted as a pending source even when it can
/// never fire, so `wait_idle` never saw the run end (it returned `false` at every
/// timeout). It is done from the start now.
#[test]
fn an_operator_that_can_never_fire_does_not_keep_the_run_from_ending() {
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let k = g
        .add_operator(
            "sink",
            Sink64 {
                input: Input::default(),
                started: Arc::default(),
            },
            d(),
        )
        .unwrap();
    counted(&mut g, k.input);
    let fired = Arc::new(AtomicU64::new(0));
    g.add_operator(
        "never",
        NeverFires {
            input: Input::default(),
            fired: Arc::clone(&fired),
        },
        d(),
    )
    .unwrap();
    g.add_operator(
        "never_either",
        NeverFiresEither {
            input: Input::default(),
            fired: Arc::clone(&fired),
        },
        d(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(3)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)), "the run ends");
    let report = session.join().unwrap();
    assert_eq!(fired.load(Ordering::Relaxed), 0);
    assert!(
        report
            .received
            .iter()
            .any(|(name, n)| name == "sink" && *n == 3),
        "{report:?}"
    );
}

/// Keeps the last device frame it received, on the producer's stream (a fused edge).
#[operator]
struct DeviceKeeper {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    kept: Arc<Mutex<Option<Tensor>>>,
}

impl Operator for DeviceKeeper {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            *self.kept.lock().unwrap() = Some(t);
        }
        Ok(())
    }
}

/// `src` (device frames of 7s, bound to `device`) → `keep`, which keeps the last frame it
/// received in the returned slot: the graph and its plan.
fn keeper_graph(
    device: &Arc<dyn DeviceBackend>,
) -> (
    Graph,
    holo_runtime::plan::ExecutionPlan,
    Arc<Mutex<Option<Tensor>>>,
) {
    let kept = Arc::new(Mutex::new(None));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g.add_operator("src", DevSource::new(), d()).unwrap();
    let k = g
        .add_operator(
            "keep",
            DeviceKeeper {
                frames: Input::default(),
                kept: Arc::clone(&kept),
            },
            d(),
        )
        .unwrap();
    g.add_flow(s.frames, k.frames, ConnectionOptions::default());
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.device_id());
    let plan = compile(&g, options).unwrap();
    (g, plan, kept)
}

/// A tensor of a fused edge has its readiness elided: a host wait or a copy from another
/// stream records it lazily on the writer's stream. Kept past its session, that stream is
/// destroyed: `synchronize_for_host` and `copy_to_host` failed with `InvalidArgument`
/// ("not a live stream"), though the teardown had synchronized the stream and the bytes
/// were complete. They work now, and `sdk_stream` names no dead stream.
#[test]
fn a_fused_tensor_kept_past_its_session_is_readable() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let (g, plan, kept) = keeper_graph(&device);
    assert!(plan.edges()[0].fusion.is_some(), "a fused edge");
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(3).on_device(Arc::clone(&device)),
    )
    .unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    // The kept frame holds its slot: join says so.
    let e = session.join().unwrap_err();
    assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{e}");
    let t = kept.lock().unwrap().take().expect("a kept frame");
    assert_eq!(t.sdk_stream(), None, "the writer's stream is gone");
    t.synchronize_for_host().unwrap_or_else(|e| panic!("{e}"));
    let stream = device.create_stream().unwrap();
    let mut bytes = [0u8; 64];
    t.copy_to_host(&mut bytes, stream)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(bytes.iter().all(|&b| b == 7));
    drop(t);
    device.destroy_stream(stream).unwrap();
}

/// A stepped session owns its pools' private free lists on the stepping thread. Joined on
/// another thread, the slots on that thread's private stack kept a count of their pool
/// each, so the pool (its device memory, its events) was never freed, and `join` said
/// nothing. The teardown gives them back from any thread now.
#[test]
fn a_stepped_session_joined_on_another_thread_frees_its_pools() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let before = device.counters().snapshot();
    let (g, plan, _) = keeper_graph(&device);
    let mut session = RunSession::start_stepped(
        g,
        &plan,
        SessionOptions::frames(5).on_device(Arc::clone(&device)),
    )
    .unwrap();
    for _ in 0..20 {
        session.step().unwrap();
    }
    std::thread::spawn(move || session.join())
        .join()
        .unwrap()
        .unwrap();
    let calls = device.counters().snapshot() - before;
    assert_eq!(calls.alloc, 1, "one pool");
    assert_eq!(calls.free, 1, "the pool was freed");
}

/// Receives every frame; after the last one, hands its input to a thread of its own that
/// receives once `go` is set (a port used on another thread: `NotSupported`).
#[operator]
struct HandsItsInputAway {
    input: Input<u64>,
    seen: u64,
    go: Arc<std::sync::atomic::AtomicBool>,
    helper: Arc<Mutex<Option<std::thread::JoinHandle<bool>>>>,
}

impl Operator for HandsItsInputAway {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {
            self.seen += 1;
        }
        if self.seen == 3 && self.helper.lock().unwrap().is_none() {
            let mut input = std::mem::take(&mut self.input);
            let go = Arc::clone(&self.go);
            *self.helper.lock().unwrap() = Some(std::thread::spawn(move || {
                while !go.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                input.receive().is_none()
            }));
        }
        Ok(())
    }
}

/// A port used on another thread records `NotSupported` for the session, which only an
/// activation took: after the operator's last activation it was lost, and `join` said
/// `Ok`. The operator's stop takes it now.
#[test]
fn a_port_used_on_another_thread_after_the_last_activation_fails_the_session() {
    let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let helper = Arc::new(Mutex::new(None));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let k = g
        .add_operator(
            "sink",
            HandsItsInputAway {
                input: Input::default(),
                seen: 0,
                go: Arc::clone(&go),
                helper: Arc::clone(&helper),
            },
            d(),
        )
        .unwrap();
    counted(&mut g, k.input);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(3)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    go.store(true, Ordering::Release);
    let handle = helper
        .lock()
        .unwrap()
        .take()
        .expect("the input was handed away");
    assert!(handle.join().unwrap(), "the foreign receive took nothing");
    let e = session.join().unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
    assert!(e.to_string().contains("sink"), "{e}");
}

/// A tensor kept past its session, handed to a caller's stream after the teardown: the
/// array's release is recorded on that stream when it drops, behind the caller's work.
/// The tensor's last handle then went back to the closed pool and freed its memory at
/// once, under that work (it waited only for streams a user call had registered). It
/// waits for every release event of the slot now.
#[test]
fn a_kept_tensors_pool_is_not_freed_under_a_callers_work() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let (g, plan, kept) = keeper_graph(&device);
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(3).on_device(Arc::clone(&device)),
    )
    .unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    let _ = session.join();
    let t = kept.lock().unwrap().take().expect("a kept frame");
    let caller = device.create_stream().unwrap();
    let array = t.device_array(caller).unwrap();
    device
        .enqueue_delay(caller, Duration::from_millis(200))
        .unwrap();
    let mut dst = vec![0u8; 64];
    // SAFETY: `dst` lives until the end of the test, after the caller's stream ran the
    // copy (the release the tensor's drop waits for is recorded behind it).
    unsafe {
        device
            .copy_to_host_async(dst.as_mut_ptr(), array.data_ptr(), 64, caller)
            .unwrap();
    }
    drop(array);
    drop(t);
    // The pool is gone: the caller's copy ran before its memory was freed.
    assert!(dst.iter().all(|&b| b == 7), "{:?}", &dst[..4]);
    assert_eq!((device.counters().snapshot()).free, 1);
    device.synchronize_stream(caller).unwrap();
    device.destroy_stream(caller).unwrap();
}

/// Whether the next loan got the abandoned slot, and what its host-written frame read.
type Abandoned = Arc<Mutex<Option<(bool, Vec<u8>)>>>;

/// Abandons a device write of a pinned slot (a fill 100 ms away on its stream), then
/// writes the next loan on the host; notes whether it got the same slot and what the
/// host-written frame reads 150 ms later.
#[operator]
struct AbandonsAWrite {
    #[output(storage = runtime_pool, memory = pinned, dtype = u8, rank = 1, bounds = 64, max_loans = 1)]
    frames: Output<Tensor>,
    seen: Abandoned,
}

impl Operator for AbandonsAWrite {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if self.seen.lock().unwrap().is_some() {
            return Ok(());
        }
        let device = Arc::clone(ctx.device().unwrap());
        let req = TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        };
        let guard = self
            .frames
            .allocate_tensor(req)?
            .write(ctx.cuda_stream()?)?;
        let first = guard.device_ptr();
        device.enqueue_delay(guard.stream(), Duration::from_millis(100))?;
        // SAFETY: the slot is the guard's, 64 bytes.
        unsafe { device.memset_async(first, 0xAA, 64, guard.stream())? };
        drop(guard); // uncommitted: the fill is abandoned, still pending
        let t = self
            .frames
            .allocate_tensor(req)?
            .write_host_and_commit(|b| b.fill(0x11))?
            .into_tensor();
        let same = t.device_ptr() == first;
        std::thread::sleep(Duration::from_millis(150));
        *self.seen.lock().unwrap() = Some((same, t.data()?.to_vec()));
        Ok(())
    }
}

/// An uncommitted device write went back to its pool with its writes still pending: a
/// host write of the slot's next loan was then overwritten by the abandoned fill. The
/// guard waits for its stream when its writes could be overtaken (host-accessible memory,
/// or another stream than the planned one).
#[test]
fn an_abandoned_device_write_does_not_land_on_the_slots_next_use() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let seen = Arc::new(Mutex::new(None));
    let (_, session) = one_operator_on(
        &device,
        "w",
        AbandonsAWrite {
            frames: Output::default(),
            seen: Arc::clone(&seen),
        },
        "frames",
        1,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen.lock().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "no frame");
        std::thread::sleep(Duration::from_millis(5));
    }
    session.stop();
    session.join().unwrap();
    let (same, bytes) = seen.lock().unwrap().take().unwrap();
    assert!(same, "the next loan got the abandoned slot");
    assert!(bytes.iter().all(|&b| b == 0x11), "{:?}", &bytes[..4]);
}

/// Loans two `f32` frames of its pool at once and notes their addresses.
#[operator]
struct OddBound {
    #[output(storage = runtime_pool, memory = host, dtype = f32, rank = 1, bounds = 1002, max_loans = 2)]
    out: Output<Tensor>,
    addresses: Arc<Mutex<Vec<usize>>>,
}

impl Operator for OddBound {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let req = TensorLoanRequest {
            shape: &[250],
            dtype: DType::F32,
        };
        let mut a = self.out.allocate_tensor(req)?.write_host()?;
        let mut b = self.out.allocate_tensor(req)?.write_host()?;
        self.addresses.lock().unwrap().extend([
            a.as_mut_slice().as_ptr() as usize,
            b.as_mut_slice().as_ptr() as usize,
        ]);
        ctx.request_stop();
        Ok(())
    }
}

/// Slots are `per_slot_bytes` apart: a bound of 1002 bytes for `f32` put every other slot
/// at an address no `f32` may start at (a kernel's typed loads fault). The bound is
/// rounded up to the dtype's size, and the derivation says so.
#[test]
fn a_slot_bound_is_aligned_to_its_dtype() {
    let addresses = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    g.add_operator_with_defaults(
        "odd",
        OddBound {
            out: Output::default(),
            addresses: Arc::clone(&addresses),
        },
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert_eq!(
        plan.tensor_allocation("odd.out").unwrap().per_slot_bytes,
        1004
    );
    assert_eq!(
        plan.tensor_byte_span_derivations()[0].expression,
        "align(tensor_bounds(1002), 4)"
    );
    let session = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(20));
    session.join().unwrap();
    let addresses = addresses.lock().unwrap();
    assert_eq!(addresses.len(), 2);
    for a in addresses.iter() {
        assert_eq!(a % 4, 0, "{a:#x} is no f32 address");
    }
}
