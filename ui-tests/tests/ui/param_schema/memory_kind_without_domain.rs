use holo_runtime::{MemoryKind, ParamSchema};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Resize", version = 1)]
struct Resize {
    #[param(recompile_required)]
    output_storage: MemoryKind,
}

fn main() {}
