use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(rank = 9)]
    output: Output<Tensor>,
}

fn main() {}
