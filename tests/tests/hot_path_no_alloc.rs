//! Zero heap allocations per frame in steady state, on every thread of a running session,
//! checked with a counting global allocator: an in-partition chain and a cross-partition
//! fork, each moving host tensors from a runtime pool through `allocate_tensor` →
//! `write_host_and_commit` → `emit` → `receive` → drop; and a clock-driven window
//! pipeline (a clock source with a nominal rate → a clock-triggered window consumer with
//! retained history and `reuse_last`, reading `ctx.rate` on every activation); and the
//! same chain and fork read in place (`Input::receive_with`: a forwarder that clones the
//! tensor into its output, sinks that read its bytes where it lies), with a 256-byte
//! value by value beside it.
//!
//! One test function per binary: the allocator counts process-wide, so nothing else may
//! run while it measures.
#![allow(
    clippy::many_single_char_names,
    reason = "graph-building tests name port handles by one letter"
)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{ByteSink, ByteSource, Forward};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, compile, operator,
};
use std::sync::Arc;

/// A clock-driven source with a declared nominal rate.
#[operator(trigger = clock(hz = 20000))]
struct ClockSource {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 64,
        nominal_rate = Rate::hz(20000))]
    frames: Output<Tensor>,
}

impl Operator for ClockSource {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        assert!(ctx.rate(&self.frames).rate.is_some());
        let loan = match self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let committed = loan.write_host_and_commit(|b| b.fill(7))?;
        match self.frames.emit(committed, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// A clock-triggered window consumer with history.
#[operator(trigger = clock(hz = 5000))]
struct WindowSink {
    #[input(window, history = 3, missing = reuse_last)]
    frames: Input<Tensor>,
    received: Arc<AtomicU64>,
}

impl Operator for WindowSink {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let _ = ctx.rate(&self.frames);
        let mut n = 0;
        while self.frames.receive().is_some() {
            n += 1;
        }
        let (a, b) = self.frames.history();
        assert!(a.len() + b.len() <= 3);
        self.received.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }
}

/// Forwards each tensor it reads in place: a clone (a reference count) into its output.
#[operator]
struct InPlaceForward {
    input: Input<Tensor>,
    #[output(storage = pass_through, forwards = input)]
    output: Output<Tensor>,
}

impl Operator for InPlaceForward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(sent) = self
            .input
            .receive_with(|t| self.output.emit(t.clone(), EmitOptions::default()))
        {
            sent?;
        }
        Ok(())
    }
}

/// Checks every byte of each tensor where it lies in the queue, and counts them.
#[operator]
struct InPlaceSink {
    #[input(memory = host, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    expect: u8,
    received: Arc<AtomicU64>,
}

impl Operator for InPlaceSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let expect = self.expect;
        while let Some(good) = self
            .frames
            .receive_with(|t| t.data().map(|b| b.iter().all(|&x| x == expect)))
        {
            assert!(good?, "a byte differs");
            self.received.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// 256 bytes by value.
#[derive(Clone)]
struct Bytes256([u8; 256]);

/// Emits `Bytes256` values.
#[operator]
struct ValueSource {
    out: Output<Bytes256>,
    n: u8,
}

impl Operator for ValueSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n = self.n.wrapping_add(1);
        self.out
            .emit(Bytes256([self.n; 256]), EmitOptions::default())
    }
}

/// Forwards a clone of each value it reads in place.
#[operator]
struct ValueForward {
    input: Input<Bytes256>,
    out: Output<Bytes256>,
}

impl Operator for ValueForward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(sent) = self
            .input
            .receive_with(|v| self.out.emit(v.clone(), EmitOptions::default()))
        {
            sent?;
        }
        Ok(())
    }
}

/// Reads two bytes of each value in place.
#[operator]
struct ValueSink {
    input: Input<Bytes256>,
    received: Arc<AtomicU64>,
}

impl Operator for ValueSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(same) = self.input.receive_with(|v| v.0[0] == v.0[255]) {
            assert!(same);
            self.received.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[global_allocator]
static GLOBAL: holo_tests::counting::Counting = holo_tests::counting::Counting;

fn wait_until(counter: &AtomicU64, at_least: u64) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while counter.load(Ordering::Relaxed) < at_least {
        assert!(
            Instant::now() < deadline,
            "the pipeline stopped making progress"
        );
        std::thread::yield_now();
    }
}

/// Runs `graph` free (no frame limit), lets it warm up for 500 frames at the sinks, then
/// counts allocations over the next 5,000.
fn allocations_per_5000_frames(graph: Graph, received: &[&AtomicU64]) -> u64 {
    let plan = compile(&graph, CompileOptions::default()).unwrap();
    let session = RunSession::start(graph, &plan, SessionOptions::default()).unwrap();
    for r in received {
        wait_until(r, 500);
    }
    let mut marks: Vec<u64> = Vec::with_capacity(received.len());
    let before = holo_tests::counting::allocations();
    marks.extend(received.iter().map(|r| r.load(Ordering::Relaxed) + 5_000));
    for (r, m) in received.iter().zip(&marks) {
        wait_until(r, *m);
    }
    let after = holo_tests::counting::allocations();
    session.join().unwrap();
    after - before
}

#[test]
fn steady_state_frames_allocate_nothing() {
    holo_tests::counting::assert_counting();
    // In-partition: src → fwd → sink is a linear chain, one partition, one thread.
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(256, 5);
    let (sink, stats) = ByteSink::new(5, 0);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let f = g
        .add_operator("fwd", Forward::new(), ParamSet::defaults().unwrap())
        .unwrap();
    let k = g
        .add_operator("sink", sink, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.frames, f.input, ConnectionOptions::default());
    g.add_flow(f.output, k.frames, ConnectionOptions::default());
    let chain = allocations_per_5000_frames(g, &[&stats.received]);
    assert_eq!(chain, 0, "allocations over 5,000 in-partition frames");

    // Cross-partition: a fork, each leg on its own thread, with drop-oldest on one leg.
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(256, 6);
    let (left, l_stats) = ByteSink::new(6, 0);
    let (right, r_stats) = ByteSink::new(6, 0);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let l = g
        .add_operator("left", left, ParamSet::defaults().unwrap())
        .unwrap();
    let r = g
        .add_operator("right", right, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(
        a.frames,
        l.frames,
        ConnectionOptions::default().with_queue_depth(4),
    );
    g.add_flow(
        a.frames,
        r.frames,
        ConnectionOptions::default()
            .with_queue_depth(2)
            .with_policy(holo_runtime::QueuePolicy::DropOldest),
    );
    let fork = allocations_per_5000_frames(g, &[&l_stats.received, &r_stats.received]);
    assert_eq!(fork, 0, "allocations over 5,000 cross-partition frames");

    // Clock and window: the contract schedules both ends.
    let mut g = Graph::new();
    let received = Arc::new(AtomicU64::new(0));
    let clock_src = g
        .add_operator(
            "clock_src",
            ClockSource {
                frames: Output::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let window = g
        .add_operator(
            "window",
            WindowSink {
                frames: Input::default(),
                received: Arc::clone(&received),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(
        clock_src.frames,
        window.frames,
        ConnectionOptions::default(),
    );
    let clocked = allocations_per_5000_frames(g, &[&received]);
    assert_eq!(clocked, 0, "allocations over 5,000 clock/window frames");

    // Read in place: src → forward → sink in one partition, and a fork whose legs cross
    // partitions (there `receive_with` receives the value, then lends it).
    let in_place_sink = |g: &mut Graph, name: &str, received: &Arc<AtomicU64>| {
        g.add_operator(
            name,
            InPlaceSink {
                frames: Input::default(),
                expect: 9,
                received: Arc::clone(received),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap()
    };
    let mut g = Graph::new();
    let received = Arc::new(AtomicU64::new(0));
    let (src, _) = ByteSource::new(256, 9);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let f = g
        .add_operator(
            "fwd",
            InPlaceForward {
                input: Input::default(),
                output: Output::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let k = in_place_sink(&mut g, "sink", &received);
    g.add_flow(a.frames, f.input, ConnectionOptions::default());
    g.add_flow(f.output, k.frames, ConnectionOptions::default());
    let chain = allocations_per_5000_frames(g, &[&received]);
    assert_eq!(
        chain, 0,
        "allocations over 5,000 in-place in-partition frames"
    );

    let mut g = Graph::new();
    let (left_received, right_received) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (src, _) = ByteSource::new(256, 9);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let l = in_place_sink(&mut g, "left", &left_received);
    let r = in_place_sink(&mut g, "right", &right_received);
    g.add_flow(a.frames, l.frames, ConnectionOptions::default());
    g.add_flow(
        a.frames,
        r.frames,
        ConnectionOptions::default()
            .with_queue_depth(2)
            .with_policy(holo_runtime::QueuePolicy::DropOldest),
    );
    let fork = allocations_per_5000_frames(g, &[&left_received, &right_received]);
    assert_eq!(
        fork, 0,
        "allocations over 5,000 in-place cross-partition frames"
    );

    // 256 bytes by value, read in place.
    let mut g = Graph::new();
    let received = Arc::new(AtomicU64::new(0));
    let s = g
        .add_operator(
            "src",
            ValueSource {
                out: Output::default(),
                n: 0,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let f = g
        .add_operator(
            "fwd",
            ValueForward {
                input: Input::default(),
                out: Output::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "sink",
            ValueSink {
                input: Input::default(),
                received: Arc::clone(&received),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(s.out, f.input, ConnectionOptions::default());
    g.add_flow(f.out, k.input, ConnectionOptions::default());
    let values = allocations_per_5000_frames(g, &[&received]);
    assert_eq!(values, 0, "allocations over 5,000 in-place 256-byte frames");
}
