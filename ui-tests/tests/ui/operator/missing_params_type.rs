use holo_runtime::{operator, Input, Output, Tensor};

#[operator(params)]
struct Resize {
    output: Output<Tensor>,
}

fn main() {}
