use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    #[output(rank = 9)]
    output: Output<Tensor>,
}

fn main() {}
