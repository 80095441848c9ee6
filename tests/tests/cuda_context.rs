//! CUDA contexts and foreign streams (docs/HANDOFF.md, "CUDA contexts"): CUDA only. Each
//! test returns at once on a machine without a CUDA device, unless
//! `HOLO_REQUIRE_DEVICE=cuda` is set (the GPU machine's run), where a missing device
//! fails it.
//!
//! - a stream cudarc made in the primary context takes holo's frames, ordered after the
//!   producer's delayed writes, and cudarc reads them through a `CudaSlice` over the
//!   tensor's `CUdeviceptr` on its own stream;
//! - a stream of another context is refused with `InvalidArgument`;
//! - a session on a caller's context (`cuCtxCreate`) creates its pools there, takes a
//!   stream of that context, and refuses one of the primary context.

use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys;
use holo_runtime::device::{CudaDevice, CudaStreamPtr, DeviceBackend};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, compile, operator,
};

const LEN: usize = 4096;

/// Frame k: `LEN` bytes of `k + 1`, written on the runtime stream after a 30 ms delay there.
#[operator]
struct Source {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 4096)]
    frames: Output<Tensor>,
    k: u8,
}

impl Operator for Source {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device"));
        let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[LEN as u64],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let guard = loan.write(stream)?;
        device.enqueue_delay(guard.stream(), Duration::from_millis(30))?;
        self.k += 1;
        // SAFETY: the guard owns the slot until commit; the fill stays inside it.
        unsafe { device.memset_async(guard.device_ptr(), self.k, LEN, guard.stream())? };
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

fn session(device: &Arc<dyn DeviceBackend>, frames: u64) -> (RunSession, Receiver<Tensor>) {
    let (tx, rx) = channel();
    let mut g = Graph::new();
    let src = g
        .add_operator(
            "src",
            Source {
                frames: Output::default(),
                k: 0,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let tap = g
        .add_operator(
            "tap",
            Tap {
                frames: Input::default(),
                out: Mutex::new(tx),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(src.frames, tap.frames, ConnectionOptions::default());
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.ordinal());
    let plan = compile(&g, options).unwrap();
    let s = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(frames).on_device(Arc::clone(device)),
    )
    .unwrap();
    (s, rx)
}

fn finish(s: RunSession, rx: Receiver<Tensor>) {
    s.stop();
    drop(rx);
    s.join().unwrap();
}

/// CUDA device 0, or `None` (the test passes vacuously) where there is none and the run
/// does not require one.
fn cuda() -> Option<Arc<CudaDevice>> {
    match CudaDevice::open(0) {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                std::env::var("HOLO_REQUIRE_DEVICE").as_deref() != Ok("cuda"),
                "HOLO_REQUIRE_DEVICE=cuda but CUDA device 0 does not open: {e}"
            );
            None
        }
    }
}

fn ok(call: &str, r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{call}");
}

/// A new context on device 0 (current on this thread afterwards) and a stream in it.
fn user_context() -> (sys::CUcontext, sys::CUstream) {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: out-pointers to locals; device 0 exists (checked by the caller).
    unsafe {
        ok(
            "cuCtxCreate",
            sys::cuCtxCreate_v4(&raw mut ctx, std::ptr::null_mut(), 0, 0),
        );
        ok("cuStreamCreate", sys::cuStreamCreate(&raw mut stream, 1));
    }
    (ctx, stream)
}

#[test]
fn a_cudarc_stream_takes_frames_and_reads_them_through_a_cuda_slice() {
    let Some(cuda) = cuda() else { return };
    let device: Arc<dyn DeviceBackend> = cuda.clone();
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    // SAFETY: holo owns the ordering of its buffers; cudarc must not add events of its own.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let (s, rx) = session(&device, 3);
    for k in 1..=3_u8 {
        let t = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        // SAFETY: cudarc's stream lives until the end of the test, after the array drops.
        let mine = unsafe { CudaStreamPtr::from_raw(stream.cu_stream() as u64) };
        let array = t.device_array(mine).unwrap();
        // A CudaSlice over holo's bytes, used on cudarc's stream, then leaked (holo frees).
        // SAFETY: `LEN` bytes at `data_ptr` stay allocated while `array` lives.
        let view = unsafe { stream.upgrade_device_ptr::<u8>(array.data_ptr().raw(), LEN) };
        let host = stream.clone_dtoh(&view).unwrap();
        view.leak();
        stream.synchronize().unwrap();
        assert!(
            host.iter().all(|&b| b == k),
            "frame {k} read {:?}",
            &host[..4]
        );
        drop(array);
    }
    finish(s, rx);
}

#[test]
fn a_stream_of_another_context_is_refused() {
    let Some(cuda) = cuda() else { return };
    let device: Arc<dyn DeviceBackend> = cuda.clone();
    let (s, rx) = session(&device, 1);
    let t = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let (ctx, stream) = user_context();
    let registered = t.release_stream_count();
    // SAFETY: a live stream, destroyed below.
    let foreign = unsafe { CudaStreamPtr::from_raw(stream as u64) };
    let error = t.device_array(foreign).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    assert!(
        error.message().contains("belongs to CUDA context"),
        "{}",
        error.message()
    );
    assert_eq!(
        t.release_stream_count(),
        registered,
        "nothing was registered"
    );
    drop(t);
    finish(s, rx);
    // SAFETY: nothing uses them any more.
    unsafe {
        ok("cuStreamDestroy", sys::cuStreamDestroy_v2(stream));
        ok("cuCtxDestroy", sys::cuCtxDestroy_v2(ctx));
    }
}

#[test]
fn a_session_runs_in_a_callers_context_end_to_end() {
    let Some(_primary) = cuda() else { return };
    let (ctx, stream) = user_context();
    {
        // SAFETY: `ctx` is destroyed only after the device and the session dropped.
        let cuda = unsafe { CudaDevice::from_context(ctx as u64) }.unwrap();
        assert_eq!(cuda.raw_context(), ctx as u64);
        let device: Arc<dyn DeviceBackend> = cuda.clone();
        let (s, rx) = session(&device, 2);
        let t = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        // The pool was allocated in the caller's context.
        let mut owner: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and a live device pointer.
        unsafe {
            ok(
                "cuPointerGetAttribute",
                sys::cuPointerGetAttribute(
                    (&raw mut owner).cast(),
                    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
                    t.device_ptr().raw(),
                ),
            );
        }
        assert_eq!(owner, ctx, "the pool lives in the caller's context");
        // A stream of the caller's context takes the frame, ordered after the writes.
        // SAFETY: live until destroyed below, after the array dropped.
        let mine = unsafe { CudaStreamPtr::from_raw(stream as u64) };
        let array = t.device_array(mine).unwrap();
        let bytes = array
            .copy_to_host_async(vec![0; 16])
            .unwrap()
            .synchronize_stream()
            .unwrap();
        assert_eq!(bytes, vec![1; 16]);
        drop(array);
        // A stream of the primary context (cudarc's) is refused.
        let primary = cudarc::driver::CudaContext::new(0).unwrap();
        let other = primary.new_stream().unwrap();
        // SAFETY: refused before any use.
        let foreign = unsafe { CudaStreamPtr::from_raw(other.cu_stream() as u64) };
        assert_eq!(
            t.device_array(foreign).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        drop(t);
        finish(s, rx);
    }
    // SAFETY: the device, its session and every tensor have dropped.
    unsafe {
        ok("cuStreamDestroy", sys::cuStreamDestroy_v2(stream));
        ok("cuCtxDestroy", sys::cuCtxDestroy_v2(ctx));
    }
}
