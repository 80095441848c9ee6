use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(optional)]
    output: Output<Tensor>,
}

fn main() {}
