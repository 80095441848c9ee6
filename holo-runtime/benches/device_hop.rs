//! Device hops through a running session, each beside the same CUDA calls made raw in
//! the same process (DESIGN.md, "Performance method"). On CUDA the raw side calls
//! `cudarc::driver::sys` directly; on the software device it calls the backend trait.
//!
//! Scenarios (256-byte `device` frames (`cuda_device` on CUDA); "fill" = `cuMemsetD8Async`, a consumer's
//! work = a 256-byte device-to-device copy on its own stream):
//! Copies are `cuMemcpyAsync` on both sides. holo's operators fill and copy through
//! `ctx.cuda()?` (`DeviceAccess::memset_async`, `copy_async`), as an operator author
//! would: the backend's call on the operator's own stream, which the session keeps live,
//! so without the handle check that a bare `StreamHandle` needs.
//! - **fenced hop**: producer on S1 → consumer on S2 (two partitions). Raw: fill S1,
//!   record E on S1, wait S2 on E, copy on S2, record R on S2, poll R before reusing the
//!   slot. Target ≤ 1.15× raw.
//! - **fused hop**: producer → consumer on one stream (a proven linear edge). Raw: fill and
//!   copy on S. Target ≤ 1.05× raw and zero event calls.
//! - **4-operator chain** (fused) and **1→2 fork** (fenced): sustained frames/s, target
//!   ≥ 0.9× raw throughput.
//!
//! Pools declare `max_loans = 4`, so a producer has about as many slots in flight
//! (4 queued + 1 held + 4 loans + 1 retiring) as the raw ring has (8).
//!
//! Each row: ns per frame in steady state (10,000 frames after 2,000, timed by the sink
//! on its own thread), medians of 15 interleaved holo/raw pairs (each side on a fresh
//! thread, alternating which runs first), the ratio balanced over that order (the median,
//! over consecutive pairs of pairs, of their two ratios' geometric mean: a run right after
//! one of the other side runs slower, see [`balanced`]), and the event calls per frame
//! holo made (device counters). For the fenced hop and the fork a second
//! baseline spreads the same raw calls over threads as holo does (a producer thread that
//! polls the release events and a thread per consumer): holo's partitions submit from
//! several threads, and that figure shows how much of holo's result that alone explains.
//!
//! `HOLO_BENCH_IDLE_SPIN_US` sets holo's `SessionOptions::idle_spin` (default 50 µs),
//! `HOLO_BENCH_PAIRS` the pairs, `HOLO_BENCH_ONLY=fused` (comma-separated parts of the
//! scenario names) runs only those scenarios, `HOLO_BENCH_VERBOSE=1` prints every pair; `diag` prints
//! where a hop's driver time goes per thread (`device_hop/diag.rs`), `diag-null` holo's
//! own cost on a device that does nothing.
//!
//! ```text
//! cargo bench -p holo-runtime --bench device_hop            # software device
//! HOLO_DEVICE=cuda ./device_hop-* --bench                   # on the GPU machine
//! HOLO_DEVICE=cuda HOLO_BENCH_ONLY=fused,chain taskset -c 2 ./device_hop-* --bench  # one core
//! HOLO_DEVICE=cuda HOLO_BENCH_IDLE_SPIN_US=0 ./device_hop-* --bench
//! HOLO_DEVICE=cuda ./device_hop-* diag
//! HOLO_BENCH_NULL_SHAPE=fused ./device_hop-* diag-null      # holo's own cost, one scenario
//! HOLO_DEVICE=cuda ./device_hop-* fused-probe              # the raw fused loop on holo's thread
//! HOLO_DEVICE=cuda ./device_hop-* copy-probe               # the fused loop's calls: cuMemcpyAsync or DtoD
//! HOLO_DEVICE=cuda ./device_hop-* cold-probe               # a line of code or data after a driver call
//! HOLO_DEVICE=cuda ./device_hop-* fork                      # issue 17's fork latency
//! HOLO_DEVICE=cuda ./device_hop-* fork-diag                 # … and its driver time per thread
//! HOLO_DEVICE=cuda ./device_hop-* fork-paced                # the paced fork and its baseline only
//! ```

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    reason = "bench arithmetic on nanosecond timings and frame counts"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::device::{
    AllocKind, DeviceBackend, DevicePtr, EventHandle, StreamHandle, open_backend_from_env,
};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, Operator, Output, ParamSet, PartitionSpec, Partitioning, Result, RunSession,
    SessionOptions, Tensor, TensorLoanRequest, compile, operator,
};

#[path = "device_hop/cold.rs"]
mod cold;
#[path = "device_hop/copy_probe.rs"]
mod copy_probe;
#[path = "device_hop/diag.rs"]
mod diag;
#[path = "device_hop/fork.rs"]
mod fork;
#[path = "common/null_device.rs"]
mod null_device;
#[cfg(target_os = "linux")]
#[path = "common/perf_counters.rs"]
mod perf_counters;

/// `device_hop perf`: the CPU's own counters over a run's measured frames, on the thread
/// that submits them (the sink's partition thread, which in the fused hop runs both
/// operators; the raw loop's thread).
#[cfg(target_os = "linux")]
mod cpu_counts {
    use std::cell::RefCell;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    use super::perf_counters::{CpuCounters, PerCall};

    /// Whether the bench counts (`device_hop perf`).
    pub(crate) static ON: AtomicBool = AtomicBool::new(false);
    /// Whether the counters that could not be opened were named already.
    static NOTED: AtomicBool = AtomicBool::new(false);
    /// The last counted run's figures per frame, or why none could be counted.
    static LAST: Mutex<Option<Result<PerCall, String>>> = Mutex::new(None);
    thread_local! {
        static OPEN: RefCell<Option<(CpuCounters, Instant)>> = const { RefCell::new(None) };
    }

    /// Starts counting on the calling thread, if the bench counts.
    pub(crate) fn start() {
        if !ON.load(Ordering::Relaxed) {
            return;
        }
        match CpuCounters::open() {
            Ok(mut c) => {
                if !c.missing.is_empty() && !NOTED.swap(true, Ordering::Relaxed) {
                    println!("perf: not counted: {}", c.missing.join(", "));
                }
                let t0 = c.start();
                OPEN.with(|o| *o.borrow_mut() = Some((c, t0)));
            }
            Err(e) => *LAST.lock().unwrap() = Some(Err(e)),
        }
    }

    /// Stops the calling thread's counting: `frames` frames since [`start`].
    pub(crate) fn stop(frames: u64) {
        if let Some((mut c, t0)) = OPEN.with(|o| o.borrow_mut().take()) {
            *LAST.lock().unwrap() = Some(Ok(c.stop(t0, frames)));
        }
    }

    /// The last counted run's figures.
    pub(crate) fn take() -> Option<Result<PerCall, String>> {
        LAST.lock().unwrap().take()
    }
}

const BYTES: usize = 256;
const FRAMES: u64 = 10_000;
const WARMUP: u64 = 2_000;
/// Interleaved holo/raw pairs per scenario (`HOLO_BENCH_PAIRS` overrides).
const PAIRS: usize = 15;
/// Slots in the raw ring.
const K: usize = 8;

#[operator]
struct Head {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256, max_loans = 4)]
    out: Output<Tensor>,
}

impl Operator for Head {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(frame) = fill_frame(&mut self.out, ctx)? else {
            diag::HEAD_EXHAUSTED.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        match self.out.emit(frame, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// Loans a frame of `out`, fills it on the operator's stream and commits it; `None` when
/// the pool has no free slot (`ResourceExhausted`).
fn fill_frame(
    out: &mut Output<Tensor>,
    ctx: &mut ExecutionContext<'_>,
) -> Result<Option<holo_runtime::CommittedTensor>> {
    let cuda = ctx.cuda()?;
    let loan = match out.allocate_tensor(TensorLoanRequest {
        shape: &[BYTES as u64],
        dtype: DType::U8,
    }) {
        Ok(l) => l,
        Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(None),
        Err(e) => return Err(e),
    };
    let w = loan.write(cuda.stream())?;
    // SAFETY: the writer owns the slot; the fill stays inside it.
    unsafe { cuda.memset_async(w.device_ptr(), 0x2A, BYTES)? };
    w.commit().map(Some)
}

/// Copies its input on its stream: into a slot of its own, which it forwards, when its
/// output is connected; else (a sink) into a device buffer of its own, as the raw loops'
/// last copy goes into their `scratch` (a sink that loaned a slot only to drop it
/// uncommitted made a loan and its return per frame that the raw loops do not make).
#[operator]
struct Stage {
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256, max_loans = 4)]
    out: Output<Tensor>,
    done: Arc<Progress>,
    scratch: DevicePtr,
}

/// A sink's frame count, and when it passed the end of the warm-up and the end of the
/// measured frames (timed on the sink's own thread: the bench's main thread sleeps).
#[derive(Default)]
struct Progress {
    /// Frames the sink received: written by the sink's partition thread only.
    frames: AtomicU64,
    /// ns since `anchor()` at frame `WARMUP` and at frame `WARMUP + FRAMES`.
    marks: [AtomicU64; 2],
    /// Whether the CPU's counters start and stop at the marks (`device_hop perf`): the
    /// measured sink's only, not a chain's inner stages, which pass the marks on the same
    /// thread a frame earlier.
    counts_cpu: bool,
}

impl Progress {
    fn frame(&self) {
        // One writer (the sink's partition thread): a plain store, not a locked
        // read-modify-write the raw loops do not make.
        let n = self.frames.load(Ordering::Relaxed) + 1;
        self.frames.store(n, Ordering::Release);
        if n == WARMUP || n == WARMUP + FRAMES {
            #[cfg(target_os = "linux")]
            if self.counts_cpu && n != WARMUP {
                cpu_counts::stop(FRAMES);
            }
            let at = anchor().elapsed().as_nanos() as u64;
            self.marks[usize::from(n != WARMUP)].store(at, Ordering::Release);
            #[cfg(target_os = "linux")]
            if self.counts_cpu && n == WARMUP {
                cpu_counts::start();
            }
        }
    }

    fn frames(&self) -> u64 {
        self.frames.load(Ordering::Acquire)
    }
}

fn anchor() -> Instant {
    static ANCHOR: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ANCHOR.get_or_init(Instant::now)
}

impl Operator for Stage {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        while let Some(t) = self.input.receive() {
            if !self.out.is_connected() {
                // SAFETY: `scratch` is this stage's own allocation (freed after the
                // session joined), `t` keeps the input out of its pool, and the stream
                // orders the copy after the input's readiness.
                unsafe { cuda.copy_async(self.scratch, t.device_ptr(), BYTES)? };
                self.done.frame();
                continue;
            }
            let Ok(loan) = self.out.allocate_tensor(TensorLoanRequest {
                shape: &[BYTES as u64],
                dtype: DType::U8,
            }) else {
                continue;
            };
            let w = loan.write(cuda.stream())?;
            // SAFETY: both slots are live: the writer owns its slot, `t` keeps the input
            // out of its pool, and the stream orders the copy after the input's readiness.
            unsafe { cuda.copy_async(w.device_ptr(), t.device_ptr(), BYTES)? };
            match self.out.emit(w.commit()?, EmitOptions::default()) {
                Err(e) if e.code() == ErrorCode::Backpressured => {}
                other => other?,
            }
            self.done.frame();
        }
        Ok(())
    }
}

/// A stage counting into `done`, with a scratch buffer of `device`'s (pushed to
/// `scratch`, for the caller to free once the session has joined).
fn stage(
    done: &Arc<Progress>,
    device: &Arc<dyn DeviceBackend>,
    scratch: &mut Vec<DevicePtr>,
) -> Stage {
    let buffer = device.alloc(AllocKind::Device, BYTES).unwrap();
    scratch.push(buffer);
    Stage {
        input: Input::default(),
        out: Output::default(),
        done: Arc::clone(done),
        scratch: buffer,
    }
}

enum Shape {
    FencedHop,
    FusedHop,
    Chain4,
    Fork,
}

/// ns per frame in steady state and event calls (record + wait + query) per frame.
fn holo(device: &Arc<dyn DeviceBackend>, shape: &Shape) -> (f64, f64) {
    let mut g = Graph::new();
    let h = g
        .add_operator(
            "head",
            Head {
                out: Output::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    anchor();
    let done = Arc::new(Progress {
        counts_cpu: true,
        ..Progress::default()
    });
    let done2 = Arc::new(Progress::default());
    let mut bound = vec!["head"];
    let mut scratch = Vec::new();
    let c = ConnectionOptions::default().with_queue_depth(4);
    match shape {
        Shape::FencedHop | Shape::FusedHop => {
            let t = g
                .add_operator(
                    "tail",
                    stage(&done, device, &mut scratch),
                    ParamSet::defaults().unwrap(),
                )
                .unwrap();
            g.add_flow(h.out, t.input, c);
            bound.push("tail");
        }
        Shape::Chain4 => {
            let mut prev = h.out;
            for (i, name) in ["b", "c", "d"].into_iter().enumerate() {
                let s = g
                    .add_operator(
                        name,
                        if i == 2 {
                            stage(&done, device, &mut scratch)
                        } else {
                            stage(&Arc::new(Progress::default()), device, &mut scratch)
                        },
                        ParamSet::defaults().unwrap(),
                    )
                    .unwrap();
                g.add_flow(prev, s.input, c);
                prev = s.out;
                bound.push(name);
            }
        }
        Shape::Fork => {
            for (name, d) in [("left", &done), ("right", &done2)] {
                let s = g
                    .add_operator(
                        name,
                        stage(d, device, &mut scratch),
                        ParamSet::defaults().unwrap(),
                    )
                    .unwrap();
                g.add_flow(h.out, s.input, c);
                bound.push(name);
            }
        }
    }
    let mut options = CompileOptions::default();
    for name in bound {
        options
            .deployment
            .bind_tensor_output_device(name, "out", device.device_id());
    }
    if matches!(shape, Shape::FencedHop) {
        options.partitioning = Partitioning::Authored(vec![
            PartitionSpec::new("producer", vec!["head"]),
            PartitionSpec::new("consumer", vec!["tail"]),
        ]);
    }
    let plan = compile(&g, options).unwrap();
    let fused = plan.edges().iter().filter(|e| e.fusion.is_some()).count();
    match shape {
        Shape::FusedHop => assert_eq!(fused, 1),
        Shape::Chain4 => assert_eq!(fused, 3),
        Shape::FencedHop | Shape::Fork => assert_eq!(fused, 0),
    }
    let session = start_session(g, &plan, device);
    let sinks: &[&Arc<Progress>] = if matches!(shape, Shape::Fork) {
        &[&done, &done2]
    } else {
        &[&done]
    };
    let frames = || sinks.iter().map(|p| p.frames()).min().unwrap_or(0);
    let wait_for = |n: u64| {
        let deadline = Instant::now() + Duration::from_mins(2);
        while frames() < n {
            assert!(Instant::now() < deadline, "no progress");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    wait_for(WARMUP);
    let c0 = device.counters().snapshot();
    let f0 = frames();
    wait_for(WARMUP + FRAMES);
    let f1 = frames();
    let calls = device.counters().snapshot() - c0;
    session.stop();
    session.join().unwrap();
    for p in scratch {
        // SAFETY: the session has joined: every stream that copied into it is done.
        unsafe { device.free(AllocKind::Device, p, BYTES).unwrap() };
    }
    // From the last sink past the warm-up to the last sink past the measured frames.
    let mark = |i: usize| {
        sinks
            .iter()
            .map(|p| p.marks[i].load(Ordering::Acquire))
            .max()
            .unwrap_or(0)
    };
    #[allow(clippy::cast_precision_loss)]
    let per = |x: u64| x as f64 / (f1 - f0).max(1) as f64;
    (
        (mark(1) - mark(0)) as f64 / FRAMES as f64,
        per(calls.event_record + calls.stream_wait + calls.event_query),
    )
}

/// The raw calls the scenarios make, through cudarc's sys layer or the trait.
struct Raw {
    device: Arc<dyn DeviceBackend>,
    #[cfg(feature = "cuda")]
    cuda: bool,
}

impl Raw {
    fn memset(&self, dst: DevicePtr, s: StreamHandle) {
        #[cfg(feature = "cuda")]
        if self.cuda {
            // SAFETY: a live allocation of BYTES on a live stream; context current.
            assert_eq!(
                unsafe {
                    cudarc::driver::sys::cuMemsetD8Async(dst.raw(), 0x2A, BYTES, ptr(s.raw()))
                },
                cudarc::driver::sys::CUresult::CUDA_SUCCESS
            );
            return;
        }
        // SAFETY: as above.
        unsafe { self.device.memset_async(dst, 0x2A, BYTES, s).unwrap() };
    }
    fn copy(&self, dst: DevicePtr, src: DevicePtr, s: StreamHandle) {
        #[cfg(feature = "cuda")]
        if self.cuda {
            // SAFETY: two live, disjoint allocations of BYTES; context current.
            assert_eq!(
                unsafe {
                    cudarc::driver::sys::cuMemcpyAsync(dst.raw(), src.raw(), BYTES, ptr(s.raw()))
                },
                cudarc::driver::sys::CUresult::CUDA_SUCCESS
            );
            return;
        }
        // SAFETY: as above.
        unsafe { self.device.copy_async(dst, src, BYTES, s).unwrap() };
    }
    /// As [`copy`](Self::copy), by `cuMemcpyDtoDAsync_v2` on CUDA (told the direction).
    fn copy_dtod(&self, dst: DevicePtr, src: DevicePtr, s: StreamHandle) {
        #[cfg(feature = "cuda")]
        if self.cuda {
            // SAFETY: two live, disjoint device allocations of BYTES; context current.
            assert_eq!(
                unsafe {
                    cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
                        dst.raw(),
                        src.raw(),
                        BYTES,
                        ptr(s.raw()),
                    )
                },
                cudarc::driver::sys::CUresult::CUDA_SUCCESS
            );
            return;
        }
        self.copy(dst, src, s);
    }
    fn record(&self, e: EventHandle, s: StreamHandle) {
        #[cfg(feature = "cuda")]
        if self.cuda {
            // SAFETY: live event and stream.
            assert_eq!(
                unsafe { cudarc::driver::sys::cuEventRecord(ptr(e.raw()), ptr(s.raw())) },
                cudarc::driver::sys::CUresult::CUDA_SUCCESS
            );
            return;
        }
        self.device.record_event(e, s).unwrap();
    }
    fn wait(&self, s: StreamHandle, e: EventHandle) {
        #[cfg(feature = "cuda")]
        if self.cuda {
            // SAFETY: live event and stream.
            assert_eq!(
                unsafe { cudarc::driver::sys::cuStreamWaitEvent(ptr(s.raw()), ptr(e.raw()), 0) },
                cudarc::driver::sys::CUresult::CUDA_SUCCESS
            );
            return;
        }
        self.device.wait_event(s, e).unwrap();
    }
    fn done(&self, e: EventHandle) -> bool {
        #[cfg(feature = "cuda")]
        if self.cuda {
            // SAFETY: a live event.
            return unsafe { cudarc::driver::sys::cuEventQuery(ptr(e.raw())) }
                == cudarc::driver::sys::CUresult::CUDA_SUCCESS;
        }
        self.device.query_event(e).unwrap()
    }
}

#[cfg(feature = "cuda")]
fn ptr<T>(raw: u64) -> *mut T {
    std::ptr::with_exposed_provenance_mut(usize::try_from(raw).unwrap())
}

/// ns per frame of the raw sequence of `shape`, single-threaded, over a ring of 8 slots.
fn raw(device: &Arc<dyn DeviceBackend>, shape: &Shape) -> f64 {
    #[cfg(feature = "cuda")]
    let cuda = device.backend_kind() == holo_runtime::device::BackendKind::Cuda;
    #[cfg(feature = "cuda")]
    if cuda {
        // The sys calls need the context current on this thread.
        let _ = device.create_event().map(|e| device.destroy_event(e));
    }
    let r = Raw {
        device: Arc::clone(device),
        #[cfg(feature = "cuda")]
        cuda,
    };
    let d = device.as_ref();
    let slots: Vec<DevicePtr> = (0..K)
        .map(|_| d.alloc(AllocKind::Device, BYTES).unwrap())
        .collect();
    let scratch: Vec<DevicePtr> = (0..4)
        .map(|_| d.alloc(AllocKind::Device, BYTES).unwrap())
        .collect();
    let s: Vec<StreamHandle> = (0..3).map(|_| d.create_stream().unwrap()).collect();
    let ready: Vec<EventHandle> = (0..K).map(|_| d.create_event().unwrap()).collect();
    let rel: Vec<EventHandle> = (0..2 * K).map(|_| d.create_event().unwrap()).collect();
    let frame = |i: usize| {
        let k = i % K;
        match shape {
            Shape::FencedHop => {
                while i >= K && !r.done(rel[k]) {}
                r.memset(slots[k], s[0]);
                r.record(ready[k], s[0]);
                r.wait(s[1], ready[k]);
                r.copy(scratch[0], slots[k], s[1]);
                r.record(rel[k], s[1]);
            }
            Shape::FusedHop => {
                r.memset(slots[k], s[0]);
                r.copy(scratch[0], slots[k], s[0]);
            }
            Shape::Chain4 => {
                r.memset(slots[k], s[0]);
                r.copy(scratch[0], slots[k], s[0]);
                r.copy(scratch[1], scratch[0], s[0]);
                r.copy(scratch[2], scratch[1], s[0]);
            }
            Shape::Fork => {
                while i >= K && !(r.done(rel[k]) && r.done(rel[K + k])) {}
                r.memset(slots[k], s[0]);
                r.record(ready[k], s[0]);
                r.wait(s[1], ready[k]);
                r.wait(s[2], ready[k]);
                r.copy(scratch[0], slots[k], s[1]);
                r.copy(scratch[1], slots[k], s[2]);
                r.record(rel[k], s[1]);
                r.record(rel[K + k], s[2]);
            }
        }
    };
    #[allow(clippy::cast_possible_truncation)]
    for i in 0..WARMUP as usize {
        frame(i);
    }
    for &st in &s {
        d.synchronize_stream(st).unwrap();
    }
    #[cfg(target_os = "linux")]
    cpu_counts::start();
    let t0 = Instant::now();
    #[allow(clippy::cast_possible_truncation)]
    for i in WARMUP as usize..(WARMUP + FRAMES) as usize {
        frame(i);
    }
    #[cfg(target_os = "linux")]
    cpu_counts::stop(FRAMES);
    for &st in &s {
        d.synchronize_stream(st).unwrap();
    }
    let dt = t0.elapsed();
    for e in ready.into_iter().chain(rel) {
        d.destroy_event(e).unwrap();
    }
    for st in s {
        d.destroy_stream(st).unwrap();
    }
    for p in slots.into_iter().chain(scratch) {
        // SAFETY: every stream using them was synchronized.
        unsafe { d.free(AllocKind::Device, p, BYTES).unwrap() };
    }
    #[allow(clippy::cast_precision_loss)]
    let ns = dt.as_nanos() as f64 / FRAMES as f64;
    ns
}

/// Starts a bench session of `g` on `device`, with the bench's idle spin.
fn start_session(
    g: Graph,
    plan: &holo_runtime::plan::ExecutionPlan,
    device: &Arc<dyn DeviceBackend>,
) -> RunSession {
    RunSession::start(
        g,
        plan,
        SessionOptions::default()
            .with_idle_spin(idle_spin())
            .on_device(Arc::clone(device)),
    )
    .unwrap()
}

/// `SessionOptions::idle_spin` for holo's sessions: the default, or
/// `HOLO_BENCH_IDLE_SPIN_US` microseconds (to compare idle policies on one machine).
fn idle_spin() -> Duration {
    std::env::var("HOLO_BENCH_IDLE_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(SessionOptions::DEFAULT_IDLE_SPIN, Duration::from_micros)
}

fn pairs() -> usize {
    std::env::var("HOLO_BENCH_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(PAIRS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The order-balanced ratio of a row: over each two consecutive pairs (one run with holo
/// first, the next with raw first), the geometric mean of their two ratios; the median of
/// those. A run right after a run of the other side is slower than one after its own side
/// (on an H100 pinned to one CPU, by 100–130 ns a frame of about 4 µs, for holo and raw
/// alike: BENCHMARKS.md, twenty-eighth session), so the pairs' ratios fall into two groups
/// by which side ran first, and their plain median landed in either group or between,
/// depending on the count in each. (One pair alone: its ratio.)
fn balanced(ratios: &[f64]) -> f64 {
    if ratios.len() < 2 {
        return median(ratios.to_vec());
    }
    median(
        ratios
            .chunks_exact(2)
            .map(|c| (c[0] * c[1]).sqrt())
            .collect(),
    )
}

/// Whether scenario `name` runs: environment variable `var` unset, or a comma-separated
/// list naming a part of it (`HOLO_BENCH_ONLY=fused,fork`, `HOLO_BENCH_NULL_SHAPE=fused`).
fn picked(var: &str, name: &str) -> bool {
    std::env::var(var).map_or(true, |v| {
        v.split(',').any(|part| name.contains(part.trim()))
    })
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let device = match open_backend_from_env() {
        Ok(d) => d,
        Err(e) => {
            println!("device_hop skipped: {e}");
            return;
        }
    };
    if std::env::args().any(|a| a == "diag-null") {
        diag::run_null();
        return;
    }
    if std::env::args().any(|a| a == "diag") {
        diag::run(&device);
        return;
    }
    if std::env::args().any(|a| a == "cold-probe") {
        cold::run(&device);
        return;
    }
    if std::env::args().any(|a| a == "fused-probe") {
        diag::run_fused_probe(&device);
        return;
    }
    if std::env::args().any(|a| a == "copy-probe") {
        copy_probe::run(&device);
        return;
    }
    if std::env::args().any(|a| a == "fork-diag") {
        fork::run_diag(&device);
        return;
    }
    // `HOLO_BENCH_RUNS`, or `default`.
    let runs = |default: usize| {
        std::env::var("HOLO_BENCH_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    if std::env::args().any(|a| a == "fork-paced") {
        fork::run_paced(&device, runs(5));
        return;
    }
    if std::env::args().any(|a| a == "fork") {
        fork::run(&device, runs(3));
        return;
    }
    #[cfg(target_os = "linux")]
    if std::env::args().any(|a| a == "perf") {
        run_perf(&device);
        return;
    }
    let pairs = pairs();
    println!(
        "device_hop on {} {}: ns per frame, medians of {pairs} interleaved holo/raw pairs of {FRAMES}-frame runs (ratio: order-balanced, the median over consecutive pairs of pairs of their ratios' geometric mean); idle_spin {:?}",
        device.backend_kind().name(),
        device.ordinal(),
        idle_spin()
    );
    println!(
        "{:<12} {:>9} {:>9} {:>6} {:>15} {:>6} {:>7}  target (against raw on one thread)",
        "scenario", "holo", "raw", "ratio", "raw, threaded", "ratio", "events"
    );
    for (name, shape, target) in [
        ("fenced hop", Shape::FencedHop, "≤ 1.15×"),
        ("fused hop", Shape::FusedHop, "≤ 1.05×, 0 events"),
        (
            "4-op chain",
            Shape::Chain4,
            "throughput ≥ 0.9× (ratio ≤ 1.11)",
        ),
        ("1→2 fork", Shape::Fork, "throughput ≥ 0.9× (ratio ≤ 1.11)"),
    ] {
        if !picked("HOLO_BENCH_ONLY", name) {
            continue;
        }
        let (mut h, mut b, mut r, mut t, mut rt) = (vec![], vec![], vec![], vec![], vec![]);
        let mut ev = 0.0;
        for pair in 0..pairs {
            // On a fresh thread, as holo's partitions run on theirs; alternating which
            // side of the pair runs first.
            let raw_ns =
                || std::thread::scope(|s| s.spawn(|| raw(&device, &shape)).join().unwrap());
            let (ns, events, raw_ns) = if pair % 2 == 0 {
                let (ns, events) = holo(&device, &shape);
                (ns, events, raw_ns())
            } else {
                let raw_ns = raw_ns();
                let (ns, events) = holo(&device, &shape);
                (ns, events, raw_ns)
            };
            h.push(ns);
            b.push(raw_ns);
            r.push(ns / raw_ns);
            ev = events;
            // The same calls spread over holo's threads (the producer polls the release
            // events): how much of holo's figure is having several submitting threads.
            let threaded = match shape {
                Shape::FencedHop => Some(diag::raw_threaded(&device, 1)),
                Shape::Fork => Some(diag::raw_threaded(&device, 2)),
                Shape::FusedHop | Shape::Chain4 => None,
            };
            if let Some(x) = threaded {
                t.push(x);
                rt.push(ns / x);
            }
        }
        if std::env::var_os("HOLO_BENCH_VERBOSE").is_some() {
            println!(
                "  {name}: holo {h:.0?}, raw {b:.0?}, ratios {r:.2?}, raw threaded {t:.0?}; median of the pairs' ratios {:.3}, balanced {:.3}",
                median(r.clone()),
                balanced(&r)
            );
        }
        let (h, b, r) = (median(h), median(b), balanced(&r));
        let (t, rt) = if t.is_empty() {
            ("—".to_owned(), "—".to_owned())
        } else {
            (format!("{:.1}", median(t)), format!("{:.2}", median(rt)))
        };
        println!("{name:<12} {h:>9.1} {b:>9.1} {r:>6.2} {t:>15} {rt:>6} {ev:>7.2}  {target}");
    }
}

/// `device_hop perf`: the fused hop and the 4-operator chain (one partition thread each),
/// holo and raw alternating over [`pairs`] pairs, each run's measured frames counted by the
/// CPU's own counters on the submitting thread; prints each side's medians per frame and
/// holo's less raw's.
#[cfg(target_os = "linux")]
fn run_perf(device: &Arc<dyn DeviceBackend>) {
    cpu_counts::ON.store(true, Ordering::Relaxed);
    let pairs = pairs();
    println!(
        "device_hop perf on {} {}: the CPU's counters per frame on the submitting thread, medians of {pairs} alternating pairs of {FRAMES}-frame runs",
        device.backend_kind().name(),
        device.ordinal(),
    );
    for (name, shape) in [
        ("fused hop", Shape::FusedHop),
        ("4-op chain", Shape::Chain4),
    ] {
        if !picked("HOLO_BENCH_ONLY", name) {
            continue;
        }
        let (mut h, mut b) = (Vec::new(), Vec::new());
        let mut why = None;
        for pair in 0..pairs {
            let mut side = |holo_side: bool| {
                if holo_side {
                    holo(device, &shape);
                } else {
                    std::thread::scope(|s| s.spawn(|| raw(device, &shape)).join().unwrap());
                }
                match cpu_counts::take() {
                    Some(Ok(p)) => (if holo_side { &mut h } else { &mut b }).push(p),
                    Some(Err(e)) => why = Some(e),
                    None => {}
                }
            };
            side(pair % 2 == 0);
            side(pair % 2 != 0);
        }
        if h.is_empty() || b.is_empty() {
            println!(
                "{name:<12} perf counters unavailable: {}",
                why.unwrap_or_else(|| "no run was counted".into())
            );
            continue;
        }
        let names: Vec<&'static str> = h[0].counts.iter().map(|(n, _)| *n).collect();
        let (h, b) = (
            perf_counters::medians(&h, &names),
            perf_counters::medians(&b, &names),
        );
        for (side, m) in [("holo", &h), ("raw", &b)] {
            println!("{name:<12} perf {side:<5} {}", m.describe());
        }
        println!("{name:<12} perf holo less raw: {}", h.less(&b));
    }
}
