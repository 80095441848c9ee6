use holo_runtime::{operator, Output, ParamSchema};

#[derive(Clone, ParamSchema)]
#[param(schema = "ui.ClockHzOfFloatField", version = 1)]
struct P {
    #[param(recompile_required, default = 29.97)]
    fps: f64,
}

#[operator(params = P, trigger = clock(hz = param_ref!(P::fps)))]
struct Camera {
    frames: Output<u64>,
}

fn main() {}
