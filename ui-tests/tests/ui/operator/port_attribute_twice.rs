use holo_runtime::{operator, Input, Tensor};

#[operator]
struct Op {
    #[input(dtype = u8)]
    #[input(rank = 1)]
    frames: Input<Tensor>,
}

fn main() {}
