use holo_runtime::ParamEnum;

#[derive(Clone, Copy, PartialEq, Eq, ParamEnum)]
enum Storage {
    #[param(rename = "h")]
    Host,
}

fn main() {}
