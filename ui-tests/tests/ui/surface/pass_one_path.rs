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
