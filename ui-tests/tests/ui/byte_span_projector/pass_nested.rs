use holo_runtime::{byte_span_projector, ByteSpanProjector, ParamSchema, ParamSet};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Geometry", version = 1)]
pub struct Geometry {
    #[param(recompile_required, default = 640)]
    width: u32,
    #[param(recompile_required, default = 480)]
    height: u32,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.BatchParams", version = 1)]
pub struct BatchParams {
    geometry: Geometry,
    #[param(compile_time, default = 4)]
    max_batch_size: u32,
    #[param(default = 1)]
    gain: u32,
}

/// Bytes of one batch of RGB frames.
#[byte_span_projector(
    id = "com.example.BatchOutput.output-max-byte-span.v1",
    reads(geometry.width, geometry.height, max_batch_size)
)]
pub fn batch_span(params: &BatchParams) -> Result<u64, holo_runtime::Error> {
    let frame = u64::from(params.geometry.width) * u64::from(params.geometry.height) * 3;
    Ok(frame * u64::from(params.max_batch_size))
}

fn main() {
    let set = ParamSet::<BatchParams>::from_toml_str("").unwrap();
    assert_eq!(batch_span(set.values()).unwrap(), 640 * 480 * 3 * 4);
    assert_eq!(<batch_span as ByteSpanProjector>::project(set.values()).unwrap(), 640 * 480 * 3 * 4);
    assert_eq!(<batch_span as ByteSpanProjector>::ID, "com.example.BatchOutput.output-max-byte-span.v1");
    let reads: Vec<String> = batch_span::reads().into_iter().map(|d| d.path).collect();
    assert_eq!(reads, ["geometry.width", "geometry.height", "max_batch_size"]);
}
