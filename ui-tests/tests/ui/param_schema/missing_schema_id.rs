use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(version = 1)]
struct Resize {
    width: u32,
}

fn main() {}
