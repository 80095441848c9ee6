use holo_runtime::{operator, Output};

#[operator]
struct Resize {
    #[output(dtype = u8)]
    count: Output<u64>,
}

fn main() {}
