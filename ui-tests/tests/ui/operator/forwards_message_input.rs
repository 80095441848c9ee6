use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Relay {
    counts: Input<u64>,
    frames_in: Input<Tensor>,
    #[output(forwards = counts)]
    frames_out: Output<Tensor>,
}

fn main() {}
