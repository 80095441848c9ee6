use holo_runtime::{operator, Input};

#[operator(trigger = every_frame)]
struct Fusion {
    frames: Input<u64>,
}

fn main() {}
