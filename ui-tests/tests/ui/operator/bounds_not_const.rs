use holo_runtime::{operator, Output, Tensor};

fn frame_bytes() -> u64 {
    640 * 480
}

#[operator]
struct Camera {
    #[output(storage = runtime_pool, memory = host, bounds = frame_bytes())]
    frames: Output<Tensor>,
}

fn main() {}
