use holo_runtime::{operator, Input, ParamSchema};

#[derive(Clone, ParamSchema)]
#[param(schema = "ui.HistoryOfRuntimeField", version = 1)]
struct P {
    #[param(default = 4)]
    depth: u32,
}

#[operator(params = P)]
struct Recorder {
    #[input(history = parameter_count(param_ref!(P::depth)))]
    frames: Input<u64>,
}

fn main() {}
