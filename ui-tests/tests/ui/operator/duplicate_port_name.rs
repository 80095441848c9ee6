use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    #[output(name = "frames")]
    left: Output<Tensor>,
    #[output(name = "frames")]
    right: Output<Tensor>,
}

fn main() {}
