use holo_runtime::{operator, Output};

#[operator]
struct Resize {
    count: Output<std::sync::Mutex<u64>>,
}

fn main() {}
