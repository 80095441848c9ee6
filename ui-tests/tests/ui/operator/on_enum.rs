use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
enum Resize {
    A,
}

fn main() {}
