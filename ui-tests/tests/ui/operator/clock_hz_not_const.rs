use holo_runtime::{operator, Output};

fn fps() -> u64 {
    30
}

#[operator(trigger = clock(hz = fps()))]
struct Tick {
    out: Output<u64>,
}

fn main() {}
