//! DLPack export and import (docs/DLPACK.md), in a running pipeline.
//!
//! - `camera` fills a `cuda_device` frame on its runtime stream. `relay` exports each frame
//!   as a read-only DLPack 1.x tensor to "another library" that works on a stream of its
//!   own (`Tensor::to_dlpack`: that stream waits on holo's readiness event, no host wait),
//!   imports the capsule straight back (`Tensor::from_dlpack`), records the library's
//!   stream as the import's readiness stream, and emits the import through a pass-through
//!   output; `check_frames` reads it on its own stream.
//! - `library` is another library's producer: it allocates a buffer with its own allocator,
//!   fills it on its own stream, hands it over as a `DLManagedTensorVersioned` whose
//!   deleter frees it, and holo imports it (`Tensor::from_dlpack_raw`),
//!   `set_readiness_stream`s it and emits it; `check_foreign` reads it. Each buffer's
//!   deleter runs once, after its last handle and its consumer's stream are done with it.
//!
//! On a machine without a GPU the plan runs on holo's software device (the App says so),
//! which stands in for CUDA; `HOLO_DEVICE=cuda` (or a GPU present) runs it on CUDA, and
//! `HOLO_REQUIRE_DEVICE=cuda` makes a missing GPU an error.
//!
//! ```text
//! cargo run -p holo-examples --example dlpack_roundtrip -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::ffi::c_void;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use holo_runtime::app::{App, AppArgs};
use holo_runtime::device::{AllocKind, DeviceBackend, StreamHandle, StreamOrQueue};
use holo_runtime::dlpack::{
    DLDevice, DLDeviceType, DLManagedTensorVersioned, DLPACK_VERSION, DLTensor, DlpackFlags,
    dtype_to_dlpack,
};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, LifecycleContext, Operator, Output, ParamSchema, ParamSet, Result, Tensor,
    TensorLoanRequest, operator,
};

/// Where the pipeline's device memory lives.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.DlpackRoundtrip.Deployment", version = 1)]
struct DeploymentParams {
    /// The CUDA device ordinal.
    #[param(default = 0)]
    device: u32,
}

/// The frames.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.DlpackRoundtrip.Frames", version = 1)]
struct FrameParams {
    /// Bytes per frame (at most 4096).
    #[param(min = 1, max = 4096, default = 1024)]
    frame_bytes: u64,
}

/// The backend of a device-active operator.
fn backend(ctx: &ExecutionContext<'_>) -> Result<Arc<dyn DeviceBackend>> {
    ctx.device()
        .map(Arc::clone)
        .ok_or_else(|| Error::new(ErrorCode::DeviceUnavailable, "no device"))
}

/// Fills frame k with `k % 251` on its runtime stream.
#[operator(params = FrameParams)]
struct Camera {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 4096)]
    frame: Output<Tensor>,
    frame_bytes: u64,
    k: u64,
}

impl Operator for Camera {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = backend(ctx)?;
        let loan = match self.frame.allocate_tensor(TensorLoanRequest {
            shape: &[self.frame_bytes],
            dtype: DType::U8,
        }) {
            Ok(loan) => loan,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let writer = loan.write(stream)?;
        let fill = u8::try_from(self.k % 251).unwrap_or(0);
        // SAFETY: the writer owns the slot until commit and the fill stays inside it.
        unsafe {
            device.memset_async(
                writer.device_ptr(),
                fill,
                writer.byte_size(),
                stream.handle(),
            )?;
        }
        self.k += 1;
        match self.frame.emit(writer.commit()?, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// Exports each frame to another library's stream, imports it back, emits the import.
#[operator]
struct Relay {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frame: Input<Tensor>,
    #[output(storage = pass_through, memory = cuda_device)]
    out: Output<Tensor>,
    /// The other library's stream (made at start).
    library: Option<(Arc<dyn DeviceBackend>, StreamHandle)>,
}

impl Operator for Relay {
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let backend = Arc::clone(ctx.cuda()?.backend());
        let stream = backend.create_stream()?;
        self.library = Some((backend, stream));
        Ok(())
    }

    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some((backend, stream)) = &self.library else {
            return Err(Error::new(ErrorCode::Internal, "start() made no stream"));
        };
        while let Some(frame) = self.frame.receive() {
            // Export: the library's stream waits on the frame's readiness (no host wait).
            let capsule = frame.to_dlpack(Some(StreamOrQueue::Backend(*stream)))?;
            // Import: a read-only tensor over the same bytes; the library's stream is
            // where the bytes are ready, so it is the import's readiness stream.
            let imported = Tensor::from_dlpack(capsule, Some(backend))?;
            imported.set_readiness_stream(*stream)?;
            self.out.emit(imported, EmitOptions::default())?;
        }
        Ok(())
    }

    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        if let Some((backend, stream)) = self.library.take() {
            backend.synchronize_stream(stream)?;
            backend.destroy_stream(stream)?;
        }
        Ok(())
    }
}

/// A buffer another library exports: the DLPack struct first, then what it points to.
#[repr(C)]
struct LibraryTensor {
    managed: DLManagedTensorVersioned,
    shape: [i64; 1],
    strides: [i64; 1],
    backend: Arc<dyn DeviceBackend>,
    stream: StreamHandle,
    bytes: usize,
    freed: Arc<AtomicU64>,
}

/// The library's deleter: frees the buffer after its own stream's work, from any thread.
unsafe extern "C" fn free_library_tensor(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `Library::export`; DLPack calls the deleter once.
    let t = unsafe { Box::from_raw(managed.cast::<LibraryTensor>()) };
    let data = holo_runtime::device::DevicePtr::from_host_ptr(t.managed.dl_tensor.data);
    // A stream destroyed at stop has run everything already.
    let _ = t.backend.synchronize_stream(t.stream);
    // SAFETY: holo released the tensor after its consumers' streams passed it.
    let _ = unsafe { t.backend.free(AllocKind::Device, data, t.bytes) };
    t.freed.fetch_add(1, Ordering::Relaxed);
}

/// Another library's producer: its own allocation, its own stream, handed over through DLPack.
#[operator(params = FrameParams)]
struct Library {
    #[output(storage = pass_through, memory = cuda_device)]
    out: Output<Tensor>,
    frame_bytes: u64,
    k: u64,
    stream: Option<(Arc<dyn DeviceBackend>, StreamHandle)>,
    freed: Arc<AtomicU64>,
}

impl Library {
    /// Allocates and fills a buffer on the library's stream; returns its DLPack tensor.
    fn export(
        &self,
        backend: &Arc<dyn DeviceBackend>,
        stream: StreamHandle,
    ) -> Result<*mut DLManagedTensorVersioned> {
        let bytes = usize::try_from(self.frame_bytes).unwrap_or(1);
        let ptr = backend.alloc(AllocKind::Device, bytes)?;
        let fill = u8::try_from(self.k * 7 % 251).unwrap_or(0);
        // SAFETY: a live allocation of `bytes` bytes; the deleter frees it after the stream.
        unsafe { backend.memset_async(ptr, fill, bytes, stream)? };
        let t = Box::new(LibraryTensor {
            managed: DLManagedTensorVersioned {
                version: DLPACK_VERSION,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(free_library_tensor),
                flags: DlpackFlags::empty(),
                dl_tensor: DLTensor {
                    data: ptr.as_host_ptr().cast::<c_void>(),
                    device: DLDevice {
                        device_type: DLDeviceType::CUDA,
                        device_id: i32::try_from(backend.ordinal()).unwrap_or(0),
                    },
                    ndim: 1,
                    dtype: dtype_to_dlpack(DType::U8),
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            shape: [i64::try_from(bytes).unwrap_or(1)],
            strides: [1],
            backend: Arc::clone(backend),
            stream,
            bytes,
            freed: Arc::clone(&self.freed),
        });
        // The shape and strides point into the box: set them from the raw pointer, not
        // through the box, whose conversion to a raw pointer revokes pointers taken from
        // it before (Rust's aliasing rules; Miri reports the reads as undefined).
        let t = Box::into_raw(t);
        // SAFETY: `t` is the allocation just leaked; nothing else refers to it yet.
        unsafe {
            (*t).managed.dl_tensor.shape = (&raw mut (*t).shape).cast();
            (*t).managed.dl_tensor.strides = (&raw mut (*t).strides).cast();
        }
        Ok(t.cast())
    }
}

impl Operator for Library {
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let backend = Arc::clone(ctx.cuda()?.backend());
        let stream = backend.create_stream()?;
        self.stream = Some((backend, stream));
        Ok(())
    }

    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some((backend, stream)) = self.stream.clone() else {
            return Err(Error::new(ErrorCode::Internal, "start() made no stream"));
        };
        let raw = self.export(&backend, stream)?;
        // SAFETY: `raw` is a valid DLPack tensor whose ownership moves to holo here.
        let imported = unsafe { Tensor::from_dlpack_raw(raw, Some(&backend))? };
        // Without this, every stream-aware consumer refuses it (ProtocolError).
        imported.set_readiness_stream(stream)?;
        self.k += 1;
        match self.out.emit(imported, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }

    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        if let Some((backend, stream)) = self.stream.take() {
            backend.synchronize_stream(stream)?;
            backend.destroy_stream(stream)?;
        }
        Ok(())
    }
}

/// Reads each tensor on its own stream and checks that its bytes are all equal.
#[operator]
struct Check {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    input: Input<Tensor>,
    what: &'static str,
    checked: u64,
    imports: u64,
}

impl Operator for Check {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            let mut bytes = vec![0; t.byte_size()];
            t.copy_to_host(&mut bytes, ctx.cuda_stream()?)?;
            if let Some(i) = bytes.iter().position(|&b| b != bytes[0]) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    format!("{}: byte {i} of tensor {} differs", self.what, self.checked),
                ));
            }
            self.imports += u64::from(t.is_dlpack_import());
            self.checked += 1;
        }
        Ok(())
    }

    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        eprintln!(
            "{}: {} tensors read on the consumer's stream, {} of them DLPack imports",
            self.what, self.checked, self.imports
        );
        Ok(())
    }
}

fn check(what: &'static str) -> Check {
    Check {
        input: Input::default(),
        what,
        checked: 0,
        imports: 0,
    }
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    app.human_output().println(
        "dlpack_roundtrip: camera → relay (export to another library's stream, import back) → check_frames; library (its own buffers, imported) → check_foreign",
    );
    let deployment = app.params::<DeploymentParams>("deployment")?;
    app.device_binding_from("deployment.device");
    let frames = app.params::<FrameParams>("frames")?;
    let frame_bytes = frames.values().frame_bytes;
    let mut graph = Graph::new();
    let camera = graph.add_operator(
        "camera",
        Camera {
            frame: Output::default(),
            frame_bytes,
            k: 0,
        },
        frames.clone(),
    )?;
    let relay = graph.add_operator(
        "relay",
        Relay {
            frame: Input::default(),
            out: Output::default(),
            library: None,
        },
        ParamSet::defaults()?,
    )?;
    let library = graph.add_operator(
        "library",
        Library {
            out: Output::default(),
            frame_bytes,
            k: 0,
            stream: None,
            freed: Arc::new(AtomicU64::new(0)),
        },
        frames,
    )?;
    let check_frames =
        graph.add_operator("check_frames", check("check_frames"), ParamSet::defaults()?)?;
    let check_foreign = graph.add_operator(
        "check_foreign",
        check("check_foreign"),
        ParamSet::defaults()?,
    )?;
    graph.add_flow(camera.frame, relay.frame, ConnectionOptions::default());
    graph.add_flow(relay.out, check_frames.input, ConnectionOptions::default());
    graph.add_flow(
        library.out,
        check_foreign.input,
        ConnectionOptions::default(),
    );
    let device = deployment.values().device;
    let mut options = CompileOptions::default();
    for (operator, port) in [("camera", "frame"), ("relay", "out"), ("library", "out")] {
        options
            .deployment
            .bind_tensor_output_device(operator, port, device);
    }
    Ok((graph, options))
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/dlpack_roundtrip.toml"),
        build,
    )
}
