use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Resize", version = "1.0")]
struct Resize {
    width: u32,
}

fn main() {}
