use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize<T> {
    input: Input<T>,
}

fn main() {}
