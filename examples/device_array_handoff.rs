//! A standalone client takes a session's frames on its own stream (docs/TOPICS.md,
//! docs/HANDOFF.md).
//!
//! The session is one camera: it fills a `cuda_device` frame on its runtime stream and
//! commits it (the readiness event is recorded there), and its output is exported as the
//! topic `camera/frames`. The client is no operator: right after the session starts it
//!
//! 1. makes a stream of its own on the session's device;
//! 2. attaches to the topic by name (`ChannelSubscriber::attach`);
//! 3. for every frame, `receive_on(its stream)`: a `DeviceArray` whose stream already
//!    waits on the camera's readiness, on the device — the host never waits;
//! 4. `copy_to_host_async` on its stream (enqueued, returns at once), then
//!    `synchronize_stream`: the one wait, after which the bytes are checked;
//! 5. drops the array (its release is recorded on the client's stream, so the slot goes
//!    back to the camera's pool only after the client's copy ran), and at the end
//!    detaches. Its stream is a holo backend's (`create_stream`), whose release the slot's
//!    last handle records again (docs/HANDOFF.md, "Your stream's lifetime"): `main`
//!    destroys it once the session has ended and no handle of a frame is left.
//!
//! With no CUDA device the example says so and runs the same on holo's software device.
//! `HOLO_REQUIRE_DEVICE=cuda` makes that an error instead.
//!
//! ```text
//! cargo run -p holo-examples --example device_array_handoff -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use holo_examples::side::SideFailure;
use holo_runtime::app::{App, AppArgs, HumanOutput};
use holo_runtime::device::{DeviceBackend, StreamHandle, StreamOrQueue};
use holo_runtime::plan::ExecutionPlan;
use holo_runtime::{
    ChannelSubscriber, CompileOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Operator, Output, ParamSchema, Result, RunSession, SubscriberOptions, Tensor,
    TensorLoanRequest, TopicOptions, operator,
};

/// The topic the camera's frames are exported under.
const TOPIC: &str = "camera/frames";

/// Where the camera's pool lives.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.DeviceArrayHandoff.Deployment", version = 1)]
struct DeploymentParams {
    /// The CUDA device ordinal.
    #[param(default = 0)]
    device: u32,
    /// Frames the topic queues for the client before the camera waits for it.
    #[param(min = 1, max = 64, default = 4)]
    client_depth: u32,
}

/// The camera source.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.DeviceArrayHandoff.Camera", version = 1)]
struct CameraParams {
    /// Bytes per frame (at most 4096).
    #[param(min = 1, max = 4096, default = 4096)]
    frame_bytes: u64,
}

/// Fills frame k with `k % 251` on its runtime stream, and numbers it k: 250 frames a
/// second, as a camera would.
#[operator(params = CameraParams, trigger = clock(hz = 250))]
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
            // Every slot is queued for, held by or retiring from the client: skip a frame.
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
        let frame = writer.commit()?; // records readiness on the runtime stream; no wait
        match self
            .frame
            .emit(frame, EmitOptions::default().with_frame(self.k))
        {
            Ok(()) => {
                self.k += 1;
                Ok(())
            }
            // The client's queue is full: the frame is dropped, the camera goes on.
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The standalone client: takes the frames of `camera/frames` on its own stream until the
/// session is idle (every frame the camera made was received) or `limit` passes.
fn client(
    session: &RunSession,
    limit: Option<Duration>,
    human: HumanOutput,
    kept: &ClientStream,
) -> Result<()> {
    let device = session.device().ok_or_else(|| {
        Error::new(
            ErrorCode::DeviceUnavailable,
            "the session has no device to make the client's stream on",
        )
    })?;
    let stream = device.create_stream()?; // the client's own stream
    // Kept alive until the session has ended (`main` destroys it).
    *kept.lock().unwrap_or_else(PoisonError::into_inner) = Some((Arc::clone(device), stream));
    let mut frames: ChannelSubscriber =
        ChannelSubscriber::attach(session, TOPIC, SubscriberOptions::DEFAULT)?;
    let started = Instant::now();
    let (mut received, mut first) = (0u64, None);
    let outcome = loop {
        if limit.is_some_and(|l| started.elapsed() >= l) {
            break Ok(());
        }
        let array =
            match frames.receive_on(StreamOrQueue::Backend(stream), Duration::from_millis(20)) {
                Ok(Some(array)) => array, // the client's stream waits on the camera's writes
                Ok(None) if session.wait_idle(Duration::ZERO) => break Ok(()),
                Ok(None) => continue,
                Err(e) if e.code() == ErrorCode::Cancelled => break Ok(()),
                Err(e) => break Err(e),
            };
        let frame = frames.last_info().frame;
        first.get_or_insert(frame);
        // Enqueued on the client's stream, after the wait: returns at once.
        let copy = array.copy_to_host_async(vec![0; array.byte_size()])?;
        // The one host wait: the copy has run, the bytes are the camera's.
        let bytes = copy.synchronize_stream()?;
        let expect = u8::try_from(frame % 251).unwrap_or(0);
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
        // `array` drops here: its release is recorded on the client's stream.
    };
    drop(frames); // detaches: the seat is free, nothing of the client's stays queued
    device.synchronize_stream(stream)?;
    outcome?;
    human.println(format_args!(
        "client: {received} frames received on its own stream from topic {TOPIC:?}{}, every byte checked after copy_to_host_async + synchronize_stream",
        first.map_or(String::new(), |f| format!(" (from frame {f})")),
    ));
    Ok(())
}

/// The client's stream and its device, destroyed by `main` once the session has ended.
type ClientStream = Arc<Mutex<Option<(Arc<dyn DeviceBackend>, StreamHandle)>>>;

fn build(
    app: &mut App,
    failure: &SideFailure,
    kept: &ClientStream,
) -> Result<(Graph, CompileOptions)> {
    app.human_output().println(format_args!(
        "device_array_handoff: camera → topic {TOPIC:?} → a standalone client on its own stream"
    ));
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
    graph.export_topic(
        cam.frame,
        TOPIC,
        TopicOptions::DEFAULT.with_depth(deployment.values().client_depth),
    );
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("camera", "frame", deployment.values().device);
    // The client runs while the session does, right after it starts.
    let limit = app
        .args()
        .duration
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    let failure = failure.clone();
    let kept = Arc::clone(kept);
    app.on_session(move |_plan: &ExecutionPlan, session, human| {
        if let Err(e) = client(session, limit, human, &kept) {
            session.stop();
            failure.set(e);
        }
    });
    Ok((graph, options))
}

fn main() -> ExitCode {
    let failure = SideFailure::default();
    let kept = ClientStream::default();
    let result = App::new(
        AppArgs::from_env(),
        include_str!("config/device_array_handoff.toml"),
    )
    .and_then(|mut app| {
        let (graph, options) = build(&mut app, &failure, &kept)?;
        app.run(graph, options)
    })
    .and_then(|_| {
        // The session has ended: no handle of a frame is left, the stream may go.
        match kept.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some((device, stream)) => device.destroy_stream(stream),
            None => Ok(()),
        }
    })
    .and_then(|()| failure.check("the standalone client"));
    holo_examples::side::exit(result)
}
