use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(colour = 1)]
    output: Output<Tensor>,
}

fn main() {}
