use holo_runtime::{operator, Input, ParamSchema};

#[derive(Clone, ParamSchema)]
#[param(schema = "ui.HistoryNotAParameterCount", version = 1)]
struct P {
    #[param(recompile_required, default = 4)]
    depth: u32,
}

const DEPTH: u32 = 4;

#[operator(params = P)]
struct Recorder {
    #[input(history = DEPTH * 2)]
    frames: Input<u64>,
}

fn main() {}
