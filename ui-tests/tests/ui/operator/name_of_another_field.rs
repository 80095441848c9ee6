use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    input: Input<Tensor>,
    #[output(name = "input")]
    output: Output<Tensor>,
}

fn main() {}
