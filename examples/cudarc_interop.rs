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
//! The other way, the cudarc user gives holo frames of its own: right after the session
//! starts it attaches to the imported topic `cudarc/frames` (`ChannelPublisher::attach`)
//! and, for every frame,
//!
//! 1. loans a slot of the topic's pool (`allocate_tensor`) and opens its write on cudarc's
//!    stream (`write(CudaStreamPtr::from_raw(stream.cu_stream()))`: holo checks that the
//!    stream is of the pool's context);
//! 2. fills it with cudarc's own `memcpy_htod` on that stream, through a `CudaSlice` over
//!    the slot's `CUdeviceptr` (leaked after: holo owns the memory);
//! 3. commits (holo records the readiness event on cudarc's stream; no host wait) and
//!    publishes. The operator `checker` imports the topic: its stream waits on that event
//!    in `receive`, and it checks every byte.
//!
//! With no CUDA device the example says so and shows the same hand-offs on holo's software
//! device, with a stream of its own standing in for cudarc's. `HOLO_REQUIRE_DEVICE=cuda`
//! makes that an error instead.
//!
//! ```text
//! cargo run -p holo-examples --example cudarc_interop -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use holo_examples::side::SideFailure;
use holo_runtime::app::{App, AppArgs, HumanOutput};
use holo_runtime::device::{BackendKind, CudaStreamPtr, DeviceBackend, StreamOrQueue};
use holo_runtime::plan::ExecutionPlan;
use holo_runtime::{
    ChannelPublisher, CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode,
    ExecutionContext, Graph, Input, LifecycleContext, Operator, Output, ParamSchema, ParamSet,
    PublisherOptions, Result, RunSession, Tensor, TensorLoanRequest, TopicOptions, operator,
};

/// The topic the cudarc user publishes its own frames into.
const TOPIC: &str = "cudarc/frames";

/// Bytes of each frame the cudarc user publishes.
const GIVEN_BYTES: usize = 1024;

/// The value of every byte of given frame `k`.
fn given_value(k: u64) -> u8 {
    u8::try_from((k + 100) % 251).unwrap_or(0)
}

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
#[derive(Clone)]
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

/// Reads the frames the cudarc user publishes into `cudarc/frames`, on its own runtime
/// stream (which waits on the cudarc stream's readiness event in `receive`), and checks
/// every byte.
#[operator]
struct Checker {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frame: Input<Tensor>,
    checked: Arc<AtomicU64>,
    bytes: Vec<u8>,
}

impl Operator for Checker {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?.handle();
        while let Some(frame) = self.frame.receive() {
            let k = self.checked.load(Ordering::Acquire);
            let n = frame.byte_size();
            self.bytes.resize(n, 0);
            frame.copy_to_host(&mut self.bytes, stream)?; // after cudarc's writes
            let expect = given_value(k);
            if let Some(i) = self.bytes.iter().position(|&b| b != expect) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    format!(
                        "byte {i} of given frame {k} is {}, expected {expect}",
                        self.bytes[i]
                    ),
                ));
            }
            self.checked.store(k + 1, Ordering::Release);
        }
        Ok(())
    }
}

/// The cudarc user's stream for the frames it gives, kept until the session has ended.
type GivingStream = Arc<Mutex<Option<CallerStream>>>;

/// The cudarc user as a publisher: gives `frames` frames of its own to `cudarc/frames`,
/// each written on its own stream, then waits until `checker` has checked them all.
fn give(
    session: &RunSession,
    frames: u64,
    checked: &AtomicU64,
    human: HumanOutput,
    kept: &GivingStream,
) -> Result<()> {
    let backend = Arc::clone(session.device().ok_or_else(|| {
        Error::new(
            ErrorCode::DeviceUnavailable,
            "the session has no device to make the cudarc user's stream on",
        )
    })?);
    let stream = if backend.backend_kind() == BackendKind::Cuda {
        let cuda = |e: cudarc::driver::DriverError| {
            Error::new(ErrorCode::DeviceUnavailable, format!("cudarc: {e:?}"))
        };
        let context = cudarc::driver::CudaContext::new(backend.ordinal() as usize).map_err(cuda)?;
        // SAFETY: holo orders its own buffers; cudarc must not add events of its own.
        unsafe { context.disable_event_tracking() };
        CallerStream::Cudarc(context.new_stream().map_err(cuda)?)
    } else {
        CallerStream::Software(Arc::clone(&backend), backend.create_stream()?)
    };
    // Kept until the session has ended (`main` destroys a software stream), also when this
    // returns early.
    *kept.lock().unwrap_or_else(PoisonError::into_inner) = Some(stream.clone());
    let mut publisher: ChannelPublisher<Tensor> =
        ChannelPublisher::attach(session, TOPIC, PublisherOptions::DEFAULT)?;
    let deadline = Instant::now() + Duration::from_mins(1);
    let late = || {
        Error::new(
            ErrorCode::Cancelled,
            format!("the cudarc user's frames were not all checked within 60 s ({TOPIC:?})"),
        )
    };
    let mut host = vec![0u8; GIVEN_BYTES];
    for k in 0..frames {
        let loan = loop {
            match publisher.allocate_tensor(TensorLoanRequest {
                shape: &[GIVEN_BYTES as u64],
                dtype: DType::U8,
            }) {
                Ok(loan) => break loan,
                // Every slot is queued or held: the checker returns one soon.
                Err(e) if e.code() == ErrorCode::ResourceExhausted && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(e) if e.code() == ErrorCode::ResourceExhausted => return Err(late()),
                Err(e) => return Err(e),
            }
        };
        host.fill(given_value(k));
        let frame = match &stream {
            CallerStream::Cudarc(s) => {
                // SAFETY: cudarc's stream lives (in `kept`) until the session has ended.
                let mine = unsafe { CudaStreamPtr::from_raw(s.cu_stream() as u64) };
                let writer = loan.write(mine)?; // holo checks the stream's context
                // SAFETY: the writer owns the slot's `GIVEN_BYTES` until its commit.
                let mut slot =
                    unsafe { s.upgrade_device_ptr::<u8>(writer.device_ptr().raw(), host.len()) };
                s.memcpy_htod(&host, &mut slot).map_err(|e| {
                    Error::new(ErrorCode::Internal, format!("cudarc memcpy_htod: {e:?}"))
                })?;
                let _ = slot.leak(); // holo owns and frees the memory
                writer.commit()? // readiness recorded on cudarc's stream: no host wait
            }
            CallerStream::Software(device, s) => {
                let writer = loan.write(StreamOrQueue::Backend(*s))?;
                // SAFETY: as above.
                unsafe {
                    device.copy_from_host_async(
                        writer.device_ptr(),
                        host.as_ptr(),
                        host.len(),
                        *s,
                    )?;
                }
                // The host buffer is refilled next frame: the copy must have read it.
                device.synchronize_stream(*s)?;
                writer.commit()?
            }
        };
        // Wait for room in the checker's queue rather than be refused (`Backpressured`,
        // which the run summary counts as a drop).
        while !publisher.has_room() {
            if Instant::now() >= deadline || session.is_stopping() {
                return Err(late());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        publisher.publish(frame.into_tensor(), EmitOptions::default())?;
    }
    drop(publisher); // detaches; what it published stays queued for the checker
    while checked.load(Ordering::Acquire) < frames {
        if Instant::now() >= deadline || session.is_stopping() {
            return Err(late());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    human.println(format_args!(
        "cudarc user: gave {frames} frames of its own through topic {TOPIC:?}, each written on its own stream; checker read every byte after them"
    ));
    Ok(())
}

fn build(
    app: &mut App,
    failure: &SideFailure,
    kept: &GivingStream,
) -> Result<(Graph, CompileOptions)> {
    app.human_output().println(
        "cudarc_interop: camera → cudarc_user (frames read on the user's own cudarc stream); the cudarc user → topic \"cudarc/frames\" → checker (frames written on its stream)",
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
    let checked = Arc::new(AtomicU64::new(0));
    let check = graph.add_operator(
        "checker",
        Checker {
            frame: Input::default(),
            checked: Arc::clone(&checked),
            bytes: Vec::new(),
        },
        ParamSet::defaults()?,
    )?;
    graph.import_topic(
        check.frame,
        TOPIC,
        TopicOptions::DEFAULT.with_max_bytes(GIVEN_BYTES as u64),
    );
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("camera", "frame", deployment.values().device);
    options
        .deployment
        .bind_imported_topic_device(TOPIC, deployment.values().device);
    // The cudarc user gives as many frames as the camera makes, right after the start.
    let frames = app.args().frames.unwrap_or(100);
    let (failure, kept) = (failure.clone(), Arc::clone(kept));
    app.on_session(move |_plan: &ExecutionPlan, session, human| {
        if let Err(e) = give(session, frames, &checked, human, &kept) {
            session.stop();
            failure.set(e);
        }
    });
    Ok((graph, options))
}

fn main() -> ExitCode {
    let failure = SideFailure::default();
    let kept = GivingStream::default();
    let result = App::new(
        AppArgs::from_env(),
        include_str!("config/cudarc_interop.toml"),
    )
    .and_then(|mut app| {
        let (graph, options) = build(&mut app, &failure, &kept)?;
        app.run(graph, options)
    })
    .and_then(|_| {
        // The session has ended: the cudarc user's stream may go.
        if let Some(CallerStream::Software(device, stream)) =
            kept.lock().unwrap_or_else(PoisonError::into_inner).take()
        {
            device.synchronize_stream(stream)?;
            device.destroy_stream(stream)?;
        }
        failure.check("the cudarc user as a publisher")
    });
    holo_examples::side::exit(result)
}
