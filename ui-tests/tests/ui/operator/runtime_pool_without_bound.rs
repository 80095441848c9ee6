use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(storage = runtime_pool, memory = host, dtype = u8)]
    output: Output<Tensor>,
}

fn main() {}
