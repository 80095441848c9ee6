use holo_runtime::{operator, Input, Output, Tensor};

// A count past `u32` was cut to 4294967295; a suffix was dropped unchecked.
#[operator]
struct Sink {
    #[input(history = 5000000000)]
    frames: Input<Tensor>,
    #[input(history = 4u8)]
    other: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, bounds = 64, max_loans = 2i64)]
    out: Output<Tensor>,
}

fn main() {}
