use holo_runtime::ParamSchema;

#[derive(Clone)]
struct Geometry {
    width: u32,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Batch", version = 1)]
struct Batch {
    geometry: Geometry,
}

fn main() {}
