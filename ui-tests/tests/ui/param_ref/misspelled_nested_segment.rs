use holo_runtime::{ParamSchema, param_ref};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Geometry", version = 1)]
struct Geometry {
    width: u32,
    height: u32,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.BatchParams", version = 1)]
struct BatchParams {
    geometry: Geometry,
}

fn main() {
    let _ = param_ref!(BatchParams::geometry.widht);
}
