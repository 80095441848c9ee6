use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize {
    count: Output<std::rc::Rc<u64>>,
}

fn main() {}
