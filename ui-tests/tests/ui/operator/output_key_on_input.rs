use holo_runtime::{operator, Input, Tensor};

#[operator]
struct Resize {
    #[input(storage = runtime_pool)]
    input: Input<Tensor>,
}

fn main() {}
