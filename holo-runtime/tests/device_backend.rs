//! The device-contract suite, written once and run on every backend `test_backends()`
//! returns: the software device always, CUDA device 0 where it opens (and must, with
//! `HOLO_REQUIRE_DEVICE=cuda`).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use holo_runtime::__test_support::test_backends;
use holo_runtime::ErrorCode;
use holo_runtime::device::{
    AllocKind, CounterSnapshot, DeviceBackend, DevicePtr, EventHandle, StreamHandle,
};

/// Long enough that a missing wait would be seen, short enough to keep the suite quick.
const DELAY: Duration = Duration::from_millis(150);
const BYTES: usize = 4096;
const POISON: u8 = 0xEE;

fn name(device: &dyn DeviceBackend) -> &'static str {
    device.backend_kind().name()
}

/// Copies `bytes` from `src` to a host vector on `stream` and waits for it.
fn read_back(
    device: &dyn DeviceBackend,
    src: DevicePtr,
    bytes: usize,
    stream: StreamHandle,
) -> Vec<u8> {
    let mut host = vec![0_u8; bytes];
    // SAFETY: `src` is a live allocation of at least `bytes`; `host` outlives the wait.
    unsafe { device.copy_to_host_async(host.as_mut_ptr(), src, bytes, stream) }.unwrap();
    device.synchronize_stream(stream).unwrap();
    host
}

fn fill(device: &dyn DeviceBackend, dst: DevicePtr, value: u8, bytes: usize, stream: StreamHandle) {
    // SAFETY: every caller passes a live allocation of at least `bytes` that it frees only
    // after synchronizing every stream that used it.
    unsafe { device.memset_async(dst, value, bytes, stream) }.unwrap();
}

fn free(device: &dyn DeviceBackend, kind: AllocKind, ptr: DevicePtr, bytes: usize) {
    // SAFETY: callers synchronize every stream that used `ptr` first.
    unsafe { device.free(kind, ptr, bytes) }.unwrap();
}

#[test]
fn a_stream_runs_its_operations_in_fifo_order() {
    for device in test_backends() {
        let device = device.as_ref();
        let stream = device.create_stream().unwrap();
        let a = device.alloc(AllocKind::Device, BYTES).unwrap();
        let b = device.alloc(AllocKind::Device, BYTES).unwrap();
        // The delay first: everything after it is still queued when the caller returns.
        device.enqueue_delay(stream, DELAY / 3).unwrap();
        fill(device, a, 0x11, BYTES, stream);
        // SAFETY: both live, BYTES long, freed only after the synchronize below.
        unsafe { device.copy_async(b, a, BYTES, stream) }.unwrap();
        fill(device, a, 0x22, BYTES, stream);
        let b_bytes = read_back(device, b, BYTES, stream);
        let a_bytes = read_back(device, a, BYTES, stream);
        assert!(
            b_bytes.iter().all(|&x| x == 0x11),
            "{}: copy ran before the first fill",
            name(device)
        );
        assert!(
            a_bytes.iter().all(|&x| x == 0x22),
            "{}: second fill lost",
            name(device)
        );
        free(device, AllocKind::Device, a, BYTES);
        free(device, AllocKind::Device, b, BYTES);
        device.destroy_stream(stream).unwrap();
    }
}

#[test]
fn an_event_is_pending_while_a_delay_runs_and_complete_after() {
    for device in test_backends() {
        let device = device.as_ref();
        let stream = device.create_stream().unwrap();
        let event = device.create_event().unwrap();
        assert!(
            device.query_event(event).unwrap(),
            "{}: a never recorded event is complete",
            name(device)
        );
        device.enqueue_delay(stream, DELAY).unwrap();
        let started = Instant::now();
        device.record_event(event, stream).unwrap();
        assert!(
            !device.query_event(event).unwrap(),
            "{}: complete during the delay",
            name(device)
        );
        assert!(
            started.elapsed() < DELAY,
            "{}: record or query blocked",
            name(device)
        );
        device.synchronize_event(event).unwrap();
        assert!(
            device.query_event(event).unwrap(),
            "{}: pending after synchronize",
            name(device)
        );
        device.destroy_event(event).unwrap();
        device.destroy_stream(stream).unwrap();
    }
}

#[test]
fn wait_event_orders_another_stream_behind_a_delayed_fill() {
    for device in test_backends() {
        let device = device.as_ref();
        let producer = device.create_stream().unwrap();
        let consumer = device.create_stream().unwrap();
        let ready = device.create_event().unwrap();
        let frame = device.alloc(AllocKind::Device, BYTES).unwrap();
        fill(device, frame, POISON, BYTES, producer);
        device.synchronize_stream(producer).unwrap();

        device.enqueue_delay(producer, DELAY).unwrap();
        fill(device, frame, 0xAB, BYTES, producer);
        device.record_event(ready, producer).unwrap();
        let started = Instant::now();
        device.wait_event(consumer, ready).unwrap();
        assert!(
            started.elapsed() < DELAY,
            "{}: wait_event blocked the caller",
            name(device)
        );
        let seen = read_back(device, frame, BYTES, consumer);
        assert!(
            seen.iter().all(|&x| x == 0xAB),
            "{}: the consumer read {:#x}, not the producer's bytes",
            name(device),
            seen.iter()
                .find(|&&x| x != 0xAB)
                .copied()
                .unwrap_or_default()
        );
        free(device, AllocKind::Device, frame, BYTES);
        device.destroy_event(ready).unwrap();
        device.destroy_stream(producer).unwrap();
        device.destroy_stream(consumer).unwrap();
    }
}

#[test]
fn counters_count_each_call_exactly() {
    for device in test_backends() {
        let device = device.as_ref();
        let before = device.counters().snapshot();
        let s = device.create_stream().unwrap();
        let e = device.create_event().unwrap();
        let p = device.alloc(AllocKind::Device, 256).unwrap();
        let mut host = [0_u8; 256];
        for _ in 0..3 {
            device.record_event(e, s).unwrap();
        }
        device.wait_event(s, e).unwrap();
        device.wait_event(s, e).unwrap();
        for _ in 0..5 {
            device.query_event(e).unwrap();
        }
        fill(device, p, 1, 256, s);
        // SAFETY: `p` and `host` are live, 256 bytes, until the synchronize below.
        unsafe {
            device
                .copy_async(p, p.checked_add(128).unwrap(), 64, s)
                .unwrap();
            device
                .copy_to_host_async(host.as_mut_ptr(), p, 256, s)
                .unwrap();
            device
                .copy_from_host_async(p, host.as_ptr(), 256, s)
                .unwrap();
        }
        device.enqueue_delay(s, Duration::from_millis(1)).unwrap();
        device.synchronize_event(e).unwrap();
        device.synchronize_stream(s).unwrap();
        // A rejected call counts nothing.
        assert!(device.record_event(EventHandle::from_raw(0), s).is_err());
        free(device, AllocKind::Device, p, 256);
        device.destroy_event(e).unwrap();
        device.destroy_stream(s).unwrap();
        let delta = device.counters().snapshot() - before;
        assert_eq!(
            delta,
            CounterSnapshot {
                stream_create: 1,
                stream_destroy: 1,
                event_create: 1,
                event_destroy: 1,
                event_record: 3,
                stream_wait: 2,
                event_query: 5,
                event_synchronize: 1,
                stream_synchronize: 1,
                alloc: 1,
                free: 1,
                memset: 1,
                copy: 3,
                delay: 1,
                ..CounterSnapshot::default()
            },
            "{}",
            name(device)
        );
    }
}

#[test]
fn every_alloc_kind_allocates_copies_and_frees() {
    for device in test_backends() {
        let device = device.as_ref();
        let stream = device.create_stream().unwrap();
        let staging = device.alloc(AllocKind::Device, BYTES).unwrap();
        for kind in AllocKind::ALL {
            let ptr = device.alloc(kind, BYTES).unwrap();
            assert_ne!(ptr.raw(), 0, "{}: {kind:?}", name(device));
            assert_eq!(
                ptr.raw() % 256,
                0,
                "{}: {kind:?} is 256-byte aligned",
                name(device)
            );
            let pattern: Vec<u8> = (0..=u8::MAX).cycle().take(BYTES).collect();
            // SAFETY: `ptr`, `staging` and `pattern` are live and BYTES long until the
            // synchronize in `read_back`.
            unsafe {
                device
                    .copy_from_host_async(ptr, pattern.as_ptr(), BYTES, stream)
                    .unwrap();
                device.copy_async(staging, ptr, BYTES, stream).unwrap();
            }
            assert_eq!(
                read_back(device, staging, BYTES, stream),
                pattern,
                "{}: {kind:?}",
                name(device)
            );
            if kind.host_accessible() {
                // SAFETY: host-accessible, live, and the stream that wrote it has finished.
                let host = unsafe { std::slice::from_raw_parts(ptr.as_host_ptr(), BYTES) };
                assert_eq!(
                    host,
                    pattern.as_slice(),
                    "{}: {kind:?} host view",
                    name(device)
                );
            }
            free(device, kind, ptr, BYTES);
            // SAFETY: a double free is rejected before anything is freed.
            let again = unsafe { device.free(kind, ptr, BYTES) }.unwrap_err();
            assert_eq!(
                again.code(),
                ErrorCode::InvalidArgument,
                "{}: double free",
                name(device)
            );
            let zero = device.alloc(kind, 0).unwrap_err();
            assert_eq!(
                zero.code(),
                ErrorCode::InvalidArgument,
                "{}: zero bytes",
                name(device)
            );
        }
        free(device, AllocKind::Device, staging, BYTES);
        device.destroy_stream(stream).unwrap();
    }
}

#[test]
fn unknown_and_destroyed_handles_are_invalid_arguments() {
    for device in test_backends() {
        let device = device.as_ref();
        let live_stream = device.create_stream().unwrap();
        let live_event = device.create_event().unwrap();
        let gone_stream = device.create_stream().unwrap();
        let gone_event = device.create_event().unwrap();
        device.destroy_stream(gone_stream).unwrap();
        device.destroy_event(gone_event).unwrap();
        let buffer = device.alloc(AllocKind::Device, 64).unwrap();
        let mut host = [0_u8; 64];
        let streams = [
            gone_stream,
            StreamHandle::from_raw(0),
            StreamHandle::from_raw(0xdead_beef),
        ];
        let events = [
            gone_event,
            EventHandle::from_raw(0),
            EventHandle::from_raw(0xdead_beef),
        ];
        let invalid = |result: holo_runtime::Result<()>, what: &str| {
            let error = result.expect_err(what);
            assert_eq!(
                error.code(),
                ErrorCode::InvalidArgument,
                "{}: {what}: {error}",
                name(device)
            );
        };
        for stream in streams {
            invalid(device.destroy_stream(stream), "destroy_stream");
            invalid(device.record_event(live_event, stream), "record_event");
            invalid(device.wait_event(stream, live_event), "wait_event");
            invalid(device.synchronize_stream(stream), "synchronize_stream");
            invalid(
                device.enqueue_delay(stream, Duration::ZERO),
                "enqueue_delay",
            );
            // SAFETY: each call is rejected for its stream before anything is enqueued.
            unsafe {
                invalid(device.memset_async(buffer, 0, 64, stream), "memset_async");
                invalid(device.copy_async(buffer, buffer, 0, stream), "copy_async");
                invalid(
                    device.copy_to_host_async(host.as_mut_ptr(), buffer, 64, stream),
                    "copy_to_host_async",
                );
                invalid(
                    device.copy_from_host_async(buffer, host.as_ptr(), 64, stream),
                    "copy_from_host_async",
                );
            }
        }
        for event in events {
            invalid(device.destroy_event(event), "destroy_event");
            invalid(device.record_event(event, live_stream), "record_event");
            invalid(device.wait_event(live_stream, event), "wait_event");
            invalid(device.query_event(event).map(drop), "query_event");
            invalid(device.synchronize_event(event), "synchronize_event");
        }
        // SAFETY: a pointer this device never allocated is rejected before anything is freed.
        invalid(
            unsafe { device.free(AllocKind::Device, DevicePtr::from_raw(0x1000), 64) },
            "free",
        );
        free(device, AllocKind::Device, buffer, 64);
        device.destroy_event(live_event).unwrap();
        device.destroy_stream(live_stream).unwrap();
    }
}

#[test]
fn a_destroyed_stream_still_completes_its_work() {
    for device in test_backends() {
        let device = device.as_ref();
        let doomed = device.create_stream().unwrap();
        let reader = device.create_stream().unwrap();
        let done = device.create_event().unwrap();
        let buffer = device.alloc(AllocKind::Device, BYTES).unwrap();
        device.enqueue_delay(doomed, DELAY / 3).unwrap();
        fill(device, buffer, 0x5A, BYTES, doomed);
        device.record_event(done, doomed).unwrap();
        device.destroy_stream(doomed).unwrap();
        device.synchronize_event(done).unwrap();
        assert!(
            read_back(device, buffer, BYTES, reader)
                .iter()
                .all(|&x| x == 0x5A),
            "{}",
            name(device)
        );
        free(device, AllocKind::Device, buffer, BYTES);
        device.destroy_event(done).unwrap();
        device.destroy_stream(reader).unwrap();
    }
}

#[test]
fn handles_work_from_any_thread() {
    for device in test_backends() {
        let stream = device.create_stream().unwrap();
        let event = device.create_event().unwrap();
        let buffer = device.alloc(AllocKind::Device, BYTES).unwrap();
        let workers: Vec<_> = (0..4_u8)
            .map(|i| {
                let device: Arc<dyn DeviceBackend> = Arc::clone(&device);
                thread::spawn(move || {
                    let own = device.create_stream().unwrap();
                    device.wait_event(own, event).unwrap();
                    let slice = buffer.checked_add(usize::from(i) * 1024).unwrap();
                    fill(device.as_ref(), slice, i + 1, 1024, own);
                    device.synchronize_stream(own).unwrap();
                    device.destroy_stream(own).unwrap();
                    device.query_event(event).unwrap()
                })
            })
            .collect();
        device.record_event(event, stream).unwrap();
        for worker in workers {
            worker.join().expect("a worker thread panicked");
        }
        let seen = read_back(device.as_ref(), buffer, BYTES, stream);
        for (i, chunk) in seen.chunks(1024).enumerate() {
            assert!(
                chunk.iter().all(|&x| usize::from(x) == i + 1),
                "{}: chunk {i}",
                name(device.as_ref())
            );
        }
        free(device.as_ref(), AllocKind::Device, buffer, BYTES);
        device.destroy_event(event).unwrap();
        device.destroy_stream(stream).unwrap();
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_without_a_driver_is_device_unavailable() {
    use holo_runtime::device::{CudaDevice, device_count, driver_present};
    if driver_present() {
        // The GPU machine: test_backends() covers CUDA; here only the no-panic promise.
        assert!(CudaDevice::open(u32::MAX).is_err());
        return;
    }
    assert_eq!(
        device_count().unwrap_err().code(),
        ErrorCode::DeviceUnavailable
    );
    let error = CudaDevice::open(0)
        .err()
        .expect("no driver on this machine");
    assert_eq!(error.code(), ErrorCode::DeviceUnavailable, "{error}");
    assert!(
        test_backends()
            .iter()
            .all(|b| b.backend_kind() != holo_runtime::device::BackendKind::Cuda),
        "no CUDA backend without a driver (the software device, and OpenCL where it opens)"
    );
}
