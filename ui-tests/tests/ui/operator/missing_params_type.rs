use holo_runtime::{operator, Output, Tensor};

#[operator(params)]
struct Resize {
    output: Output<Tensor>,
}

fn main() {}
