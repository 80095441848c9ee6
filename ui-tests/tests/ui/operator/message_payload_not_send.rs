use holo_runtime::{operator, Output};

#[operator]
struct Resize {
    count: Output<std::rc::Rc<u64>>,
}

fn main() {}
