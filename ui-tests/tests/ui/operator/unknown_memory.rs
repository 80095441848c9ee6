use holo_runtime::{operator, Input, Tensor};

#[operator]
struct Resize {
    #[input(memory = gpu)]
    input: Input<Tensor>,
}

fn main() {}
