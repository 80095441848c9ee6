use holo_runtime::ParamEnum;

#[derive(Clone, Copy, PartialEq, Eq, ParamEnum)]
enum Storage {
    Host,
    #[param(name = "host")]
    PinnedHost,
}

fn main() {}
