//! The OpenCL rules of the DeviceArray seed, each provoked with its exact code, on the first
//! OpenCL device (PoCL in CI; with `HOLO_REQUIRE_DEVICE=opencl` a device must open, else
//! the tests return at once). The generic device-contract suite (stream_contract.rs,
//! handoff.rs, topics.rs, …) runs on OpenCL too, through `test_backends()`; this file holds
//! what only OpenCL has: contexts given and adopted, a caller's raw `cl_command_queue` and
//! `cl_mem`, and their refusals.
//!
//! The caller's side is what an application does with `opencl3`'s raw calls: its own
//! context, queues and buffers, released by the caller.
#![allow(
    clippy::cast_possible_truncation,
    reason = "test fixtures: frame numbers modulo 128 and small byte counts"
)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::__test_support::test_backends;
use holo_runtime::device::{
    AdoptedStream, AllocKind, BackendKind, CudaStreamPtr, DeviceBackend, OpenClDevice,
    OpenClMemPtr, OpenClQueuePtr, SoftwareDevice, StreamOrQueue, synchronize_stream,
};
use holo_runtime::{
    CompileOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph, Input, MemoryKind,
    Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest,
    compile, operator,
};
use opencl3::types::{cl_command_queue, cl_context, cl_device_id, cl_mem};

const LEN: u64 = 192;
const POISON: u8 = 0xEE;

/// OpenCL device 0 in a context of its own, or `None` (the test returns) when this machine
/// has none and `HOLO_REQUIRE_DEVICE` does not ask for one.
fn opencl() -> Option<Arc<OpenClDevice>> {
    match OpenClDevice::open(0) {
        Ok(device) => Some(device),
        Err(error) => {
            assert_ne!(
                std::env::var("HOLO_REQUIRE_DEVICE").as_deref(),
                Ok("opencl"),
                "HOLO_REQUIRE_DEVICE=opencl but OpenCL device 0 did not open: {error}"
            );
            assert_eq!(error.code(), ErrorCode::DeviceUnavailable, "{error}");
            None
        }
    }
}

fn ptr<T>(raw: u64) -> *mut T {
    std::ptr::with_exposed_provenance_mut(usize::try_from(raw).unwrap())
}

fn raw<T>(handle: *mut T) -> u64 {
    handle.expose_provenance() as u64
}

/// A caller's own command queue (the caller creates and releases it).
struct CallerQueue(cl_command_queue);

impl CallerQueue {
    /// A queue on `device` in `context`.
    fn new(context: u64, device: u64) -> Self {
        // SAFETY: a live context and a device of it.
        let queue = unsafe {
            opencl3::command_queue::create_command_queue(
                ptr::<c_void>(context).cast(),
                ptr::<c_void>(device).cast(),
                0,
            )
        }
        .expect("clCreateCommandQueue");
        Self(queue)
    }

    fn ptr(&self) -> OpenClQueuePtr {
        // SAFETY: live until this value drops, after every hand-off on it in these tests.
        unsafe { OpenClQueuePtr::from_raw(raw(self.0)) }
    }

    fn finish(&self) {
        opencl3::command_queue::finish(self.0).expect("clFinish");
    }
}

impl Drop for CallerQueue {
    fn drop(&mut self) {
        // SAFETY: the caller's one reference, released once.
        unsafe { opencl3::command_queue::release_command_queue(self.0) }.unwrap();
    }
}

/// A caller's own buffer of `len` bytes in `context`, filled with `value`.
struct CallerBuffer(cl_mem);

impl CallerBuffer {
    fn new(context: u64, queue: &CallerQueue, len: usize, value: u8) -> Self {
        // SAFETY: a live context; no host pointer.
        let mem = unsafe {
            opencl3::memory::create_buffer(
                ptr::<c_void>(context).cast(),
                opencl3::memory::CL_MEM_READ_WRITE,
                len,
                std::ptr::null_mut(),
            )
        }
        .expect("clCreateBuffer");
        let bytes = vec![value; len];
        // SAFETY: a blocking write of `len` bytes from a live vector into the new buffer.
        let event = unsafe {
            opencl3::command_queue::enqueue_write_buffer(
                queue.0,
                mem,
                opencl3::types::CL_BLOCKING,
                0,
                len,
                bytes.as_ptr().cast(),
                0,
                std::ptr::null(),
            )
        }
        .expect("clEnqueueWriteBuffer");
        // SAFETY: the event the write returned, released once.
        unsafe { opencl3::event::release_event(event) }.unwrap();
        Self(mem)
    }

    fn ptr(&self) -> OpenClMemPtr {
        // SAFETY: live until this value drops.
        unsafe { OpenClMemPtr::from_raw(raw(self.0)) }
    }

    fn reference_count(&self) -> u32 {
        opencl3::memory::get_mem_object_info(self.0, opencl3::memory::CL_MEM_REFERENCE_COUNT)
            .expect("clGetMemObjectInfo")
            .into()
    }
}

impl Drop for CallerBuffer {
    fn drop(&mut self) {
        // SAFETY: the caller's one reference, released once.
        unsafe { opencl3::memory::release_mem_object(self.0) }.unwrap();
    }
}

/// Writes frame k (`LEN` bytes of `k % 128`) on its runtime queue, after `delay` there.
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
        let device = Arc::clone(ctx.device().expect("a device-active operator has a device"));
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
    out: Mutex<std::sync::mpsc::Sender<(u64, Tensor)>>,
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

impl Session {
    fn start(device: &Arc<dyn DeviceBackend>, frames: u64, delay: Duration) -> Self {
        let (tx, rx) = channel();
        let mut g = Graph::new();
        let source = Source {
            frames: Output::default(),
            k: 0,
            delay,
            emitted: Arc::default(),
        };
        let src = g
            .add_operator("src", source, ParamSet::defaults().unwrap())
            .unwrap();
        let tap = Tap {
            frames: Input::default(),
            k: 0,
            out: Mutex::new(tx),
        };
        let tap = g
            .add_operator("tap", tap, ParamSet::defaults().unwrap())
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
        Self {
            session,
            frames: rx,
        }
    }

    fn next(&self) -> (u64, Tensor) {
        self.frames
            .recv_timeout(Duration::from_secs(30))
            .expect("the tap hands a frame within 30 s")
    }

    fn finish(self) -> holo_runtime::RunReport {
        self.session.stop();
        drop(self.frames);
        self.session.join().unwrap()
    }
}

fn expected(k: u64) -> u8 {
    (k % 128) as u8
}

#[test]
fn the_contract_suite_runs_on_opencl_when_a_platform_opens() {
    let Some(_device) = opencl() else { return };
    assert!(
        test_backends()
            .iter()
            .any(|b| b.backend_kind() == BackendKind::OpenCl),
        "an OpenCL device opens here, so test_backends() must include it"
    );
}

#[test]
fn a_caller_queue_in_the_adopted_context_sees_the_producers_bytes() {
    let Some(cl) = opencl() else { return };
    // Option 2 of the seed: the caller adopts holo's context and makes its queue there.
    let queue = CallerQueue::new(cl.native_context(), cl.native_device());
    let device: Arc<dyn DeviceBackend> = cl;
    // The producer's queue is held back 30 ms per frame: a caller queue that did not wait
    // on the readiness would read stale bytes.
    let s = Session::start(&device, 3, Duration::from_millis(30));
    // Every frame first (its fill still pending on the device): the counters then see no
    // call of the producer's or the tap's during a measurement.
    let frames: Vec<(u64, Tensor)> = (0..3).map(|_| s.next()).collect();
    for (k, t) in frames {
        let before = device.counters().snapshot();
        // The owning form: the array outlives the tensor's handle.
        let array = t.into_device_array(queue.ptr()).unwrap();
        let calls = device.counters().snapshot() - before;
        // One barrier on the caller's queue, no host wait.
        assert_eq!(calls.stream_wait, 1);
        assert_eq!(calls.event_synchronize + calls.stream_synchronize, 0);
        let bytes = array
            .copy_to_host_async(vec![POISON; 64])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert!(bytes.iter().all(|&b| b == expected(k)), "frame {k}");
    }
    s.finish();
    // The one-call wait on a caller queue.
    synchronize_stream(&*device, queue.ptr().into()).unwrap();
}

#[test]
fn a_device_on_a_given_context_takes_the_callers_queues() {
    let Some(cl) = opencl() else { return };
    // Option 1 of the seed: the caller gives holo its context first.
    let devices: [cl_device_id; 1] = [ptr(cl.native_device())];
    let context: cl_context = opencl3::context::context::create_context(
        &devices,
        std::ptr::null(),
        None,
        std::ptr::null_mut(),
    )
    .expect("clCreateContext");
    // SAFETY: a live context; holo retains it.
    let given = unsafe { OpenClDevice::from_context(raw(context)) }.unwrap();
    assert!(given.context_was_given());
    assert_eq!(given.native_context(), raw(context));
    let queue = CallerQueue::new(raw(context), cl.native_device());
    // The caller may drop its own context reference: holo holds one.
    // SAFETY: the caller's one reference, released once.
    unsafe { opencl3::context::context::release_context(context) }.unwrap();
    let device: Arc<dyn DeviceBackend> = given.clone();
    let s = Session::start(&device, 2, Duration::from_millis(10));
    for _ in 0..2 {
        let (k, t) = s.next();
        // holo's pool lives in the caller's context.
        let (mem, _) = given.resolve(t.device_ptr()).unwrap().unwrap();
        let owner: isize =
            opencl3::memory::get_mem_object_info(ptr(mem), opencl3::memory::CL_MEM_CONTEXT)
                .unwrap()
                .into();
        assert_eq!(
            owner.unsigned_abs() as u64,
            raw(context),
            "the pool's cl_mem context"
        );
        let array = t.device_array(queue.ptr()).unwrap();
        let bytes = array
            .copy_to_host_async(vec![POISON; 16])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert_eq!(bytes, vec![expected(k); 16]);
    }
    // A queue of holo's own other context (device `cl`) is refused here.
    let other = CallerQueue::new(cl.native_context(), cl.native_device());
    let error = AdoptedStream::new(&device, other.ptr()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    s.finish();
    drop(queue);
    drop(device);
}

#[test]
fn a_queue_of_another_context_a_null_queue_and_a_cuda_stream_are_refused() {
    let Some(cl) = opencl() else { return };
    // Device 0 again, in a context of its own: the same hardware, another context.
    let other = opencl().unwrap();
    let foreign = CallerQueue::new(other.native_context(), other.native_device());
    let device: Arc<dyn DeviceBackend> = cl;
    let s = Session::start(&device, 1, Duration::ZERO);
    let (_, t) = s.next();
    let registered = t.release_stream_count();
    let error = t.device_array(foreign.ptr()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    assert!(error.message().contains("belongs to cl_context"), "{error}");
    assert_eq!(t.release_stream_count(), registered, "nothing registered");
    let error = AdoptedStream::new(&device, foreign.ptr()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    let error = synchronize_stream(&*device, foreign.ptr().into()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    // A queue holo's other device created: refused as a Backend stream too.
    let theirs = other.create_stream().unwrap();
    let error = t.device_array(StreamOrQueue::Backend(theirs)).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    // The seed: "the queue handle must be non-null".
    // SAFETY: null is refused before any use.
    let null = unsafe { OpenClQueuePtr::from_raw(0) };
    let error = t.device_array(null).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    assert!(error.message().contains("null"), "{error}");
    // A CUDA stream on an OpenCL device.
    let error = t.device_array(CudaStreamPtr::NULL).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    assert_eq!(t.release_stream_count(), registered, "nothing registered");
    drop(t);
    s.finish();
    other.destroy_stream(theirs).unwrap();
}

#[test]
fn the_hand_off_on_holos_own_queue_makes_no_opencl_call() {
    let Some(cl) = opencl() else { return };
    let device: Arc<dyn DeviceBackend> = cl;
    let s = Session::start(&device, 3, Duration::ZERO);
    // Every frame first: the counters then see no call of the producer's or the tap's.
    let frames: Vec<(u64, Tensor)> = (0..3).map(|_| s.next()).collect();
    for (k, t) in frames {
        let own = t.sdk_stream().expect("written on a queue");
        let StreamOrQueue::Backend(handle) = own else {
            panic!("{own:?}")
        };
        // SAFETY: holo's own live queue, named as a caller would name it.
        let as_queue = unsafe { OpenClQueuePtr::from_raw(handle.raw()) };
        let before = device.counters().snapshot();
        let by_handle = t.device_array(own).unwrap();
        let by_queue = t.device_array(as_queue).unwrap();
        assert!(
            !by_handle.is_ordered() && !by_queue.is_ordered(),
            "frame {k}"
        );
        drop((by_handle, by_queue));
        let calls = device.counters().snapshot() - before;
        assert_eq!(calls.total(), 0, "frame {k}: {calls:?}");
    }
    s.finish();
}

#[test]
fn a_slot_is_not_reused_before_the_callers_queue_finished() {
    let Some(cl) = opencl() else { return };
    let queue = CallerQueue::new(cl.native_context(), cl.native_device());
    let opencl_device = Arc::clone(&cl);
    let device: Arc<dyn DeviceBackend> = cl;
    let adopted = AdoptedStream::new(&device, queue.ptr()).unwrap();
    // The source runs until stopped; the pool has 4 slots, so a slot recycled before the
    // caller's delayed read ran is overwritten by a later frame (the poison pattern: each
    // frame's bytes are its own number).
    let s = Session::start(&device, u64::MAX, Duration::ZERO);
    let frames = 12;
    let len = usize::try_from(LEN).unwrap();
    let mut host = vec![POISON; len * frames];
    let mut read = Vec::new();
    for (i, chunk) in host.chunks_mut(len).enumerate() {
        let (k, t) = s.next();
        let array = t.into_device_array_on(&adopted).unwrap();
        // The caller's "kernel": 20 ms of work on its queue, then a raw read of the
        // array's cl_mem at its offset (no registration of its own), then the array drops.
        device
            .enqueue_delay(adopted.handle(), Duration::from_millis(20))
            .unwrap();
        let (mem, offset) = opencl_device.resolve(array.data_ptr()).unwrap().unwrap();
        // SAFETY: a non-blocking read into `chunk`, which is not touched until the queue
        // finished below; the array's release keeps the slot until the read ran.
        let event = unsafe {
            opencl3::command_queue::enqueue_read_buffer(
                queue.0,
                ptr(mem),
                opencl3::types::CL_NON_BLOCKING,
                offset,
                len,
                chunk.as_mut_ptr().cast(),
                0,
                std::ptr::null(),
            )
        }
        .unwrap();
        // SAFETY: the read's event, released once.
        unsafe { opencl3::event::release_event(event) }.unwrap();
        drop(array);
        read.push((i, k));
    }
    queue.finish();
    for (i, k) in read {
        let bytes = &host[i * len..(i + 1) * len];
        assert!(
            bytes.iter().all(|&b| b == expected(k)),
            "frame {k} was overwritten before the caller's read: {:?}",
            &bytes[..4]
        );
    }
    let report = s.finish();
    assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
    drop(adopted);
}

#[test]
fn a_wrapped_cl_mem_is_read_only_ordered_and_released_once() {
    let Some(cl) = opencl() else { return };
    let queue = CallerQueue::new(cl.native_context(), cl.native_device());
    let reader = CallerQueue::new(cl.native_context(), cl.native_device());
    let buffer = CallerBuffer::new(cl.native_context(), &queue, 256, 0x5A);
    assert_eq!(buffer.reference_count(), 1);
    let device: Arc<dyn DeviceBackend> = cl;
    let mut t = Tensor::from_cl_mem(&device, buffer.ptr(), &[4, 64], DType::U8).unwrap();
    assert_eq!(buffer.reference_count(), 2, "holo holds its own reference");
    assert_eq!(t.byte_size(), 256);
    // OpenCL memory, as an OpenCL runtime pool's tensors are (it said `cuda_device`).
    assert_eq!(t.memory_kind(), MemoryKind::OpenClDevice);
    // The view's own metadata (cargo-mutants found its rank and dtype unchecked; the
    // F32 view below checks the dtype).
    assert_eq!((t.shape(), t.rank()), (&[4, 64][..], 2));
    // Read-only forever.
    assert_eq!(
        t.mutable_data().unwrap_err().code(),
        ErrorCode::PermissionDenied
    );
    // The foreign-tensor rules: no readiness contract until the producer's queue is named.
    assert!(!t.has_readiness_stream_contract());
    // The caller's producer: 30 ms of work, then a fill, on its queue.
    let handle = device.adopt_stream(queue.ptr().into()).unwrap();
    device
        .enqueue_delay(handle, Duration::from_millis(30))
        .unwrap();
    // SAFETY: the fill stays inside the wrapped buffer; the reader waits on the readiness.
    unsafe { device.memset_async(t.device_ptr(), 0x77, 256, handle) }.unwrap();
    t.set_readiness_stream(queue.ptr()).unwrap();
    assert!(t.has_readiness_stream_contract());
    let array = t.device_array(reader.ptr()).unwrap();
    let bytes = array
        .copy_to_host_async(vec![0; 256])
        .unwrap()
        .synchronize_stream()
        .unwrap();
    assert!(bytes.iter().all(|&b| b == 0x77), "{:?}", &bytes[..4]);
    drop(array);
    drop(t);
    device.release_adopted_stream(handle);
    // The last handle dropped and every release passed: holo released its one reference.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while buffer.reference_count() != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(buffer.reference_count(), 1, "released exactly once");
}

#[test]
fn a_cl_mem_of_another_context_a_null_one_or_a_short_one_is_refused() {
    let Some(cl) = opencl() else { return };
    let other = opencl().unwrap();
    let their_queue = CallerQueue::new(other.native_context(), other.native_device());
    let theirs = CallerBuffer::new(other.native_context(), &their_queue, 64, 0);
    let device: Arc<dyn DeviceBackend> = cl.clone();
    let error = Tensor::from_cl_mem(&device, theirs.ptr(), &[64], DType::U8).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    assert!(error.message().contains("belongs to cl_context"), "{error}");
    assert_eq!(theirs.reference_count(), 1, "a refused cl_mem is not kept");
    // SAFETY: null is refused before any use.
    let null = unsafe { OpenClMemPtr::from_raw(0) };
    let error = Tensor::from_cl_mem(&device, null, &[1], DType::U8).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    // A view larger than the buffer.
    let queue = CallerQueue::new(cl.native_context(), cl.native_device());
    let ours = CallerBuffer::new(cl.native_context(), &queue, 64, 0);
    let error = Tensor::from_cl_mem(&device, ours.ptr(), &[17], DType::F32).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    assert_eq!(
        ours.reference_count(),
        1,
        "a refused view releases its reference"
    );
    // A backend that is not OpenCL.
    let software: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let error = Tensor::from_cl_mem(&software, ours.ptr(), &[64], DType::U8).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotSupported);
    // The largest view that fits, of another dtype: its metadata is the view's.
    let view = Tensor::from_cl_mem(&device, ours.ptr(), &[2, 8], DType::F32).unwrap();
    assert_eq!(
        (view.shape(), view.rank(), view.dtype(), view.byte_size()),
        (&[2, 8][..], 2, DType::F32, 64)
    );
}

#[test]
fn exhaustion_and_bad_memory_names_give_their_codes() {
    let Some(cl) = opencl() else { return };
    // Past holo's 1 TiB window, and past what any device can allocate (exactly 1 TiB:
    // above CL_DEVICE_MAX_MEM_ALLOC_SIZE everywhere, CL_INVALID_BUFFER_SIZE).
    assert_eq!(
        cl.alloc(AllocKind::Device, 1 << 41).unwrap_err().code(),
        ErrorCode::ResourceExhausted
    );
    assert_eq!(
        cl.alloc(AllocKind::Device, 1 << 40).unwrap_err().code(),
        ErrorCode::ResourceExhausted
    );
    assert_eq!(
        cl.alloc(AllocKind::Device, 0).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    let stream = cl.create_stream().unwrap();
    let buffer = cl.alloc(AllocKind::Device, 64).unwrap();
    // A fill past the buffer's end names no live range.
    // SAFETY: refused before anything is enqueued.
    let error =
        unsafe { cl.memset_async(buffer.checked_add(32).unwrap(), 0, 64, stream) }.unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    // SAFETY: nothing used the buffer.
    unsafe { cl.free(AllocKind::Device, buffer, 64) }.unwrap();
    // A freed buffer's name is never reused, so it stays refused.
    assert_eq!(
        cl.resolve(buffer).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    // SAFETY: freed already.
    let error = unsafe { cl.free(AllocKind::Device, buffer, 64) }.unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    cl.destroy_stream(stream).unwrap();
}

#[test]
fn a_buffer_of_one_opencl_backend_is_unknown_to_another() {
    let Some(one) = opencl() else { return };
    let Some(other) = opencl() else { return };
    // Two backends on device 0, each with its own context: a buffer of the first names no
    // memory of the second (the first buffer of each was named alike, window 0 of its own
    // numbering, and resolved to the other's buffer).
    let a = one.alloc(AllocKind::Device, 64).unwrap();
    let b = other.alloc(AllocKind::Device, 64).unwrap();
    assert_ne!(a, b);
    assert_eq!(
        other.resolve(a).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    let stream = other.create_stream().unwrap();
    // SAFETY: refused before anything is enqueued.
    let error = unsafe { other.memset_async(a, 0, 64, stream) }.unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    // SAFETY: refused before anything is enqueued.
    let error = unsafe { other.copy_async(b, a, 64, stream) }.unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    // SAFETY: `a` is not `other`'s: refused, nothing freed.
    let error = unsafe { other.free(AllocKind::Device, a, 64) }.unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    other.destroy_stream(stream).unwrap();
    // SAFETY: nothing used either buffer.
    unsafe {
        one.free(AllocKind::Device, a, 64).unwrap();
        other.free(AllocKind::Device, b, 64).unwrap();
    }
}

#[test]
fn an_opencl_tensor_is_not_exported_as_cuda_memory() {
    let Some(cl) = opencl() else { return };
    let device: Arc<dyn DeviceBackend> = cl;
    let s = Session::start(&device, 1, Duration::ZERO);
    let (_, t) = s.next();
    let Err(error) = t.to_dlpack(None) else {
        panic!("an OpenCL tensor was exported through DLPack")
    };
    assert_eq!(error.code(), ErrorCode::NotSupported);
    drop(t);
    s.finish();
}
