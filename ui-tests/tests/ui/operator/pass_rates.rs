use holo_runtime::{operator, Input, Output, ParamSchema};

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "ui.Rates", version = 1)]
struct P {
    #[param(max = 120, recompile_required, default = 60)]
    fps: u32,
    #[param(recompile_required, default = 4)]
    history: u32,
}

#[operator(params = P, trigger = clock(rate = parameter_rate(param_ref!(P::fps))))]
struct Camera {
    #[input(window = 2, missing = reuse_last, history = parameter_count(param_ref!(P::history)), expected_rate = Rate::hz(60))]
    imu: Input<u64>,
    #[input(latest, history = 3)]
    trigger: Input<u64>,
    #[output(nominal_rate = parameter_rate(param_ref!(P::fps)), burst = 2)]
    frames: Output<u64>,
    #[output(follows(imu, RateRatio::new(1, 4)))]
    thumbnails: Output<u64>,
}

#[operator(trigger = on_arrival(frames))]
struct Sink {
    frames: Input<u64>,
}

#[operator(trigger = clock(hz = 30))]
struct Tick {
    #[output(nominal_rate = Rate::new(1, 4))]
    out: Output<u64>,
}

fn main() {}
