//! Raw device-op costs through `DeviceBackend`, each beside a baseline in the same
//! process: for CUDA the same driver calls made directly through `cudarc::driver::sys`
//! on the same stream, event and buffer (the floor for a device hop); for the software
//! device a bounded crossbeam channel send to a draining thread and a bare atomic load
//! (the floor for a host hop). Prints ns/op (median of several batches) and the ratio.
//!
//! `cargo bench -p holo-runtime --bench device_ops` (cargo passes `--bench`); any
//! arguments are accepted and ignored. Runs in a few seconds.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

use holo_runtime::device::{AllocKind, DeviceBackend, DevicePtr, SoftwareDevice};

const BATCHES: usize = 9;
const OPS_PER_BATCH: u32 = 1000;
const FILL_BYTES: usize = 256;

/// Median ns/op of `BATCHES` timed batches of `OPS_PER_BATCH` calls of `op`; `settle`
/// runs untimed after each batch (it drains the queue the batch filled).
fn median_ns(mut op: impl FnMut(), mut settle: impl FnMut()) -> f64 {
    let mut samples = Vec::with_capacity(BATCHES);
    settle();
    for _ in 0..BATCHES {
        let started = Instant::now();
        for _ in 0..OPS_PER_BATCH {
            op();
        }
        let elapsed = started.elapsed();
        settle();
        samples.push(elapsed.as_secs_f64() * 1e9 / f64::from(OPS_PER_BATCH));
    }
    samples.sort_by(f64::total_cmp);
    samples[BATCHES / 2]
}

/// Prints one row per op: holo's ns/op beside its baseline's, and their ratio.
fn report(backend: &str, holo: [(&str, f64); 5], baselines: [(f64, &str); 5]) {
    for ((op, holo), (baseline, baseline_name)) in holo.into_iter().zip(baselines) {
        println!(
            "{backend:<9} {op:<18} {holo:>10.1} {baseline:>14.1} {ratio:>7.2}   {baseline_name}",
            ratio = holo / baseline
        );
    }
}

/// The ops through the trait: (name, ns/op). `fill_256_unchecked` is the fill without
/// the stream's handle check, as an operator's `ctx.cuda()?.memset_async` makes it.
fn trait_ops(device: &dyn DeviceBackend) -> [(&'static str, f64); 5] {
    let stream = device.create_stream().unwrap();
    let other = device.create_stream().unwrap();
    let event = device.create_event().unwrap();
    let buffer = device.alloc(AllocKind::Device, FILL_BYTES).unwrap();
    let settle = || {
        device.synchronize_stream(stream).unwrap();
        device.synchronize_stream(other).unwrap();
    };
    let record = median_ns(|| device.record_event(event, stream).unwrap(), settle);
    device.record_event(event, stream).unwrap();
    let wait = median_ns(|| device.wait_event(other, event).unwrap(), settle);
    let query = median_ns(
        || {
            black_box(device.query_event(event).unwrap());
        },
        settle,
    );
    // SAFETY: `buffer` is a live FILL_BYTES allocation; the stream is synchronized before
    // it is freed.
    let fill = median_ns(
        || unsafe {
            device
                .memset_async(buffer, 0x2A, FILL_BYTES, stream)
                .unwrap();
        },
        settle,
    );
    // SAFETY: as above, and `stream` is live until destroyed below.
    let unchecked = median_ns(
        || unsafe {
            device
                .memset_async_unchecked(buffer, 0x2A, FILL_BYTES, stream)
                .unwrap();
        },
        settle,
    );
    settle();
    // SAFETY: both streams have finished every operation on `buffer`.
    unsafe { device.free(AllocKind::Device, buffer, FILL_BYTES) }.unwrap();
    device.destroy_event(event).unwrap();
    device.destroy_stream(stream).unwrap();
    device.destroy_stream(other).unwrap();
    [
        ("event_record", record),
        ("stream_wait", wait),
        ("event_query", query),
        ("fill_256", fill),
        ("fill_256_unchecked", unchecked),
    ]
}

fn bench_software() {
    let device = SoftwareDevice::new();
    let holo = trait_ops(device.as_ref());

    // Host-hop floor: a bounded channel send of a job the size of a queued operation to a
    // thread that drains it, and a bare acquire load for the query.
    let (sender, receiver) = crossbeam_channel::bounded::<[u64; 4]>(4096);
    let worker = thread::spawn(move || {
        while let Ok(job) = receiver.recv() {
            black_box(job);
        }
    });
    let send = || sender.send(black_box([1, 2, 3, 4])).unwrap();
    let settle = || {
        while !sender.is_empty() {
            thread::yield_now();
        }
    };
    let channel = median_ns(send, settle);
    let completed = AtomicU64::new(1);
    let load = median_ns(
        || {
            black_box(completed.load(Ordering::Acquire));
        },
        || {},
    );
    drop(sender);
    worker.join().unwrap();

    let send = "crossbeam bounded send";
    report(
        "software",
        holo,
        [
            (channel, send),
            (channel, send),
            (load, "atomic load"),
            (channel, send),
            (channel, send),
        ],
    );
}

#[cfg(feature = "cuda")]
fn bench_cuda() {
    use cudarc::driver::sys;
    use holo_runtime::device::CudaDevice;

    let device = match CudaDevice::open(0) {
        Ok(device) => device,
        Err(error) => {
            println!("cuda      skipped: {error}");
            return;
        }
    };
    let holo = trait_ops(device.as_ref());

    // The same calls straight through cudarc's sys layer, on handles this process made.
    device.make_current().unwrap();
    let stream = device.create_stream().unwrap();
    let other = device.create_stream().unwrap();
    let event = device.create_event().unwrap();
    let buffer: DevicePtr = device.alloc(AllocKind::Device, FILL_BYTES).unwrap();
    let as_ptr = |raw: u64| usize::try_from(raw).expect("64-bit target");
    let raw_stream: sys::CUstream = std::ptr::with_exposed_provenance_mut(as_ptr(stream.raw()));
    let raw_other: sys::CUstream = std::ptr::with_exposed_provenance_mut(as_ptr(other.raw()));
    let raw_event: sys::CUevent = std::ptr::with_exposed_provenance_mut(as_ptr(event.raw()));
    let settle = || {
        // SAFETY: both streams are live until destroyed below.
        unsafe {
            assert_eq!(
                sys::cuStreamSynchronize(raw_stream),
                sys::CUresult::CUDA_SUCCESS
            );
            assert_eq!(
                sys::cuStreamSynchronize(raw_other),
                sys::CUresult::CUDA_SUCCESS
            );
        }
    };
    // SAFETY (all four): live handles and a live FILL_BYTES buffer, synchronized before
    // they are destroyed; the context is current on this thread.
    let record = median_ns(
        || {
            assert_eq!(
                unsafe { sys::cuEventRecord(raw_event, raw_stream) },
                sys::CUresult::CUDA_SUCCESS
            );
        },
        settle,
    );
    let wait = median_ns(
        || {
            assert_eq!(
                unsafe { sys::cuStreamWaitEvent(raw_other, raw_event, 0) },
                sys::CUresult::CUDA_SUCCESS
            );
        },
        settle,
    );
    let query = median_ns(
        || {
            black_box(unsafe { sys::cuEventQuery(raw_event) });
        },
        settle,
    );
    let fill = median_ns(
        || {
            assert_eq!(
                unsafe { sys::cuMemsetD8Async(buffer.raw(), 0x2A, FILL_BYTES, raw_stream) },
                sys::CUresult::CUDA_SUCCESS
            );
        },
        settle,
    );
    settle();
    // SAFETY: every stream that used `buffer` has finished.
    unsafe { device.free(AllocKind::Device, buffer, FILL_BYTES) }.unwrap();
    device.destroy_event(event).unwrap();
    device.destroy_stream(stream).unwrap();
    device.destroy_stream(other).unwrap();

    report(
        "cuda",
        holo,
        [
            (record, "sys::cuEventRecord"),
            (wait, "sys::cuStreamWaitEvent"),
            (query, "sys::cuEventQuery"),
            (fill, "sys::cuMemsetD8Async"),
            (fill, "sys::cuMemsetD8Async"),
        ],
    );
}

#[cfg(not(feature = "cuda"))]
fn bench_cuda() {
    println!("cuda      skipped: built without the `cuda` feature");
}

fn main() {
    // `cargo bench` passes `--bench` (and maybe a filter); nothing here needs arguments.
    let started = Instant::now();
    println!(
        "{:<9} {:<18} {:>10} {:>14} {:>7}   baseline (median of {BATCHES} batches of {OPS_PER_BATCH})",
        "backend", "op", "holo ns/op", "baseline ns/op", "ratio"
    );
    bench_software();
    bench_cuda();
    println!("total {:.2} s", started.elapsed().as_secs_f64());
}
