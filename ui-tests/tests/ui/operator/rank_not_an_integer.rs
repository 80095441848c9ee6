use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    #[output(rank = "3")]
    output: Output<Tensor>,
}

fn main() {}
