//! The fork's latency (issue 17): `device_hop fork`.
//!
//! The workload of the comparison: a source on a 1 µs clock
//! (`trigger = clock(hz = 1_000_000)`) fills a 256-byte device frame on its stream and
//! emits it with its capture time, counting the frames it could not loan
//! (`ResourceExhausted`) or emit (`Backpressured`: it checks `Output::has_room` first and
//! fills nothing then, as the raw producer checks its queues); blocking queues of depth
//! 4; each sink copies the frame on its own stream into a buffer of its own (the
//! stand-in for an add kernel) and records capture → receipt. Scenarios:
//!
//! - **fork, default policy**: source → {sink0, sink1}, three partitions, three streams;
//! - **fork, shared stream**: the same under `CudaComputeStreamPolicy::SharedProcessDevice`;
//! - **fork, one partition**: the three operators authored into one partition;
//! - **chain over 3 partitions**, default and shared: source → forward (device_hop's
//!   `Stage`: a copy into its own slot, emitted on) → sink, one operator per partition;
//! - **fork, default, paced**: the default fork with the source paced on its consumers
//!   (docs/STREAMS.md, "Pacing a source"): at a tick where a frame of its still waits in
//!   a sink's queue (`Output::queued() > 0`) it fills nothing, and counts the tick as
//!   skipped. Its baseline, **raw threaded, paced**, is the raw threaded
//!   baseline with the same rule (it fills only when every consumer's queue is empty);
//! - **fork, default, paced on in_flight**: the same, paced on `Output::in_flight()`
//!   (a frame a sink took and is still working on counts too), beside **raw threaded,
//!   paced on in flight** (it fills only when every consumer has finished every frame).
//! - **fork, default, paced on in_use**: the same, paced on `Output::in_use()` (the
//!   device has finished every consumer's work on every frame: every slot is back in
//!   the pool), beside **raw threaded, paced on completion** (it fills only when the
//!   previous slot's release events, polled by the producer, have completed).
//!
//! Each row: per sink, msg/s over the measured window and p50 / p99 of capture → receipt
//! (µs); at the source, Backpressured/s and ResourceExhausted/s. A holo sink's row adds
//! its p50 from capture to the entry of the activation that received the frame: the part
//! before `receive`, which makes the driver call that orders the sink's stream behind the
//! frame (the raw consumers stamp a frame at its pop, before their wait). The raw baseline has the
//! same threads and queue depth: a producer thread paced at 1 µs (fill, readiness record,
//! a crossbeam `ArrayQueue` of depth 4 per consumer, a ring of 8 slots whose release
//! events it polls before reuse; a frame is dropped and counted when a queue is full or no
//! slot is free) and a thread per consumer (wait, copy, release record). The fork in one
//! partition has its own baseline, **raw one thread**: one thread and one stream (fill,
//! each consumer's copy in turn, one release record per slot).
//!
//! A second raw threaded row, **polling thread**, moves the release-event polling off the
//! producer onto a thread of its own, as holo's retirement worker does: the producer then
//! fills as fast as holo's source, and the row shows what that alone does to the
//! latency. `HOLO_BENCH_FORK_PACE_NS` sets the source's period (default 1,000 ns: the
//! issue's workload) for every row, holo's and raw: with a period longer than a sink's
//! service time the sinks keep up, and the rows show the latency without a standing
//! queue.
//!
//! `HOLO_BENCH_FORK_CPUS=a,b,c` pins the source's thread to CPU a and the sinks' to b
//! and c, holo's (at their first activation) and the raw baselines' alike; unset,
//! nothing is pinned.
//!
//! Under `SharedProcessDevice` the three partitions submit on one stream, so the plan
//! gives them one thread (`ExecutionPartition::thread`): the shared rows measure that.

use std::fmt::Write as _;
use std::sync::Mutex;

use crossbeam_queue::ArrayQueue;
use holo_runtime::FrameInfo;
use holo_runtime::plan::CudaComputeStreamPolicy;

use super::diag::{RawRing, raw_for, relax};
use super::{
    AllocKind, Arc, AtomicU64, BYTES, CompileOptions, ConnectionOptions, DeviceBackend, DevicePtr,
    Duration, EmitOptions, ErrorCode, ExecutionContext, Graph, Input, Instant, K, Operator,
    Ordering, Output, ParamSet, PartitionSpec, Partitioning, Result, Tensor, compile, operator,
};

/// Deliveries per sink before the measured window, and in it.
const WARM: u64 = 2_000;
const MEASURED: u64 = 20_000;
/// The source's period: 1 µs (the workload), or `HOLO_BENCH_FORK_PACE_NS`
/// nanoseconds (a source slower than the sinks, to show where the latency goes).
fn pace() -> Duration {
    static PACE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *PACE.get_or_init(|| {
        std::env::var("HOLO_BENCH_FORK_PACE_NS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_micros(1), Duration::from_nanos)
    })
}
/// Spins until `next`, then sets it one period on (to now, if that is already past: no
/// burst of ticks to catch up).
fn wait_tick(next: &mut Instant) {
    while Instant::now() < *next {
        std::hint::spin_loop();
    }
    *next += pace();
    if *next + pace() <= Instant::now() {
        *next = Instant::now();
    }
}

/// Queue depth of every edge.
const DEPTH: usize = 4;

/// `HOLO_BENCH_FORK_CPUS=a,b,c`: the CPUs of the source, sink 0 and sink 1 (holo's
/// partition threads, pinned at their first activation, and the raw baseline's threads);
/// unset, nothing is pinned. A real-time deployment pins its threads; the two sinks on
/// CPUs equally far from the source's is what makes their latencies comparable.
fn fork_cpus() -> Option<[usize; 3]> {
    static CPUS: std::sync::OnceLock<Option<[usize; 3]>> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| {
        let v: Vec<usize> = std::env::var("HOLO_BENCH_FORK_CPUS")
            .ok()?
            .split(',')
            .map(|c| c.trim().parse().ok())
            .collect::<Option<_>>()?;
        v.try_into().ok()
    })
}

/// Pins the calling thread to role `role`'s CPU (0 the source, 1 and 2 the sinks) when
/// [`fork_cpus`] names them; returns the mask it had, to restore.
fn pin(role: usize) -> Option<rustix::thread::CpuSet> {
    let cpu = fork_cpus()?[role];
    let before = rustix::thread::sched_getaffinity(None).ok()?;
    let mut one = rustix::thread::CpuSet::new();
    one.set(cpu);
    rustix::thread::sched_setaffinity(None, &one)
        .unwrap_or_else(|e| panic!("HOLO_BENCH_FORK_CPUS: cannot pin to CPU {cpu}: {e}"));
    Some(before)
}

/// What the source could not do.
#[derive(Default)]
struct SourceStats {
    exhausted: AtomicU64,
    backpressured: AtomicU64,
    /// Ticks a paced source skipped: a frame of its still waited in a consumer's queue.
    skipped: AtomicU64,
}

/// One sink's deliveries and latencies (ns, capture → receipt), and when its measured
/// window began and ended (ns since `super::anchor()`), with the source's refusals then.
#[derive(Default)]
struct SinkStats {
    frames: AtomicU64,
    latencies: Mutex<Vec<u64>>,
    /// holo's sinks: capture → the activation's entry (ns) of the same frames, before
    /// `receive` orders the sink's stream behind the frame (a driver call). Empty for the
    /// raw baselines, whose receipt is their pop.
    entries: Mutex<Vec<u64>>,
    window: [AtomicU64; 2],
    /// The source's Backpressured, ResourceExhausted and skipped counts at the window's
    /// start and end.
    refusals: [[AtomicU64; 3]; 2],
}

impl SinkStats {
    /// The measured window's length, in seconds.
    fn window_secs(&self) -> f64 {
        let w0 = self.window[0].load(Ordering::Acquire);
        let w1 = self.window[1].load(Ordering::Acquire);
        w1.saturating_sub(w0) as f64 / 1e9
    }

    /// A frame received now, captured `latency` ns earlier; `odd`: its frame id is odd
    /// (kept in the sample's low bit: [`figures`] splits the latencies by it). Whether it
    /// is in the measured window (kept).
    fn frame(&self, latency: u64, odd: bool, source: &SourceStats, local: &mut Vec<u64>) -> bool {
        let n = self.frames.fetch_add(1, Ordering::Release) + 1;
        let kept = n > WARM && n <= WARM + MEASURED && local.len() < local.capacity();
        if kept {
            local.push(latency << 1 | u64::from(odd));
        }
        if n == WARM || n == WARM + MEASURED {
            let i = usize::from(n != WARM);
            self.window[i].store(
                super::anchor().elapsed().as_nanos() as u64,
                Ordering::Release,
            );
            self.refusals[i][0].store(
                source.backpressured.load(Ordering::Relaxed),
                Ordering::Release,
            );
            self.refusals[i][1].store(source.exhausted.load(Ordering::Relaxed), Ordering::Release);
            self.refusals[i][2].store(source.skipped.load(Ordering::Relaxed), Ordering::Release);
        }
        kept
    }
}

#[operator(trigger = clock(hz = 1_000_000))]
struct ClockedHead {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256, max_loans = 4)]
    out: Output<Tensor>,
    stats: Arc<SourceStats>,
    /// With a period longer than the clock's 1 µs (`pace()`): the next tick that fills.
    next: Option<Instant>,
    pacing: Pace,
    /// Whether its thread was pinned yet ([`pin`]).
    pinned: bool,
}

/// How a source paces itself on its consumers (holo's and the raw producer).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// Not at all: it fills at every tick with a free slot and room.
    No,
    /// Only when every consumer's queue is empty (`Output::queued() > 0` skips).
    Queued,
    /// Only when every consumer has finished every frame (`Output::in_flight() > 0`).
    InFlight,
    /// Only when the device has finished every consumer's work on every frame: holo's
    /// pool has every slot back (`Output::in_use() > 0`), the raw producer finds the
    /// previous slot's release events complete.
    InUse,
}

impl Operator for ClockedHead {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if !self.pinned {
            self.pinned = true;
            pin(0);
        }
        if let Some(next) = &mut self.next {
            let now = Instant::now();
            if now < *next {
                return Ok(());
            }
            *next = (*next + pace()).max(now);
        }
        let waiting = match self.pacing {
            Pace::No => 0,
            Pace::Queued => self.out.queued(),
            Pace::InFlight => self.out.in_flight(),
            Pace::InUse => self.out.in_use(),
        };
        if waiting > 0 {
            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        // As the raw producer does: no frame is filled for a queue that has no room.
        if !self.out.has_room() {
            self.stats.backpressured.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let Some(frame) = super::fill_frame(&mut self.out, ctx)? else {
            self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        match self.out.emit(
            frame,
            EmitOptions::default().with_capture_time(Instant::now()),
        ) {
            Err(e) if e.code() == ErrorCode::Backpressured => {
                self.stats.backpressured.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            other => other,
        }
    }
}

/// Copies each frame on its own stream into a buffer of its own and records its latency.
#[operator]
struct LatencySink {
    input: Input<Tensor>,
    scratch: DevicePtr,
    stats: Arc<SinkStats>,
    source: Arc<SourceStats>,
    local: Vec<u64>,
    /// Capture → activation entry of the kept frames ([`SinkStats::entries`]).
    entries: Vec<u64>,
    /// Its index (sink 0 or 1), and whether its thread was pinned yet ([`pin`]).
    index: usize,
    pinned: bool,
}

impl Operator for LatencySink {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if !self.pinned {
            self.pinned = true;
            pin(1 + self.index);
        }
        let entry = Instant::now();
        let stream = ctx.cuda_stream()?;
        let device = ctx.device().unwrap();
        let dst = self.scratch;
        while let Some((t, info)) = self.input.receive_with_info() {
            let now = Instant::now();
            // SAFETY: `dst` is this sink's own allocation, `t` keeps its slot, and the
            // stream orders the copy after `t`'s writes.
            unsafe { device.copy_async(dst, t.device_ptr(), BYTES, stream.handle())? };
            let latency = latency_ns(&info, now);
            if self
                .stats
                .frame(latency, info.frame & 1 == 1, &self.source, &mut self.local)
            {
                self.entries.push(latency_ns(&info, entry));
            }
        }
        Ok(())
    }

    fn stop(&mut self, _ctx: &mut holo_runtime::LifecycleContext<'_>) -> Result<()> {
        *self.stats.latencies.lock().unwrap() = std::mem::take(&mut self.local);
        *self.stats.entries.lock().unwrap() = std::mem::take(&mut self.entries);
        Ok(())
    }
}

fn latency_ns(info: &FrameInfo, now: Instant) -> u64 {
    info.capture_time
        .map_or(0, |c| now.saturating_duration_since(c).as_nanos() as u64)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Fork,
    ForkShared,
    ForkOnePartition,
    Chain,
    ChainShared,
    ForkPaced,
    ForkPacedInFlight,
    ForkPacedInUse,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Fork => "fork, default (3 partitions)",
            Scenario::ForkShared => "fork, shared stream",
            Scenario::ForkOnePartition => "fork, one partition",
            Scenario::Chain => "chain, 3 partitions",
            Scenario::ChainShared => "chain, 3 partitions, shared",
            Scenario::ForkPaced => "fork, default, paced",
            Scenario::ForkPacedInFlight => "fork, default, paced on in_flight",
            Scenario::ForkPacedInUse => "fork, default, paced on in_use",
        }
    }
    /// How the scenario's source paces itself.
    fn pacing(self) -> Pace {
        match self {
            Scenario::ForkPaced => Pace::Queued,
            Scenario::ForkPacedInFlight => Pace::InFlight,
            Scenario::ForkPacedInUse => Pace::InUse,
            _ => Pace::No,
        }
    }
    fn is_fork(self) -> bool {
        matches!(
            self,
            Scenario::Fork
                | Scenario::ForkShared
                | Scenario::ForkOnePartition
                | Scenario::ForkPaced
                | Scenario::ForkPacedInFlight
                | Scenario::ForkPacedInUse
        )
    }
}

/// A run's figures: per sink (msg/s, p50 µs, p99 µs, and the p50s of its even and odd
/// frames), and the source's Backpressured/s, ResourceExhausted/s and skipped ticks/s over
/// the window.
struct Figures {
    sinks: Vec<(f64, f64, f64, [f64; 2], f64)>,
    backpressured: f64,
    exhausted: f64,
    skipped: f64,
}

fn quantile_us(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    #[allow(clippy::cast_sign_loss)]
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i] as f64 / 1e3
}

/// Figures from the sinks' windows: msg/s per sink; refusals per second over the window
/// of the first sink.
fn figures(sinks: &[Arc<SinkStats>]) -> Figures {
    let mut out = Vec::new();
    for s in sinks {
        let tagged = s.latencies.lock().unwrap().clone();
        let mut l: Vec<u64> = tagged.iter().map(|v| v >> 1).collect();
        // A fan-out serves consumer `id mod n` first: at n = 2, each sink's even frames
        // are one class (served first, or second) and its odd frames the other.
        let mut parity = [0, 1].map(|bit| {
            let mut c: Vec<u64> = tagged
                .iter()
                .filter(|v| *v & 1 == bit)
                .map(|v| v >> 1)
                .collect();
            quantile_us(&mut c, 0.5)
        });
        if parity.iter().any(|p| p.is_nan()) {
            parity = [f64::NAN; 2];
        }
        let mut entries = s.entries.lock().unwrap().clone();
        out.push((
            MEASURED as f64 / s.window_secs(),
            quantile_us(&mut l, 0.5),
            quantile_us(&mut l, 0.99),
            parity,
            quantile_us(&mut entries, 0.5),
        ));
    }
    let s = &sinks[0];
    let secs = s.window_secs();
    let per = |i: usize| {
        (s.refusals[1][i].load(Ordering::Acquire) - s.refusals[0][i].load(Ordering::Acquire)) as f64
            / secs
    };
    Figures {
        sinks: out,
        backpressured: per(0),
        exhausted: per(1),
        skipped: per(2),
    }
}

fn holo(device: &Arc<dyn DeviceBackend>, scenario: Scenario) -> Figures {
    super::anchor();
    let source = Arc::new(SourceStats::default());
    let sinks: Vec<Arc<SinkStats>> = (0..if scenario.is_fork() { 2 } else { 1 })
        .map(|_| Arc::new(SinkStats::default()))
        .collect();
    let mut g = Graph::new();
    let h = g
        .add_operator(
            "head",
            ClockedHead {
                out: Output::default(),
                stats: Arc::clone(&source),
                next: (pace() > Duration::from_micros(1)).then(Instant::now),
                pacing: scenario.pacing(),
                pinned: false,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let scratch: Vec<DevicePtr> = (0..sinks.len())
        .map(|_| device.alloc(AllocKind::Device, BYTES).unwrap())
        .collect();
    let sink = |i: usize| LatencySink {
        input: Input::default(),
        scratch: scratch[i],
        stats: Arc::clone(&sinks[i]),
        source: Arc::clone(&source),
        local: Vec::with_capacity(MEASURED as usize),
        entries: Vec::with_capacity(MEASURED as usize),
        index: i,
        pinned: false,
    };
    let depth = || ConnectionOptions::default().with_queue_depth(DEPTH as u32);
    let mut bound = vec!["head"];
    let mut names = vec!["head"];
    // The forwarding stage's scratch buffer (a connected stage does not use it).
    let mut forward_scratch = Vec::new();
    if scenario.is_fork() {
        for (i, name) in ["sink0", "sink1"].into_iter().enumerate() {
            let s = g
                .add_operator(name, sink(i), ParamSet::defaults().unwrap())
                .unwrap();
            g.add_flow(h.out, s.input, depth());
            names.push(name);
        }
    } else {
        // device_hop's copying stage (its frame count unused here).
        let f = g
            .add_operator(
                "forward",
                super::stage(
                    &Arc::new(super::Progress::default()),
                    device,
                    &mut forward_scratch,
                ),
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(h.out, f.input, depth());
        let s = g
            .add_operator("sink0", sink(0), ParamSet::defaults().unwrap())
            .unwrap();
        g.add_flow(f.out, s.input, depth());
        bound.push("forward");
        names.extend(["forward", "sink0"]);
    }
    let mut options = CompileOptions::default();
    for name in bound {
        options
            .deployment
            .bind_tensor_output_device(name, "out", device.device_id());
    }
    if matches!(scenario, Scenario::ForkShared | Scenario::ChainShared) {
        options = options.with_compute_stream_policy(CudaComputeStreamPolicy::SharedProcessDevice);
    }
    options.partitioning = Partitioning::Authored(if scenario == Scenario::ForkOnePartition {
        vec![PartitionSpec::new("all", names)]
    } else {
        names
            .iter()
            .map(|&n| PartitionSpec::new(n, vec![n]))
            .collect()
    });
    let plan = compile(&g, options).unwrap();
    let session = super::start_session(g, &plan, device);
    let deadline = Instant::now() + Duration::from_mins(2);
    while sinks
        .iter()
        .any(|s| s.frames.load(Ordering::Acquire) < WARM + MEASURED)
    {
        assert!(Instant::now() < deadline, "no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
    session.stop();
    session.join().unwrap();
    for p in scratch.into_iter().chain(forward_scratch) {
        // SAFETY: the session's teardown synchronized the sinks' streams.
        unsafe { device.free(AllocKind::Device, p, BYTES).unwrap() };
    }
    figures(&sinks)
}

/// Who polls the raw baseline's release events.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Polling {
    /// The producer, before it fills a slot (the raw threaded baseline).
    Producer,
    /// A thread of its own, as holo's retirement worker does: the producer only reads
    /// a flag per slot.
    OwnThread,
}

/// The raw baseline: the same threads, queue depth and pacing, the CUDA calls made raw.
fn raw(device: &Arc<dyn DeviceBackend>, consumers: usize, polling: Polling, pace: Pace) -> Figures {
    super::anchor();
    let d = device.as_ref();
    let ring = RawRing::new(d, consumers);
    let (slots, scratch, s, ready, rel) =
        (&ring.slots, &ring.scratch, &ring.s, &ring.ready, &ring.rel);
    // A frame in flight: its slot and capture time.
    let hops: Vec<Arc<ArrayQueue<(usize, Instant)>>> = (0..consumers)
        .map(|_| Arc::new(ArrayQueue::new(DEPTH)))
        .collect();
    // Per slot and consumer: released (its release recorded) since the last fill.
    let released: Arc<Vec<AtomicU64>> =
        Arc::new((0..consumers * K).map(|_| AtomicU64::new(1)).collect());
    let source = Arc::new(SourceStats::default());
    let sinks: Vec<Arc<SinkStats>> = (0..consumers)
        .map(|_| Arc::new(SinkStats::default()))
        .collect();
    // Per slot, with `Polling::OwnThread`: every release event completed since its fill.
    let free: Arc<Vec<AtomicU64>> = Arc::new((0..K).map(|_| AtomicU64::new(1)).collect());
    // Per consumer: frames it finished (after its release record).
    let finished: Arc<Vec<AtomicU64>> =
        Arc::new((0..consumers).map(|_| AtomicU64::new(0)).collect());
    let mut emitted = 0u64;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads: Vec<_> = (0..consumers)
        .map(|c| {
            let finished = Arc::clone(&finished);
            let (device, hop, ready, rel, slots, released, stats, source, stop) = (
                Arc::clone(device),
                Arc::clone(&hops[c]),
                Arc::clone(ready),
                Arc::clone(rel),
                Arc::clone(slots),
                Arc::clone(&released),
                Arc::clone(&sinks[c]),
                Arc::clone(&source),
                Arc::clone(&stop),
            );
            let (stream, dst) = (s[1 + c], scratch[c]);
            std::thread::spawn(move || {
                pin(1 + c);
                let r = raw_for(&device);
                let mut spins = 0u32;
                let mut local = Vec::with_capacity(MEASURED as usize);
                while !stop.load(Ordering::Acquire) {
                    let Some((k, captured)) = hop.pop() else {
                        relax(&mut spins);
                        continue;
                    };
                    let now = Instant::now();
                    r.wait(stream, ready[k]);
                    r.copy(dst, slots[k], stream);
                    r.record(rel[c * K + k], stream);
                    released[c * K + k].store(1, Ordering::Release);
                    finished[c].fetch_add(1, Ordering::Release);
                    let latency = now.saturating_duration_since(captured).as_nanos() as u64;
                    stats.frame(latency, false, &source, &mut local);
                }
                *stats.latencies.lock().unwrap() = local;
            })
        })
        .collect();
    if polling == Polling::OwnThread {
        let (device, rel, released, free, stop) = (
            Arc::clone(device),
            Arc::clone(rel),
            Arc::clone(&released),
            Arc::clone(&free),
            Arc::clone(&stop),
        );
        threads.push(std::thread::spawn(move || {
            let r = raw_for(&device);
            let mut spins = 0u32;
            while !stop.load(Ordering::Acquire) {
                let mut found = false;
                for k in 0..K {
                    // A filled slot every consumer released: free once its events completed.
                    if free[k].load(Ordering::Acquire) == 0
                        && (0..consumers).all(|c| released[c * K + k].load(Ordering::Acquire) == 1)
                        && (0..consumers).all(|c| r.done(rel[c * K + k]))
                    {
                        free[k].store(1, Ordering::Release);
                        found = true;
                    }
                }
                if found {
                    spins = 0;
                } else {
                    relax(&mut spins);
                }
            }
        }));
    }
    // The producer is this thread: its mask is restored after the row.
    let unpinned = pin(0);
    let r = raw_for(device);
    let mut next = Instant::now();
    let mut k = 0usize;
    let done = || {
        sinks
            .iter()
            .all(|s| s.frames.load(Ordering::Acquire) >= WARM + MEASURED)
    };
    let deadline = Instant::now() + Duration::from_mins(2);
    while !done() {
        assert!(Instant::now() < deadline, "no progress");
        wait_tick(&mut next);
        let skip = match pace {
            Pace::No => false,
            Pace::Queued => hops.iter().any(|h| !h.is_empty()),
            Pace::InFlight => finished.iter().any(|f| f.load(Ordering::Acquire) < emitted),
            Pace::InUse => {
                let prev = (k + K - 1) % K;
                emitted > 0
                    && !(0..consumers).all(|c| {
                        released[c * K + prev].load(Ordering::Acquire) == 1
                            && r.done(rel[c * K + prev])
                    })
            }
        };
        if skip {
            source.skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        // A free slot: every consumer released it and its release events completed.
        let is_free = match polling {
            Polling::Producer => (0..consumers).all(|c| {
                released[c * K + k].load(Ordering::Acquire) == 1 && r.done(rel[c * K + k])
            }),
            Polling::OwnThread => free[k].load(Ordering::Acquire) == 1,
        };
        if !is_free {
            source.exhausted.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if hops.iter().any(|h| h.is_full()) {
            source.backpressured.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        r.memset(slots[k], s[0]);
        r.record(ready[k], s[0]);
        let captured = Instant::now();
        for c in 0..consumers {
            released[c * K + k].store(0, Ordering::Relaxed);
        }
        // After the released flags and before any consumer sees the slot: a poller that
        // reads `free` 0 reads them 0, or a consumer's later 1.
        free[k].store(0, Ordering::Release);
        for hop in &hops {
            hop.push((k, captured)).unwrap();
        }
        emitted += 1;
        k = (k + 1) % K;
    }
    stop.store(true, Ordering::Release);
    if let Some(mask) = unpinned {
        rustix::thread::sched_setaffinity(None, &mask).unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    ring.free(d);
    figures(&sinks)
}

/// The raw baseline of the fork in one partition: one thread and one stream, as a
/// hand-written loop would do it — at each 1 µs tick, fill a free slot, copy it for each
/// consumer in turn (same stream: no wait), and record one release event for the slot.
fn raw_one_thread(device: &Arc<dyn DeviceBackend>, consumers: usize) -> Figures {
    super::anchor();
    let d = device.as_ref();
    let ring = RawRing::new(d, consumers);
    let (slots, scratch, s0, rel) = (&ring.slots, &ring.scratch, ring.s[0], &ring.rel);
    let source = SourceStats::default();
    let sinks: Vec<Arc<SinkStats>> = (0..consumers)
        .map(|_| Arc::new(SinkStats::default()))
        .collect();
    let mut locals: Vec<Vec<u64>> = (0..consumers)
        .map(|_| Vec::with_capacity(MEASURED as usize))
        .collect();
    let r = raw_for(device);
    let mut next = Instant::now();
    let mut k = 0usize;
    // Per slot: whether its release event was recorded since its last fill.
    let mut recorded = [false; K];
    let deadline = Instant::now() + Duration::from_mins(2);
    while sinks
        .iter()
        .any(|s| s.frames.load(Ordering::Relaxed) < WARM + MEASURED)
    {
        assert!(Instant::now() < deadline, "no progress");
        wait_tick(&mut next);
        if recorded[k] && !r.done(rel[k]) {
            source.exhausted.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        r.memset(slots[k], s0);
        let captured = Instant::now();
        for (c, stats) in sinks.iter().enumerate() {
            let now = Instant::now();
            r.copy(scratch[c], slots[k], s0);
            let latency = now.saturating_duration_since(captured).as_nanos() as u64;
            stats.frame(latency, false, &source, &mut locals[c]);
        }
        r.record(rel[k], s0);
        recorded[k] = true;
        k = (k + 1) % K;
    }
    for (stats, local) in sinks.iter().zip(locals) {
        *stats.latencies.lock().unwrap() = local;
    }
    ring.free(d);
    figures(&sinks)
}

fn row(name: &str, f: &Figures) {
    let mut s = format!("{name:<30}");
    for (i, (rate, p50, p99, [even, odd], entry)) in f.sinks.iter().enumerate() {
        let _ = write!(
            s,
            "  sink{i} {:>7.1} k/s p50 {p50:>7.2} p99 {p99:>8.1} µs",
            rate / 1e3
        );
        if !even.is_nan() {
            let _ = write!(s, " (p50 even/odd frames {even:.1}/{odd:.1})");
        }
        if !entry.is_nan() {
            let _ = write!(s, " (p50 to the activation's entry {entry:.2})");
        }
    }
    // Issue 17's symmetry figure: the slower sink's p50 over the faster's (≤ 1.20).
    if let [(_, a, ..), (_, b, ..)] = f.sinks[..] {
        let _ = write!(s, "  p50 ratio {:.2}", a.max(b) / a.min(b));
    }
    let skipped = if f.skipped > 0.0 {
        format!(" skipped {:>8.0}/s", f.skipped)
    } else {
        String::new()
    };
    println!(
        "{s}  source: Backpressured {:>8.0}/s ResourceExhausted {:>8.0}/s{skipped}",
        f.backpressured, f.exhausted
    );
}

/// The first line of `fork` and `fork-paced`.
fn header(what: &str, device: &Arc<dyn DeviceBackend>) {
    println!(
        "{what} latency on {} {}: 256-byte frames, source period {:?}, blocking queues of depth {DEPTH}; {MEASURED} deliveries per sink after {WARM}; capture → receipt; {}",
        device.backend_kind().name(),
        device.ordinal(),
        pace(),
        fork_cpus().map_or("threads unpinned".to_owned(), |[a, b, c]| format!(
            "source on CPU {a}, sinks on CPUs {b} and {c} (HOLO_BENCH_FORK_CPUS)"
        ))
    );
}

/// The paced fork each way, each beside its raw baseline under the same rule; with
/// `polling_thread`, also the raw `queued` baseline with its release events polled by a
/// thread of its own (holo's layout: the producer fills as soon as the queues are empty).
fn paced_rows(device: &Arc<dyn DeviceBackend>, polling_thread: bool) {
    for (scenario, rule) in [
        (Scenario::ForkPaced, "paced"),
        (Scenario::ForkPacedInFlight, "paced on in flight"),
        (Scenario::ForkPacedInUse, "paced on completion"),
    ] {
        let pacing = scenario.pacing();
        row(
            &format!("holo {}", scenario.name()),
            &holo(device, scenario),
        );
        row(
            &format!("raw threaded, 2 consumers, {rule}"),
            &raw(device, 2, Polling::Producer, pacing),
        );
        if polling_thread && pacing == Pace::Queued {
            row(
                "raw threaded, 2 consumers, paced, polling thread",
                &raw(device, 2, Polling::OwnThread, pacing),
            );
        }
    }
}

/// `device_hop fork`: each scenario and its raw baseline, `runs` times interleaved.
pub(super) fn run(device: &Arc<dyn DeviceBackend>, runs: usize) {
    header("fork", device);
    for run in 1..=runs {
        println!("-- run {run}");
        for scenario in [
            Scenario::Fork,
            Scenario::ForkShared,
            Scenario::ForkOnePartition,
            Scenario::Chain,
            Scenario::ChainShared,
        ] {
            row(
                &format!("holo {}", scenario.name()),
                &holo(device, scenario),
            );
        }
        row(
            "raw threaded, 2 consumers",
            &raw(device, 2, Polling::Producer, Pace::No),
        );
        row(
            "raw threaded, 2 consumers, polling thread",
            &raw(device, 2, Polling::OwnThread, Pace::No),
        );
        row("raw one thread, 2 consumers", &raw_one_thread(device, 2));
        row(
            "raw threaded, 1 consumer",
            &raw(device, 1, Polling::Producer, Pace::No),
        );
        paced_rows(device, false);
    }
}

/// `device_hop fork-paced`: the paced rows only (`paced_rows`, with the polling-thread
/// baseline), `runs` times: more runs of them than `fork` gives in the same time.
pub(super) fn run_paced(device: &Arc<dyn DeviceBackend>, runs: usize) {
    header("paced fork", device);
    for run in 1..=runs {
        println!("-- run {run}");
        paced_rows(device, true);
    }
}

/// `device_hop fork-diag`: the fork and the chain under both policies through a timing
/// wrapper (`diag`'s): driver time per delivered frame by call kind and thread, to find
/// where a frame's latency goes (issue 17, item 2).
pub(super) fn run_diag(device: &Arc<dyn DeviceBackend>) {
    let timed: Arc<dyn DeviceBackend> =
        holo_runtime::device::Observed::new(Arc::clone(device), super::diag::tally);
    println!(
        "fork diag on {} {}: driver ns per delivered frame (warm-up included), kind calls×ns, per thread",
        device.backend_kind().name(),
        device.ordinal()
    );
    for scenario in [
        Scenario::Fork,
        Scenario::ForkShared,
        Scenario::ForkOnePartition,
        Scenario::Chain,
        Scenario::ChainShared,
        Scenario::ForkPaced,
        Scenario::ForkPacedInFlight,
        Scenario::ForkPacedInUse,
    ] {
        let before = super::diag::snapshot();
        let f = holo(&timed, scenario);
        let after = super::diag::snapshot();
        row(&format!("holo {}", scenario.name()), &f);
        super::diag::report(&before, &after, (WARM + MEASURED) as f64);
    }
}
