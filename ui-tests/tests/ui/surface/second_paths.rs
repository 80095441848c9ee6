// Every item has one path (holo_runtime's crate documentation, "Where things are"): the
// modules behind the crate root's items are private, the plan lives in `plan`, and the
// test support is not in `device`.
use holo_runtime::ExecutionPlan;
use holo_runtime::compile::CompileOptions;
use holo_runtime::device::test_backends;
use holo_runtime::graph::Graph;
use holo_runtime::session::RunSession;
use holo_runtime::tensor::Tensor;

fn main() {}
