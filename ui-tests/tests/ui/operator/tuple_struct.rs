use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Resize(Input<Tensor>, Output<Tensor>);

fn main() {}
