//! Device faults injected into a running pipeline (issue 16, item 4): a
//! [`FaultInjecting`] backend over the software device fails the N-th call of one kind —
//! for every kind of device call and every N up to the number of such calls a run makes
//! (sampled past the first few) — and each case asserts what the rules promise:
//!
//! - a failure while the session starts fails `RunSession::start` with the injected code,
//!   and everything made so far is destroyed: no stream, event or allocation alive, no
//!   holo thread left;
//! - a failure on the hot path stops the session, `join` returns the injected code, and
//!   nothing is left alive either;
//! - a failed `free` or `destroy_*` leaves exactly that one object alive (the device
//!   refused to destroy it) and is reported by `join`, never swallowed.
//!
//! The pipeline is a fork across three partitions on `cuda_device` memory: a source fills
//! each frame on its stream, a forwarder copies it into its own pool on its stream, two
//! sinks receive (one from the source, one from the forwarder) and read each frame's first
//! bytes back to check them (one waits on the host for the readiness first). The source
//! holds its stream back 20 µs per frame and completions arrive late (the software
//! device's completion delay), so releases are really polled. Every call kind of the
//! backend is made by a clean run (asserted), so every kind is failed.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::holo_threads_settled;
use holo_runtime::device::{CallKind, DeviceBackend, FaultInjecting, SoftwareDevice};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, LifecycleContext, Operator, Output, ParamSet, PartitionSpec, Partitioning,
    Result, RunReport, RunSession, SessionOptions, Tensor, TensorLoanRequest, compile, operator,
};

const LEN: u64 = 64;
const FRAMES: u64 = 12;
/// The code every injected fault carries (one no part of the pipeline returns itself).
const CODE: ErrorCode = ErrorCode::DeviceUnavailable;

/// `ResourceExhausted` and `Backpressured` are flow control here, not failures.
fn flow(result: Result<()>) -> Result<()> {
    match result {
        Err(e)
            if matches!(
                e.code(),
                ErrorCode::ResourceExhausted | ErrorCode::Backpressured
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Where an operator fails on purpose (the operator-failure cases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Start,
    /// In `compute`, at the operator's first frame (a source's first activation, a
    /// consumer's first received tensor): counted per frame, because a consumer may take
    /// every queued frame in one activation, and only the first frame is sure to reach
    /// every consumer (a later one may meet a full queue).
    Compute,
    Stop,
}

/// An operator failure to inject: in which phase, and by returning an error (with
/// [`OPERATOR_CODE`]) or by panicking.
#[derive(Clone, Copy, Debug, Default)]
struct Fault {
    at: Option<Phase>,
    panic: bool,
}

/// The code an operator's injected error carries (nothing else in the pipeline returns it).
const OPERATOR_CODE: ErrorCode = ErrorCode::NotFound;

impl Fault {
    fn check(self, phase: Phase, activation: u64) -> Result<()> {
        if self.at != Some(phase) || phase == Phase::Compute && activation != 1 {
            return Ok(());
        }
        assert!(!self.panic, "an injected {phase:?} panic");
        Err(Error::new(
            OPERATOR_CODE,
            format!("an injected {phase:?} failure"),
        ))
    }
}

/// `start`, `stop` and the activation count every test operator shares.
macro_rules! lifecycle {
    () => {
        fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
            self.fault.check(Phase::Start, 0)
        }

        fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
            self.fault.check(Phase::Stop, 0)
        }
    };
}

#[operator]
struct Source {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 64)]
    frames: Output<Tensor>,
    fault: Fault,
    n: u64,
}

impl Operator for Source {
    lifecycle!();

    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        self.fault.check(Phase::Compute, self.n)?;
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device operator has a device"));
        flow((|| {
            let loan = self.frames.allocate_tensor(TensorLoanRequest {
                shape: &[LEN],
                dtype: DType::U8,
            })?;
            let guard = loan.write(stream)?;
            device.enqueue_delay(guard.stream(), Duration::from_micros(20))?;
            // SAFETY: the guard owns the slot until commit; the fill stays inside it.
            unsafe {
                device.memset_async(guard.device_ptr(), 7, guard.byte_size(), guard.stream())?;
            };
            self.frames.emit(guard.commit()?, EmitOptions::default())
        })())
    }
}

#[operator]
struct Forward {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 64)]
    out: Output<Tensor>,
    fault: Fault,
    n: u64,
}

impl Operator for Forward {
    lifecycle!();

    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device operator has a device"));
        while let Some(t) = self.input.receive() {
            self.n += 1;
            self.fault.check(Phase::Compute, self.n)?;
            flow((|| {
                let loan = self.out.allocate_tensor(TensorLoanRequest {
                    shape: &[LEN],
                    dtype: DType::U8,
                })?;
                let guard = loan.write(stream)?;
                // SAFETY: both are slots of LEN bytes held until commit / drop; the copy
                // is ordered after the input's readiness (received on this stream).
                unsafe {
                    device.copy_async(
                        guard.device_ptr(),
                        t.device_ptr(),
                        t.byte_size(),
                        guard.stream(),
                    )?;
                };
                self.out.emit(guard.commit()?, EmitOptions::default())
            })())?;
        }
        Ok(())
    }
}

/// Receives; reads each frame's first bytes back to the host (a copy and a stream
/// synchronization, or a host wait on the readiness first) and checks them: a slot reused
/// early, or bytes never written, show as something other than 7.
#[operator]
struct Sink {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    input: Input<Tensor>,
    /// Wait on the host for the readiness event before the copy.
    host_wait: bool,
    fault: Fault,
    n: u64,
}

impl Operator for Sink {
    lifecycle!();

    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        while let Some(t) = self.input.receive() {
            self.n += 1;
            self.fault.check(Phase::Compute, self.n)?;
            if self.host_wait {
                t.synchronize_for_host()?;
            }
            let mut head = [0_u8; 8];
            t.copy_to_host(&mut head, stream)?;
            if head != [7; 8] {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    format!("a frame read back {head:?}, not its fill"),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
enum Outcome {
    StartFailed(Error),
    JoinFailed(Error),
    Ran(RunReport),
    Dropped,
}

/// Builds, starts and runs the fork on `device` for [`FRAMES`] source activations.
fn run(device: &Arc<FaultInjecting>) -> Outcome {
    run_with(device, |_| Fault::default(), true)
}

/// [`run`] with an operator fault per operator name; `join`: join the session (else drop
/// it once idle).
fn run_with(device: &Arc<FaultInjecting>, fault: impl Fn(&str) -> Fault, join: bool) -> Outcome {
    let mut g = Graph::new();
    let params = || ParamSet::defaults().unwrap();
    let src = g
        .add_operator(
            "src",
            Source {
                frames: Output::default(),
                fault: fault("src"),
                n: 0,
            },
            params(),
        )
        .unwrap();
    let fwd = g
        .add_operator(
            "fwd",
            Forward {
                input: Input::default(),
                out: Output::default(),
                fault: fault("fwd"),
                n: 0,
            },
            params(),
        )
        .unwrap();
    let sink_a = g
        .add_operator(
            "sink_a",
            Sink {
                input: Input::default(),
                host_wait: true,
                fault: fault("sink_a"),
                n: 0,
            },
            params(),
        )
        .unwrap();
    let sink_b = g
        .add_operator(
            "sink_b",
            Sink {
                input: Input::default(),
                host_wait: false,
                fault: fault("sink_b"),
                n: 0,
            },
            params(),
        )
        .unwrap();
    g.add_flow(src.frames, fwd.input, ConnectionOptions::default());
    g.add_flow(src.frames, sink_a.input, ConnectionOptions::default());
    g.add_flow(fwd.out, sink_b.input, ConnectionOptions::default());
    let mut options = CompileOptions::default().with_partitioning(Partitioning::Authored(vec![
        PartitionSpec::new("p_src".to_owned(), ["src"]),
        PartitionSpec::new("p_fwd".to_owned(), ["fwd", "sink_b"]),
        PartitionSpec::new("p_a".to_owned(), ["sink_a"]),
    ]));
    options
        .deployment
        .bind_tensor_output_device("src", "frames", 0);
    options
        .deployment
        .bind_tensor_output_device("fwd", "out", 0);
    let plan = compile(&g, options).expect("the fork compiles");
    let backend: Arc<dyn DeviceBackend> = Arc::clone(device) as Arc<dyn DeviceBackend>;
    let session =
        match RunSession::start(g, &plan, SessionOptions::frames(FRAMES).on_device(backend)) {
            Ok(s) => s,
            Err(e) => return Outcome::StartFailed(e),
        };
    session.wait_idle(Duration::from_secs(20));
    if !join {
        drop(session);
        return Outcome::Dropped;
    }
    match session.join() {
        Ok(report) => Outcome::Ran(report),
        Err(e) => Outcome::JoinFailed(e),
    }
}

fn fault_device() -> Arc<FaultInjecting> {
    FaultInjecting::new(SoftwareDevice::with_completion_delay(
        Duration::from_micros(200),
    ))
}

/// The call numbers to fail for a kind a clean run makes `count` calls of: every one of
/// the first eight, then a spread up to the last.
fn ordinals(count: u64) -> BTreeSet<u64> {
    let mut n: BTreeSet<u64> = (1..=count.min(8)).collect();
    let mut k = 8;
    while k < count {
        k = k * 3 / 2;
        n.insert(k.min(count));
    }
    n
}

/// One fault: the `n`-th call of `kind` fails. Returns a description of what went wrong
/// against the rules, or `None`.
fn check(kind: CallKind, n: u64) -> Option<String> {
    let device = fault_device();
    device.fail_nth(kind, n, CODE);
    let outcome = run(&device);
    let fired = device.injected(kind) == 1;
    let live = device.live();
    // A refused destruction leaves exactly that object alive (and is reported).
    let expected_live = match kind {
        CallKind::Free if fired => (0, 0, 1),
        CallKind::DestroyStream if fired => (1, 0, 0),
        CallKind::DestroyEvent if fired => (0, 1, 0),
        _ => (0, 0, 0),
    };
    let case = format!("{kind} call {n}");
    let mut problems = Vec::new();
    match (&outcome, fired) {
        (Outcome::StartFailed(e) | Outcome::JoinFailed(e), true) if e.code() != CODE => {
            problems.push(format!(
                "failed with {:?} instead of {CODE:?}: {e}",
                e.code()
            ));
        }
        (Outcome::Ran(_), true) => problems.push("the injected fault was swallowed".into()),
        (Outcome::StartFailed(e) | Outcome::JoinFailed(e), false) => {
            problems.push(format!("failed with no fault injected: {e}"));
        }
        _ => {}
    }
    if (live.streams, live.events, live.allocations) != expected_live {
        problems.push(format!(
            "left alive: {live:?} (expected (streams, events, allocations) {expected_live:?})"
        ));
    }
    // A stream the device refused to destroy keeps its software worker thread.
    let expected_threads = usize::from(kind == CallKind::DestroyStream && fired);
    let threads = holo_threads_settled(expected_threads);
    if threads != expected_threads {
        problems.push(format!("{threads} holo threads left"));
    }
    (!problems.is_empty()).then(|| format!("{case}: {} ({outcome:?})", problems.join("; ")))
}

#[test]
fn every_device_call_kind_fails_closed_and_leaks_nothing() {
    // A clean run first: how many calls of each kind it makes, and that it leaks nothing.
    let clean = fault_device();
    let Outcome::Ran(report) = run(&clean) else {
        panic!("the clean run failed");
    };
    assert!(report.pools.iter().all(|p| p.free_at_end == p.slot_count));
    assert!(clean.live().is_empty(), "{:?}", clean.live());
    for kind in CallKind::ALL {
        assert!(clean.calls(kind) > 0, "a clean run makes no {kind} call");
    }
    let mut problems = Vec::new();
    let mut injected = Vec::new();
    for kind in CallKind::ALL {
        let count = clean.calls(kind);
        for n in ordinals(count) {
            if let Some(p) = check(kind, n) {
                problems.push(p);
            }
        }
        injected.push(format!("{kind}: {} of {count}", ordinals(count).len()));
    }
    eprintln!("faults injected per kind (cases of calls in a clean run): {injected:?}");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn an_operator_failing_or_panicking_anywhere_stops_the_session_with_its_error() {
    // Every operator, in every partition position, fails in `start`, at its first frame in
    // `compute` or in `stop`, by returning an error or by panicking: the session gives
    // that error back (a panic as `Internal`, naming the phase), from `start` or `join`,
    // and leaves nothing alive.
    let mut problems = Vec::new();
    let mut cases = 0;
    for operator in ["src", "fwd", "sink_a", "sink_b"] {
        for at in [Phase::Start, Phase::Compute, Phase::Stop] {
            for panic in [false, true] {
                cases += 1;
                let device = fault_device();
                let fault = Fault {
                    at: Some(at),
                    panic,
                };
                let outcome = run_with(
                    &device,
                    |name| {
                        if name == operator {
                            fault
                        } else {
                            Fault::default()
                        }
                    },
                    true,
                );
                let case = format!(
                    "{operator} {at:?} {}",
                    if panic { "panic" } else { "error" }
                );
                let ((Outcome::StartFailed(error), Phase::Start)
                | (Outcome::JoinFailed(error), Phase::Compute | Phase::Stop)) = (&outcome, at)
                else {
                    problems.push(format!("{case}: {outcome:?}"));
                    continue;
                };
                let phase = match at {
                    Phase::Start => "start",
                    Phase::Compute => "compute",
                    Phase::Stop => "stop",
                };
                let expected = if panic {
                    ErrorCode::Internal
                } else {
                    OPERATOR_CODE
                };
                if error.code() != expected
                    || panic && !error.to_string().contains(&format!("{phase} panicked"))
                    || !error.to_string().contains(operator)
                {
                    problems.push(format!("{case}: {error}"));
                }
                if !device.live().is_empty() {
                    problems.push(format!("{case}: left alive {:?}", device.live()));
                }
                let threads = holo_threads_settled(0);
                if threads != 0 {
                    problems.push(format!("{case}: {threads} holo threads left"));
                }
            }
        }
    }
    assert_eq!(cases, 24);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_session_dropped_without_join_leaves_nothing_alive() {
    let device = fault_device();
    let outcome = run_with(&device, |_| Fault::default(), false);
    assert!(matches!(outcome, Outcome::Dropped));
    assert!(device.live().is_empty(), "{:?}", device.live());
    assert_eq!(holo_threads_settled(0), 0);
}
