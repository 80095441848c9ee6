use holo_runtime::{ParamSchema, param_ref};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.ResizeParams", version = 1)]
struct ResizeParams {
    #[param(min = 1)]
    output_shape: [u64; 3],
}

fn main() {
    let _ = param_ref!(ResizeParams::output_shap);
}
