//! DLPack export and import (docs/DLPACK.md), on every backend `test_backends()` returns:
//! the software device here and in CI, and CUDA device 0 on a GPU machine.
//!
//! Each test provokes one rule: a round trip keeps shape, dtype and bytes (host, and
//! device through a session); an export is read-only and versioned, and a legacy-only
//! consumer is refused; an import without a readiness stream contract is refused by
//! every stream-aware consumer, and one with it orders consumers behind a delayed foreign
//! producer (a consumer that did not wait would read the poison); the import's deleter
//! runs once, however its clones are dropped, and only after its consumers' streams
//! passed it; a tensor of another device is refused; an import is read-only; it fans out
//! through a pass-through output.
#![allow(
    clippy::many_single_char_names,
    reason = "test fixtures: short names for graph handles and clones"
)]
#![allow(
    clippy::naive_bytecount,
    reason = "counting poison bytes in a failure message"
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::__test_support::test_backends;
use holo_runtime::device::{DeviceBackend, DevicePtr, SoftwareDevice, StreamHandle, StreamOrQueue};
use holo_runtime::dlpack::{
    DLDevice, DLDeviceType, Dlpack, DlpackFlags, ExportRequest, dtype_to_dlpack,
};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, MemoryKind, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, TensorReadiness, compile, operator,
};
use holo_tests::foreign::{cuda_device, foreign_tensor};

const POISON: u8 = 0xEE;
const VALUE: u8 = 0x42;

fn name(d: &Arc<dyn DeviceBackend>) -> &'static str {
    d.backend_kind().name()
}

/// The backends, the software one slowed down so that a missing wait shows.
fn backends() -> Vec<Arc<dyn DeviceBackend>> {
    let mut v: Vec<Arc<dyn DeviceBackend>> = vec![SoftwareDevice::with_completion_delay(
        Duration::from_micros(200),
    )];
    v.extend(
        test_backends()
            .into_iter()
            // Software: the slowed one above. OpenCL: DLPack's CUDA device types cannot
            // name a cl_mem; export is NotSupported there (tests/tests/opencl.rs).
            .filter(|b| !matches!(b.backend_kind().name(), "software" | "opencl")),
    );
    v
}

// ---- a foreign library's tensor (holo_tests::foreign) ------------------------------------

/// A device buffer of `len` bytes another library made on `device`: poisoned and complete,
/// then — on `stream`, after `delay` — filled with `VALUE`. Freed by the tensor's deleter.
fn foreign_device_bytes(
    device: &Arc<dyn DeviceBackend>,
    len: usize,
    stream: StreamHandle,
    delay: Duration,
) -> (Dlpack, Arc<AtomicUsize>) {
    holo_tests::foreign::foreign_device_bytes(device, len, stream, delay, POISON, VALUE)
}

fn wait_for(deleted: &AtomicUsize, n: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while deleted.load(Ordering::SeqCst) < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    deleted.load(Ordering::SeqCst) == n
}

/// Copies the tensor's bytes to the host on `stream` the way a consumer kernel would read
/// them: through the backend, with no wait of its own.
fn read_on(device: &Arc<dyn DeviceBackend>, t: &Tensor, stream: StreamHandle) -> Vec<u8> {
    let mut out = vec![0_u8; t.byte_size()];
    // SAFETY: `out` outlives the synchronization below; the tensor keeps its bytes.
    unsafe {
        device
            .copy_to_host_async(out.as_mut_ptr(), t.device_ptr(), out.len(), stream)
            .unwrap();
    }
    device.synchronize_stream(stream).unwrap();
    out
}

// ---- export → import --------------------------------------------------------------------

#[test]
fn a_host_round_trip_keeps_shape_dtype_and_bytes() {
    for (shape, dtype) in [
        (&[6_u64][..], DType::U8),
        (&[2, 3][..], DType::F32),
        (&[2, 1, 2][..], DType::I64),
        (&[][..], DType::BF16),
    ] {
        let n = shape.iter().product::<u64>() * dtype.size_bytes();
        #[allow(clippy::cast_possible_truncation)]
        let bytes: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
        let t = Tensor::from_host_vec(shape, dtype, bytes.clone()).unwrap();
        let d = t.to_dlpack(None).unwrap();
        assert_eq!(d.version().major, 1);
        assert!(d.flags().contains(DlpackFlags::READ_ONLY));
        let back = Tensor::from_dlpack(d, None).unwrap();
        assert_eq!(back.shape(), shape);
        assert_eq!(back.dtype(), dtype);
        assert_eq!(back.memory_kind(), MemoryKind::Host);
        assert_eq!(back.data().unwrap(), &bytes[..]);
        assert_eq!(back.device_ptr(), t.device_ptr(), "no copy");
    }
}

/// A shape whose byte count overflows is `ArithmeticOverflow`, as a loan's is; a rank
/// past 8 `InvalidArgument` (both were `InvalidArgument`, one message for the two).
#[test]
fn a_host_vec_of_an_overflowing_or_too_deep_shape_says_which() {
    let e = Tensor::from_host_vec(&[u64::MAX, 2], DType::F32, Vec::new()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ArithmeticOverflow, "{e}");
    let e = Tensor::from_host_vec(&[1; 9], DType::U8, vec![0]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    assert!(e.message().contains("9 extents"), "{e}");
}

#[test]
fn a_legacy_only_consumer_is_refused_with_not_supported() {
    let t = Tensor::from_host_vec(&[4], DType::U8, vec![1, 2, 3, 4]).unwrap();
    let legacy = ExportRequest::new(None).with_max_version(None);
    let e = t.export_dlpack(&legacy).err().unwrap();
    assert_eq!(e.code(), ErrorCode::NotSupported);
    assert!(e.message().contains("READ_ONLY"), "{e}");
}

/// Writes frame `k` (every byte `k`) on its runtime stream after a delay.
#[operator]
struct DevSource {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 2, bounds = 64)]
    frames: Output<Tensor>,
    k: u8,
}

impl Operator for DevSource {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device"));
        let guard = self
            .frames
            .allocate_tensor(TensorLoanRequest {
                shape: &[4, 8],
                dtype: DType::U8,
            })?
            .write(stream)?;
        device.enqueue_delay(guard.stream(), Duration::from_millis(2))?;
        // SAFETY: the guard owns the slot until commit; the fill stays inside it.
        unsafe {
            device.memset_async(
                guard.device_ptr(),
                self.k,
                guard.byte_size(),
                guard.stream(),
            )?;
        }
        self.k += 1;
        self.frames.emit(guard.commit()?, EmitOptions::default())
    }
}

/// Exports each frame to another library's stream and keeps the capsule.
#[operator]
struct Exporter {
    #[input(memory = cuda_device, dtype = u8)]
    frames: Input<Tensor>,
    consumer: StreamHandle,
    out: Arc<Mutex<Vec<Dlpack>>>,
}

impl Operator for Exporter {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            let d = t.to_dlpack(Some(self.consumer.into()))?;
            self.out.lock().unwrap().push(d);
        }
        Ok(())
    }
}

#[test]
fn a_device_round_trip_through_a_session_keeps_shape_dtype_and_bytes() {
    for device in backends() {
        let consumer = device.create_stream().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let mut g = Graph::new();
        let d = || ParamSet::defaults().unwrap();
        let s = g
            .add_operator(
                "src",
                DevSource {
                    frames: Output::default(),
                    k: 1,
                },
                d(),
            )
            .unwrap();
        let x = g
            .add_operator(
                "export",
                Exporter {
                    frames: Input::default(),
                    consumer,
                    out: Arc::clone(&out),
                },
                d(),
            )
            .unwrap();
        g.add_flow(s.frames, x.frames, ConnectionOptions::default());
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "frames", device.ordinal());
        let plan = compile(&g, options).unwrap();
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(3).on_device(Arc::clone(&device)),
        )
        .unwrap();
        let _ = session.wait_idle(holo_tests::IDLE_WAIT);
        let capsules: Vec<Dlpack> = std::mem::take(&mut *out.lock().unwrap());
        assert_eq!(capsules.len(), 3, "{}", name(&device));
        for (k, c) in (1_u8..).zip(capsules) {
            // SAFETY: a read-only look at the descriptor.
            let dl = unsafe { *c.tensor() };
            assert_eq!(dl.device, cuda_device(0), "{}", name(&device));
            assert!(c.flags().contains(DlpackFlags::READ_ONLY));
            let t = Tensor::from_dlpack(c, Some(&device)).unwrap();
            assert_eq!((t.shape(), t.dtype()), (&[4_u64, 8][..], DType::U8));
            assert_eq!(t.memory_kind(), MemoryKind::CudaDevice);
            // The export ordered `consumer` behind the producer's delayed fill: reading
            // there needs no other wait.
            assert_eq!(
                read_on(&device, &t, consumer),
                vec![k; 32],
                "{}: frame {k}",
                name(&device)
            );
        }
        session.join().unwrap();
        device.destroy_stream(consumer).unwrap();
    }
}

// ---- the readiness stream contract of an import ---------------------------------------

#[test]
fn an_import_without_a_contract_is_refused_by_every_stream_consumer() {
    for device in backends() {
        let foreign = device.create_stream().unwrap();
        let consumer = device.create_stream().unwrap();
        let (d, deleted) = foreign_device_bytes(&device, 64, foreign, Duration::ZERO);
        let t = Tensor::from_dlpack(d, Some(&device)).unwrap();
        assert!(!t.has_readiness_stream_contract());
        assert_eq!(t.readiness(), TensorReadiness::Uncontracted);
        let mut host = [0_u8; 64];
        let refusals = [
            t.synchronize_for_consumer_stream(consumer).unwrap_err(),
            t.copy_to_host(&mut host, consumer).unwrap_err(),
            t.synchronize_for_host().unwrap_err(),
            t.to_dlpack(Some(consumer.into())).err().unwrap(),
        ];
        for e in refusals {
            assert_eq!(e.code(), ErrorCode::ProtocolError, "{}: {e}", name(&device));
            assert!(e.message().contains("set_readiness_stream"), "{e}");
            assert!(e.message().contains("cuda_device tensor [64] of u8"), "{e}");
        }
        drop(t);
        assert!(wait_for(&deleted, 1));
        device.destroy_stream(foreign).unwrap();
        device.destroy_stream(consumer).unwrap();
    }
}

/// A refused hand-off of an uncontracted import registered its stream as a release stream
/// first: each fresh stream took one of the slot's release positions for good, and after
/// as many refusals as the cap, the import could not be handed off at all, even once its
/// readiness contract was set. A refused hand-off registers nothing now.
#[test]
fn a_refused_hand_off_takes_no_release_position() {
    for device in backends() {
        let foreign = device.create_stream().unwrap();
        let (d, deleted) = foreign_device_bytes(&device, 64, foreign, Duration::ZERO);
        let t = Tensor::from_dlpack(d, Some(&device)).unwrap();
        let streams: Vec<_> = (0..12).map(|_| device.create_stream().unwrap()).collect();
        for &s in &streams {
            let e = t.device_array(s).map(|_| ()).unwrap_err();
            assert_eq!(e.code(), ErrorCode::ProtocolError, "{}: {e}", name(&device));
        }
        assert_eq!(t.release_stream_count(), 0, "{}", name(&device));
        t.set_readiness_stream(foreign).unwrap();
        let consumer = device.create_stream().unwrap();
        drop(
            t.device_array(consumer)
                .unwrap_or_else(|e| panic!("{}: {e}", name(&device))),
        );
        drop(t);
        assert!(wait_for(&deleted, 1));
        for s in streams.into_iter().chain([foreign, consumer]) {
            device.synchronize_stream(s).unwrap();
            device.destroy_stream(s).unwrap();
        }
    }
}

#[test]
fn set_readiness_stream_orders_a_consumer_behind_a_delayed_foreign_producer() {
    for device in backends() {
        let foreign = device.create_stream().unwrap();
        let consumer = device.create_stream().unwrap();
        let (d, deleted) = foreign_device_bytes(&device, 4096, foreign, Duration::from_millis(30));
        let t = Tensor::from_dlpack(d, Some(&device)).unwrap();
        t.set_readiness_stream(foreign).unwrap();
        assert!(t.has_readiness_stream_contract());
        assert_eq!(t.readiness(), TensorReadiness::Recorded);
        t.synchronize_for_consumer_stream(consumer).unwrap();
        let seen = read_on(&device, &t, consumer);
        assert!(
            seen.iter().all(|&b| b == VALUE),
            "{}: the consumer read before the foreign producer's fill (poison: {})",
            name(&device),
            seen.iter().filter(|&&b| b == POISON).count()
        );
        // A stream of no backend's is the backend's refusal.
        assert_eq!(
            t.set_readiness_stream(StreamHandle::from_raw(0xdead))
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        assert!(
            t.has_readiness_stream_contract(),
            "a failed record keeps the contract"
        );
        // DLPack's `stream` argument: `None` is the legacy default stream, `-1` no sync.
        // SAFETY: neither names a CUstream value.
        let legacy = unsafe { StreamOrQueue::from_dlpack_stream(None) }.unwrap();
        let no_sync = unsafe { StreamOrQueue::from_dlpack_stream(Some(-1)) }.unwrap();
        assert_eq!(no_sync, None);
        drop(t.to_dlpack(legacy).unwrap());
        drop(t.to_dlpack(no_sync).unwrap());
        drop(t);
        assert!(wait_for(&deleted, 1), "{}", name(&device));
        device.destroy_stream(foreign).unwrap();
        device.destroy_stream(consumer).unwrap();
    }
}

/// Emits one prepared host tensor on a pass-through output.
#[operator]
struct Emit {
    #[output(storage = pass_through, memory = host)]
    out: Output<Tensor>,
    tensor: Option<Tensor>,
}

impl Operator for Emit {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if let Some(t) = self.tensor.take() {
            self.out.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// Emits one prepared device tensor on a pass-through output.
#[operator]
struct DevEmit {
    #[output(storage = pass_through, memory = cuda_device)]
    out: Output<Tensor>,
    tensor: Option<Tensor>,
}

impl Operator for DevEmit {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if let Some(t) = self.tensor.take() {
            self.out.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// Keeps the bytes of every host tensor it receives.
#[operator]
struct Check {
    #[input(memory = host)]
    input: Input<Tensor>,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Operator for Check {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            self.seen.lock().unwrap().push(t.data()?.to_vec());
        }
        Ok(())
    }
}

/// Keeps the bytes of every device tensor it receives, read on its own stream.
#[operator]
struct DevCheck {
    #[input(memory = cuda_device)]
    input: Input<Tensor>,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Operator for DevCheck {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            let mut host = vec![0; t.byte_size()];
            t.copy_to_host(&mut host, ctx.cuda_stream()?)?;
            self.seen.lock().unwrap().push(host);
        }
        Ok(())
    }
}

/// An emitter of `tensor` and `consumers` checkers on `device`: the session's result and
/// what each checker saw.
fn fan_out(
    device: Option<&Arc<dyn DeviceBackend>>,
    tensor: Tensor,
    consumers: usize,
) -> (Result<()>, Vec<Vec<u8>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let (out, tensor) = (Output::default(), Some(tensor));
    if device.is_some() {
        let e = g
            .add_operator("emit", DevEmit { out, tensor }, d())
            .unwrap();
        for i in 0..consumers {
            let (input, seen) = (Input::default(), Arc::clone(&seen));
            let c = g
                .add_operator(&format!("check{i}"), DevCheck { input, seen }, d())
                .unwrap();
            g.add_flow(e.out, c.input, ConnectionOptions::default());
        }
    } else {
        let e = g.add_operator("emit", Emit { out, tensor }, d()).unwrap();
        for i in 0..consumers {
            let (input, seen) = (Input::default(), Arc::clone(&seen));
            let c = g
                .add_operator(&format!("check{i}"), Check { input, seen }, d())
                .unwrap();
            g.add_flow(e.out, c.input, ConnectionOptions::default());
        }
    }
    let mut options = CompileOptions::default();
    let mut session_options = SessionOptions::frames(1);
    if let Some(device) = device {
        options
            .deployment
            .bind_tensor_output_device("emit", "out", device.ordinal());
        session_options = session_options.on_device(Arc::clone(device));
    }
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(g, &plan, session_options).unwrap();
    let _ = session.wait_idle(Duration::from_secs(30));
    let result = session.join().map(|_| ());
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (result, seen)
}

#[test]
fn a_session_consumer_refuses_an_uncontracted_import_and_waits_on_a_contracted_one() {
    for device in backends() {
        let foreign = device.create_stream().unwrap();
        // Without the contract: the consumer's receive fails the session, naming the rule.
        let (d, deleted) = foreign_device_bytes(&device, 256, foreign, Duration::ZERO);
        let t = Tensor::from_dlpack(d, Some(&device)).unwrap();
        let (result, seen) = fan_out(Some(&device), t, 1);
        let e = result.unwrap_err();
        assert_eq!(e.code(), ErrorCode::ProtocolError, "{}: {e}", name(&device));
        assert!(e.message().contains("set_readiness_stream"), "{e}");
        assert!(seen.is_empty());
        assert!(wait_for(&deleted, 1), "{}", name(&device));
        // With it: two consumers on their own streams see the delayed fill.
        let (d, deleted) = foreign_device_bytes(&device, 256, foreign, Duration::from_millis(20));
        let t = Tensor::from_dlpack(d, Some(&device)).unwrap();
        t.set_readiness_stream(foreign).unwrap();
        let (result, seen) = fan_out(Some(&device), t, 2);
        result.unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        assert_eq!(seen, vec![vec![VALUE; 256]; 2], "{}", name(&device));
        assert!(wait_for(&deleted, 1), "{}: released once", name(&device));
        device.destroy_stream(foreign).unwrap();
    }
}

#[test]
fn a_host_import_fans_out_through_a_pass_through_output_and_is_released_once() {
    let mut bytes = vec![VALUE; 32];
    let data = bytes.as_mut_ptr().cast();
    let (d, deleted) = foreign_tensor(
        data,
        &[32],
        dtype_to_dlpack(DType::U8),
        DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        },
        None,
    );
    let t = Tensor::from_dlpack(d, None).unwrap();
    assert!(
        t.has_readiness_stream_contract(),
        "host memory needs no contract"
    );
    let (result, seen) = fan_out(None, t, 3);
    result.unwrap();
    assert_eq!(seen, vec![vec![VALUE; 32]; 3]);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    drop(bytes);
}

// ---- the deleter ------------------------------------------------------------------------

#[test]
fn the_import_deleter_runs_once_with_clones_dropped_on_several_threads() {
    for round in 0..20 {
        let mut bytes = vec![1_u8; 16];
        let (d, deleted) = foreign_tensor(
            bytes.as_mut_ptr().cast(),
            &[16],
            dtype_to_dlpack(DType::U8),
            DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            None,
        );
        let t = Tensor::from_dlpack(d, None).unwrap();
        let threads = 8;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (c, l) = (t.clone(), t.read_lease());
                let b = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    b.wait();
                    drop(c);
                    drop(l);
                })
            })
            .collect();
        drop(t);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(deleted.load(Ordering::SeqCst), 1, "round {round}");
        drop(bytes);
    }
}

#[test]
fn a_device_import_is_released_only_after_its_consumer_streams_passed_it() {
    for device in backends() {
        let foreign = device.create_stream().unwrap();
        let consumer = device.create_stream().unwrap();
        let (d, deleted) = foreign_device_bytes(&device, 64, foreign, Duration::ZERO);
        let t = Tensor::from_dlpack(d, Some(&device)).unwrap();
        t.set_readiness_stream(foreign).unwrap();
        t.synchronize_for_consumer_stream(consumer).unwrap();
        assert_eq!(t.release_stream_count(), 1);
        // The consumer's stream is still busy with the tensor when its handle drops.
        device
            .enqueue_delay(consumer, Duration::from_millis(50))
            .unwrap();
        let dropped = Instant::now();
        drop(t);
        assert!(wait_for(&deleted, 1), "{}", name(&device));
        assert!(
            dropped.elapsed() >= Duration::from_millis(40),
            "{}: the deleter ran while the consumer's stream still used the buffer",
            name(&device)
        );
        // Exported to the consumer's stream: the capsule's deleter records the release
        // there, so the import is released only after the consumer's work on it.
        let (d, deleted) = foreign_device_bytes(&device, 64, foreign, Duration::ZERO);
        let t = Tensor::from_dlpack(d, Some(&device)).unwrap();
        t.set_readiness_stream(foreign).unwrap();
        let capsule = t.to_dlpack(Some(consumer.into())).unwrap();
        drop(t);
        device
            .enqueue_delay(consumer, Duration::from_millis(50))
            .unwrap();
        let dropped = Instant::now();
        drop(capsule);
        assert!(wait_for(&deleted, 1), "{}", name(&device));
        assert!(
            dropped.elapsed() >= Duration::from_millis(40),
            "{}: released before the DLPack consumer's stream passed it",
            name(&device)
        );
        device.destroy_stream(foreign).unwrap();
        device.destroy_stream(consumer).unwrap();
    }
}

// ---- devices and access -----------------------------------------------------------------

/// A DLPack device, the backend named with it, and words of the refusal.
type Case<'a> = (DLDevice, Option<&'a Arc<dyn DeviceBackend>>, &'static str);

#[test]
fn a_tensor_of_another_device_is_refused() {
    for device in backends() {
        let stream = device.create_stream().unwrap();
        let other = i32::try_from(device.ordinal()).unwrap() + 1;
        let cases: [Case<'_>; 3] = [
            (
                cuda_device(other),
                Some(&device),
                "never copies across devices",
            ),
            (cuda_device(0), None, "name the device backend"),
            (
                DLDevice {
                    device_type: DLDeviceType::OPENCL,
                    device_id: 0,
                },
                Some(&device),
                "no holo backend serves",
            ),
        ];
        for (dl_device, backend, words) in cases {
            let (d, deleted) = foreign_tensor(
                DevicePtr::from_raw(0x1000).as_host_ptr().cast(),
                &[4],
                dtype_to_dlpack(DType::U8),
                dl_device,
                None,
            );
            let e = Tensor::from_dlpack(d, backend).unwrap_err();
            assert_eq!(
                e.code(),
                ErrorCode::InvalidArgument,
                "{}: {e}",
                name(&device)
            );
            assert!(e.message().contains(words), "{e}");
            assert_eq!(
                deleted.load(Ordering::SeqCst),
                1,
                "a refused import is released"
            );
        }
        device.destroy_stream(stream).unwrap();
    }
}

#[test]
fn an_import_is_read_only_forever() {
    let mut bytes = vec![3_u8; 8];
    let (d, deleted) = foreign_tensor(
        bytes.as_mut_ptr().cast(),
        &[2, 4],
        dtype_to_dlpack(DType::U8),
        DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        },
        None,
    );
    let mut t = Tensor::from_dlpack(d, None).unwrap();
    assert!(t.is_dlpack_import());
    let e = t.mutable_data().unwrap_err();
    assert_eq!(e.code(), ErrorCode::PermissionDenied);
    // Exported again, it stays read-only.
    let again = t.to_dlpack(None).unwrap();
    assert!(again.flags().contains(DlpackFlags::READ_ONLY));
    let mut back = Tensor::from_dlpack(again, None).unwrap();
    assert_eq!(
        back.mutable_data().unwrap_err().code(),
        ErrorCode::PermissionDenied
    );
    drop((t, back));
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    drop(bytes);
}
