use holo_runtime::{operator, Output, Tensor};

#[operator]
struct Resize {
    #[output(storage = runtime_pool, memory = host, memory_kind = parameter_memory_kind_exact(param_ref!(NoParams::kind)), bounds = 4096)]
    output: Output<Tensor>,
}

fn main() {}
