use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    #[input(dtype = u8)]
    output: Output<Tensor>,
}

fn main() {}
