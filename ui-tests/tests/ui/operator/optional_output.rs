use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    #[output(optional)]
    output: Output<Tensor>,
}

fn main() {}
