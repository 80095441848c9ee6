use holo_runtime::ParamEnum;

#[derive(Clone, Copy, PartialEq, Eq, ParamEnum)]
enum Storage {
    Host,
    Device(u32),
}

fn main() {}
