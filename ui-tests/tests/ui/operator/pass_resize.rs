use holo_runtime::{
    byte_span_projector, memory_kind_map, operator, param_ref, Input, Output, ParamEnum,
    ParamSchema, Tensor,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
pub enum OutputStorage {
    Host,
    Pinned,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.ResizeParams", version = 1)]
pub struct ResizeParams {
    #[param(recompile_required)]
    output_shape: [u64; 3],
    #[param(recompile_required, default = OutputStorage::Host)]
    output_storage: OutputStorage,
    #[param(compile_time, default = 4)]
    max_batch_size: u32,
}

#[byte_span_projector(id = "com.example.Resize.batch-max-byte-span.v1", reads(output_shape, max_batch_size))]
fn batch_span(params: &ResizeParams) -> holo_runtime::Result<u64> {
    let [h, w, c] = params.output_shape;
    Ok(h * w * c * u64::from(params.max_batch_size))
}

/// Resizes frames.
#[operator(params = ResizeParams)]
pub struct Resize {
    /// The frames to resize.
    #[input(memory = host, dtype = u8, rank = 3)]
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 3,
             byte_span = parameter_contiguous_byte_span(param_ref!(ResizeParams::output_shape)))]
    output: Output<Tensor>,
    #[output(name = "gray", storage = runtime_pool, dtype = u8, rank = 2,
             memory_kind = parameter_memory_kind(param_ref!(ResizeParams::output_storage),
                 memory_kind_map!(OutputStorage { Host => Host, Pinned => MemoryKind::PinnedHost })),
             byte_span = input_max_byte_span(input).ceiling_divided_by(tensor_byte_span(4)))]
    gray: Output<Tensor>,
    #[output(storage = runtime_pool, memory = cuda_device, max_rank = 4, bounds = 1 << 20, max_loans = 2)]
    scratch: Output<Tensor>,
    #[output(storage = runtime_pool, memory = pinned, byte_span = parameter_projected_byte_span::<batch_span>())]
    batch: Output<Tensor>,
    count: Output<u64>,
    #[input(optional)]
    control: Input<String>,
    frames_seen: u64,
}

#[operator]
struct Sink {
    #[input(optional)]
    input: Input<Tensor>,
}

fn main() {
    use holo_runtime::__private::{OperatorPorts, PortDirection};

    let spec = Resize::operator_spec();
    assert_eq!(spec.type_name, "Resize");
    let names: Vec<&str> = spec.ports.iter().map(|p| p.name).collect();
    assert_eq!(names, ["input", "output", "gray", "scratch", "batch", "count", "control"]);
    assert_eq!(spec.ports[0].direction, PortDirection::Input);
    assert_eq!(spec.ports[5].payload_type, "u64");
    assert!(spec.ports[6].optional);
    let _: fn(ResizePorts) -> holo_runtime::OutPort<u64> = |ports| ports.count;
    let _: fn(ResizePorts) -> holo_runtime::InPort<String> = |ports| ports.control;
    let resize = Resize {
        input: Input::default(),
        output: Output::default(),
        gray: Output::default(),
        scratch: Output::default(),
        batch: Output::default(),
        count: Output::default(),
        control: Input::default(),
        frames_seen: 0,
    };
    let _ = resize.frames_seen;
    assert_eq!(Sink::operator_spec().ports.len(), 1);
}
