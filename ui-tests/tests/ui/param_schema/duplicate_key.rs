use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Resize", version = 1)]
struct Resize {
    #[param(min = 1, max = 10, min = 2)]
    width: u32,
}

fn main() {}
