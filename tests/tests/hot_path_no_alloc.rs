//! Zero heap allocations per frame in steady state, on every thread of a running session,
//! checked with a counting global allocator: an in-partition chain and a cross-partition
//! fork, each moving host tensors from a runtime pool through `allocate_tensor` →
//! `write_host_and_commit` → `emit` → `receive` → drop; and a clock-driven window
//! pipeline (a clock source with a nominal rate → a clock-triggered window consumer with
//! retained history and `reuse_last`, reading `ctx.rate` on every activation).
//!
//! One test function per binary: the allocator counts process-wide, so nothing else may
//! run while it measures.
#![allow(
    clippy::many_single_char_names,
    reason = "graph-building tests name port handles by one letter"
)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
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

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

struct CountingAllocator;

// SAFETY: every call forwards to `System`; the counter is a static atomic.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded from the caller.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

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
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    marks.extend(received.iter().map(|r| r.load(Ordering::Relaxed) + 5_000));
    for (r, m) in received.iter().zip(&marks) {
        wait_until(r, *m);
    }
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    session.join().unwrap();
    after - before
}

#[test]
fn steady_state_frames_allocate_nothing() {
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
}
