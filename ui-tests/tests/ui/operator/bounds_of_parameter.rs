use holo_runtime::{operator, Output, ParamSchema, Tensor};

#[derive(Clone, ParamSchema)]
#[param(schema = "ui.BoundsOfParameter", version = 1)]
struct P {
    #[param(recompile_required, default = 4096)]
    slot_bytes: u64,
}

#[operator(params = P)]
struct Camera {
    #[output(storage = runtime_pool, memory = host, bounds = param_ref!(P::slot_bytes))]
    frames: Output<Tensor>,
}

fn main() {}
