use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(storage = pool, memory = host, bounds = 4096)]
    output: Output<Tensor>,
}

fn main() {}
