use holo_runtime::{operator, Input, Tensor};

#[operator]
struct Resize {
    #[input(dtype = u7)]
    input: Input<Tensor>,
}

fn main() {}
