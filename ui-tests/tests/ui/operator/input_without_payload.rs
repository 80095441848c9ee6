use holo_runtime::{operator, Input};

#[operator]
struct Resize {
    input: Input,
}

fn main() {}
