//! `tensors_in_depth` on CUDA: the seed's device-memory pattern.
//!
//! The camera borrows a 256-byte `cuda_device` slot (`allocate_tensor`), starts the device
//! write phase on its runtime stream (`write(ctx.cuda()?.stream())` — any other stream is
//! `NotSupported`), fills it with 0x2A there (`DeviceAccess::memset_async`:
//! `cuMemsetD8Async`), and `commit()` records the readiness event on that stream and
//! nothing else. The frame fans out to three consumers,
//! each in its own partition with its own stream: before a consumer gets the frame the
//! runtime has enqueued its stream's wait on the readiness event and registered that stream
//! as a release stream. Each consumer copies the frame to the host on its own stream and
//! checks every byte. The slot returns to the pool only after all three release events
//! completed, found by polling on the retirement worker.
//!
//! With no CUDA device the example says so and runs the same contract on holo's software
//! device. `HOLO_REQUIRE_DEVICE=cuda` makes that an error instead.
//!
//! ```text
//! cargo run -p holo-examples --example tensors_in_depth_cuda -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;

use holo_runtime::app::{App, AppArgs};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, Operator, Output, ParamSchema, ParamSet, Result, Tensor, TensorLoanRequest,
    operator,
};

/// Where the camera's pool lives.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.TensorsInDepthCuda.Deployment", version = 1)]
struct DeploymentParams {
    /// The CUDA device ordinal.
    #[param(default = 0)]
    device: u32,
}

/// The camera source.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.TensorsInDepthCuda.Camera", version = 1)]
struct CameraParams {
    /// Bytes per frame (at most 256).
    #[param(min = 1, max = 256, default = 256)]
    frame_bytes: u64,
    /// The fill byte.
    #[param(default = 42)]
    fill: u8,
}

/// A checking consumer.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.TensorsInDepthCuda.Consumer", version = 1)]
struct ConsumerParams {
    /// The byte every frame must hold.
    #[param(default = 42)]
    expect: u8,
}

/// Fills a device frame on the runtime stream.
#[operator(params = CameraParams)]
struct CameraSource {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 256)]
    frame: Output<Tensor>,
    frame_bytes: u64,
    fill: u8,
}

impl Operator for CameraSource {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        // The device, its context current on this thread, and this operator's stream.
        let cuda = ctx.cuda()?;
        let loan = match self.frame.allocate_tensor(TensorLoanRequest {
            shape: &[self.frame_bytes],
            dtype: DType::U8,
        }) {
            Ok(loan) => loan,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()), // drop the frame
            Err(e) => return Err(e),
        };
        let writer = loan.write(cuda.stream())?; // device write phase, runtime stream only
        // On the operator's stream, which the session keeps live: no handle check.
        // SAFETY: the writer owns the slot until commit and the fill stays inside it.
        unsafe { cuda.memset_async(writer.device_ptr(), self.fill, writer.byte_size())? };
        let committed = writer.commit()?; // records readiness — never synchronizes
        match self.frame.emit(
            committed,
            EmitOptions::default().with_capture_time(ctx.activation_time()),
        ) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// Copies each frame to the host on its own stream and checks it.
#[operator(params = ConsumerParams)]
struct CheckingConsumer {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frame: Input<Tensor>,
    expect: u8,
    host: Vec<u8>,
    checked: u64,
}

impl Operator for CheckingConsumer {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(frame) = self.frame.receive() {
            let n = frame.byte_size();
            // Already ordered after the producer's fill on this stream; the copy is one of
            // the three blocking host-access calls.
            frame.copy_to_host(&mut self.host[..n], ctx.cuda_stream()?)?;
            if let Some(i) = self.host[..n].iter().position(|&b| b != self.expect) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    format!(
                        "byte {i} of frame {} is {:#04x}, expected {:#04x}",
                        self.checked, self.host[i], self.expect
                    ),
                ));
            }
            self.checked += 1;
        }
        Ok(())
    }
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    app.human_output().println(
        "tensors_in_depth (CUDA): camera → consumer_a, consumer_b, consumer_c, each on its own stream",
    );
    let deployment = app.params::<DeploymentParams>("deployment")?;
    app.device_binding_from("deployment.device");
    let camera = app.params::<CameraParams>("camera")?;
    let mut graph = Graph::new();
    let source = CameraSource {
        frame: Output::default(),
        frame_bytes: camera.values().frame_bytes,
        fill: camera.values().fill,
    };
    let cam = graph.add_operator("camera", source, camera)?;
    for name in ["consumer_a", "consumer_b", "consumer_c"] {
        let params = app.params::<ConsumerParams>(name)?;
        let consumer = CheckingConsumer {
            frame: Input::default(),
            expect: params.values().expect,
            host: vec![0; 256],
            checked: 0,
        };
        let ports = graph.add_operator(name, consumer, params)?;
        graph.add_flow(cam.frame, ports.frame, ConnectionOptions::default());
    }
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("camera", "frame", deployment.values().device);
    let _: ParamSet<DeploymentParams> = deployment;
    Ok((graph, options))
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/tensors_in_depth_cuda.toml"),
        build,
    )
}
