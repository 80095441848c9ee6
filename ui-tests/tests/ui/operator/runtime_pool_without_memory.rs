use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(storage = runtime_pool, bounds = 4096)]
    output: Output<Tensor>,
}

fn main() {}
