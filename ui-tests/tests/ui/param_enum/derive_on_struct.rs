use holo_runtime::ParamEnum;

#[derive(Clone, Copy, PartialEq, Eq, ParamEnum)]
struct Storage {
    kind: u32,
}

fn main() {}
