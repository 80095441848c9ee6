use holo_runtime::{operator, Input};

#[operator(trigger = on_arrival(frame))]
struct Fusion {
    frames: Input<u64>,
}

fn main() {}
