use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(storage = runtime_pool, memory = host, bounds = 4096, byte_span = tensor_byte_span(4096))]
    output: Output<Tensor>,
}

fn main() {}
