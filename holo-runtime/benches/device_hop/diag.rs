//! `device_hop -- diag`: where a device hop's time goes. Not a target check; a tool for
//! finding the next cost to remove.
//!
//! - holo's four scenarios through [`Observed`], timing every call on the thread that
//!   makes it (driver time per frame by call kind and thread: partitions, retirement
//!   worker), and how often the producer found its pool empty;
//! - the raw fenced, fused and fork sequences on one thread with each call timed (host
//!   time in the driver per frame against the frame's wall time: host- or device-bound);
//! - the raw fenced hop and fork spread over threads as holo spreads them (the producer
//!   polls its release events; a thread per consumer), to separate the cost of holo's
//!   code from the cost of submitting from several threads.

#![allow(
    clippy::many_single_char_names,
    reason = "the raw sequences name their streams, events and runner as the bench's raw side does"
)]

use std::fmt::Write as _;
use std::sync::Mutex;

use crossbeam_queue::ArrayQueue;
use holo_runtime::device::{DeviceCall, Observed};

use super::null_device::NullDevice;

use super::{
    AllocKind, Arc, AtomicU64, BYTES, DeviceBackend, DevicePtr, Duration, EventHandle, FRAMES,
    Instant, K, Ordering, Raw, Result, Shape, StreamHandle, WARMUP,
};

/// Call kinds timed.
const KINDS: [&str; 6] = ["record", "wait", "query", "memset", "copy", "other"];

/// One thread's time (ns) and calls per kind (0..12); then its calls that took over
/// [`SLOW`] and their time (12, 13), the longest call (14: a maximum, reset by each
/// [`snapshot`]), and the gaps over [`SLOW`] between the end of one of its calls and the
/// start of the next, and their time (15, 16).
type Acc = [AtomicU64; 17];

/// The index in [`Acc`] of the longest call: a maximum, not a sum.
const LONGEST: usize = 14;

/// What counts as a slow call, or a long gap between two calls of one thread: a stall a
/// frame of 10–20 µs cannot hide (the driver's lock held elsewhere, or the thread off
/// its CPU).
const SLOW: Duration = Duration::from_micros(20);

/// Every thread's accumulator, by thread name.
static THREADS: Mutex<Vec<(String, Arc<Acc>)>> = Mutex::new(Vec::new());

thread_local! {
    /// When this thread's last call ended.
    static LAST_END: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    static MINE: Arc<Acc> = {
        let acc: Arc<Acc> = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
        let name = std::thread::current().name().unwrap_or("unnamed").to_owned();
        THREADS.lock().unwrap().push((name, Arc::clone(&acc)));
        acc
    };
}

/// Adds one call of `call`'s kind, `took` long, to the calling thread's accumulator.
pub(super) fn tally(call: DeviceCall, took: Duration) {
    let kind = match call {
        DeviceCall::RecordEvent { .. } => 0,
        DeviceCall::WaitEvent { .. } => 1,
        DeviceCall::QueryEvent { .. } => 2,
        DeviceCall::Memset { .. } => 3,
        DeviceCall::Copy { .. } => 4,
        _ => 5,
    };
    let end = Instant::now();
    let gap = LAST_END
        .with(|l| l.replace(Some(end)))
        .map(|last| end.saturating_duration_since(last).saturating_sub(took));
    MINE.with(|a| {
        let ns = took.as_nanos() as u64;
        a[kind].fetch_add(ns, Ordering::Relaxed);
        a[6 + kind].fetch_add(1, Ordering::Relaxed);
        if took > SLOW {
            a[12].fetch_add(1, Ordering::Relaxed);
            a[13].fetch_add(ns, Ordering::Relaxed);
        }
        a[LONGEST].fetch_max(ns, Ordering::Relaxed);
        if let Some(gap) = gap.filter(|g| *g > SLOW) {
            a[15].fetch_add(1, Ordering::Relaxed);
            a[16].fetch_add(gap.as_nanos() as u64, Ordering::Relaxed);
        }
    });
}

/// Every thread's accumulator now; each thread's longest call restarts from 0.
pub(super) fn snapshot() -> Vec<(String, [u64; 17])> {
    THREADS
        .lock()
        .unwrap()
        .iter()
        .map(|(n, a)| {
            (
                n.clone(),
                std::array::from_fn(|i| {
                    if i == LONGEST {
                        a[i].swap(0, Ordering::Relaxed)
                    } else {
                        a[i].load(Ordering::Relaxed)
                    }
                }),
            )
        })
        .collect()
}

/// Prints each thread's driver time per frame between two snapshots.
/// With each thread's stalls: its calls over [`SLOW`] (count and µs per frame), its
/// longest call, and its gaps over [`SLOW`] between two calls (count and µs per frame).
pub(super) fn report(before: &[(String, [u64; 17])], after: &[(String, [u64; 17])], frames: f64) {
    for (i, (name, a)) in after.iter().enumerate() {
        let b = before.get(i).map_or([0; 17], |x| x.1);
        let d: Vec<u64> = (0..17)
            .map(|k| if k == LONGEST { a[k] } else { a[k] - b[k] })
            .collect();
        let total: u64 = d[..6].iter().sum();
        if total == 0 {
            continue;
        }
        let mut line = format!(
            "    {name:<22} driver {:>7.0} ns/frame:",
            total as f64 / frames
        );
        for k in 0..6 {
            if d[6 + k] > 0 {
                let _ = write!(
                    line,
                    " {} {:.2}×{:.0}",
                    KINDS[k],
                    d[6 + k] as f64 / frames,
                    d[k] as f64 / d[6 + k] as f64
                );
            }
        }
        let _ = write!(
            line,
            " | calls > {} µs: {} ({:.2} µs/frame), longest {:.1} µs; gaps > {0} µs: {} ({:.2} µs/frame)",
            SLOW.as_micros(),
            d[12],
            d[13] as f64 / frames / 1e3,
            d[LONGEST] as f64 / 1e3,
            d[15],
            d[16] as f64 / frames / 1e3
        );
        println!("{line}");
    }
}

/// Loans the producer could not get (its pool empty), for the diagnosis.
pub(super) static HEAD_EXHAUSTED: AtomicU64 = AtomicU64::new(0);

pub(super) fn run(device: &Arc<dyn DeviceBackend>) {
    println!("diag: holo through a timing wrapper (driver ns per frame: kind calls×ns)");
    let timed_device: Arc<dyn DeviceBackend> = Observed::new(Arc::clone(device), tally);
    for (name, shape) in [
        ("fenced hop", Shape::FencedHop),
        ("fused hop", Shape::FusedHop),
        ("1→2 fork", Shape::Fork),
        ("4-op chain", Shape::Chain4),
    ] {
        for _ in 0..2 {
            let before = snapshot();
            let e0 = HEAD_EXHAUSTED.load(Ordering::Relaxed);
            let (ns, events) = super::holo(&timed_device, &shape);
            let after = snapshot();
            let frames = (FRAMES + WARMUP) as f64;
            println!(
                "  holo {name}: {ns:.0} ns/frame, {events:.2} events/frame, producer found its pool empty {:.2}×/frame (whole run incl. warm-up; driver figures too)",
                (HEAD_EXHAUSTED.load(Ordering::Relaxed) - e0) as f64 / frames
            );
            report(&before, &after, frames);
        }
    }
    for _ in 0..2 {
        raw_timed(device, &Shape::FencedHop);
        raw_timed(device, &Shape::FusedHop);
        raw_timed(device, &Shape::Fork);
        println!(
            "  raw fenced, 2 threads (producer polls): {:.0} ns/frame",
            raw_threaded(device, 1)
        );
        println!(
            "  raw fork, 3 threads (producer polls, a thread per consumer): {:.0} ns/frame",
            raw_threaded(device, 2)
        );
    }
}

/// The raw sequence single-threaded, with the host time inside each call summed.
fn raw_timed(device: &Arc<dyn DeviceBackend>, shape: &Shape) {
    let fenced = matches!(shape, Shape::FencedHop);
    let fork = matches!(shape, Shape::Fork);
    let r = raw_for(device);
    let d = device.as_ref();
    let slots = buffers(d, K);
    let scratch = d.alloc(AllocKind::Device, BYTES).unwrap();
    let scratch2 = d.alloc(AllocKind::Device, BYTES).unwrap();
    let s: Vec<StreamHandle> = (0..3).map(|_| d.create_stream().unwrap()).collect();
    let ready: Vec<EventHandle> = (0..K).map(|_| d.create_event().unwrap()).collect();
    let rel: Vec<EventHandle> = (0..2 * K).map(|_| d.create_event().unwrap()).collect();
    let mut t = [0u64; 6];
    let mut n = [0u64; 6];
    let time = |t: &mut [u64; 6], n: &mut [u64; 6], kind: usize, f: &mut dyn FnMut()| {
        let a = Instant::now();
        f();
        t[kind] += a.elapsed().as_nanos() as u64;
        n[kind] += 1;
    };
    let total = (WARMUP + FRAMES) as usize;
    let mut t0 = Instant::now();
    for i in 0..total {
        if i == WARMUP as usize {
            t = [0; 6];
            n = [0; 6];
            t0 = Instant::now();
        }
        let k = i % K;
        if fork {
            for e in [rel[k], rel[K + k]] {
                while i >= K && {
                    let mut done = false;
                    time(&mut t, &mut n, 2, &mut || done = r.done(e));
                    !done
                } {}
            }
            time(&mut t, &mut n, 3, &mut || r.memset(slots[k], s[0]));
            time(&mut t, &mut n, 0, &mut || r.record(ready[k], s[0]));
            time(&mut t, &mut n, 1, &mut || r.wait(s[1], ready[k]));
            time(&mut t, &mut n, 1, &mut || r.wait(s[2], ready[k]));
            time(&mut t, &mut n, 4, &mut || r.copy(scratch, slots[k], s[1]));
            time(&mut t, &mut n, 4, &mut || r.copy(scratch2, slots[k], s[2]));
            time(&mut t, &mut n, 0, &mut || r.record(rel[k], s[1]));
            time(&mut t, &mut n, 0, &mut || r.record(rel[K + k], s[2]));
        } else if fenced {
            while i >= K && {
                let mut done = false;
                time(&mut t, &mut n, 2, &mut || done = r.done(rel[k]));
                !done
            } {}
            time(&mut t, &mut n, 3, &mut || r.memset(slots[k], s[0]));
            time(&mut t, &mut n, 0, &mut || r.record(ready[k], s[0]));
            time(&mut t, &mut n, 1, &mut || r.wait(s[1], ready[k]));
            time(&mut t, &mut n, 4, &mut || r.copy(scratch, slots[k], s[1]));
            time(&mut t, &mut n, 0, &mut || r.record(rel[k], s[1]));
        } else {
            time(&mut t, &mut n, 3, &mut || r.memset(slots[k], s[0]));
            time(&mut t, &mut n, 4, &mut || r.copy(scratch, slots[k], s[0]));
        }
    }
    for &st in &s {
        d.synchronize_stream(st).unwrap();
    }
    let wall = t0.elapsed().as_nanos() as f64 / FRAMES as f64;
    let f = FRAMES as f64;
    let mut line = format!(
        "  raw {} single-threaded: {wall:.0} ns/frame wall, {:.0} ns/frame in calls:",
        if fork {
            "fork"
        } else if fenced {
            "fenced"
        } else {
            "fused"
        },
        t.iter().sum::<u64>() as f64 / f
    );
    for k in 0..6 {
        if n[k] > 0 {
            let _ = write!(
                line,
                " {} {:.2}×{:.0}",
                KINDS[k],
                n[k] as f64 / f,
                t[k] as f64 / n[k] as f64
            );
        }
    }
    println!("{line}");
    for e in ready.into_iter().chain(rel) {
        d.destroy_event(e).unwrap();
    }
    for st in s {
        d.destroy_stream(st).unwrap();
    }
    for p in slots.into_iter().chain([scratch, scratch2]) {
        // SAFETY: every stream using them was synchronized.
        unsafe { d.free(AllocKind::Device, p, BYTES).unwrap() };
    }
}

pub(super) fn raw_for(device: &Arc<dyn DeviceBackend>) -> Raw {
    #[cfg(feature = "cuda")]
    let cuda = device.backend_kind() == holo_runtime::device::BackendKind::Cuda;
    bind(device);
    Raw {
        device: Arc::clone(device),
        #[cfg(feature = "cuda")]
        cuda,
    }
}

/// Spins a while, then yields (a machine with fewer cores than busy threads must still
/// run the device's own threads).
pub(super) fn relax(spins: &mut u32) {
    *spins += 1;
    if spins.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Makes the device's context current on this thread (the sys calls need it).
fn bind(device: &Arc<dyn DeviceBackend>) {
    let _ = device.create_event().map(|e| device.destroy_event(e));
}

/// A raw fan-out to `consumers` spread over threads as holo spreads it: the producer
/// (fill, readiness record; it polls every release event of a slot before reusing it)
/// and one thread per consumer (wait, copy, its own release record). One consumer is the
/// fenced hop, two the fork.
pub(super) fn raw_threaded(device: &Arc<dyn DeviceBackend>, consumers: usize) -> f64 {
    let d = device.as_ref();
    let ring = RawRing::new(d, consumers);
    let (slots, scratch, s, ready, rel) =
        (&ring.slots, &ring.scratch, &ring.s, &ring.ready, &ring.rel);
    let hops: Vec<Arc<ArrayQueue<usize>>> = (0..consumers)
        .map(|_| Arc::new(ArrayQueue::new(K)))
        .collect();
    let recorded: Vec<Arc<AtomicU64>> = (0..consumers)
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect();
    let total = (WARMUP + FRAMES) as usize;
    let threads: Vec<_> = (0..consumers)
        .map(|c| {
            let (device, hop, ready, rel, slots, recorded) = (
                Arc::clone(device),
                Arc::clone(&hops[c]),
                Arc::clone(ready),
                Arc::clone(rel),
                Arc::clone(slots),
                Arc::clone(&recorded[c]),
            );
            let (stream, dst) = (s[1 + c], scratch[c]);
            std::thread::spawn(move || {
                let r = raw_for(&device);
                let mut spins = 0u32;
                let mut t0 = Instant::now();
                for i in 0..total {
                    if i == WARMUP as usize {
                        t0 = Instant::now();
                    }
                    let k = loop {
                        if let Some(k) = hop.pop() {
                            break k;
                        }
                        relax(&mut spins);
                    };
                    r.wait(stream, ready[k]);
                    r.copy(dst, slots[k], stream);
                    r.record(rel[c * K + k], stream);
                    recorded.store(i as u64 + 1, Ordering::Release);
                }
                t0
            })
        })
        .collect();
    let r = raw_for(device);
    let mut spins = 0u32;
    for i in 0..total {
        let k = i % K;
        if i >= K {
            for c in 0..consumers {
                while recorded[c].load(Ordering::Acquire) <= (i - K) as u64 {
                    relax(&mut spins);
                }
                while !r.done(rel[c * K + k]) {}
            }
        }
        r.memset(slots[k], s[0]);
        r.record(ready[k], s[0]);
        for hop in &hops {
            while hop.push(k).is_err() {
                relax(&mut spins);
            }
        }
    }
    let t0 = threads
        .into_iter()
        .map(|c| c.join().unwrap())
        .min()
        .unwrap();
    for &st in s {
        d.synchronize_stream(st).unwrap();
    }
    let ns = t0.elapsed().as_nanos() as f64 / FRAMES as f64;
    ring.free(d);
    ns
}

/// The raw side's device objects for a fan-out to `consumers`: a ring of `K` slots and
/// their readiness events, a stream per consumer after the producer's (`s[0]`), a scratch
/// buffer per consumer, and `K` release events per consumer (`rel[c × K + k]`).
pub(super) struct RawRing {
    pub(super) slots: Arc<Vec<DevicePtr>>,
    pub(super) scratch: Vec<DevicePtr>,
    pub(super) s: Vec<StreamHandle>,
    pub(super) ready: Arc<Vec<EventHandle>>,
    pub(super) rel: Arc<Vec<EventHandle>>,
}

/// `n` device buffers of `BYTES`.
pub(super) fn buffers(d: &dyn DeviceBackend, n: usize) -> Vec<DevicePtr> {
    (0..n)
        .map(|_| d.alloc(AllocKind::Device, BYTES).unwrap())
        .collect()
}

impl RawRing {
    pub(super) fn new(d: &dyn DeviceBackend, consumers: usize) -> RawRing {
        let events =
            |n: usize| -> Vec<EventHandle> { (0..n).map(|_| d.create_event().unwrap()).collect() };
        RawRing {
            slots: Arc::new(buffers(d, K)),
            scratch: buffers(d, consumers),
            s: (0..=consumers)
                .map(|_| d.create_stream().unwrap())
                .collect(),
            ready: Arc::new(events(K)),
            rel: Arc::new(events(consumers * K)),
        }
    }

    /// Synchronizes every stream, then destroys and frees everything.
    pub(super) fn free(self, d: &dyn DeviceBackend) {
        for &st in &self.s {
            d.synchronize_stream(st).unwrap();
        }
        for &e in self.ready.iter().chain(self.rel.iter()) {
            d.destroy_event(e).unwrap();
        }
        for st in self.s {
            d.destroy_stream(st).unwrap();
        }
        for &p in self.slots.iter().chain(&self.scratch) {
            // SAFETY: every stream using them was synchronized.
            unsafe { d.free(AllocKind::Device, p, BYTES).unwrap() };
        }
    }
}

/// holo's own cost per frame: the scenarios on a device that does nothing.
/// `HOLO_BENCH_NULL_SHAPE=fused` (or `fenced`, `chain`) runs that scenario alone (for a
/// profiler: `valgrind --tool=callgrind`); `HOLO_BENCH_EVICT_KIB=N` has every device call
/// write N KiB first, as a GPU driver's calls evict what holo touched before them (for
/// callgrind's cache simulation, `.ci/count-code-lines.sh`); `HOLO_BENCH_NULL_RAW=1` runs
/// the raw loop on the same device after each holo run and prints it beside (holo's gap
/// over the raw calls, with the eviction both pay; off by default, so that the counting
/// scripts trace holo's frames alone).
pub(super) fn run_null() {
    let evict = super::null_device::evict_kib_from_env().unwrap_or(0);
    let with_raw = std::env::var_os("HOLO_BENCH_NULL_RAW").is_some_and(|v| v == "1");
    let device: Arc<dyn DeviceBackend> = Arc::new(NullDevice::evicting(evict << 10));
    for (name, shape) in [
        ("fused hop", Shape::FusedHop),
        ("fenced hop", Shape::FencedHop),
        ("4-op chain", Shape::Chain4),
    ] {
        if !super::picked("HOLO_BENCH_NULL_SHAPE", name) {
            continue;
        }
        let mut runs = Vec::new();
        let mut raws = Vec::new();
        for _ in 0..5 {
            runs.push(super::holo(&device, &shape).0);
            if with_raw {
                raws.push(std::thread::scope(|s| {
                    s.spawn(|| super::raw(&device, &shape)).join().unwrap()
                }));
            }
        }
        if with_raw {
            println!("  holo {name} on a null device: {runs:.0?} ns/frame; raw {raws:.0?}");
        } else {
            println!("  holo {name} on a null device: {runs:.0?} ns/frame");
        }
    }
}

/// Where [`raw_fused_loop`]'s buffers live.
#[derive(Clone, Copy)]
pub(super) enum Memory {
    /// One `cuMemAlloc` per slot and one for the scratch buffer (the raw rows' layout).
    Separate,
    /// The slots at `i × BYTES` in one allocation of `K × BYTES`, and the scratch buffers
    /// likewise in a second one, used in turn: a holo pool's layout (one memory object per
    /// pool, `per_slot_bytes` apart), with the consumer writing into its own output pool's
    /// slots as the fused hop's does.
    Carved,
}

/// Which of the fused loop's two calls [`raw_fused_loop`] makes, and by which driver call
/// the copy is made (`device_hop copy-probe` makes each alone, and the copy both ways).
#[derive(Clone, Copy)]
pub(super) struct Calls {
    /// The fill (`cuMemsetD8Async`).
    pub(super) fill: bool,
    /// The copy: `cuMemcpyAsync` (`Some(false)`), `cuMemcpyDtoDAsync_v2` (`Some(true)`),
    /// or none.
    pub(super) copy_dtod: Option<bool>,
}

impl Calls {
    /// The fused hop's raw side: the fill, then the copy by `cuMemcpyAsync`.
    pub(super) const FUSED: Calls = Calls {
        fill: true,
        copy_dtod: Some(false),
    };
}

/// The raw fused loop (fill a slot of a ring of `K`, copy it into a scratch buffer, on one
/// stream; `calls` picks which of the two and how the copy is made), `WARMUP + FRAMES`
/// frames on `stream` from the calling thread; `pollute` bytes of a private buffer are
/// written between frames. Returns ns per measured frame and the host ns inside the fill
/// and copy calls per frame.
pub(super) fn raw_fused_loop(
    device: &Arc<dyn DeviceBackend>,
    stream: StreamHandle,
    pollute: usize,
    memory: Memory,
    calls: Calls,
) -> (f64, f64, f64) {
    let r = raw_for(device);
    let d = device.as_ref();
    let (blocks, slots, scratch): (Vec<(DevicePtr, usize)>, Vec<DevicePtr>, Vec<DevicePtr>) =
        match memory {
            Memory::Separate => {
                let slots = buffers(d, K);
                let scratch = buffers(d, 1);
                let blocks = slots.iter().chain(&scratch).map(|&p| (p, BYTES)).collect();
                (blocks, slots, scratch)
            }
            Memory::Carved => {
                let block = || d.alloc(AllocKind::Device, K * BYTES).unwrap();
                let (a, b) = (block(), block());
                let carve = |base: DevicePtr| -> Vec<DevicePtr> {
                    (0..K)
                        .map(|i| DevicePtr::from_raw(base.raw() + (i * BYTES) as u64))
                        .collect()
                };
                (vec![(a, K * BYTES), (b, K * BYTES)], carve(a), carve(b))
            }
        };
    let mut dirt = vec![0u8; pollute.max(64)];
    let (mut fill, mut copy) = (0u64, 0u64);
    let mut t0 = Instant::now();
    for i in 0..(WARMUP + FRAMES) as usize {
        if i == WARMUP as usize {
            d.synchronize_stream(stream).unwrap();
            (fill, copy) = (0, 0);
            t0 = Instant::now();
        }
        let k = i % K;
        let a = Instant::now();
        if calls.fill {
            r.memset(slots[k], stream);
        }
        let b = Instant::now();
        match calls.copy_dtod {
            Some(false) => r.copy(scratch[k % scratch.len()], slots[k], stream),
            Some(true) => r.copy_dtod(scratch[k % scratch.len()], slots[k], stream),
            None => {}
        }
        copy += b.elapsed().as_nanos() as u64;
        fill += (b - a).as_nanos() as u64;
        if pollute > 0 {
            for line in dirt.chunks_mut(64) {
                line[0] = line[0].wrapping_add(1);
            }
            std::hint::black_box(&mut dirt);
        }
    }
    d.synchronize_stream(stream).unwrap();
    let per = |x: f64| x / FRAMES as f64;
    let out = (
        per(t0.elapsed().as_nanos() as f64),
        per(fill as f64),
        per(copy as f64),
    );
    for (p, bytes) in blocks {
        // SAFETY: the stream that used them was synchronized.
        unsafe { d.free(AllocKind::Device, p, bytes).unwrap() };
    }
    out
}

/// Runs [`raw_fused_loop`] once, inside the first activation of a one-operator session,
/// on the partition's own thread and stream.
/// Its output is never written: it binds the partition to the device, which gives it a
/// stream.
#[holo_runtime::operator]
struct RawInside {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256, max_loans = 4)]
    out: holo_runtime::Output<holo_runtime::Tensor>,
    result: Arc<Mutex<Option<(f64, f64, f64)>>>,
}

impl holo_runtime::Operator for RawInside {
    fn compute(&mut self, ctx: &mut holo_runtime::ExecutionContext<'_>) -> Result<()> {
        if self.result.lock().unwrap().is_some() {
            return Ok(());
        }
        let stream = ctx.cuda_stream()?.handle();
        let device = Arc::clone(ctx.device().unwrap());
        let r = raw_fused_loop(&device, stream, 0, Memory::Separate, Calls::FUSED);
        *self.result.lock().unwrap() = Some(r);
        Ok(())
    }
}

/// `device_hop fused-probe`: is a driver call slower on holo's partition thread, after
/// holo's work between calls, or on holo's memory layout? The raw fused loop on a fresh
/// thread, on slots carved from one allocation as a holo pool's are, inside an operator's
/// activation (holo's thread and stream, no holo work between calls), and on a fresh
/// thread writing 16 KiB and 64 KiB between frames (a stand-in for holo's work).
pub(super) fn run_fused_probe(device: &Arc<dyn DeviceBackend>) {
    println!(
        "fused probe on {} {}: the raw fused loop, ns per frame (wall / in the fill / in the copy)",
        device.backend_kind().name(),
        device.ordinal()
    );
    let fresh = |pollute: usize, memory: Memory| {
        let device = Arc::clone(device);
        std::thread::spawn(move || {
            let s = device.create_stream().unwrap();
            let r = raw_fused_loop(&device, s, pollute, memory, Calls::FUSED);
            device.destroy_stream(s).unwrap();
            r
        })
        .join()
        .unwrap()
    };
    let inside = || {
        let result = Arc::new(Mutex::new(None));
        let mut g = holo_runtime::Graph::new();
        g.add_operator(
            "raw",
            RawInside {
                out: holo_runtime::Output::default(),
                result: Arc::clone(&result),
            },
            holo_runtime::ParamSet::defaults().unwrap(),
        )
        .unwrap();
        let mut options = holo_runtime::CompileOptions::default();
        options.partitioning =
            holo_runtime::Partitioning::Authored(vec![holo_runtime::PartitionSpec::new(
                "raw",
                vec!["raw"],
            )]);
        options
            .deployment
            .bind_tensor_output_device("raw", "out", device.device_id());
        let plan = holo_runtime::compile(&g, options).unwrap();
        let session = super::start_session(g, &plan, device);
        let deadline = Instant::now() + Duration::from_mins(1);
        while result.lock().unwrap().is_none() {
            assert!(Instant::now() < deadline, "no progress");
            std::thread::sleep(Duration::from_millis(1));
        }
        session.stop();
        session.join().unwrap();
        result.lock().unwrap().take().unwrap()
    };
    let show = |name: &str, (wall, fill, copy): (f64, f64, f64)| {
        println!("  {name:<48} {wall:>7.0} / {fill:>6.0} / {copy:>6.0}");
    };
    for _ in 0..3 {
        show("fresh thread", fresh(0, Memory::Separate));
        show(
            "fresh thread, slots carved from one allocation",
            fresh(0, Memory::Carved),
        );
        show("inside an activation (holo's thread, stream)", inside());
        show(
            "fresh thread, 16 KiB written between frames",
            fresh(16 << 10, Memory::Separate),
        );
        show(
            "fresh thread, 64 KiB written between frames",
            fresh(64 << 10, Memory::Separate),
        );
    }
}
