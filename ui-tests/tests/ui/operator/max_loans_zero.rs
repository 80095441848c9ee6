use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(storage = runtime_pool, memory = host, bounds = 4096, max_loans = 0)]
    output: Output<Tensor>,
}

fn main() {}
