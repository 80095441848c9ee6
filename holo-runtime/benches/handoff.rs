//! The DeviceArray hand-off beside the raw driver pair it stands for, in one process.
//!
//! A session's source writes a frame on its runtime stream; the bench takes the received
//! tensor and hands it to a caller stream over and over: `tensor.device_array(stream)`
//! (the caller stream waits on the readiness event, is registered as a release stream)
//! and its drop (the release event recorded on the caller stream). The baseline is what
//! that costs with no framework: `cuStreamWaitEvent` on an event recorded on another
//! stream (as the readiness is, on the producer's) + `cuEventRecord`, on the same kind of
//! handles, straight through `cudarc::driver::sys` (through the trait for the software
//! device). Batches of the two alternate, after one untimed pair, which side goes first
//! alternating from pair to pair; each row prints both sides' medians, their ratio (the
//! figure every earlier log printed as "ratio"), and the median and quartiles of the
//! pairs' ratios (each holo batch over the baseline batch beside it, the `device_hop`
//! method: a drift that moves both sides of a pair cancels in its ratio). The
//! SDK-stream hand-off (the tensor's own stream) is timed too, with its device call count
//! per hand-off (the rule: 0).
//!
//! The steady-state form is timed against the target: `device_array_on` on a stream
//! adopted once, borrowing the tensor and the adoption (no handle cloned). The per-call
//! adoption (`device_array`, one `cuStreamGetCtx` each) and the owning form
//! (`into_device_array_on` on a clone of the tensor) are printed beside it. On CUDA two
//! more rows split the gap: the raw pair on holo's own two events (the slot's readiness
//! event, the stream's release event), and that pair through the backend trait.
//!
//! `cargo bench -p holo-runtime --bench handoff` (target: ≤ 1.1× on CUDA; SDK stream 0
//! calls). `… --bench handoff -- cold` times holo's own part of a steady-state hand-off on
//! a device that does nothing, with warm caches and with caches evicted in every device
//! call, as a driver's calls evict them (`bench_cold`). `… -- perf` counts the CPU's own
//! events (cycles, instructions, branch and instruction-cache misses, user space) per
//! hand-off beside the same counts for the raw pair (`perf_rows`), on the device
//! `HOLO_DEVICE` names (CUDA, else the software device).

use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::device::{
    AdoptedStream, CudaStreamPtr, DeviceBackend, SoftwareDevice, StreamOrQueue,
};
#[path = "common/null_device.rs"]
mod null_device;
#[cfg(target_os = "linux")]
#[path = "common/perf_counters.rs"]
mod perf_counters;

use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ExecutionContext, Graph, Input,
    Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest,
    compile, operator,
};

/// Timed pairs of batches per row (`HOLO_BENCH_BATCHES` overrides).
const BATCHES: usize = 41;
const PER_BATCH: u32 = 2000;

#[operator]
struct Source {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 256)]
    frames: Output<Tensor>,
}

impl Operator for Source {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device"));
        let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[256],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let guard = loan.write(stream)?;
        // SAFETY: the guard owns the slot until commit; the fill stays inside it.
        unsafe { device.memset_async(guard.device_ptr(), 7, 256, guard.stream())? };
        let _ = self.frames.emit(guard.commit()?, EmitOptions::default());
        Ok(())
    }
}

#[operator]
struct Tap {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    out: Mutex<std::sync::mpsc::Sender<Tensor>>,
}

impl Operator for Tap {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            let _ = self.out.lock().unwrap().send(t);
        }
        Ok(())
    }
}

/// A running one-frame session on `device` and the frame it produced.
fn one_frame(device: &Arc<dyn DeviceBackend>) -> (RunSession, Receiver<Tensor>, Tensor) {
    let (tx, rx) = channel();
    let mut g = Graph::new();
    let params = || ParamSet::defaults().unwrap();
    let src = g
        .add_operator(
            "src",
            Source {
                frames: Output::default(),
            },
            params(),
        )
        .unwrap();
    let tap = g
        .add_operator(
            "tap",
            Tap {
                frames: Input::default(),
                out: Mutex::new(tx),
            },
            params(),
        )
        .unwrap();
    g.add_flow(src.frames, tap.frames, ConnectionOptions::default());
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.ordinal());
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(1).on_device(Arc::clone(device)),
    )
    .unwrap();
    let t = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    (session, rx, t)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Timed pairs per row: `HOLO_BENCH_BATCHES`, else [`BATCHES`].
fn batches() -> usize {
    std::env::var("HOLO_BENCH_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(BATCHES)
}

/// One row's figures: the two sides' medians over the batches, the median and quartiles
/// of the per-pair ratios (each holo batch over the baseline batch beside it: a drift
/// that moves both sides of a pair cancels in its ratio), and the median of the per-pair
/// differences (holo's own ns beside the baseline, for `handoff cold`).
struct Pairs {
    holo: f64,
    base: f64,
    pair_ratio: [f64; 3],
    difference: f64,
}

impl Pairs {
    /// The ratio of the medians (the figure every earlier log printed as "ratio").
    fn ratio(&self) -> f64 {
        self.holo / self.base
    }

    /// "ratio R; pairs median M [Q1–Q3]".
    fn ratios(&self) -> String {
        let [q1, m, q3] = self.pair_ratio;
        format!("ratio {:.2}; pairs {m:.2} [{q1:.2}–{q3:.2}]", self.ratio())
    }
}

/// Alternating batches of `holo` and `baseline` (which goes first alternates from pair to
/// pair, after one untimed warm-up pair); `settle` runs untimed after each batch.
fn interleaved(holo: impl FnMut(), baseline: impl FnMut(), settle: impl FnMut()) -> Pairs {
    interleaved_by(PER_BATCH, holo, baseline, settle)
}

/// [`interleaved`] with `per_batch` calls a batch.
fn interleaved_by(
    per_batch: u32,
    mut holo: impl FnMut(),
    mut baseline: impl FnMut(),
    mut settle: impl FnMut(),
) -> Pairs {
    let mut time = |f: &mut dyn FnMut()| {
        let t0 = Instant::now();
        for _ in 0..per_batch {
            f();
        }
        let ns = t0.elapsed().as_secs_f64() * 1e9 / f64::from(per_batch);
        settle();
        ns
    };
    time(&mut holo);
    time(&mut baseline);
    let pairs = batches();
    let (mut holos, mut bases, mut ratios, mut differences) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let (x, y) = if i % 2 == 0 {
            let x = time(&mut holo);
            (x, time(&mut baseline))
        } else {
            let y = time(&mut baseline);
            (time(&mut holo), y)
        };
        holos.push(x);
        bases.push(y);
        ratios.push(x / y);
        differences.push(x - y);
    }
    ratios.sort_by(f64::total_cmp);
    Pairs {
        holo: median(holos),
        base: median(bases),
        pair_ratio: [
            ratios[pairs / 4],
            ratios[pairs / 2],
            ratios[(3 * pairs) / 4],
        ],
        difference: median(differences),
    }
}

fn sdk_row(name: &str, device: &Arc<dyn DeviceBackend>, t: &Tensor) {
    let sdk = t.sdk_stream().expect("a stream-written tensor");
    let before = device.counters().snapshot();
    let t0 = Instant::now();
    for _ in 0..PER_BATCH {
        drop(t.device_array(sdk).unwrap());
    }
    let ns = t0.elapsed().as_secs_f64() * 1e9 / f64::from(PER_BATCH);
    let calls = device.counters().snapshot() - before;
    println!(
        "{name:<9} SDK-stream hand-off: {ns:>8.1} ns, device calls per hand-off: {} (rule: 0)",
        calls.event_record + calls.stream_wait + calls.event_query + calls.event_synchronize
    );
}

/// One steady-state hand-off (borrowed tensor, stream adopted once), made and dropped: out
/// of line, so that a profiler can count one (`valgrind --tool=callgrind
/// --toggle-collect=handoff::adopted_hand_off`, less the backend's `wait_event` and
/// `record_event`, is holo's own work per hand-off).
#[inline(never)]
fn adopted_hand_off(t: &Tensor, adopted: &AdoptedStream) {
    drop(t.device_array_on(adopted).unwrap());
}

/// The pair through the backend trait (unchecked, counted) on holo's own two events of a
/// hand-off of `t` on `adopted` (the slot's readiness event, the stream's release event):
/// `None` until a hand-off on `adopted` has registered its stream on the slot.
fn trait_pair_on_holos_events<'a>(
    device: &'a Arc<dyn DeviceBackend>,
    t: &Tensor,
    adopted: &AdoptedStream,
) -> Option<impl Fn() + 'a> {
    let (ready, release) = holo_runtime::__test_support::hand_off_events(t, adopted)?;
    let h = adopted.handle();
    Some(move || {
        // SAFETY: the pool's live events (the caller keeps the tensor, and so its pool);
        // the stream is adopted by `device` while the caller keeps `adopted`.
        unsafe {
            device.wait_event_unchecked(h, ready).unwrap();
            device.record_event_unchecked(release, h).unwrap();
        }
    })
}

/// The same two driver calls made raw (`cuStreamWaitEvent` + `cuEventRecord`) on holo's two
/// events (see [`trait_pair_on_holos_events`]).
#[cfg(feature = "cuda")]
fn raw_pair_on_holos_events(t: &Tensor, adopted: &AdoptedStream) -> Option<impl Fn() + use<>> {
    use cudarc::driver::sys;
    let (ready, release) = holo_runtime::__test_support::hand_off_events(t, adopted)?;
    let (r, e) = (ready.raw() as sys::CUevent, release.raw() as sys::CUevent);
    let stream = adopted.handle().raw() as sys::CUstream;
    Some(move || {
        // SAFETY: as `trait_pair_on_holos_events`; the context is current on this thread.
        unsafe {
            assert_eq!(
                sys::cuStreamWaitEvent(stream, r, 0),
                sys::CUresult::CUDA_SUCCESS
            );
            assert_eq!(sys::cuEventRecord(e, stream), sys::CUresult::CUDA_SUCCESS);
        }
    })
}

/// `handoff perf`: each side's batches (of [`PER_BATCH`] calls) counted by the CPU's own
/// counters, the sides' order rotating from round to round, [`batches`] rounds; prints each
/// side's medians per call, then each side less the first baseline (the second side).
#[cfg(target_os = "linux")]
fn perf_rows(label: &str, sides: &mut [(&str, &mut dyn FnMut())], settle: &mut dyn FnMut()) {
    let mut counters = match perf_counters::CpuCounters::open() {
        Ok(c) => c,
        Err(e) => {
            println!("{label:<9} perf counters unavailable: {e}");
            return;
        }
    };
    if !counters.missing.is_empty() {
        println!("{label:<9} not counted: {}", counters.missing.join(", "));
    }
    let names = counters.names();
    let mut rows: Vec<Vec<perf_counters::PerCall>> = sides.iter().map(|_| Vec::new()).collect();
    for (_, f) in sides.iter_mut() {
        counters.measure(PER_BATCH, &mut **f);
        settle();
    }
    let n = sides.len();
    for round in 0..batches() {
        for k in 0..n {
            let i = (round + k) % n;
            rows[i].push(counters.measure(PER_BATCH, &mut *sides[i].1));
            settle();
        }
    }
    let medians: Vec<_> = rows
        .iter()
        .map(|r| perf_counters::medians(r, &names))
        .collect();
    for ((name, _), m) in sides.iter().zip(&medians) {
        println!("{label:<9} perf  {name:<34} {}", m.describe());
    }
    let base = &medians[1];
    for (i, ((name, _), m)) in sides.iter().zip(&medians).enumerate() {
        if i != 1 {
            println!(
                "{label:<9} perf  {name:<34} less the raw pair: {}",
                m.less(base)
            );
        }
    }
}

fn bench_software() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let (session, rx, t) = one_frame(&device);
    // The caller's own stream, as on CUDA: one the runtime does not run. On the software
    // device that is the stream standing for CUDA's default streams.
    let legacy = StreamOrQueue::Cuda(CudaStreamPtr::LEGACY);
    let adopted = AdoptedStream::new(&device, legacy).unwrap();
    let caller = adopted.handle();
    let event = device.create_event().unwrap();
    // The waited event is recorded on another stream, as the tensor's readiness is on the
    // producer's: a wait on an event of the waiting stream itself costs the driver less.
    let producer = device.create_stream().unwrap();
    let ready = device.create_event().unwrap();
    device.record_event(ready, producer).unwrap();
    let baseline = || {
        device.wait_event(caller, ready).unwrap();
        device.record_event(event, caller).unwrap();
    };
    let settle = || device.synchronize_stream(caller).unwrap();
    if perf_mode() {
        #[cfg(target_os = "linux")]
        perf_rows(
            "software",
            &mut [
                ("hand-off, adopted once", &mut || {
                    adopted_hand_off(&t, &adopted);
                }),
                ("wait+record via the trait", &mut || baseline()),
            ],
            &mut || settle(),
        );
    } else {
        let row = interleaved(|| drop(t.device_array(legacy).unwrap()), baseline, settle);
        println!(
            "software  hand-off, adopted per call {:>8.1} ns   wait+record via the trait {:>8.1} ns   {}",
            row.holo,
            row.base,
            row.ratios()
        );
        let row = interleaved(|| adopted_hand_off(&t, &adopted), baseline, settle);
        println!(
            "software  hand-off, adopted once     {:>8.1} ns   wait+record via the trait {:>8.1} ns   {}",
            row.holo,
            row.base,
            row.ratios()
        );
    }
    drop(adopted);
    sdk_row("software", &device, &t);
    drop(t);
    session.stop();
    drop(rx);
    session.join().unwrap();
}

/// Hand-offs per batch of `handoff cold` (each may write megabytes first).
const COLD_PER_BATCH: u32 = 200;

/// `handoff cold`: holo's own cost per steady-state hand-off on a device that does
/// nothing ([`null_device::NullDevice`]), with the caches warm and with a buffer written
/// inside every stream wait and event record — 64 KiB (more than a core's L1 data cache)
/// or 1 MiB (the size of an L2) — as a GPU driver's calls evict what holo's ledger touched
/// before them: the hand-off's wait comes after its lookup, the array's drop after the
/// wait. Beside each: the same loop with the raw pair through the trait on that device
/// (which evicts the same), so that the difference is the ledger's: the pool's fields,
/// the slot, its release-stream, readiness and release-event entries, the adoption.
fn bench_cold() {
    // `HOLO_BENCH_EVICT_KIB=N`: only the row with N KiB written in each call (for
    // `valgrind --tool=callgrind --cache-sim=yes`, whose miss counts are exact).
    let rows: Vec<(String, usize)> = match null_device::evict_kib_from_env() {
        Some(kib) => vec![(format!("{kib} KiB written per call"), kib << 10)],
        None => vec![
            ("warm".to_owned(), 0),
            ("64 KiB written per call".to_owned(), 64 << 10),
            ("1 MiB written per call".to_owned(), 1 << 20),
        ],
    };
    println!(
        "null-device hand-off, ns per hand-off (median of {} pairs of batches of {COLD_PER_BATCH}; holo's own = holo - raw pair)",
        batches()
    );
    for (label, bytes) in rows {
        let device: Arc<dyn DeviceBackend> = Arc::new(null_device::NullDevice::evicting(bytes));
        let (session, rx, t) = one_frame(&device);
        // SAFETY: the null device never dereferences a stream; the value only names one.
        let caller = StreamOrQueue::Cuda(unsafe { CudaStreamPtr::from_raw(0x5_0001) });
        let adopted = AdoptedStream::new(&device, caller).unwrap();
        drop(t.device_array_on(&adopted).unwrap());
        let raw_pair = trait_pair_on_holos_events(&device, &t, &adopted)
            .expect("the first hand-off registered the stream");
        let row = interleaved_by(
            COLD_PER_BATCH,
            || adopted_hand_off(&t, &adopted),
            raw_pair,
            || {},
        );
        println!(
            "null      {label:<25} holo {:>8.1}   raw pair via the trait {:>8.1}   holo's own {:>6.1}",
            row.holo, row.base, row.difference
        );
        drop(adopted);
        drop(t);
        session.stop();
        drop(rx);
        session.join().unwrap();
    }
}

#[cfg(feature = "cuda")]
fn bench_cuda() {
    use cudarc::driver::sys;
    use holo_runtime::device::CudaDevice;

    let cuda = match CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            println!("cuda      skipped: {e}");
            return;
        }
    };
    let device: Arc<dyn DeviceBackend> = cuda.clone();
    let (session, rx, t) = one_frame(&device);
    cuda.make_current().unwrap();
    // The caller's own stream and events, made straight through the driver (as cudarc,
    // CuPy or PyTorch would): holo has never seen them.
    let mut stream: sys::CUstream = std::ptr::null_mut();
    let mut producer: sys::CUstream = std::ptr::null_mut();
    let mut event: sys::CUevent = std::ptr::null_mut();
    let mut ready: sys::CUevent = std::ptr::null_mut();
    // SAFETY: out-pointers to locals; the primary context is current.
    unsafe {
        assert_eq!(
            sys::cuStreamCreate(&raw mut stream, 1),
            sys::CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            sys::cuStreamCreate(&raw mut producer, 1),
            sys::CUresult::CUDA_SUCCESS
        );
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        assert_eq!(
            sys::cuEventCreate(&raw mut event, flags),
            sys::CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            sys::cuEventCreate(&raw mut ready, flags),
            sys::CUresult::CUDA_SUCCESS
        );
        // On another stream, as the tensor's readiness is recorded on the producer's: a
        // wait on an event of the waiting stream itself costs the driver less.
        assert_eq!(
            sys::cuEventRecord(ready, producer),
            sys::CUresult::CUDA_SUCCESS
        );
    }
    // SAFETY: `stream` is live until destroyed at the end, after every hand-off dropped.
    let caller = StreamOrQueue::Cuda(unsafe { CudaStreamPtr::from_raw(stream as u64) });
    let baseline = || {
        // SAFETY: live handles; the context is current on this thread.
        unsafe {
            assert_eq!(
                sys::cuStreamWaitEvent(stream, ready, 0),
                sys::CUresult::CUDA_SUCCESS
            );
            assert_eq!(
                sys::cuEventRecord(event, stream),
                sys::CUresult::CUDA_SUCCESS
            );
        }
    };
    let settle = || {
        // SAFETY: a live stream.
        assert_eq!(
            unsafe { sys::cuStreamSynchronize(stream) },
            sys::CUresult::CUDA_SUCCESS
        );
    };
    if perf_mode() {
        #[cfg(target_os = "linux")]
        cuda_perf(&device, &t, caller, baseline, settle);
    } else {
        let row = interleaved(|| drop(t.device_array(caller).unwrap()), baseline, settle);
        println!(
            "cuda      hand-off, adopted per call (cuStreamGetCtx each) {:>8.1} ns   cuStreamWaitEvent+cuEventRecord {:>8.1} ns   {}",
            row.holo,
            row.base,
            row.ratios()
        );
        let adopted = AdoptedStream::new(&device, caller).unwrap();
        let row = interleaved(
            || drop(t.device_array_on(&adopted).unwrap()),
            baseline,
            settle,
        );
        println!(
            "cuda      hand-off, adopted once                            {:>8.1} ns   cuStreamWaitEvent+cuEventRecord {:>8.1} ns   {} (target ≤ 1.10)",
            row.holo,
            row.base,
            row.ratios()
        );
        // Where the gap goes: the same two driver calls on holo's own events (the slot's
        // readiness event and the stream's release event), made raw, then through the backend
        // trait (unchecked, counted): the rest of holo's hand-off is its ledger.
        if let (Some(raw_on_holos), Some(trait_pair)) = (
            raw_pair_on_holos_events(&t, &adopted),
            trait_pair_on_holos_events(&device, &t, &adopted),
        ) {
            let row = interleaved(raw_on_holos, baseline, settle);
            println!(
                "cuda      the raw pair on holo's two events                {:>8.1} ns   cuStreamWaitEvent+cuEventRecord {:>8.1} ns   {}",
                row.holo,
                row.base,
                row.ratios()
            );
            let row = interleaved(trait_pair, baseline, settle);
            println!(
                "cuda      the same pair through the backend trait          {:>8.1} ns   cuStreamWaitEvent+cuEventRecord {:>8.1} ns   {}",
                row.holo,
                row.base,
                row.ratios()
            );
        }
        let row = interleaved(
            || drop(t.clone().into_device_array_on(&adopted).unwrap()),
            baseline,
            settle,
        );
        println!(
            "cuda      hand-off, adopted once, owning form (a handle and the adoption cloned) {:>8.1} ns   cuStreamWaitEvent+cuEventRecord {:>8.1} ns   {}",
            row.holo,
            row.base,
            row.ratios()
        );
        drop(adopted);
    }
    sdk_row("cuda", &device, &t);
    drop(t);
    session.stop();
    drop(rx);
    session.join().unwrap();
    // SAFETY: every hand-off on `stream` has dropped; synchronized before destroying.
    unsafe {
        sys::cuStreamSynchronize(stream);
        sys::cuEventDestroy_v2(event);
        sys::cuEventDestroy_v2(ready);
        sys::cuStreamDestroy_v2(stream);
        sys::cuStreamDestroy_v2(producer);
    }
}

/// `handoff perf` on CUDA: the adopted-once hand-off, the raw pair, the raw pair on holo's
/// two events and the pair through the backend trait, counted by the CPU's counters. A
/// first hand-off registers the caller's stream on the slot (the other rows, which do
/// that in `bench_cuda`, do not run in this mode), so that every counted hand-off takes
/// the steady path.
#[cfg(all(feature = "cuda", target_os = "linux"))]
fn cuda_perf(
    device: &Arc<dyn DeviceBackend>,
    t: &Tensor,
    caller: StreamOrQueue,
    baseline: impl Fn(),
    settle: impl Fn(),
) {
    let adopted = AdoptedStream::new(device, caller).unwrap();
    drop(t.device_array_on(&adopted).unwrap());
    let (Some(raw_on_holos), Some(trait_pair)) = (
        raw_pair_on_holos_events(t, &adopted),
        trait_pair_on_holos_events(device, t, &adopted),
    ) else {
        println!("cuda      perf: no steady-state hand-off events");
        return;
    };
    perf_rows(
        "cuda",
        &mut [
            ("hand-off, adopted once", &mut || {
                adopted_hand_off(t, &adopted);
            }),
            ("raw cuStreamWaitEvent+cuEventRecord", &mut || baseline()),
            ("the raw pair on holo's two events", &mut || raw_on_holos()),
            ("the same pair through the backend trait", &mut || {
                trait_pair();
            }),
        ],
        &mut || settle(),
    );
}

/// Whether the bench was asked for `perf` (the CPU's counters) instead of its rows.
fn perf_mode() -> bool {
    std::env::args().any(|a| a == "perf")
}

#[cfg(not(feature = "cuda"))]
fn bench_cuda() {
    println!("cuda      skipped: built without the `cuda` feature");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if std::env::args().any(|a| a == "cold") {
        bench_cold();
        return;
    }
    println!(
        "DeviceArray hand-off ({} timed pairs of batches of {PER_BATCH}, after one untimed pair; medians, their ratio, and the median and quartiles of the pairs' ratios)",
        batches()
    );
    bench_software();
    bench_cuda();
}
