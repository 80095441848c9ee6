use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Resize", version = 1)]
struct Resize {
    #[param(default = "640")]
    width: u32,
}

fn main() {}
