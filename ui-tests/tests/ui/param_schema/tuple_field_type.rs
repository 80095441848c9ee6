use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Resize", version = 1)]
struct Resize {
    size: (u32, u32),
}

fn main() {}
