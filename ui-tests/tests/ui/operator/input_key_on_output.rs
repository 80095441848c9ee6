use holo_runtime::{operator, Output};

#[operator]
struct Camera {
    #[output(history = 4)]
    frames: Output<u64>,
}

fn main() {}
