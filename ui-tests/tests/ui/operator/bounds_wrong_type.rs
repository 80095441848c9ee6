use holo_runtime::{operator, Output, Tensor};

const FRAME_BYTES: usize = 640 * 480;

#[operator]
struct Camera {
    #[output(storage = runtime_pool, memory = host, bounds = FRAME_BYTES)]
    frames: Output<Tensor>,
}

fn main() {}
