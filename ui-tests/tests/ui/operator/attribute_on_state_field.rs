use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    #[input]
    frames_seen: u64,
}

fn main() {}
