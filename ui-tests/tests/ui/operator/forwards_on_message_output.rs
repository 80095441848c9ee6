use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Relay {
    frames_in: Input<Tensor>,
    #[output(forwards = frames_in)]
    counts: Output<u64>,
}

fn main() {}
