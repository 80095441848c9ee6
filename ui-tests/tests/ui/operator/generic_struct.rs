use holo_runtime::{operator, Input};

#[operator]
struct Resize<T> {
    input: Input<T>,
}

fn main() {}
