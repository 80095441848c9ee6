//! holo's frames on a cudarc user's own stream (docs/HANDOFF.md).
//!
//! The camera fills a `cuda_device` frame on its runtime stream. The consumer is the
//! cudarc user: at `start` it makes its own `cudarc::driver::CudaStream` in the session
//! device's context (the primary context: cudarc's `CudaContext::new` retains it too), and
//! for every frame it
//!
//! 1. hands the frame to its stream: `frame.device_array(CudaStreamPtr::from_raw(
//!    stream.cu_stream()))` — cudarc's stream now waits on holo's readiness event, on the
//!    device; the host never waits;
//! 2. wraps the frame's `CUdeviceptr` in a `CudaSlice<u8>` (`upgrade_device_ptr`, with
//!    cudarc's own event tracking switched off: holo orders its buffers) and reads it back
//!    with cudarc's `clone_dtoh` on its stream, then `leak`s the slice (holo owns the
//!    memory);
//! 3. drops the array: holo records the release on cudarc's stream, and the slot returns
//!    to its pool only after cudarc's work on it has run.
//!
//! With no CUDA device the example says so and shows the same hand-off on holo's software
//! device, with a stream of its own standing in for cudarc's. `HOLO_REQUIRE_DEVICE=cuda`
//! makes that an error instead.
//!
//! ```text
//! cargo run -p holo-examples --example cudarc_interop -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use holo_runtime::app::{App, AppArgs};
use holo_runtime::device::{BackendKind, CudaStreamPtr, DeviceBackend, StreamOrQueue};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, LifecycleContext, Operator, Output, ParamSchema, ParamSet, Result, Tensor,
    TensorLoanRequest, operator,
};

/// Where the camera's pool lives.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.CudarcInterop.Deployment", version = 1)]
struct DeploymentParams {
    /// The CUDA device ordinal.
    #[param(default = 0)]
    device: u32,
}

/// The camera source.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.CudarcInterop.Camera", version = 1)]
struct CameraParams {
    /// Bytes per frame (at most 4096).
    #[param(min = 1, max = 4096, default = 4096)]
    frame_bytes: u64,
}

/// Fills frame k with `k % 251` on the runtime stream.
#[operator(params = CameraParams)]
struct Camera {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 4096)]
    frame: Output<Tensor>,
    frame_bytes: u64,
    k: u64,
}

impl Operator for Camera {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(
            ctx.device()
                .ok_or_else(|| Error::new(ErrorCode::DeviceUnavailable, "no device"))?,
        );
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
                writer.stream(),
            )?;
        }
        self.k += 1;
        match self.frame.emit(writer.commit()?, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// The caller's own stream: cudarc's on CUDA, a software-device stream otherwise.
enum CallerStream {
    Cudarc(Arc<cudarc::driver::CudaStream>),
    Software(Arc<dyn DeviceBackend>, holo_runtime::device::StreamHandle),
}

/// The cudarc user: reads every frame on its own stream.
#[operator]
struct CudarcUser {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frame: Input<Tensor>,
    stream: Option<CallerStream>,
    checked: u64,
}

impl Operator for CudarcUser {
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let device = ctx.cuda()?;
        let backend = Arc::clone(device.backend());
        self.stream = Some(if backend.backend_kind() == BackendKind::Cuda {
            let cuda = |e: cudarc::driver::DriverError| {
                Error::new(ErrorCode::DeviceUnavailable, format!("cudarc: {e:?}"))
            };
            let context =
                cudarc::driver::CudaContext::new(device.ordinal() as usize).map_err(cuda)?;
            // SAFETY: holo orders its own buffers; cudarc must not add events of its own.
            unsafe { context.disable_event_tracking() };
            CallerStream::Cudarc(context.new_stream().map_err(cuda)?)
        } else {
            let stream = backend.create_stream()?;
            CallerStream::Software(backend, stream)
        });
        Ok(())
    }

    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(stream) = &self.stream else {
            return Err(Error::new(ErrorCode::Internal, "start() made no stream"));
        };
        while let Some(frame) = self.frame.receive() {
            let n = frame.byte_size();
            let expect = u8::try_from(self.checked % 251).unwrap_or(0);
            let bytes = match stream {
                CallerStream::Cudarc(s) => {
                    // SAFETY: cudarc's stream lives in `self` until after every array drops.
                    let mine = unsafe { CudaStreamPtr::from_raw(s.cu_stream() as u64) };
                    let array = frame.device_array(mine)?; // no host wait
                    // SAFETY: `n` bytes at `data_ptr` stay allocated while `array` lives.
                    let view = unsafe { s.upgrade_device_ptr::<u8>(array.data_ptr().raw(), n) };
                    let bytes = s.clone_dtoh(&view).map_err(|e| {
                        Error::new(ErrorCode::Internal, format!("cudarc clone_dtoh: {e:?}"))
                    })?;
                    let _ = view.leak(); // holo owns and frees the memory
                    bytes
                    // `array` drops here: the release is recorded on cudarc's stream.
                }
                CallerStream::Software(_, s) => {
                    let array = frame.device_array(StreamOrQueue::Backend(*s))?;
                    array.copy_to_host_async(vec![0; n])?.synchronize_stream()?
                }
            };
            if let Some(i) = bytes.iter().position(|&b| b != expect) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    format!(
                        "byte {i} of frame {} is {}, expected {expect}",
                        self.checked, bytes[i]
                    ),
                ));
            }
            self.checked += 1;
        }
        Ok(())
    }

    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        if let Some(CallerStream::Software(backend, stream)) = self.stream.take() {
            backend.synchronize_stream(stream)?;
            backend.destroy_stream(stream)?;
        }
        Ok(())
    }
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    app.human_output().println(
        "cudarc_interop: camera → cudarc_user (frames read on the user's own cudarc stream)",
    );
    let deployment = app.params::<DeploymentParams>("deployment")?;
    app.device_binding_from("deployment.device");
    let camera = app.params::<CameraParams>("camera")?;
    let mut graph = Graph::new();
    let source = Camera {
        frame: Output::default(),
        frame_bytes: camera.values().frame_bytes,
        k: 0,
    };
    let cam = graph.add_operator("camera", source, camera)?;
    let user = graph.add_operator(
        "cudarc_user",
        CudarcUser {
            frame: Input::default(),
            stream: None,
            checked: 0,
        },
        ParamSet::defaults()?,
    )?;
    graph.add_flow(cam.frame, user.frame, ConnectionOptions::default());
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("camera", "frame", deployment.values().device);
    Ok((graph, options))
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/cudarc_interop.toml"),
        build,
    )
}
