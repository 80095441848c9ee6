use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[input(dtype = u8)]
    output: Output<Tensor>,
}

fn main() {}
