use holo_runtime::{byte_span_projector, ParamSchema};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.BatchParams", version = 1)]
struct BatchParams {
    #[param(recompile_required)]
    width: u32,
    #[param(recompile_required)]
    height: u32,
    #[param(compile_time)]
    max_batch_size: u32,
    gain: u32,
    #[param(sensitive, compile_time)]
    token: String,
}

#[byte_span_projector(id = "com.example.Batch.span.v1", reads(width))]
fn batch_span(params: &BatchParams) -> holo_runtime::Result<u64> {
    Ok(u64::from(params.width) * u64::from(params.height))
}

fn main() {}
