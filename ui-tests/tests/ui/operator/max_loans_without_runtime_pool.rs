use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(max_loans = 2)]
    output: Output<Tensor>,
}

fn main() {}
