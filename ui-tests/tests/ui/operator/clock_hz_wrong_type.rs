use holo_runtime::{operator, Output};

const FPS: u32 = 30;

#[operator(trigger = clock(hz = FPS))]
struct Tick {
    out: Output<u64>,
}

fn main() {}
