use holo_runtime::{ParamRef, ParamSchema, param_ref};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Geometry", version = 1)]
struct Geometry {
    width: u32,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.BatchParams", version = 1)]
struct BatchParams {
    geometry: Geometry,
    #[param(min = 1)]
    output_shape: [u64; 3],
}

fn main() {
    let width: ParamRef<BatchParams, u32> = param_ref!(BatchParams::geometry.width);
    let shape: ParamRef<BatchParams, [u64; 3]> = param_ref!(crate::BatchParams::output_shape);
    assert_eq!(width.path(), "geometry.width");
    assert_eq!(shape.path(), "output_shape");
}
