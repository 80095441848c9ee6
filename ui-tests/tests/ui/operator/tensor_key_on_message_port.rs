use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    #[output(dtype = u8)]
    count: Output<u64>,
}

fn main() {}
