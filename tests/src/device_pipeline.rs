//! A running session with a device pool: a source filling 64-byte device frames on its
//! stream, a sink dropping them. What a test needs when it needs the session's partition
//! threads and retirement worker to exist (`fork.rs`, `worker_placement.rs`).

use std::sync::Arc;

use holo_runtime::device::DeviceBackend;
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ExecutionContext, Graph, Input,
    Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest,
    compile, operator,
};

/// Fills each frame with 7 on its stream; a frame it cannot loan is skipped.
#[operator]
pub struct DeviceSource {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 64)]
    frames: Output<Tensor>,
}

impl DeviceSource {
    /// A source with an unbound output (the graph binds it).
    pub fn new() -> Self {
        Self {
            frames: Output::default(),
        }
    }
}

impl Default for DeviceSource {
    fn default() -> Self {
        Self::new()
    }
}

impl Operator for DeviceSource {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device"));
        let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let guard = loan.write(stream)?;
        // SAFETY: the guard owns the slot until commit; the fill stays inside it.
        unsafe { device.memset_async(guard.device_ptr(), 7, guard.byte_size(), guard.stream())? };
        let _ = self.frames.emit(guard.commit()?, EmitOptions::default());
        Ok(())
    }
}

/// Receives and drops every frame.
#[operator]
pub struct DeviceSink {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
}

impl Operator for DeviceSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

/// The session `DeviceSource` → `DeviceSink` on `device`, running until stopped.
///
/// # Panics
/// If the graph does not compile or the session does not start.
pub fn device_session(device: &Arc<dyn DeviceBackend>) -> RunSession {
    let mut g = Graph::new();
    let params = || ParamSet::defaults().unwrap();
    let src = g
        .add_operator("src", DeviceSource::new(), params())
        .unwrap();
    let sink = g
        .add_operator(
            "sink",
            DeviceSink {
                frames: Input::default(),
            },
            params(),
        )
        .unwrap();
    g.add_flow(src.frames, sink.frames, ConnectionOptions::default());
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.ordinal());
    let plan = compile(&g, options).unwrap();
    RunSession::start(
        g,
        &plan,
        SessionOptions::default().on_device(Arc::clone(device)),
    )
    .unwrap()
}
