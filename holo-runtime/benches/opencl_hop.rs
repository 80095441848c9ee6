//! The OpenCL backend beside raw `cl3` calls making the same OpenCL calls, in one process
//! (docs/OPENCL.md; DESIGN.md "Performance method").
//!
//! - **Fenced hop between two queues**: holo's `record_event` on queue A (a marker, and a
//!   flush so another queue may wait on it) then `wait_event` on queue B (a barrier on the
//!   marker), against the raw sequence `clEnqueueMarkerWithWaitList` + `clFlush` +
//!   `clEnqueueBarrierWithWaitList` + `clReleaseEvent` of the previous marker, on two
//!   queues made straight through `cl3`.
//! - **Hand-off on a caller's queue**: `tensor.device_array_on(adopted)` and its drop (a
//!   barrier on the readiness marker, then the release marker + flush on the caller's
//!   queue), against the raw barrier + marker + flush + release.
//! - **Hand-off on holo's own queue**: its OpenCL call count per hand-off (rule: 0).
//! - **Allocations**: a counting global allocator over the hop and hand-off loops (rule: 0
//!   per frame).
//!
//! Batches of holo and the baseline alternate (which goes first alternates too); medians
//! and their ratio are printed. Each
//! batch ends with `clFinish` on the queues (untimed), so queues do not grow without bound.
//!
//! `cargo bench -p holo-runtime --bench opencl_hop` (targets: hop ≤ 1.2× raw; own queue 0
//! calls; 0 allocations per frame). `HOLO_OPENCL_DEVICE=N` picks `opencl:N` (default 0).

#![cfg_attr(
    not(feature = "opencl"),
    allow(
        unused_imports,
        dead_code,
        reason = "without the opencl feature the bench only says it is skipped"
    )
)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ExecutionContext, Graph, Input,
    Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest,
    compile, operator,
};

#[path = "common/counting.rs"]
mod counting;
use counting::ALLOCATIONS;

const BATCHES: usize = 31;
const PER_BATCH: u32 = 1000;

#[operator]
struct Source {
    #[output(storage = runtime_pool, memory = opencl_device, dtype = u8, rank = 1, bounds = 256)]
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
    #[input(memory = opencl_device, dtype = u8, rank = 1)]
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Alternating batches of `holo` and `baseline`; `settle` runs untimed after each batch.
/// Also returns the allocations per iteration of `holo`.
fn interleaved(
    mut holo: impl FnMut(),
    mut baseline: impl FnMut(),
    mut settle: impl FnMut(),
) -> (f64, f64, f64) {
    let mut allocations = 0_u64;
    let mut time = |f: &mut dyn FnMut(), count: bool| {
        let a0 = ALLOCATIONS.load(Ordering::Relaxed);
        let t0 = Instant::now();
        for _ in 0..PER_BATCH {
            f();
        }
        let ns = t0.elapsed().as_secs_f64() * 1e9 / f64::from(PER_BATCH);
        if count {
            allocations += ALLOCATIONS.load(Ordering::Relaxed) - a0;
        }
        settle();
        ns
    };
    let (mut h, mut b) = (Vec::new(), Vec::new());
    for batch in 0..BATCHES {
        // Which goes first alternates, so neither always finds the queues just settled.
        if batch % 2 == 0 {
            h.push(time(&mut holo, true));
            b.push(time(&mut baseline, false));
        } else {
            b.push(time(&mut baseline, false));
            h.push(time(&mut holo, true));
        }
    }
    #[allow(clippy::cast_precision_loss, reason = "a count far below 2^52")]
    let per = allocations as f64 / (BATCHES as f64 * f64::from(PER_BATCH));
    (median(h), median(b), per)
}

#[cfg(feature = "opencl")]
mod opencl {
    use std::sync::mpsc::{Receiver, channel};

    use super::{
        Arc, CompileOptions, ConnectionOptions, Duration, Graph, Input, Instant, Mutex, Output,
        PER_BATCH, ParamSet, RunSession, SessionOptions, Source, Tap, Tensor, compile, interleaved,
    };
    use holo_runtime::device::{AdoptedStream, DeviceBackend, OpenClDevice, OpenClQueuePtr};
    use opencl3::types::{cl_command_queue, cl_event};

    fn handle<T>(raw: u64) -> *mut T {
        std::ptr::with_exposed_provenance_mut(usize::try_from(raw).unwrap())
    }

    /// A raw queue in the device's context, made straight through cl3.
    fn raw_queue(cl: &OpenClDevice) -> cl_command_queue {
        // SAFETY: the device's live context and device.
        unsafe {
            opencl3::command_queue::create_command_queue(
                handle(cl.native_context()),
                handle(cl.native_device()),
                0,
            )
        }
        .unwrap()
    }

    /// The raw sequence holo's record + wait stand for: a marker on `from` (replacing the
    /// previous one, released), a flush of `from`, a barrier on `to` waiting for it.
    struct RawFence {
        latest: cl_event,
    }

    impl RawFence {
        fn record(&mut self, queue: cl_command_queue) {
            // SAFETY: a live queue; the new marker replaces (and releases) the old one.
            unsafe {
                let marker = opencl3::command_queue::enqueue_marker_with_wait_list(
                    queue,
                    0,
                    std::ptr::null(),
                )
                .unwrap();
                opencl3::command_queue::flush(queue).unwrap();
                if !self.latest.is_null() {
                    opencl3::event::release_event(self.latest).unwrap();
                }
                self.latest = marker;
            }
        }

        fn wait(&self, queue: cl_command_queue) {
            let lib = cl3::load_library().as_ref().unwrap();
            // No event out, as holo's wait: cl3's wrapper would return one to release.
            let status = lib
                .clEnqueueBarrierWithWaitList(
                    queue,
                    1,
                    &raw const self.latest,
                    std::ptr::null_mut(),
                )
                .unwrap();
            assert_eq!(status, 0);
        }
    }

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
        let tap = Tap {
            frames: Input::default(),
            out: Mutex::new(tx),
        };
        let tap = g.add_operator("tap", tap, params()).unwrap();
        g.add_flow(src.frames, tap.frames, ConnectionOptions::default());
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "frames", device.device_id());
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

    pub(super) fn bench() {
        let ordinal = std::env::var("HOLO_OPENCL_DEVICE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let cl = match OpenClDevice::open(ordinal) {
            Ok(cl) => cl,
            Err(e) => {
                println!("opencl    skipped: {e}");
                return;
            }
        };
        println!("opencl:{ordinal} = {}", cl.name());
        let device: Arc<dyn DeviceBackend> = cl.clone();
        let finish = |q: cl_command_queue| opencl3::command_queue::finish(q).unwrap();

        // Fenced hop between two queues.
        let (a, b) = (
            device.create_stream().unwrap(),
            device.create_stream().unwrap(),
        );
        let event = device.create_event().unwrap();
        let (ra, rb) = (raw_queue(&cl), raw_queue(&cl));
        let mut raw = RawFence {
            latest: std::ptr::null_mut(),
        };
        let (holo, base, allocs) = interleaved(
            || {
                device.record_event(event, a).unwrap();
                device.wait_event(b, event).unwrap();
            },
            || {
                raw.record(ra);
                raw.wait(rb);
            },
            || {
                for q in [handle(a.raw()), handle(b.raw()), ra, rb] {
                    finish(q);
                }
            },
        );
        println!(
            "opencl    fenced hop A→B (record+wait)   {holo:>8.1} ns   raw marker+flush+barrier {base:>8.1} ns   ratio {:.2} (target ≤ 1.20)   allocations/hop {allocs:.3}",
            holo / base
        );

        // Hand-off on a caller's queue, beside the raw barrier + marker + flush.
        let (session, rx, t) = one_frame(&device);
        let caller = raw_queue(&cl);
        let producer = raw_queue(&cl);
        let mut ready = RawFence {
            latest: std::ptr::null_mut(),
        };
        ready.record(producer);
        let mut release = RawFence {
            latest: std::ptr::null_mut(),
        };
        let baseline = || {
            ready.wait(caller);
            release.record(caller);
        };
        let settle = || finish(caller);
        // SAFETY: `caller` is live until released at the end, after every hand-off dropped.
        let queue = unsafe { OpenClQueuePtr::from_raw(caller.expose_provenance() as u64) };
        let adopted = AdoptedStream::new(&device, queue).unwrap();
        let mut baseline = baseline;
        let before = device.counters().snapshot();
        let (holo, base, allocs) = interleaved(
            || drop(t.device_array_on(&adopted).unwrap()),
            &mut baseline,
            settle,
        );
        let calls = device.counters().snapshot() - before;
        let per = |n: u64| {
            #[allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]
            let per = n as f64 / (super::BATCHES as f64 * f64::from(PER_BATCH));
            per
        };
        println!(
            "opencl    hand-off, adopted once         {holo:>8.1} ns   raw barrier+marker+flush {base:>8.1} ns   ratio {:.2} (target ≤ 1.20)   allocations/hand-off {allocs:.3}   per hand-off: {:.2} waits, {:.2} records, {:.2} queries",
            holo / base,
            per(calls.stream_wait),
            per(calls.event_record),
            per(calls.event_query)
        );
        let (holo, base, _) = interleaved(
            || drop(t.device_array(queue).unwrap()),
            &mut baseline,
            settle,
        );
        println!(
            "opencl    hand-off, adopted per call     {holo:>8.1} ns   raw barrier+marker+flush {base:>8.1} ns   ratio {:.2} (clGetCommandQueueInfo + retain/release each)",
            holo / base
        );
        drop(adopted);

        // Hand-off on holo's own queue: no OpenCL call at all.
        let own = t.sdk_stream().expect("a queue-written tensor");
        let before = device.counters().snapshot();
        let a0 = super::ALLOCATIONS.load(super::Ordering::Relaxed);
        let t0 = Instant::now();
        for _ in 0..PER_BATCH {
            drop(t.device_array(own).unwrap());
        }
        let ns = t0.elapsed().as_secs_f64() * 1e9 / f64::from(PER_BATCH);
        let allocs = super::ALLOCATIONS.load(super::Ordering::Relaxed) - a0;
        let calls = device.counters().snapshot() - before;
        println!(
            "opencl    own-queue hand-off:            {ns:>8.1} ns   OpenCL calls per hand-off: {} (rule: 0)   allocations: {allocs} over {PER_BATCH}",
            calls.total()
        );

        drop(t);
        session.stop();
        drop(rx);
        session.join().unwrap();
        // SAFETY: every hand-off dropped; each raw handle released once.
        unsafe {
            for q in [caller, producer, ra, rb] {
                finish(q);
                opencl3::command_queue::release_command_queue(q).unwrap();
            }
            for e in [raw.latest, ready.latest, release.latest] {
                opencl3::event::release_event(e).unwrap();
            }
        }
        device.destroy_event(event).unwrap();
        device.destroy_stream(a).unwrap();
        device.destroy_stream(b).unwrap();
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!("OpenCL hop and hand-off (median of {BATCHES} alternating batches of {PER_BATCH})");
    #[cfg(feature = "opencl")]
    opencl::bench();
    #[cfg(not(feature = "opencl"))]
    println!("opencl    skipped: built without the `opencl` feature");
}
