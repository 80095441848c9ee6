use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Resize", version = 1)]
struct Resize {
    #[param(min = 64, max = 8)]
    width: u32,
}

fn main() {}
