use holo_runtime::{operator, param_ref, Input, Output, ParamSchema, Tensor};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.ResizeParams", version = 1)]
struct ResizeParams {
    #[param(recompile_required)]
    output_shape: [u64; 3],
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.CropParams", version = 1)]
struct CropParams {
    #[param(recompile_required)]
    output_shape: [u64; 3],
}

#[operator(params = ResizeParams)]
struct Resize {
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 3,
             byte_span = parameter_contiguous_byte_span(param_ref!(CropParams::output_shape)))]
    output: Output<Tensor>,
}

fn main() {}
