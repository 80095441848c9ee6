//! `device_hop -- diag`: where a device hop's time goes. Not a target check; a tool for
//! finding the next cost to remove.
//!
//! - holo's fenced and fused hops through a backend wrapper that times every call per
//!   thread (driver time per frame by call kind and thread: producer partition, consumer
//!   partition, retirement worker), and how often the producer found its pool empty;
//! - the raw fenced sequence single-threaded with each call timed (host time in the
//!   driver per frame, against the frame's wall time: host-bound or device-bound);
//! - the raw fenced sequence spread over two threads (producer polls its release
//!   events) and over three (a third thread polls and returns slots), to separate the
//!   cost of holo's code from the cost of submitting from several threads.

#![allow(
    clippy::many_single_char_names,
    reason = "the raw sequences name their streams, events and runner as the bench's raw side does"
)]

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use crossbeam_queue::ArrayQueue;
use holo_runtime::device::DeviceCounters;

use super::{
    AllocKind, Arc, AtomicU64, BYTES, DeviceBackend, DevicePtr, Duration, EventHandle, FRAMES,
    Instant, K, Ordering, Raw, Result, Shape, StreamHandle, WARMUP,
};

/// Call kinds timed.
const KINDS: [&str; 6] = ["record", "wait", "query", "memset", "copy", "other"];

/// One thread's time (ns) and calls per kind.
type Acc = [AtomicU64; 12];

/// Every thread's accumulator, by thread name.
static THREADS: Mutex<Vec<(String, Arc<Acc>)>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: Arc<Acc> = {
        let acc: Arc<Acc> = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
        let name = std::thread::current().name().unwrap_or("unnamed").to_owned();
        THREADS.lock().unwrap().push((name, Arc::clone(&acc)));
        acc
    };
}

fn timed<T>(kind: usize, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    let ns = t.elapsed().as_nanos() as u64;
    MINE.with(|a| {
        a[kind].fetch_add(ns, Ordering::Relaxed);
        a[6 + kind].fetch_add(1, Ordering::Relaxed);
    });
    r
}

/// Forwards every call to `inner`, timing it on the calling thread.
struct Timed(Arc<dyn DeviceBackend>);

impl DeviceBackend for Timed {
    fn backend_kind(&self) -> holo_runtime::device::BackendKind {
        self.0.backend_kind()
    }
    fn ordinal(&self) -> u32 {
        self.0.ordinal()
    }
    fn create_stream(&self) -> Result<StreamHandle> {
        self.0.create_stream()
    }
    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        self.0.destroy_stream(stream)
    }
    fn create_event(&self) -> Result<EventHandle> {
        self.0.create_event()
    }
    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        self.0.destroy_event(event)
    }
    fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()> {
        timed(0, || self.0.record_event(event, stream))
    }
    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        timed(1, || self.0.wait_event(stream, event))
    }
    fn query_event(&self, event: EventHandle) -> Result<bool> {
        timed(2, || self.0.query_event(event))
    }
    fn synchronize_event(&self, event: EventHandle) -> Result<()> {
        timed(5, || self.0.synchronize_event(event))
    }
    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()> {
        self.0.synchronize_stream(stream)
    }
    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        self.0.alloc(kind, bytes)
    }
    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: forwarded unchanged; the caller's guarantees carry over.
        unsafe { self.0.free(kind, ptr, bytes) }
    }
    unsafe fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded unchanged.
        timed(3, || unsafe {
            self.0.memset_async(dst, value, bytes, stream)
        })
    }
    unsafe fn copy_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded unchanged.
        timed(4, || unsafe { self.0.copy_async(dst, src, bytes, stream) })
    }
    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded unchanged.
        timed(5, || unsafe {
            self.0.copy_to_host_async(dst, src, bytes, stream)
        })
    }
    unsafe fn copy_from_host_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded unchanged.
        timed(5, || unsafe {
            self.0.copy_from_host_async(dst, src, bytes, stream)
        })
    }
    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()> {
        self.0.enqueue_delay(stream, duration)
    }
    fn counters(&self) -> &DeviceCounters {
        self.0.counters()
    }
}

fn snapshot() -> Vec<(String, [u64; 12])> {
    THREADS
        .lock()
        .unwrap()
        .iter()
        .map(|(n, a)| {
            (
                n.clone(),
                std::array::from_fn(|i| a[i].load(Ordering::Relaxed)),
            )
        })
        .collect()
}

/// Prints each thread's driver time per frame between two snapshots.
fn report(before: &[(String, [u64; 12])], after: &[(String, [u64; 12])], frames: f64) {
    for (i, (name, a)) in after.iter().enumerate() {
        let b = before.get(i).map_or([0; 12], |x| x.1);
        let d: Vec<u64> = (0..12).map(|k| a[k] - b[k]).collect();
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
        println!("{line}");
    }
}

/// Loans the producer could not get (its pool empty), for the diagnosis.
pub(super) static HEAD_EXHAUSTED: AtomicU64 = AtomicU64::new(0);

pub(super) fn run(device: &Arc<dyn DeviceBackend>) {
    println!("diag: holo through a timing wrapper (driver ns per frame: kind calls×ns)");
    let timed_device: Arc<dyn DeviceBackend> = Arc::new(Timed(Arc::clone(device)));
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
            raw_threaded(device, false)
        );
        println!(
            "  raw fenced, 3 threads (a poller returns slots): {:.0} ns/frame",
            raw_threaded(device, true)
        );
        println!(
            "  raw fork, 3 threads (producer polls, a thread per consumer): {:.0} ns/frame",
            raw_fork_threaded(device)
        );
    }
}

/// The raw sequence single-threaded, with the host time inside each call summed.
fn raw_timed(device: &Arc<dyn DeviceBackend>, shape: &Shape) {
    let fenced = matches!(shape, Shape::FencedHop);
    let fork = matches!(shape, Shape::Fork);
    let r = raw_for(device);
    let d = device.as_ref();
    let slots: Vec<DevicePtr> = (0..K)
        .map(|_| d.alloc(AllocKind::Device, BYTES).unwrap())
        .collect();
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

fn raw_for(device: &Arc<dyn DeviceBackend>) -> Raw {
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
fn relax(spins: &mut u32) {
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

/// The raw fenced sequence on two threads (the producer polls a slot's release event
/// before reusing it) or three (a third thread polls and hands slots back).
pub(super) fn raw_threaded(device: &Arc<dyn DeviceBackend>, poller: bool) -> f64 {
    let d = device.as_ref();
    let slots: Arc<Vec<DevicePtr>> = Arc::new(
        (0..K)
            .map(|_| d.alloc(AllocKind::Device, BYTES).unwrap())
            .collect(),
    );
    let scratch = d.alloc(AllocKind::Device, BYTES).unwrap();
    let s: Vec<StreamHandle> = (0..2).map(|_| d.create_stream().unwrap()).collect();
    let ready: Arc<Vec<EventHandle>> =
        Arc::new((0..K).map(|_| d.create_event().unwrap()).collect());
    let rel: Arc<Vec<EventHandle>> = Arc::new((0..K).map(|_| d.create_event().unwrap()).collect());
    let hop = Arc::new(ArrayQueue::<usize>::new(K));
    let back = Arc::new(ArrayQueue::<usize>::new(K));
    let free = Arc::new(ArrayQueue::<usize>::new(K));
    for k in 0..K {
        free.push(k).unwrap();
    }
    let total = (WARMUP + FRAMES) as usize;
    let stop = Arc::new(AtomicBool::new(false));
    // Frames whose release event the consumer has recorded (the two-thread producer polls
    // a slot's event only once its last use is recorded).
    let recorded = Arc::new(AtomicU64::new(0));
    let (s0, s1) = (s[0], s[1]);
    let consumer = {
        let (device, hop, back, ready, rel) = (
            Arc::clone(device),
            Arc::clone(&hop),
            Arc::clone(&back),
            Arc::clone(&ready),
            Arc::clone(&rel),
        );
        let slots = Arc::clone(&slots);
        let recorded = Arc::clone(&recorded);
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
                r.wait(s1, ready[k]);
                r.copy(scratch, slots[k], s1);
                r.record(rel[k], s1);
                recorded.store(i as u64 + 1, Ordering::Release);
                if poller {
                    back.push(k).unwrap();
                }
            }
            t0
        })
    };
    let retirer = poller.then(|| {
        let (device, back, free, rel, stop) = (
            Arc::clone(device),
            Arc::clone(&back),
            Arc::clone(&free),
            Arc::clone(&rel),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let r = raw_for(&device);
            let mut spins = 0u32;
            let mut pending = VecDeque::with_capacity(K);
            while !stop.load(Ordering::Relaxed) {
                while let Some(k) = back.pop() {
                    pending.push_back(k);
                }
                while let Some(&k) = pending.front() {
                    if !r.done(rel[k]) {
                        break;
                    }
                    pending.pop_front();
                    free.push(k).unwrap();
                }
                relax(&mut spins);
            }
        })
    });
    let r = raw_for(device);
    let mut spins = 0u32;
    for i in 0..total {
        let k = if poller {
            loop {
                if let Some(k) = free.pop() {
                    break k;
                }
                relax(&mut spins);
            }
        } else {
            let k = i % K;
            if i >= K {
                while recorded.load(Ordering::Acquire) <= (i - K) as u64 {
                    relax(&mut spins);
                }
                while !r.done(rel[k]) {}
            }
            k
        };
        r.memset(slots[k], s0);
        r.record(ready[k], s0);
        while hop.push(k).is_err() {
            relax(&mut spins);
        }
    }
    let t0 = consumer.join().unwrap();
    for &st in &s {
        d.synchronize_stream(st).unwrap();
    }
    let ns = t0.elapsed().as_nanos() as f64 / FRAMES as f64;
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = retirer {
        t.join().unwrap();
    }
    for &e in ready.iter().chain(rel.iter()) {
        d.destroy_event(e).unwrap();
    }
    for st in s {
        d.destroy_stream(st).unwrap();
    }
    for &p in slots.iter().chain([&scratch]) {
        // SAFETY: every stream using them was synchronized.
        unsafe { d.free(AllocKind::Device, p, BYTES).unwrap() };
    }
    ns
}

/// The raw fork on three threads: the producer (fill, readiness record; it polls both
/// release events before reusing a slot) and one thread per consumer (wait, copy, its
/// own release record).
pub(super) fn raw_fork_threaded(device: &Arc<dyn DeviceBackend>) -> f64 {
    let d = device.as_ref();
    let slots: Arc<Vec<DevicePtr>> = Arc::new(
        (0..K)
            .map(|_| d.alloc(AllocKind::Device, BYTES).unwrap())
            .collect(),
    );
    let scratch: Vec<DevicePtr> = (0..2)
        .map(|_| d.alloc(AllocKind::Device, BYTES).unwrap())
        .collect();
    let s: Vec<StreamHandle> = (0..3).map(|_| d.create_stream().unwrap()).collect();
    let ready: Arc<Vec<EventHandle>> =
        Arc::new((0..K).map(|_| d.create_event().unwrap()).collect());
    let rel: Arc<Vec<EventHandle>> =
        Arc::new((0..2 * K).map(|_| d.create_event().unwrap()).collect());
    let hops: Vec<Arc<ArrayQueue<usize>>> = (0..2).map(|_| Arc::new(ArrayQueue::new(K))).collect();
    let recorded: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let total = (WARMUP + FRAMES) as usize;
    let consumers: Vec<_> = (0..2)
        .map(|c| {
            let (device, hop, ready, rel, slots, recorded) = (
                Arc::clone(device),
                Arc::clone(&hops[c]),
                Arc::clone(&ready),
                Arc::clone(&rel),
                Arc::clone(&slots),
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
            for c in 0..2 {
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
    let t0 = consumers
        .into_iter()
        .map(|c| c.join().unwrap())
        .min()
        .unwrap();
    for &st in &s {
        d.synchronize_stream(st).unwrap();
    }
    let ns = t0.elapsed().as_nanos() as f64 / FRAMES as f64;
    for &e in ready.iter().chain(rel.iter()) {
        d.destroy_event(e).unwrap();
    }
    for st in s {
        d.destroy_stream(st).unwrap();
    }
    for &p in slots.iter().chain(&scratch) {
        // SAFETY: every stream using them was synchronized.
        unsafe { d.free(AllocKind::Device, p, BYTES).unwrap() };
    }
    ns
}

/// A device whose asynchronous calls do nothing and whose events are always complete:
/// what is left of a hop through it is holo's own cost (`device_hop diag-null`, for a
/// profiler on a machine without a GPU).
#[derive(Default)]
struct NullDevice {
    next: AtomicU64,
    counters: DeviceCounters,
}

impl NullDevice {
    fn handle(&self) -> u64 {
        (self.next.fetch_add(1, Ordering::Relaxed) + 1) << 16
    }
}

impl DeviceBackend for NullDevice {
    fn backend_kind(&self) -> holo_runtime::device::BackendKind {
        holo_runtime::device::BackendKind::Software
    }
    fn ordinal(&self) -> u32 {
        0
    }
    fn create_stream(&self) -> Result<StreamHandle> {
        Ok(StreamHandle::from_raw(self.handle()))
    }
    fn destroy_stream(&self, _: StreamHandle) -> Result<()> {
        Ok(())
    }
    fn create_event(&self) -> Result<EventHandle> {
        Ok(EventHandle::from_raw(self.handle()))
    }
    fn destroy_event(&self, _: EventHandle) -> Result<()> {
        Ok(())
    }
    fn record_event(&self, _: EventHandle, _: StreamHandle) -> Result<()> {
        Ok(())
    }
    fn wait_event(&self, _: StreamHandle, _: EventHandle) -> Result<()> {
        Ok(())
    }
    fn query_event(&self, _: EventHandle) -> Result<bool> {
        Ok(true)
    }
    fn synchronize_event(&self, _: EventHandle) -> Result<()> {
        Ok(())
    }
    fn synchronize_stream(&self, _: StreamHandle) -> Result<()> {
        Ok(())
    }
    fn alloc(&self, _: AllocKind, bytes: usize) -> Result<DevicePtr> {
        // Never dereferenced: only the null device's own (no-op) calls see it.
        Ok(DevicePtr::from_raw(
            self.next
                .fetch_add(bytes as u64 / 256 + 1, Ordering::Relaxed)
                << 16,
        ))
    }
    unsafe fn free(&self, _: AllocKind, _: DevicePtr, _: usize) -> Result<()> {
        Ok(())
    }
    unsafe fn memset_async(&self, _: DevicePtr, _: u8, _: usize, _: StreamHandle) -> Result<()> {
        Ok(())
    }
    unsafe fn copy_async(
        &self,
        _: DevicePtr,
        _: DevicePtr,
        _: usize,
        _: StreamHandle,
    ) -> Result<()> {
        Ok(())
    }
    unsafe fn copy_to_host_async(
        &self,
        _: *mut u8,
        _: DevicePtr,
        _: usize,
        _: StreamHandle,
    ) -> Result<()> {
        Ok(())
    }
    unsafe fn copy_from_host_async(
        &self,
        _: DevicePtr,
        _: *const u8,
        _: usize,
        _: StreamHandle,
    ) -> Result<()> {
        Ok(())
    }
    fn enqueue_delay(&self, _: StreamHandle, _: Duration) -> Result<()> {
        Ok(())
    }
    fn counters(&self) -> &DeviceCounters {
        &self.counters
    }
}

/// holo's own cost per frame: the scenarios on a device that does nothing.
pub(super) fn run_null() {
    let device: Arc<dyn DeviceBackend> = Arc::new(NullDevice::default());
    for (name, shape) in [
        ("fused hop", Shape::FusedHop),
        ("fenced hop", Shape::FencedHop),
        ("4-op chain", Shape::Chain4),
    ] {
        let runs: Vec<f64> = (0..5).map(|_| super::holo(&device, &shape).0).collect();
        println!("  holo {name} on a null device: {runs:.0?} ns/frame");
    }
}
