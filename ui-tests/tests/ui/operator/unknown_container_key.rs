use holo_runtime::{operator, Input, Output, Tensor};

#[operator(parms = NoParams)]
struct Resize {
    output: Output<Tensor>,
}

fn main() {}
