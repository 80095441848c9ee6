//! The DeviceArray hand-off (docs/HANDOFF.md), written once and run on every backend
//! `test_backends()` returns: the software device here and in CI, and CUDA device 0 on a
//! GPU machine (with `HOLO_REQUIRE_DEVICE=cuda` the CUDA run is mandatory).
//!
//! A session's source writes frame k (every byte `k % 128`) on its runtime stream and a
//! tap hands each received tensor to the test thread, which plays the caller: it hands
//! the tensor to its own stream and checks what the rules promise — the caller's stream
//! sees the producer's bytes with no host wait, the slot is not reused before the caller
//! stream's work, the tensor's own (SDK) stream costs no device call, and a stream of
//! another context, an OpenCL queue on a stream device or a destination longer than the
//! tensor get their exact codes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::__test_support::test_backends;
use holo_runtime::device::{
    AdoptedStream, AllocKind, BackendKind, CudaStreamPtr, DeviceBackend, DeviceCall, Observed,
    OpenClQueuePtr, SoftwareDevice, StreamOrQueue, synchronize_stream,
};
use holo_runtime::{
    CompileOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph, Input, Operator,
    Output, ParamSet, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest, compile,
    operator,
};

const LEN: u64 = 192;

/// Writes frame k (`LEN` bytes of `k % 128`) on its runtime stream, after `delay` there.
#[operator]
struct Source {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    frames: Output<Tensor>,
    k: u64,
    delay: Duration,
    emitted: Arc<AtomicU64>,
}

impl Operator for Source {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a CUDA-active operator has a device"));
        let loan = match self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[LEN],
            dtype: DType::U8,
        }) {
            Ok(loan) => loan,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let guard = loan.write(stream)?;
        if !self.delay.is_zero() {
            device.enqueue_delay(guard.stream(), self.delay)?;
        }
        #[allow(clippy::cast_possible_truncation, reason = "k % 128 fits in u8")]
        let value = (self.k % 128) as u8;
        // SAFETY: the guard owns the slot until commit; the fill stays inside it.
        unsafe {
            device.memset_async(guard.device_ptr(), value, guard.byte_size(), guard.stream())?;
        };
        let committed = guard.commit()?;
        self.k += 1;
        if self.frames.emit(committed, EmitOptions::default()).is_ok() {
            self.emitted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Hands every received tensor, with its frame number, to the test thread.
#[operator]
struct Tap {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    k: u64,
    out: Mutex<Sender<(u64, Tensor)>>,
}

impl Operator for Tap {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            let _ = self.out.lock().unwrap().send((self.k, t));
            self.k += 1;
        }
        Ok(())
    }
}

struct Session {
    session: RunSession,
    frames: Receiver<(u64, Tensor)>,
}

fn start(device: &Arc<dyn DeviceBackend>, frames: u64, delay: Duration) -> Session {
    let (tx, rx) = channel();
    let mut g = Graph::new();
    let src = g
        .add_operator(
            "src",
            Source {
                frames: Output::default(),
                k: 0,
                delay,
                emitted: Arc::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let tap = g
        .add_operator(
            "tap",
            Tap {
                frames: Input::default(),
                k: 0,
                out: Mutex::new(tx),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(
        src.frames,
        tap.frames,
        holo_runtime::ConnectionOptions::default(),
    );
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.device_id());
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(frames).on_device(Arc::clone(device)),
    )
    .unwrap();
    Session {
        session,
        frames: rx,
    }
}

impl Session {
    /// Stops the session, drops the frames the test did not take, and joins.
    fn finish(self) -> holo_runtime::RunReport {
        self.session.stop();
        drop(self.frames);
        self.session.join().unwrap()
    }
}

fn next(s: &Session) -> (u64, Tensor) {
    s.frames
        .recv_timeout(Duration::from_secs(30))
        .expect("the tap hands a frame within 30 s")
}

fn name(d: &Arc<dyn DeviceBackend>) -> &'static str {
    d.backend_kind().name()
}

/// An OpenCL device has no default streams: CUDA's null, legacy and per-thread streams
/// are refused there (`InvalidArgument`) and the CUDA-only test ends for it. `true` then.
fn refuses_cuda_default_streams(device: &Arc<dyn DeviceBackend>, t: &Tensor) -> bool {
    if device.backend_kind() != BackendKind::OpenCl {
        return false;
    }
    for stream in [
        CudaStreamPtr::NULL,
        CudaStreamPtr::LEGACY,
        CudaStreamPtr::PER_THREAD,
    ] {
        let error = t.device_array(stream).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{stream:?}");
    }
    true
}

#[allow(clippy::cast_possible_truncation, reason = "k % 128 fits in u8")]
fn expected(k: u64) -> u8 {
    (k % 128) as u8
}

#[test]
fn a_caller_stream_sees_the_producers_bytes_and_the_host_never_waits() {
    for device in test_backends() {
        // The producer's stream is held back 30 ms per frame: a caller stream that did not
        // wait on the readiness would copy the pool's stale bytes.
        let s = start(&device, 4, Duration::from_millis(30));
        let caller = device.create_stream().unwrap();
        for _ in 0..4 {
            let (k, t) = next(&s);
            let ptr = t.device_ptr();
            let before = device.counters().snapshot();
            // The owning form: the array outlives the tensor's handle.
            let array = t.into_device_array(caller).unwrap();
            let calls = device.counters().snapshot() - before;
            // The hand-off returns at once: no host wait of any kind, one stream wait.
            assert_eq!(calls.event_synchronize, 0, "{}", name(&device));
            assert_eq!(calls.stream_synchronize, 0, "{}", name(&device));
            assert_eq!(calls.stream_wait, 1, "{}", name(&device));
            assert!(array.is_ordered());
            assert_eq!(array.data_ptr(), ptr);
            // A prefix copy, enqueued and returned; the one wait hands the bytes back.
            let copy = array.copy_to_host_async(vec![0xEE; 100]).unwrap();
            let bytes = copy.synchronize_stream().unwrap();
            assert!(
                bytes.iter().all(|&b| b == expected(k)),
                "{}: frame {k} read {:?}",
                name(&device),
                &bytes[..4]
            );
        }
        s.finish();
        device.destroy_stream(caller).unwrap();
    }
}

#[test]
fn a_slot_is_not_reused_before_the_caller_streams_work() {
    for device in test_backends() {
        // The source runs until stopped (an activation that finds the pool empty skips).
        let frames: usize = 12;
        let s = start(&device, u64::MAX, Duration::ZERO);
        let caller = device.create_stream().unwrap();
        // The reads land in pinned memory: a copy into pageable memory would block the
        // host until it ran (CUDA stages it), and the array would drop after the read.
        let len = usize::try_from(LEN).unwrap();
        let pinned = device.alloc(AllocKind::PinnedHost, len * frames).unwrap();
        let mut copies = Vec::new();
        for i in 0..frames {
            let (k, t) = next(&s);
            let array = t.into_device_array(caller).unwrap();
            // The caller's "kernel": a 20 ms delay, then a raw read of the array's bytes
            // on the caller stream (no registration of its own), then the array drops at
            // once. A slot recycled before the read ran would be overwritten by a later
            // frame.
            device
                .enqueue_delay(caller, Duration::from_millis(20))
                .unwrap();
            let dst = pinned.checked_add(len * i).unwrap();
            // SAFETY: `dst` is not read until the stream is synchronized below; the
            // array's registration keeps the slot allocated until the read ran.
            unsafe {
                device
                    .copy_async(dst, array.data_ptr(), len, caller)
                    .unwrap();
            }
            drop(array);
            copies.push((k, dst));
        }
        device.synchronize_stream(caller).unwrap();
        for &(k, dst) in &copies {
            // SAFETY: the stream has run every copy into the pinned buffer.
            let host = unsafe { std::slice::from_raw_parts(dst.as_host_ptr(), len) };
            assert!(
                host.iter().all(|&b| b == expected(k)),
                "{}: frame {k} was overwritten before the caller's read: {:?}",
                name(&device),
                &host[..4]
            );
        }
        // SAFETY: the stream that used it is synchronized.
        unsafe { device.free(AllocKind::PinnedHost, pinned, len * frames) }.unwrap();
        let report = s.finish();
        assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
        device.destroy_stream(caller).unwrap();
    }
}

#[test]
fn the_sdk_stream_records_and_waits_nothing() {
    for device in test_backends() {
        let s = start(&device, 3, Duration::ZERO);
        // Every frame first: the device's counters then see no call of the producer's
        // (a slower backend may still be filling the next frame during a measurement).
        let frames: Vec<(u64, Tensor)> = (0..3).map(|_| next(&s)).collect();
        for (k, t) in frames {
            let sdk = t
                .sdk_stream()
                .expect("a stream-written tensor has an SDK stream");
            let registered = t.release_stream_count();
            let before = device.counters().snapshot();
            let array = t.clone().into_device_array(sdk).unwrap();
            assert!(!array.is_ordered());
            let count = t.release_stream_count();
            drop(t);
            drop(array);
            let calls = device.counters().snapshot() - before;
            assert_eq!(
                calls,
                holo_runtime::device::CounterSnapshot::default(),
                "{}: the SDK stream made device calls",
                name(&device)
            );
            // Nothing was registered either.
            assert_eq!(count, registered, "{} frame {k}", name(&device));
        }
        s.finish();
    }
}

#[test]
fn a_stream_of_another_context_or_kind_is_refused() {
    for device in test_backends() {
        let s = start(&device, 1, Duration::ZERO);
        let (_, t) = next(&s);
        let registered = t.release_stream_count();
        // A stream of another device (another context): refused, nothing registered.
        let other = SoftwareDevice::new();
        let foreign = other.create_stream().unwrap();
        let error = t.device_array(foreign).unwrap_err();
        assert_eq!(
            error.code(),
            ErrorCode::InvalidArgument,
            "{}",
            name(&device)
        );
        assert_eq!(t.release_stream_count(), registered, "{}", name(&device));
        // A handle of the other API's kind: refused (an OpenCL queue on a CUDA-stream
        // device, a CUDA stream on an OpenCL device).
        // SAFETY: the value is refused before any use (its kind does not match).
        let queue: StreamOrQueue = if device.backend_kind() == BackendKind::OpenCl {
            unsafe { CudaStreamPtr::from_raw(0x1000) }.into()
        } else {
            unsafe { OpenClQueuePtr::from_raw(0x1000) }.into()
        };
        let error = t.device_array(queue).unwrap_err();
        assert_eq!(
            error.code(),
            ErrorCode::InvalidArgument,
            "{}",
            name(&device)
        );
        // The one-call wait refuses the same way.
        let error = synchronize_stream(&*device, StreamOrQueue::Backend(foreign)).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        drop(t);
        s.finish();
    }
}

#[test]
fn the_default_stream_is_accepted() {
    for device in test_backends() {
        let s = start(&device, 1, Duration::from_millis(20));
        let (k, t) = next(&s);
        if refuses_cuda_default_streams(&device, &t) {
            drop(t);
            s.finish();
            continue;
        }
        let array = t
            .device_array(holo_runtime::device::CudaStreamPtr::NULL)
            .unwrap();
        assert!(array.is_ordered());
        let bytes = array
            .copy_to_host_async(vec![0; 8])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert_eq!(bytes, vec![expected(k); 8], "{}", name(&device));
        drop(array);
        drop(t);
        s.finish();
    }
}

#[test]
fn a_destination_longer_than_the_tensor_is_refused() {
    for device in test_backends() {
        let s = start(&device, 1, Duration::ZERO);
        let (_, t) = next(&s);
        let caller = device.create_stream().unwrap();
        let array = t.device_array(caller).unwrap();
        let error = array
            .copy_to_host_async(vec![0; usize::try_from(LEN).unwrap() + 1])
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        drop(array);
        drop(t);
        s.finish();
        device.destroy_stream(caller).unwrap();
    }
}

#[test]
fn the_release_stream_cap_refuses_a_hand_off_and_registers_nothing() {
    // Each caller stream is a distinct release stream of the slot; the slot's cap (8 by
    // default, less what the session registered) refuses the one past it.
    for device in test_backends() {
        let s = start(&device, 1, Duration::ZERO);
        let (_, t) = next(&s);
        let registered = t.release_stream_count();
        let room = usize::try_from(8 - registered).unwrap();
        let streams: Vec<_> = (0..=room)
            .map(|_| device.create_stream().unwrap())
            .collect();
        let mut arrays = Vec::new();
        let mut refused = None;
        for &stream in &streams {
            match t.device_array(stream) {
                Ok(a) => arrays.push(a),
                Err(e) => {
                    refused = Some(e.code());
                    break;
                }
            }
        }
        assert_eq!(
            refused,
            Some(ErrorCode::ResourceExhausted),
            "{}",
            name(&device)
        );
        assert_eq!(arrays.len(), room, "{}", name(&device));
        assert_eq!(t.release_stream_count(), 8);
        drop(arrays);
        drop(t);
        s.finish();
        for stream in streams {
            device.destroy_stream(stream).unwrap();
        }
    }
}

#[test]
fn a_host_tensor_is_handed_off_with_nothing_to_order() {
    let t = Tensor::from_host_vec(&[4], DType::U8, vec![1, 2, 3, 4]).unwrap();
    let device = SoftwareDevice::new();
    let stream = device.create_stream().unwrap();
    let before = device.counters().snapshot();
    let array = t.device_array(stream).unwrap();
    assert!(!array.is_ordered());
    assert_eq!(t.sdk_stream(), None);
    let bytes = array
        .copy_to_host_async(vec![0; 3])
        .unwrap()
        .synchronize_stream()
        .unwrap();
    assert_eq!(bytes, [1, 2, 3]);
    assert_eq!(
        device.counters().snapshot() - before,
        holo_runtime::device::CounterSnapshot::default()
    );
}

#[test]
fn a_stream_adopted_once_takes_every_frame_and_another_devices_is_refused() {
    for device in test_backends() {
        let s = start(&device, 4, Duration::from_millis(20));
        let caller = device.create_stream().unwrap();
        let adopted = AdoptedStream::new(&device, caller).unwrap();
        // Adopted by another device: refused at adoption (another context) ...
        let other: Arc<dyn DeviceBackend> = SoftwareDevice::new();
        assert_eq!(
            AdoptedStream::new(&other, caller).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        // ... and a stream the other device adopted is refused by this device's tensors.
        let foreign = AdoptedStream::new(&other, other.create_stream().unwrap()).unwrap();
        for _ in 0..4 {
            let (k, t) = next(&s);
            assert_eq!(
                t.device_array_on(&foreign).unwrap_err().code(),
                ErrorCode::InvalidArgument,
                "{}",
                name(&device)
            );
            let array = t.into_device_array_on(&adopted).unwrap();
            assert!(array.is_ordered());
            let bytes = array
                .copy_to_host_async(vec![0; 32])
                .unwrap()
                .synchronize_stream()
                .unwrap();
            assert_eq!(bytes, vec![expected(k); 32], "{}", name(&device));
        }
        s.finish();
        drop(adopted);
        device.destroy_stream(caller).unwrap();
    }
}

/// Runs `body` on each test backend with a received frame `(k, t)` and CUDA's legacy
/// default stream adopted by the frame's device and already registered on its slot (a
/// first hand-off made and dropped), so that the next hand-off on it takes the steady-state
/// path; then waits for the stream and ends the session. Skipped on OpenCL, which has no
/// default streams.
fn on_a_registered_caller_stream(
    delay: Duration,
    body: impl Fn(&Arc<dyn DeviceBackend>, u64, &Tensor, &AdoptedStream),
) {
    for device in test_backends() {
        let s = start(&device, 2, delay);
        let (k, t) = next(&s);
        if refuses_cuda_default_streams(&device, &t) {
            drop(t);
            s.finish();
            continue;
        }
        let own = AdoptedStream::new(&device, CudaStreamPtr::LEGACY).unwrap();
        drop(t.device_array_on(&own).unwrap());
        body(&device, k, &t, &own);
        synchronize_stream(device.as_ref(), CudaStreamPtr::LEGACY.into()).unwrap();
        drop(t);
        drop(own);
        s.finish();
    }
}

/// The steady-state path (a stream adopted once and already registered on the slot) checks
/// the adopting device too: a wrapper of the tensor's device adopts the same raw stream,
/// under the same handle, and is still another device, refused as the general path
/// refuses it.
#[test]
fn a_registered_stream_adopted_by_another_device_is_refused_on_the_steady_path() {
    on_a_registered_caller_stream(Duration::ZERO, |device, _, t, own| {
        let wrapper: Arc<dyn DeviceBackend> =
            holo_runtime::device::FaultInjecting::new(Arc::clone(device));
        let foreign = AdoptedStream::new(&wrapper, CudaStreamPtr::LEGACY).unwrap();
        assert_eq!(foreign.handle(), own.handle(), "{}", name(device));
        assert_eq!(
            t.device_array_on(&foreign).unwrap_err().code(),
            ErrorCode::InvalidArgument,
            "{}",
            name(device)
        );
        // The device's own adoption still takes the steady path.
        let array = t.device_array_on(own).unwrap();
        assert!(array.is_ordered());
    });
}

/// The steady-state path on a thread that never bound the device's context (on CUDA the
/// backend's unchecked calls find it unbound and take their out-of-line path, which binds
/// it): the caller's stream still waits for the producer's bytes, and the hand-off makes
/// exactly one stream wait and its drop one event record, counted once each.
#[test]
fn a_steady_state_hand_off_on_a_thread_that_never_bound_the_context_counts_each_call_once() {
    on_a_registered_caller_stream(Duration::from_millis(20), |device, k, t, own| {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let before = device.counters().snapshot();
                    let array = t.device_array_on(own).unwrap();
                    let after_hand_off = device.counters().snapshot() - before;
                    let bytes = array
                        .copy_to_host_async(vec![0xEE; 16])
                        .unwrap()
                        .synchronize_stream()
                        .unwrap();
                    let before_drop = device.counters().snapshot();
                    drop(array);
                    let at_drop = device.counters().snapshot() - before_drop;
                    assert_eq!(bytes, vec![expected(k); 16], "{}", name(device));
                    assert_eq!(after_hand_off.stream_wait, 1, "{}", name(device));
                    assert_eq!(after_hand_off.event_record, 0, "{}", name(device));
                    assert_eq!(at_drop.event_record, 1, "{}", name(device));
                    assert_eq!(at_drop.stream_wait, 0, "{}", name(device));
                })
                .join()
                .unwrap();
        });
    });
}

#[test]
fn a_per_thread_stream_array_dropped_on_another_thread_records_on_the_legacy_stream() {
    // The per-thread default stream is the calling thread's: an array made on it and
    // dropped on another thread records its release on the legacy default stream (which
    // CUDA orders after every per-thread default stream) — one record, no host wait.
    for device in test_backends() {
        let s = start(&device, 1, Duration::from_millis(20));
        let (k, t) = next(&s);
        if refuses_cuda_default_streams(&device, &t) {
            drop(t);
            s.finish();
            continue;
        }
        let array = t
            .clone()
            .into_device_array(holo_runtime::device::CudaStreamPtr::PER_THREAD)
            .unwrap();
        let bytes = array
            .copy_to_host_async(vec![0; 8])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert_eq!(bytes, vec![expected(k); 8], "{}", name(&device));
        let before = device.counters().snapshot();
        std::thread::spawn(move || drop(array)).join().unwrap();
        let calls = device.counters().snapshot() - before;
        assert_eq!(calls.event_record, 1, "{}", name(&device));
        assert_eq!(
            calls.stream_synchronize,
            0,
            "{}: the release fell back to a host wait",
            name(&device)
        );
        drop(t);
        let report = s.finish();
        assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
    }
}

#[test]
fn a_per_thread_array_records_its_release_on_the_legacy_stream_wherever_it_drops() {
    // Which stream a per-thread default stream's release lands on (found by cargo-mutants,
    // RELIABILITY.md: the test above counts one record, not where): CUDA's legacy default
    // stream, ordered after every per-thread stream of the context, wherever the array
    // drops. Dropped on another thread, that thread's per-thread stream is not the
    // caller's; and two threads' hand-offs of one tensor on their per-thread streams share
    // one release position (the same handle value), whose last record must cover both
    // (a read-only audit, 2026-12-05: it recorded on its own thread's stream there).
    // CUDA only: the software device has one default stream for all three.
    for device in test_backends() {
        if device.backend_kind() != BackendKind::Cuda {
            continue;
        }
        let recorded: Arc<Mutex<Vec<u64>>> = Arc::default();
        let sink = Arc::clone(&recorded);
        let observed: Arc<dyn DeviceBackend> =
            Observed::new(Arc::clone(&device), move |call, _| {
                if let DeviceCall::RecordEvent { stream, .. } = call {
                    sink.lock().unwrap().push(stream.raw());
                }
            });
        let s = start(&observed, 1, Duration::ZERO);
        let (_, t) = next(&s);
        let handle = |stream| {
            let h = observed.adopt_stream(StreamOrQueue::Cuda(stream)).unwrap();
            observed.release_adopted_stream(h);
            h.raw()
        };
        let (legacy, per_thread) = (
            handle(CudaStreamPtr::LEGACY),
            handle(CudaStreamPtr::PER_THREAD),
        );
        assert_ne!(legacy, per_thread);
        for elsewhere in [false, true] {
            let array = t
                .clone()
                .into_device_array(CudaStreamPtr::PER_THREAD)
                .unwrap();
            recorded.lock().unwrap().clear();
            if elsewhere {
                std::thread::spawn(move || drop(array)).join().unwrap();
            } else {
                drop(array);
            }
            assert_eq!(
                *recorded.lock().unwrap(),
                vec![legacy],
                "dropped on another thread: {elsewhere}"
            );
        }
        drop(t);
        s.finish();
    }
}

/// An array on CUDA's per-thread default stream names another stream on every thread: a
/// copy enqueued there ran unordered after the tensor's writes, and a wait there could
/// return before the copy wrote its destination (a host use-after-free from safe code).
#[test]
fn a_per_thread_array_is_copied_and_waited_on_only_on_its_own_thread() {
    for device in test_backends() {
        let s = start(&device, 1, Duration::ZERO);
        let (k, t) = next(&s);
        if refuses_cuda_default_streams(&device, &t) {
            drop(t);
            s.finish();
            continue;
        }
        let array = t
            .clone()
            .into_device_array(CudaStreamPtr::PER_THREAD)
            .unwrap();
        let (copy, wait) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    (
                        array
                            .copy_to_host_async(vec![0; 8])
                            .map(|_| ())
                            .unwrap_err(),
                        array.synchronize_stream().unwrap_err(),
                    )
                })
                .join()
                .unwrap()
        });
        for e in [copy, wait] {
            assert_eq!(e.code(), ErrorCode::NotSupported, "{}: {e}", name(&device));
            assert!(
                e.message()
                    .contains("per-thread default stream of another thread")
            );
        }
        // On its own thread both work.
        let bytes = array
            .copy_to_host_async(vec![0; 8])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert_eq!(bytes, vec![expected(k); 8], "{}", name(&device));
        drop(array);
        drop(t);
        s.finish();
    }
}

#[test]
fn a_hand_off_on_a_backend_stream_leaves_its_release_to_the_last_handle() {
    // A stream the backend created may go on carrying work on the tensor after the array
    // dropped (here: the caller keeps its tensor handle and reads it on that stream 30 ms
    // later). The array's release must not be marked clean there, or the slot's last
    // handle would skip recording it and the slot would go back to the producer under
    // that read.
    for device in test_backends() {
        let s = start(&device, u64::MAX, Duration::ZERO);
        let caller = device.create_stream().unwrap();
        let len = usize::try_from(LEN).unwrap();
        let pinned = device.alloc(AllocKind::PinnedHost, len).unwrap();
        let (k, t) = next(&s);
        drop(t.device_array(caller).unwrap());
        device
            .enqueue_delay(caller, Duration::from_millis(30))
            .unwrap();
        // SAFETY: `pinned` is read after the stream synchronization below; `t` keeps the
        // slot until it drops, and its last handle's release covers the read.
        unsafe { device.copy_async(pinned, t.device_ptr(), len, caller) }.unwrap();
        drop(t);
        // Let the producer cycle through its pool meanwhile.
        let until = std::time::Instant::now() + Duration::from_millis(80);
        while std::time::Instant::now() < until {
            let _ = s.frames.recv_timeout(Duration::from_millis(5));
        }
        device.synchronize_stream(caller).unwrap();
        // SAFETY: the stream has run the copy.
        let host = unsafe { std::slice::from_raw_parts(pinned.as_host_ptr(), len) };
        assert!(
            host.iter().all(|&b| b == expected(k)),
            "{}: frame {k} was overwritten before the read that followed the array: {:?}",
            name(&device),
            &host[..4]
        );
        s.finish();
        // SAFETY: the stream that used it is synchronized.
        unsafe { device.free(AllocKind::PinnedHost, pinned, len) }.unwrap();
        device.destroy_stream(caller).unwrap();
    }
}

#[test]
fn a_second_hand_off_on_a_caller_stream_still_holds_the_slot_until_its_work_ran() {
    // On a caller's raw stream (CUDA's legacy default stream; the software device's
    // default stream stands for it) only hand-offs use the slot's release position, so a
    // hand-off keeps the clean mark an earlier one left instead of clearing and setting
    // it again. That is sound only because each hand-off records its release when it
    // ends: here the second array's stream reads the frame 30 ms late, after both arrays
    // and the tensor dropped, and the slot must not go back to the producer before.
    for device in test_backends() {
        let s = start(&device, u64::MAX, Duration::ZERO);
        let (k, t) = next(&s);
        if refuses_cuda_default_streams(&device, &t) {
            drop(t);
            s.finish();
            continue;
        }
        let adopted = AdoptedStream::new(
            &device,
            StreamOrQueue::Cuda(holo_runtime::device::CudaStreamPtr::LEGACY),
        )
        .unwrap();
        let caller = adopted.handle();
        let len = usize::try_from(LEN).unwrap();
        let pinned = device.alloc(AllocKind::PinnedHost, len).unwrap();
        drop(t.device_array_on(&adopted).unwrap());
        let before = device.counters().snapshot();
        let array = t.device_array_on(&adopted).unwrap();
        device
            .enqueue_delay(caller, Duration::from_millis(30))
            .unwrap();
        // SAFETY: `pinned` is read after the stream synchronization below; the array's
        // release, recorded when it drops, covers the read.
        unsafe { device.copy_async(pinned, array.data_ptr(), len, caller) }.unwrap();
        drop(array);
        let calls = device.counters().snapshot() - before;
        assert_eq!(
            (calls.stream_wait, calls.event_record),
            (1, 1),
            "{}: the second hand-off waits once and records its release once",
            name(&device)
        );
        drop(t);
        // Let the producer cycle through its pool meanwhile.
        let until = std::time::Instant::now() + Duration::from_millis(80);
        while std::time::Instant::now() < until {
            let _ = s.frames.recv_timeout(Duration::from_millis(5));
        }
        adopted.synchronize().unwrap();
        // SAFETY: the stream has run the copy.
        let host = unsafe { std::slice::from_raw_parts(pinned.as_host_ptr(), len) };
        assert!(
            host.iter().all(|&b| b == expected(k)),
            "{}: frame {k} was overwritten before the second hand-off's read: {:?}",
            name(&device),
            &host[..4]
        );
        s.finish();
        // SAFETY: the stream that used it is synchronized.
        unsafe { device.free(AllocKind::PinnedHost, pinned, len) }.unwrap();
        drop(adopted);
    }
}

#[test]
fn an_array_whose_release_record_fails_waits_and_leaves_nothing_to_record_on_its_stream() {
    // The array's release record on a caller's raw stream fails (an injected fault): it
    // waits for the stream on the host instead, and then its position is clean, so the
    // tensor's last handle does not record on the caller's stream again — a stream the
    // caller may destroy once the array has dropped. Both ways in: the first hand-off on
    // the stream (which registers it), and a later one on the steady path, whose array
    // carries the release event and clean mark it found when the hand-off began.
    use holo_runtime::device::{CallKind, FaultInjecting};
    for steady in [false, true] {
        let faulty = FaultInjecting::new(SoftwareDevice::new());
        let device: Arc<dyn DeviceBackend> = Arc::clone(&faulty) as Arc<dyn DeviceBackend>;
        let s = start(&device, u64::MAX, Duration::ZERO);
        let (k, t) = next(&s);
        let adopted = AdoptedStream::new(
            &device,
            StreamOrQueue::Cuda(holo_runtime::device::CudaStreamPtr::LEGACY),
        )
        .unwrap();
        if steady {
            // The first hand-off registers the stream; the next takes the steady path,
            // one wait and nothing else.
            drop(t.device_array_on(&adopted).unwrap());
        }
        let before = device.counters().snapshot();
        let array = t.device_array_on(&adopted).unwrap();
        let made = device.counters().snapshot() - before;
        if steady {
            assert_eq!((made.stream_wait, made.event_record), (1, 0));
        }
        let bytes = array
            .copy_to_host_async(vec![0; 8])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert_eq!(bytes, vec![expected(k); 8]);
        faulty.fail_nth(CallKind::RecordEvent, 1, ErrorCode::DeviceUnavailable);
        let before = device.counters().snapshot();
        drop(array);
        let dropped = device.counters().snapshot() - before;
        assert_eq!(faulty.injected(CallKind::RecordEvent), 1, "steady {steady}");
        assert_eq!(
            dropped.stream_synchronize, 1,
            "the failed record falls back to one host wait (steady {steady})"
        );
        let before = faulty.calls(CallKind::RecordEvent);
        drop(t);
        // Every position is clean now (the tap recorded its own release when it handed
        // the tensor over): the last handle records nothing, on the caller's stream least
        // of all.
        assert_eq!(
            faulty.calls(CallKind::RecordEvent) - before,
            0,
            "steady {steady}"
        );
        drop(adopted);
        let report = s.finish();
        assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
    }
}

#[test]
fn a_hand_off_whose_wait_fails_is_refused_with_the_drivers_code_and_loses_nothing() {
    // The caller stream's wait on the readiness fails (an injected fault): the hand-off
    // returns the error, records the stream's release at once (nothing of the caller's
    // was ordered yet), and the slot goes back to its pool. Both ways in: the first
    // hand-off on the stream (which registers it) and a later one (the steady state's
    // one-pass lookup).
    use holo_runtime::device::{CallKind, FaultInjecting};
    let faulty = FaultInjecting::new(SoftwareDevice::new());
    let device: Arc<dyn DeviceBackend> = Arc::clone(&faulty) as Arc<dyn DeviceBackend>;
    // Two frames, both taken before any fault is set: the session makes no device call
    // while the test injects one.
    let s = start(&device, 2, Duration::ZERO);
    let frames = [next(&s), next(&s)];
    let adopted = AdoptedStream::new(
        &device,
        StreamOrQueue::Cuda(holo_runtime::device::CudaStreamPtr::LEGACY),
    )
    .unwrap();
    let other = device.create_stream().unwrap();
    for (registered_first, (k, t)) in [false, true].into_iter().zip(frames) {
        // A first hand-off records the readiness (a fused producer elides it until a
        // stream of another domain needs it): on the caller's stream, which it registers,
        // or on another one.
        if registered_first {
            drop(t.device_array_on(&adopted).unwrap());
        } else {
            drop(t.device_array(other).unwrap());
        }
        faulty.fail_nth(CallKind::WaitEvent, 1, ErrorCode::DeviceUnavailable);
        let (records, injected) = (
            faulty.calls(CallKind::RecordEvent),
            faulty.injected(CallKind::WaitEvent),
        );
        assert_eq!(
            t.device_array_on(&adopted).unwrap_err().code(),
            ErrorCode::DeviceUnavailable,
            "registered first: {registered_first}"
        );
        assert_eq!(faulty.injected(CallKind::WaitEvent) - injected, 1);
        assert_eq!(
            faulty.calls(CallKind::RecordEvent) - records,
            1,
            "registered first: {registered_first}: the release is recorded at once"
        );
        // The next hand-off of the same tensor is whole.
        let bytes = t
            .device_array_on(&adopted)
            .unwrap()
            .copy_to_host_async(vec![0; 8])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert_eq!(bytes, vec![expected(k); 8]);
        drop(t);
    }
    drop(adopted);
    let report = s.finish();
    assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
    device.destroy_stream(other).unwrap();
}
