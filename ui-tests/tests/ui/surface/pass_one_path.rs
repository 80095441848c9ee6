// The documented paths: the crate root, then `plan`, `spec`, `channel`, `device`, `app`,
// `params`, `codes` and `generation_codes`.
use holo_runtime::app::App;
use holo_runtime::channel::{BufferRef, OrderingDomain, SlotRef};
use holo_runtime::device::{DeviceBackend, StreamHandle};
use holo_runtime::params::SchemaDescriptor;
use holo_runtime::plan::{CudaComputeStreamPolicy, ExecutionPlan, PortRateRecord};
use holo_runtime::spec::{OperatorSpec, PortSpec};
use holo_runtime::{
    CompileOptions, DType, FrameInfo, Graph, RateGenerationCode, Refused, RunSession, Tensor,
    codes, generation_codes,
};

fn main() {
    let _ = (codes::GRAPH_CYCLE, generation_codes::RATE_INVALID, DType::U8);
    let _ = std::mem::size_of::<(
        Option<App>,
        Option<BufferRef>,
        Option<OrderingDomain>,
        Option<SlotRef>,
        Option<StreamHandle>,
        Option<Box<dyn DeviceBackend>>,
        Option<SchemaDescriptor>,
        Option<CudaComputeStreamPolicy>,
        Option<ExecutionPlan>,
        Option<PortRateRecord>,
        Option<OperatorSpec<holo_runtime::NoParams>>,
        Option<PortSpec<holo_runtime::NoParams>>,
        Option<CompileOptions>,
        Option<FrameInfo>,
        Option<Graph>,
        Option<RateGenerationCode>,
        Option<Refused<u8>>,
        Option<RunSession>,
        Option<Tensor>,
    )>();
}

/// The builders that replace struct literals.
#[allow(dead_code)]
fn options() {
    use holo_runtime::{
        AutomaticQueueSizing, ConnectionOptions, CudaExecutionOptions, EmitOptions, PartitionSpec,
        Partitioning, QueuePolicy, RateRatio, SessionOptions,
    };
    let _ = ConnectionOptions::default()
        .with_queue_depth(4)
        .with_policy(QueuePolicy::DropOldest);
    let _ = EmitOptions::default()
        .with_capture_time(std::time::Instant::now())
        .with_frame(7);
    let _ = SessionOptions::frames(3).with_idle_spin(std::time::Duration::ZERO);
    let _ = CompileOptions::default()
        .with_partitioning(Partitioning::Authored(vec![PartitionSpec::new("p", ["a"])]))
        .with_cuda_execution(
            CudaExecutionOptions::default()
                .with_compute_stream_policy(CudaComputeStreamPolicy::default()),
        )
        .with_default_queue_depth(2)
        .with_automatic_queue_sizing(
            AutomaticQueueSizing::default().with_headroom_ratio(RateRatio::new(3, 2)),
        )
        .with_max_fanout_release_streams(4);
}
