//! A session in one process serves its camera frames to a subscriber in another
//! (docs/IPC.md).
//!
//! The camera fills a 4 KiB frame a millisecond and its output is exported as the topic
//! `camera/frames` **across processes** (`TopicOptions::across_processes`), and the session
//! serves the topic on a socket named by its namespace. The frames are **device memory**
//! on the session's device — a CUDA device where one opens (and `HOLO_DEVICE` does not say
//! otherwise), else holo's software device, whose `DeviceIpc` stands in for CUDA's: the
//! pool is a virtual-memory allocation (software: a memfd) the consumer maps once, the
//! camera's stream fills frame k with `k % 251 + 1` and writes the slot's fence, and the
//! consumer's stream waits for the fence before it reads — no host wait on either side. On
//! a device that cannot share its memory (OpenCL) they are **host memory** (frame k: k in
//! its first 8 bytes, then `k % 251`) in a shared-memory pool. Right after the session
//! starts this example
//!
//! 1. writes the plan's endpoint catalog (`session.endpoint_catalog()`) to a file — the
//!    one artifact the two processes share;
//! 2. starts the consumer as a second process (this binary with `--consume <catalog>`;
//!    `cargo run -p holo-examples --example ipc_consumer -- <catalog>` is the same
//!    consumer, for a terminal of its own), which attaches by topic name
//!    (`ProcessSubscriber::attach`): a handshake checks the catalog against the running
//!    session, takes a seat and maps the shared pool;
//! 3. runs; each frame crosses as an iceoryx2 descriptor of its slot — no copy — and the
//!    consumer checks every byte and that the frame ids follow each other. A slot goes
//!    back to the camera's pool when the consumer's tensor drops (its release word), or
//!    when the consumer's process exits;
//! 4. at the end the session stops serving: the consumer's next receive is `Cancelled`
//!    and it reports what it received.
//!
//! ```text
//! cargo run -p holo-examples --example ipc_producer -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use holo_examples::ipc::{TOPIC, consume, device_fill, fill_frame};
use holo_runtime::app::{App, AppArgs};
use holo_runtime::{
    CompileOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph, Operator, Output,
    ParamSchema, Result, Tensor, TensorLoanRequest, TensorOutputLoan, TopicOptions, operator,
};

/// How the topic is served.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.IpcProducer.Deployment", version = 1)]
struct DeploymentParams {
    /// Frames queued for the consumer before the camera waits for it.
    #[param(min = 1, max = 64, default = 4)]
    consumer_depth: u32,
    /// Frames the consumer may hold at once (its descriptors in flight included).
    #[param(min = 1, max = 64, default = 2)]
    consumer_holds: u32,
}

/// The camera source.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.IpcProducer.Camera", version = 1)]
struct CameraParams {
    /// Bytes per frame (8 to 4096).
    #[param(min = 8, max = 4096, default = 4096)]
    frame_bytes: u64,
}

/// Fills frame k on the host and numbers it k, a thousand frames a second.
#[operator(params = CameraParams, trigger = clock(hz = 1000))]
struct Camera {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 4096)]
    frame: Output<Tensor>,
    frame_bytes: u64,
    k: u64,
}

impl Operator for Camera {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(loan) = loan(&mut self.frame, self.frame_bytes)? else {
            return Ok(());
        };
        let k = self.k;
        let frame = loan.write_host_and_commit(|b| fill_frame(k, b))?;
        emitted(
            self.frame.emit(frame, EmitOptions::default().with_frame(k)),
            &mut self.k,
        )
    }
}

/// A slot for the next frame of `bytes`; `None` when every slot is queued for or held by
/// the consumer: the camera skips a frame.
fn loan(frame: &mut Output<Tensor>, bytes: u64) -> Result<Option<TensorOutputLoan>> {
    match frame.allocate_tensor(TensorLoanRequest {
        shape: &[bytes],
        dtype: DType::U8,
    }) {
        Ok(loan) => Ok(Some(loan)),
        Err(e) if e.code() == ErrorCode::ResourceExhausted => Ok(None),
        Err(e) => Err(e),
    }
}

/// Frame k was emitted: the next is k + 1. The consumer's queue was full
/// (`Backpressured`): the frame is dropped, the camera goes on.
fn emitted(result: Result<()>, k: &mut u64) -> Result<()> {
    match result {
        Ok(()) => {
            *k += 1;
            Ok(())
        }
        Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
        Err(e) => Err(e),
    }
}

/// Fills frame k on the camera's CUDA stream (`k % 251 + 1` in every byte), a thousand
/// frames a second: the device-memory camera.
#[operator(params = CameraParams, trigger = clock(hz = 1000))]
struct DeviceCamera {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 4096)]
    frame: Output<Tensor>,
    frame_bytes: u64,
    k: u64,
}

impl Operator for DeviceCamera {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(loan) = loan(&mut self.frame, self.frame_bytes)? else {
            return Ok(());
        };
        let k = self.k;
        let frame = loan.write_and_commit(ctx.cuda_stream()?, |device, ptr, n, stream| {
            // SAFETY: the loan's slot, written only on this stream until committed.
            unsafe { device.memset_async(ptr, device_fill(k), n, stream) }
        })?;
        emitted(
            self.frame.emit(frame, EmitOptions::default().with_frame(k)),
            &mut self.k,
        )
    }
}

/// The consumer process and its stdout, once started.
type Consumer = Arc<Mutex<Option<(Child, BufReader<ChildStdout>)>>>;

/// What went wrong before the consumer process ran (the catalog or the spawn), and the
/// catalog's path to remove at exit: `main` reports the one and removes the other.
#[derive(Default)]
struct Setup {
    failure: Option<String>,
    catalog: Option<std::path::PathBuf>,
}

fn build(
    app: &mut App,
    consumer: &Consumer,
    setup: &Arc<Mutex<Setup>>,
) -> Result<(Graph, CompileOptions)> {
    app.human_output().println(format_args!(
        "ipc_producer: camera → topic {TOPIC:?} across processes → a consumer process"
    ));
    let deployment = app.params::<DeploymentParams>("deployment")?;
    let camera = app.params::<CameraParams>("camera")?;
    let mut graph = Graph::new();
    let mut options = CompileOptions::default();
    let frame_bytes = camera.values().frame_bytes;
    // Device frames where the device the session will run on can share its memory with
    // another process: a CUDA device, or the software device standing in for one.
    let device = holo_runtime::device::open_backend_from_env().ok();
    let shareable = device.as_ref().filter(|d| d.ipc().is_some());
    let frame = if let Some(d) = shareable {
        app.human_output().println(format_args!(
            "frames: device memory on the {} device, fenced on the camera's stream",
            d.backend_kind().name()
        ));
        let source = DeviceCamera {
            frame: Output::default(),
            frame_bytes,
            k: 0,
        };
        options.deployment.bind_tensor_output_device(
            "camera",
            "frame",
            holo_runtime::device::DeviceId::cuda(0),
        );
        graph.add_operator("camera", source, camera)?.frame
    } else {
        app.human_output().println(format_args!(
            "frames: host memory (this device cannot share its memory), in a shared-memory pool"
        ));
        let source = Camera {
            frame: Output::default(),
            frame_bytes,
            k: 0,
        };
        graph.add_operator("camera", source, camera)?.frame
    };
    graph.export_topic(
        frame,
        TOPIC,
        TopicOptions::DEFAULT
            .with_depth(deployment.values().consumer_depth)
            .with_holds_per_subscriber(deployment.values().consumer_holds)
            .across_processes(),
    );
    let consumer = Arc::clone(consumer);
    let setup = Arc::clone(setup);
    app.on_session(move |_plan, session, human| {
        // Stops the session: with no consumer there is nothing to serve.
        let fail = |message: String| {
            session.stop();
            setup.lock().unwrap_or_else(PoisonError::into_inner).failure = Some(message);
        };
        let path =
            std::env::temp_dir().join(format!("holo-ipc-producer-{}.toml", std::process::id()));
        if let Err(e) = session.endpoint_catalog().write(&path) {
            fail(e.to_string());
            return;
        }
        setup.lock().unwrap_or_else(PoisonError::into_inner).catalog = Some(path.clone());
        human.println(format_args!(
            "endpoint catalog written to {} (namespace {:?})",
            path.display(),
            session.endpoint_catalog().namespace
        ));
        let spawned = std::env::current_exe().and_then(|exe| {
            Command::new(exe)
                .arg("--consume")
                .arg(&path)
                .stdout(Stdio::piped())
                .spawn()
        });
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                fail(format!("cannot start the consumer process: {e}"));
                return;
            }
        };
        let Some(out) = child.stdout.take() else {
            fail("the consumer process has no stdout".to_owned());
            return;
        };
        let mut out = BufReader::new(out);
        // The consumer's first line: it attached (frames before it went to no one).
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        human.print(format_args!("{line}"));
        *consumer.lock().unwrap_or_else(PoisonError::into_inner) = Some((child, out));
    });
    Ok((graph, options))
}

fn main() -> ExitCode {
    // `args_os`: the catalog's path (under `TMPDIR`) need not be UTF-8.
    let mut raw = std::env::args_os().skip(1);
    if raw.next().is_some_and(|a| a == "--consume") {
        // The second process.
        let Some(catalog) = raw.next() else {
            eprintln!("error: --consume needs the catalog's path");
            return ExitCode::FAILURE;
        };
        return match consume(std::path::Path::new(&catalog)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("consumer: error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let consumer: Consumer = Arc::default();
    let setup = Arc::new(Mutex::new(Setup::default()));
    let code = App::main(
        AppArgs::from_env(),
        include_str!("config/ipc_producer.toml"),
        |app| build(app, &consumer, &setup),
    );
    let setup = std::mem::take(&mut *setup.lock().unwrap_or_else(PoisonError::into_inner));
    if let Some(path) = &setup.catalog {
        let _ = std::fs::remove_file(path);
    }
    if let Some(message) = setup.failure {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    // The session has ended (its `join` said BYE to the consumer): the consumer's report.
    let taken = consumer
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some((mut child, out)) = taken {
        for line in out.lines().map_while(std::io::Result::ok) {
            eprintln!("{line}");
        }
        match child.wait() {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("error: the consumer process exited with {status}");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("error: the consumer process: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    code
}
