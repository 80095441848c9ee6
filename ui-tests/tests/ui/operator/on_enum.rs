use holo_runtime::operator;

#[operator]
enum Resize {
    A,
}

fn main() {}
