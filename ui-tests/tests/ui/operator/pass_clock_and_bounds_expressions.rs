use holo_runtime::{operator, Output, ParamSchema, Tensor};

const TICK_HZ: u64 = 50;
const FRAME_BYTES: u64 = 640 * 480;

mod limits {
    pub const SLOT_BYTES: u64 = 1 << 20;
}

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "ui.ClockAndBounds", version = 1)]
struct P {
    #[param(min = 1, max = 240, recompile_required, default = 60)]
    fps: u32,
}

#[operator(trigger = clock(hz = TICK_HZ))]
struct ConstTick {
    #[output(storage = runtime_pool, memory = host, bounds = FRAME_BYTES)]
    frames: Output<Tensor>,
}

#[operator(trigger = clock(hz = 30 * 2))]
struct ProductTick {
    #[output(storage = runtime_pool, memory = host, bounds = 64 * 1024)]
    frames: Output<Tensor>,
}

#[operator(trigger = clock(hz = u64::MAX / (1 << 40)))]
struct PathTick {
    #[output(storage = runtime_pool, memory = host, bounds = limits::SLOT_BYTES)]
    frames: Output<Tensor>,
}

#[operator(params = P, trigger = clock(hz = param_ref!(P::fps)))]
struct Camera {
    #[output(storage = runtime_pool, memory = host, bounds = FRAME_BYTES * 2)]
    frames: Output<Tensor>,
}

fn main() {}
