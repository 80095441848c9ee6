use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(rank = "3")]
    output: Output<Tensor>,
}

fn main() {}
