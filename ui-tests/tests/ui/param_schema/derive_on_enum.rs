use holo_runtime::ParamSchema;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Storage", version = 1)]
enum Storage {
    Host,
    Pinned,
}

fn main() {}
