use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    input: Input,
}

fn main() {}
