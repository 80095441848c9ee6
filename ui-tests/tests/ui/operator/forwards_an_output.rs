use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Relay {
    frames_in: Input<Tensor>,
    #[output(storage = pass_through)]
    copies: Output<Tensor>,
    #[output(forwards = copies)]
    frames_out: Output<Tensor>,
}

fn main() {}
