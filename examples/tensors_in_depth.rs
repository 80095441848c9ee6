//! `tensors_in_depth` on host memory: the seed's producer and its three consumers.
//!
//! A camera source borrows a 256-byte frame from its runtime pool (`allocate_tensor`),
//! fills it with 0x2A on the host (`write_host_and_commit`) and emits it with its capture
//! time. The frame fans out to three consumers; each runs in its own partition (the
//! automatic partitioner splits a fork's legs), receives the same read-only slot and checks
//! every byte. The slot returns to the pool only when all three have dropped it.
//!
//! ```text
//! cargo run -p holo-examples --example tensors_in_depth -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;

use holo_runtime::app::{App, AppArgs};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, Operator, Output, ParamSchema, Result, Tensor, TensorLoanRequest, operator,
};

/// Parameters of the camera source.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.TensorsInDepth.Camera", version = 1)]
struct CameraParams {
    /// Bytes per frame (at most the pool's 256-byte slot).
    #[param(min = 1, max = 256, default = 256)]
    frame_bytes: u64,
    /// The byte every frame is filled with.
    #[param(default = 42)]
    fill: u8,
}

/// Parameters of a checking consumer.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.TensorsInDepth.Consumer", version = 1)]
struct ConsumerParams {
    /// The byte every received frame must hold.
    #[param(default = 42)]
    expect: u8,
}

/// Produces one frame per activation from a host runtime pool.
#[operator(params = CameraParams)]
struct CameraSource {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 256)]
    frame: Output<Tensor>,
    frame_bytes: u64,
    fill: u8,
    exhausted: u64,
}

impl Operator for CameraSource {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let loan = match self.frame.allocate_tensor(TensorLoanRequest {
            shape: &[self.frame_bytes],
            dtype: DType::U8,
        }) {
            Ok(loan) => loan,
            // Real-time: a producer that outruns its consumers drops the frame.
            Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                self.exhausted += 1;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let fill = self.fill;
        let committed = loan.write_host_and_commit(|bytes| bytes.fill(fill))?;
        match self.frame.emit(
            committed,
            EmitOptions::default().with_capture_time(ctx.activation_time()),
        ) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// Receives frames (read-only) and checks every byte.
#[operator(params = ConsumerParams)]
struct CheckingConsumer {
    #[input(memory = host, dtype = u8, rank = 1)]
    frame: Input<Tensor>,
    expect: u8,
    checked: u64,
}

impl Operator for CheckingConsumer {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(frame) = self.frame.receive() {
            let bytes = frame.data()?;
            if let Some(i) = bytes.iter().position(|&b| b != self.expect) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    format!(
                        "byte {i} of frame {} is {:#04x}, expected {:#04x}",
                        self.checked, bytes[i], self.expect
                    ),
                )
                .at(format!("operator {:?}", ctx.operator_name())));
            }
            self.checked += 1;
        }
        Ok(())
    }
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    app.human_output()
        .println("tensors_in_depth (host memory): camera → consumer_a, consumer_b, consumer_c");
    let mut graph = Graph::new();
    let camera = app.params::<CameraParams>("camera")?;
    let source = CameraSource {
        frame: Output::default(),
        frame_bytes: camera.values().frame_bytes,
        fill: camera.values().fill,
        exhausted: 0,
    };
    let camera_ports = graph.add_operator("camera", source, camera)?;
    for name in ["consumer_a", "consumer_b", "consumer_c"] {
        let params = app.params::<ConsumerParams>(name)?;
        let consumer = CheckingConsumer {
            frame: Input::default(),
            expect: params.values().expect,
            checked: 0,
        };
        let ports = graph.add_operator(name, consumer, params)?;
        graph.add_flow(
            camera_ports.frame,
            ports.frame,
            ConnectionOptions::default(),
        );
    }
    Ok((graph, CompileOptions::default()))
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/tensors_in_depth.toml"),
        build,
    )
}
