use holo_runtime::{operator, Output, Tensor};

#[operator(parms = NoParams)]
struct Resize {
    output: Output<Tensor>,
}

fn main() {}
