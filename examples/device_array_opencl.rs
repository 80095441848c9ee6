//! The DeviceArray hand-off on OpenCL: a holo camera fills frames on its own command queue,
//! and a caller runs its own kernel on them on its own queue (docs/OPENCL.md).
//!
//! The session is one camera: it fills a device frame on its runtime queue (holo's own,
//! the seed's "SDK queue") and commits it — a marker is its readiness event — and exports
//! it as the topic `camera/frames`. The caller is no operator: it
//!
//! 1. **adopts holo's context** (the seed's option 2): it asks the device for its
//!    `cl_context` and `cl_device_id` (`OpenClDevice::native_context`) and creates its own
//!    queue, program, kernel and output buffer there with `opencl3`'s raw calls;
//! 2. adopts its queue once (`AdoptedStream::new`: the queue's context is checked, and
//!    holo retains the queue while it uses it);
//! 3. for every frame, `device_array_on(its queue)`: a barrier on its queue waits for the
//!    camera's marker — the host never waits; it resolves the array to its `cl_mem` and
//!    offset (`OpenClDevice::resolve`), runs its kernel `out[i] = frame[offset + i] + 1`
//!    on its queue, enqueues the read of `out`, and waits once (`synchronize_stream`);
//! 4. drops the array: its release marker goes on the caller's queue, so the slot goes back
//!    to the camera's pool only after the kernel ran.
//!
//! Then a second run where the caller **gives holo its context first** (option 1): the
//! caller creates a `cl_context` of its own, holo is opened on it
//! (`OpenClDevice::from_context`) and makes its queues and pool there, and the caller's
//! queue in that context takes the frames the same way.
//!
//! OpenCL device 0 (`[deployment] device`) runs it: PoCL runs OpenCL on the CPU (Debian:
//! `apt-get install pocl-opencl-icd ocl-icd-libopencl1`). With no OpenCL device the
//! example says so and runs the camera on holo's software device with a plain copy in
//! place of the caller's kernel; `HOLO_REQUIRE_DEVICE=opencl` makes that an error.
//!
//! ```text
//! cargo run -p holo-examples --example device_array_opencl -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::ffi::c_void;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use holo_runtime::app::{App, AppArgs, HumanOutput};
use holo_runtime::device::{
    AdoptedStream, DeviceBackend, DeviceId, OpenClDevice, OpenClQueuePtr, SoftwareDevice,
    StreamHandle, StreamOrQueue,
};
use holo_runtime::plan::ExecutionPlan;
use holo_runtime::{
    ChannelSubscriber, CompileOptions, DType, DeviceArray, EmitOptions, Error, ErrorCode,
    ExecutionContext, Graph, Operator, Output, ParamSchema, Result, RunSession, SessionOptions,
    SubscriberOptions, Tensor, TensorLoanRequest, TopicOptions, operator,
};
use opencl3::types::{cl_command_queue, cl_context, cl_device_id, cl_kernel, cl_mem, cl_program};

/// The topic the camera's frames are exported under.
const TOPIC: &str = "camera/frames";

/// The caller's kernel: one work item per byte of the frame.
const KERNEL: &str = r"
__kernel void brighten(__global const uchar* frame, ulong offset, __global uchar* out) {
    size_t i = get_global_id(0);
    out[i] = frame[offset + i] + 1;
}
";

/// Where the camera's pool lives.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.DeviceArrayOpenCl.Deployment", version = 1)]
struct DeploymentParams {
    /// The OpenCL device (`opencl:N`: every device of the first platform, then the next).
    #[param(default = 0)]
    device: u32,
    /// Frames the topic queues for the caller before the camera waits for it.
    #[param(min = 1, max = 64, default = 4)]
    client_depth: u32,
}

/// The camera source.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.DeviceArrayOpenCl.Camera", version = 1)]
struct CameraParams {
    /// Bytes per frame (at most 4096).
    #[param(min = 1, max = 4096, default = 4096)]
    frame_bytes: u64,
}

/// Fills frame k with `k % 251` on its runtime queue, and numbers it k: 250 frames a
/// second, as a camera would.
#[operator(params = CameraParams, trigger = clock(hz = 250))]
struct Camera {
    // `device`: the bound device's memory — OpenCL global memory on `opencl:N`, and CUDA
    // device memory where the software device stands in (no OpenCL here). The camera
    // calls no API-specific function, so it runs unchanged on either.
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 4096)]
    frame: Output<Tensor>,
    frame_bytes: u64,
    k: u64,
}

impl Operator for Camera {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let queue = ctx.cuda_stream()?; // the partition's queue on an OpenCL device
        let device = Arc::clone(
            ctx.device()
                .ok_or_else(|| Error::new(ErrorCode::DeviceUnavailable, "no device"))?,
        );
        let loan = match self.frame.allocate_tensor(TensorLoanRequest {
            shape: &[self.frame_bytes],
            dtype: DType::U8,
        }) {
            Ok(loan) => loan,
            // Every slot is queued for, held by or retiring from the caller: skip a frame.
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let writer = loan.write(queue)?;
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
        let frame = writer.commit()?; // a marker on the camera's queue; no wait
        match self
            .frame
            .emit(frame, EmitOptions::default().with_frame(self.k))
        {
            Ok(()) => {
                self.k += 1;
                Ok(())
            }
            // The caller's queue of frames is full: the frame is dropped, the camera goes on.
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn cl_error(call: &str, code: i32) -> Error {
    Error::new(
        ErrorCode::Internal,
        format!(
            "{call} failed: {} ({code})",
            opencl3::error_codes::error_text(code)
        ),
    )
}

fn handle<T>(raw: u64) -> *mut T {
    std::ptr::with_exposed_provenance_mut(usize::try_from(raw).unwrap_or(usize::MAX))
}

fn raw<T>(handle: *mut T) -> u64 {
    handle.expose_provenance() as u64
}

/// What the caller owns in one context: its queue, its program and kernel, its output
/// buffer — and the context itself when it made it.
struct Caller {
    context: cl_context,
    owns_context: bool,
    queue: cl_command_queue,
    program: cl_program,
    kernel: cl_kernel,
    out: cl_mem,
    len: usize,
}

impl Caller {
    /// Creates the caller's objects in `context` (on `device`), for frames of `len` bytes.
    /// `owns_context`: the caller made the context and releases it when done.
    fn new(
        context: cl_context,
        device: cl_device_id,
        len: usize,
        owns_context: bool,
    ) -> Result<Self> {
        let mut caller = Caller {
            context,
            owns_context,
            queue: std::ptr::null_mut(),
            program: std::ptr::null_mut(),
            kernel: std::ptr::null_mut(),
            out: std::ptr::null_mut(),
            len,
        };
        // SAFETY: a live context and a device of it; in order, no profiling.
        caller.queue = unsafe { opencl3::command_queue::create_command_queue(context, device, 0) }
            .map_err(|e| cl_error("clCreateCommandQueue", e))?;
        caller.program = opencl3::program::create_program_with_source(context, &[KERNEL])
            .map_err(|e| cl_error("clCreateProgramWithSource", e))?;
        opencl3::program::build_program(caller.program, &[device], c"", None, std::ptr::null_mut())
            .map_err(|e| cl_error("clBuildProgram", e))?;
        caller.kernel = opencl3::kernel::create_kernel(caller.program, c"brighten")
            .map_err(|e| cl_error("clCreateKernel", e))?;
        // SAFETY: a live context; a plain device buffer, no host pointer.
        caller.out = unsafe {
            opencl3::memory::create_buffer(
                context,
                opencl3::memory::CL_MEM_READ_WRITE,
                len,
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| cl_error("clCreateBuffer", e))?;
        Ok(caller)
    }

    fn queue(&self) -> OpenClQueuePtr {
        // SAFETY: the queue lives until `self` drops, after every hand-off made on it.
        unsafe { OpenClQueuePtr::from_raw(raw(self.queue)) }
    }

    /// Runs the kernel on the array's bytes on the caller's queue, reads the result back,
    /// and waits once.
    fn brighten(&self, device: &OpenClDevice, array: &DeviceArray<'_>) -> Result<Vec<u8>> {
        let (mem, offset) = device.resolve(array.data_ptr())?.ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                "a device frame resolved to host memory",
            )
        })?;
        let frame: cl_mem = handle(mem);
        let offset = offset as u64;
        let mut host = vec![0_u8; self.len];
        // SAFETY: the arguments match the kernel's signature; the frame's cl_mem stays live
        // while the array does, and the array's barrier orders the kernel after the
        // camera's fill; `host` is not touched until the queue finished.
        unsafe {
            let set = |i: u32, size: usize, value: *const c_void| {
                opencl3::kernel::set_kernel_arg(self.kernel, i, size, value)
                    .map_err(|e| cl_error("clSetKernelArg", e))
            };
            set(0, size_of::<cl_mem>(), (&raw const frame).cast())?;
            set(1, size_of::<u64>(), (&raw const offset).cast())?;
            set(2, size_of::<cl_mem>(), (&raw const self.out).cast())?;
            let global = self.len;
            let event = opencl3::command_queue::enqueue_nd_range_kernel(
                self.queue,
                self.kernel,
                1,
                std::ptr::null(),
                &raw const global,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
            .map_err(|e| cl_error("clEnqueueNDRangeKernel", e))?;
            opencl3::event::release_event(event).map_err(|e| cl_error("clReleaseEvent", e))?;
            let event = opencl3::command_queue::enqueue_read_buffer(
                self.queue,
                self.out,
                opencl3::types::CL_NON_BLOCKING,
                0,
                self.len,
                host.as_mut_ptr().cast(),
                0,
                std::ptr::null(),
            )
            .map_err(|e| cl_error("clEnqueueReadBuffer", e))?;
            opencl3::event::release_event(event).map_err(|e| cl_error("clReleaseEvent", e))?;
        }
        array.synchronize_stream()?; // the one host wait: the kernel and the read ran
        Ok(host)
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        // SAFETY: the caller's own references, each released once (null: never made).
        unsafe {
            if !self.queue.is_null() {
                let _ = opencl3::command_queue::finish(self.queue);
            }
            if !self.out.is_null() {
                let _ = opencl3::memory::release_mem_object(self.out);
            }
            if !self.kernel.is_null() {
                let _ = opencl3::kernel::release_kernel(self.kernel);
            }
            if !self.program.is_null() {
                let _ = opencl3::program::release_program(self.program);
            }
            if !self.queue.is_null() {
                let _ = opencl3::command_queue::release_command_queue(self.queue);
            }
            if self.owns_context {
                let _ = opencl3::context::context::release_context(self.context);
            }
        }
    }
}

/// How the caller reads each frame.
enum Reader {
    /// Its own kernel on its own queue, in `device`'s context.
    Kernel(Arc<OpenClDevice>, Caller),
    /// No OpenCL here: a plain copy on a stream of the software device.
    Copy,
}

/// The caller: takes the frames of `camera/frames` until the session is idle or `limit`
/// passes, and checks every byte its kernel wrote (`frame + 1`).
fn client(
    session: &RunSession,
    reader: &Reader,
    limit: Option<Duration>,
    human: HumanOutput,
    kept: &ClientStream,
) -> Result<()> {
    let device = session
        .device()
        .ok_or_else(|| Error::new(ErrorCode::DeviceUnavailable, "the session has no device"))?;
    let (queue, bump): (StreamOrQueue, u8) = match reader {
        Reader::Kernel(_, caller) => (caller.queue().into(), 1),
        Reader::Copy => (StreamOrQueue::Backend(device.create_stream()?), 0),
    };
    // The queue's context is checked once; holo retains the queue while it uses it.
    let adopted = AdoptedStream::new(device, queue)?;
    let mut frames: ChannelSubscriber =
        ChannelSubscriber::attach(session, TOPIC, SubscriberOptions::DEFAULT)?;
    let started = Instant::now();
    let mut received = 0_u64;
    let outcome = loop {
        if limit.is_some_and(|l| started.elapsed() >= l) {
            break Ok(());
        }
        let tensor = match frames.receive(Duration::from_millis(20)) {
            Ok(Some(t)) => t,
            Ok(None) if session.wait_idle(Duration::ZERO) => break Ok(()),
            Ok(None) => continue,
            Err(e) if e.code() == ErrorCode::Cancelled => break Ok(()),
            Err(e) => break Err(e),
        };
        // A barrier on the caller's queue waits for the camera's marker; no host wait.
        let array = tensor.into_device_array_on(&adopted)?;
        let frame = frames.last_info().frame;
        let bytes = match reader {
            Reader::Kernel(cl, caller) => caller.brighten(cl, &array)?,
            Reader::Copy => array
                .copy_to_host_async(vec![0; array.byte_size()])?
                .synchronize_stream()?,
        };
        let expect = u8::try_from(frame % 251).unwrap_or(0) + bump;
        if let Some(i) = bytes.iter().position(|&b| b != expect) {
            break Err(Error::new(
                ErrorCode::ProtocolError,
                format!(
                    "byte {i} of frame {frame} is {}, expected {expect}",
                    bytes[i]
                ),
            ));
        }
        received += 1;
        // `array` drops here: its release marker goes on the caller's queue.
    };
    drop(frames);
    adopted.synchronize()?;
    if let (Reader::Copy, StreamOrQueue::Backend(stream)) = (reader, queue) {
        // A holo backend's stream: the slot's last handle records its release again
        // (docs/HANDOFF.md), so `main` destroys it once the session has ended.
        *kept.lock().unwrap_or_else(PoisonError::into_inner) = Some((Arc::clone(device), stream));
    }
    outcome?;
    human.println(format_args!(
        "caller: {received} frames of topic {TOPIC:?} {} on its own queue, every byte checked",
        match reader {
            Reader::Kernel(..) => "brightened by its own kernel",
            Reader::Copy => "copied",
        }
    ));
    Ok(())
}

/// The camera graph, exported under `TOPIC`, bound to device `device`.
fn graph(
    camera: holo_runtime::ParamSet<CameraParams>,
    device: DeviceId,
    depth: u32,
) -> Result<(Graph, CompileOptions)> {
    let mut graph = Graph::new();
    let source = Camera {
        frame: Output::default(),
        frame_bytes: camera.values().frame_bytes,
        k: 0,
    };
    let cam = graph.add_operator("camera", source, camera)?;
    graph.export_topic(cam.frame, TOPIC, TopicOptions::DEFAULT.with_depth(depth));
    let mut options = CompileOptions::default();
    // The device — `opencl:N`, API and ordinal — is named in the deployment binding, never
    // guessed: the plan shows it, its context and its queues.
    options
        .deployment
        .bind_tensor_output_device("camera", "frame", device);
    Ok((graph, options))
}

/// A caller's failure, for `main` to report once the session has ended.
type Failure = Arc<Mutex<Option<Error>>>;

/// The copying caller's stream and its device, destroyed by `main` once the session has
/// ended.
type ClientStream = Arc<Mutex<Option<(Arc<dyn DeviceBackend>, StreamHandle)>>>;

/// The second run: the caller makes a context, gives it to holo, and takes `frames` frames
/// on its queue there.
fn given_context_run(
    cl: &OpenClDevice,
    camera: holo_runtime::ParamSet<CameraParams>,
    depth: u32,
    frames: u64,
    human: HumanOutput,
) -> Result<()> {
    let device: cl_device_id = handle(cl.native_device());
    let context = opencl3::context::context::create_context(
        &[device],
        std::ptr::null(),
        None,
        std::ptr::null_mut(),
    )
    .map_err(|e| cl_error("clCreateContext", e))?;
    let len = usize::try_from(camera.values().frame_bytes).unwrap_or(0);
    let caller = Caller::new(context, device, len, true)?;
    // SAFETY: the caller's live context; holo retains it.
    let given = unsafe { OpenClDevice::from_context(raw(context)) }?;
    human.println(format_args!(
        "given context: holo runs on {} in the caller's cl_context {:#x} (context given: {})",
        given.name(),
        given.native_context(),
        given.context_was_given()
    ));
    let backend: Arc<dyn DeviceBackend> = Arc::clone(&given) as Arc<dyn DeviceBackend>;
    let (graph, options) = graph(camera, given.device_id(), depth)?;
    let plan = holo_runtime::compile(&graph, options)?;
    let session = RunSession::start(
        graph,
        &plan,
        SessionOptions::frames(frames).on_device(Arc::clone(&backend)),
    )?;
    let reader = Reader::Kernel(given, caller);
    // A kernel reader: its queue is the caller's own, nothing for `kept`.
    let kept = ClientStream::default();
    let result = client(
        &session,
        &reader,
        Some(Duration::from_secs(30)),
        human,
        &kept,
    );
    session.stop();
    let report = session.join();
    result?;
    report?;
    Ok(())
}

fn main() -> ExitCode {
    let failure = Failure::default();
    let result = App::new(
        AppArgs::from_env(),
        include_str!("config/device_array_opencl.toml"),
    )
    .and_then(|mut app| {
        let human = app.human_output();
        human.println(
            "device_array_opencl: camera (holo's queue) → topic \"camera/frames\" → the caller's kernel on its own queue",
        );
        let deployment = app.params::<DeploymentParams>("deployment")?;
        let camera = app.params::<CameraParams>("camera")?;
        let (ordinal, depth) = (deployment.values().device, deployment.values().client_depth);
        let len = usize::try_from(camera.values().frame_bytes).unwrap_or(0);
        let (reader, device): (Rc<Reader>, Arc<dyn DeviceBackend>) = match OpenClDevice::open(ordinal) {
            Ok(cl) => {
                human.println(format_args!(
                    "adopted context: holo runs on opencl:{ordinal} = {} in its own cl_context {:#x}; the caller creates its queue there",
                    cl.name(),
                    cl.native_context()
                ));
                let caller = Caller::new(handle(cl.native_context()), handle(cl.native_device()), len, false)?;
                let backend: Arc<dyn DeviceBackend> = Arc::clone(&cl) as Arc<dyn DeviceBackend>;
                (Rc::new(Reader::Kernel(cl, caller)), backend)
            }
            Err(e) if std::env::var("HOLO_REQUIRE_DEVICE").as_deref() == Ok("opencl") => {
                return Err(e.at(app.config_location("deployment.device")));
            }
            // This machine has OpenCL devices, just not this one: a wrong ordinal in the
            // configuration, not a machine without OpenCL.
            Err(e) if holo_runtime::device::opencl_device_count().is_ok_and(|n| n > 0) => {
                return Err(e.at(app.config_location("deployment.device")));
            }
            Err(e) => {
                human.println(format_args!(
                    "no OpenCL device here ({e}): the camera runs on holo's software device and the caller copies instead of running its kernel; set HOLO_REQUIRE_DEVICE=opencl to make this an error"
                ));
                (Rc::new(Reader::Copy), SoftwareDevice::new() as Arc<dyn DeviceBackend>)
            }
        };
        let bound = device.device_id();
        app.with_device(device);
        let (g, options) = graph(camera.clone(), bound, depth)?;
        let limit = app
            .args()
            .duration
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        let client_failure = Arc::clone(&failure);
        let client_reader = Rc::clone(&reader);
        let kept = ClientStream::default();
        let client_kept = Arc::clone(&kept);
        app.on_session(move |_plan: &ExecutionPlan, session, human| {
            if let Err(e) = client(session, &client_reader, limit, human, &client_kept) {
                session.stop();
                *client_failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
            }
        });
        let report = app.run(g, options)?;
        // The session has ended: no handle of a frame is left, the stream may go.
        if let Some((device, stream)) = kept.lock().unwrap_or_else(PoisonError::into_inner).take() {
            device.destroy_stream(stream)?;
        }
        if let Some(e) = failure.lock().unwrap_or_else(PoisonError::into_inner).take() {
            return Err(e.at("the caller (adopted context)"));
        }
        // Only printing was asked for, or no OpenCL here: no second run.
        if let (Some(_), Reader::Kernel(cl, _)) = (report, &*reader) {
            let frames = app.args().frames.unwrap_or(100);
            given_context_run(cl, camera, depth, frames, human)
                .map_err(|e| e.at("the caller (given context)"))?;
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
