use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Resize", version = 1)]
struct Resize {
    width: u32,
    #[param(name = "width")]
    height: u32,
}

fn main() {}
