use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(max_rank = 0)]
    output: Output<Tensor>,
}

fn main() {}
