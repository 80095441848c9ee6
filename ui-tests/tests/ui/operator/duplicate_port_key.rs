use holo_runtime::{operator, Input, Tensor};

#[operator]
struct Resize {
    #[input(dtype = u8, dtype = u16)]
    input: Input<Tensor>,
}

fn main() {}
