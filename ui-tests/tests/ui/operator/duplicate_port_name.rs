use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(name = "frames")]
    left: Output<Tensor>,
    #[output(name = "frames")]
    right: Output<Tensor>,
}

fn main() {}
