use holo_runtime::{operator, Input, ParamSchema};

#[derive(Clone, ParamSchema)]
#[param(schema = "ui.HistoryOfSensitiveField", version = 1)]
struct P {
    #[param(sensitive, recompile_required, default = 4)]
    secret_depth: u32,
}

#[operator(params = P)]
struct Recorder {
    #[input(history = parameter_count(param_ref!(P::secret_depth)))]
    frames: Input<u64>,
}

fn main() {}
