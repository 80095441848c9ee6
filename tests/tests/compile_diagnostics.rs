//! Every diagnostic code `compile` can report, each provoked and asserted with its
//! operator, port or field path.
#![allow(
    clippy::many_single_char_names,
    clippy::unnecessary_wraps,
    reason = "test fixtures: short names for graph handles, shared result logs"
)]

mod common;

use common::{ByteSink, ByteSource, Forward};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, DiagnosticCode, Diagnostics, Error, ErrorCode,
    ExecutionContext, Graph, Input, MemoryKind, Operator, Output, ParamEnum, ParamSchema, ParamSet,
    PartitionSpec, Partitioning, Result, Severity, Tensor, byte_span_projector, codes, compile,
    operator,
};

fn no_params<S: ParamSchema>() -> ParamSet<S> {
    ParamSet::defaults().unwrap()
}

fn rejected(g: &Graph) -> Diagnostics {
    compile(g, CompileOptions::default()).expect_err("the graph must be rejected")
}

fn only(d: &Diagnostics, code: DiagnosticCode) -> holo_runtime::Diagnostic {
    assert_eq!(d.codes(), vec![code], "{d}");
    d.items[0].clone()
}

#[operator]
struct Sink2 {
    a: Input<Tensor>,
    b: Input<Tensor>,
}
impl Operator for Sink2 {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn an_unconnected_required_input() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(1, 1);
    let a = g.add_operator("src", src, no_params()).unwrap();
    let s = g
        .add_operator(
            "join",
            Sink2 {
                a: Input::default(),
                b: Input::default(),
            },
            no_params(),
        )
        .unwrap();
    g.add_flow(a.frames, s.a, ConnectionOptions::default());
    let d = only(&rejected(&g), codes::GRAPH_UNCONNECTED_INPUT);
    assert_eq!(
        (d.operator.as_deref(), d.port.as_deref()),
        (Some("join"), Some("b"))
    );
    assert_eq!(d.severity, Severity::Error);
    assert!(!d.hint.is_empty());
}

#[test]
fn an_illegal_fan_in() {
    let mut g = Graph::new();
    let (s1, _) = ByteSource::new(1, 1);
    let (s2, _) = ByteSource::new(1, 1);
    let (sink, _) = ByteSink::new(1, 0);
    let a = g.add_operator("a", s1, no_params()).unwrap();
    let b = g.add_operator("b", s2, no_params()).unwrap();
    let k = g.add_operator("sink", sink, no_params()).unwrap();
    g.add_flow(a.frames, k.frames, ConnectionOptions::default());
    g.add_flow(b.frames, k.frames, ConnectionOptions::default());
    let d = rejected(&g);
    let fan_in = d.with_code(codes::GRAPH_ILLEGAL_FAN_IN).next().unwrap();
    assert_eq!(
        (fan_in.operator.as_deref(), fan_in.port.as_deref()),
        (Some("sink"), Some("frames"))
    );
}

#[test]
fn a_cycle() {
    let mut g = Graph::new();
    let x = g.add_operator("x", Forward::new(), no_params()).unwrap();
    let y = g.add_operator("y", Forward::new(), no_params()).unwrap();
    g.add_flow(x.output, y.input, ConnectionOptions::default());
    g.add_flow(y.output, x.input, ConnectionOptions::default());
    let d = only(&rejected(&g), codes::GRAPH_CYCLE);
    assert_eq!(d.message, "the flows form a cycle through x, y");
}

#[test]
fn an_invalid_authored_partitioning() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(1, 1);
    let (sink, _) = ByteSink::new(1, 0);
    let a = g.add_operator("src", src, no_params()).unwrap();
    let k = g.add_operator("sink", sink, no_params()).unwrap();
    g.add_flow(a.frames, k.frames, ConnectionOptions::default());
    let options = CompileOptions::default().with_partitioning(Partitioning::Authored(vec![
        PartitionSpec::new("main", vec!["src", "ghost"]),
    ]));
    let d = compile(&g, options).unwrap_err();
    assert_eq!(
        d.codes(),
        vec![codes::PARTITION_INVALID, codes::PARTITION_INVALID],
        "{d}"
    );
    assert_eq!(d.items[0].operator.as_deref(), Some("ghost"));
    assert_eq!(d.items[1].operator.as_deref(), Some("sink"));
}

/// A partition's name becomes its thread's, which takes no NUL (`RunSession::start`
/// panicked in `std::thread::Builder::name`); two partitions of one name are ambiguous.
#[test]
fn partition_names_that_are_empty_hold_a_control_character_or_repeat() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(1, 1);
    let (sink, _) = ByteSink::new(1, 0);
    let a = g.add_operator("src", src, no_params()).unwrap();
    let k = g.add_operator("sink", sink, no_params()).unwrap();
    g.add_flow(a.frames, k.frames, ConnectionOptions::default());
    for (names, message) in [
        (
            ["cam\0", "sink"],
            "the partition name \"cam\\0\" is empty or holds a control character",
        ),
        (
            ["", "sink"],
            "the partition name \"\" is empty or holds a control character",
        ),
        (["main", "main"], "two partitions are named \"main\""),
    ] {
        let options = CompileOptions::default().with_partitioning(Partitioning::Authored(vec![
            PartitionSpec::new(names[0], vec!["src"]),
            PartitionSpec::new(names[1], vec!["sink"]),
        ]));
        let d = compile(&g, options).unwrap_err();
        let d = only(&d, codes::PARTITION_INVALID);
        assert_eq!(d.message, message);
    }
}

/// An operator name reaches thread names, shared-memory names and trace spans.
#[test]
fn an_operator_name_with_a_control_character_is_refused() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(1, 1);
    let error = g.add_operator("cam\0era", src, no_params()).unwrap_err();
    assert_eq!(error.code(), holo_runtime::ErrorCode::InvalidArgument);
    assert_eq!(
        error.message(),
        "the operator name \"cam\\0era\" holds a control character"
    );
}

#[test]
fn a_zero_queue_depth() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(1, 1);
    let (sink, _) = ByteSink::new(1, 0);
    let a = g.add_operator("src", src, no_params()).unwrap();
    let k = g.add_operator("sink", sink, no_params()).unwrap();
    g.add_flow(
        a.frames,
        k.frames,
        ConnectionOptions::default().with_queue_depth(0),
    );
    let d = only(&rejected(&g), codes::QUEUE_DEPTH_ZERO);
    assert_eq!(d.port.as_deref(), Some("frames"));
}

// ---- byte spans --------------------------------------------------------------------

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.ShapeParams", version = 1)]
struct ShapeParams {
    #[param(recompile_required, default = [480, 640, 3])]
    shape: [u64; 3],
    #[param(recompile_required, default = [4, 4])]
    flat: [u64; 2],
    #[param(default = [8, 8, 8])]
    runtime_shape: [u64; 3],
    #[param(recompile_required, sensitive, default = [1, 1, 1])]
    secret_shape: [u64; 3],
    #[param(recompile_required, default = 1)]
    width: u64,
    #[param(recompile_required, default = 1)]
    height: u64,
}

#[operator(params = ShapeParams)]
struct RankMismatch {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 2, byte_span = parameter_contiguous_byte_span(param_ref!(ShapeParams::shape)))]
    out: Output<Tensor>,
}
impl Operator for RankMismatch {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[operator(params = ShapeParams)]
struct Contiguous {
    #[output(storage = runtime_pool, memory = host, dtype = f32, rank = 3, byte_span = parameter_contiguous_byte_span(param_ref!(ShapeParams::shape)))]
    out: Output<Tensor>,
}
impl Operator for Contiguous {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

fn shape_params(toml: &str) -> ParamSet<ShapeParams> {
    ParamSet::from_toml_str(toml).unwrap()
}

#[test]
fn a_shape_whose_length_differs_from_the_exact_rank() {
    let mut g = Graph::new();
    g.add_operator(
        "resize",
        RankMismatch {
            out: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    let d = only(
        &rejected(&g),
        codes::PHYSICAL_TENSOR_BYTE_SPAN_RANK_MISMATCH,
    );
    assert_eq!(d.field_path.as_deref(), Some("shape"));
    assert_eq!(
        d.message,
        "the shape parameter shape has 3 extents but the output declares rank 2"
    );
}

#[test]
fn a_parameter_contiguous_span_is_the_product_times_the_dtype_size() {
    let mut g = Graph::new();
    g.add_operator(
        "resize",
        Contiguous {
            out: Output::default(),
        },
        shape_params("shape = [2, 3, 5]"),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let d = &plan.tensor_byte_span_derivations()[0];
    assert_eq!(d.per_slot_bytes, 2 * 3 * 5 * 4);
    assert_eq!(d.expression, "parameter_contiguous_byte_span(shape)");
    assert_eq!(d.dependencies, vec!["shape".to_owned()]);
}

#[test]
fn an_overflowing_shape() {
    let mut g = Graph::new();
    let big = u64::MAX / 2;
    g.add_operator(
        "resize",
        Contiguous {
            out: Output::default(),
        },
        shape_params(&format!("shape = [{big}, 2, 3]")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW);
    assert_eq!(d.field_path.as_deref(), Some("shape"));
}

#[test]
fn a_zero_extent_is_a_zero_span() {
    let mut g = Graph::new();
    g.add_operator(
        "resize",
        Contiguous {
            out: Output::default(),
        },
        shape_params("shape = [0, 2, 3]"),
    )
    .unwrap();
    // The parameter the zero came from is the diagnostic's field (it named only the
    // operator and port).
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_BYTE_SPAN_ZERO);
    assert_eq!(d.field_path.as_deref(), Some("shape"), "{d}");
}

#[operator(params = ShapeParams)]
struct ReadsRuntimeField {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 3, byte_span = parameter_contiguous_byte_span(param_ref!(ShapeParams::runtime_shape)))]
    out: Output<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 3, byte_span = parameter_contiguous_byte_span(param_ref!(ShapeParams::secret_shape)))]
    secret: Output<Tensor>,
}
impl Operator for ReadsRuntimeField {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn reading_a_runtime_or_sensitive_field_and_every_diagnostic_is_reported_together() {
    let mut g = Graph::new();
    g.add_operator(
        "op",
        ReadsRuntimeField {
            out: Output::default(),
            secret: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    let d = rejected(&g);
    assert_eq!(
        d.codes(),
        vec![
            codes::PHYSICAL_TENSOR_BYTE_SPAN_UNREADABLE_PARAMETER,
            codes::PHYSICAL_TENSOR_BYTE_SPAN_UNREADABLE_PARAMETER
        ]
    );
    assert_eq!(d.items[0].field_path.as_deref(), Some("runtime_shape"));
    assert_eq!(d.items[0].port.as_deref(), Some("out"));
    assert_eq!(d.items[1].field_path.as_deref(), Some("secret_shape"));
    assert!(d.items[1].message.contains("sensitive"));
}

#[operator(params = ShapeParams)]
struct Expr {
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, byte_span = input_max_byte_span(input).ceiling_divided_by(tensor_byte_span(4)))]
    gray: Output<Tensor>,
}
impl Operator for Expr {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn input_max_byte_span_reads_the_single_bounded_producer() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(1, 1); // bounds = 256
    let a = g.add_operator("src", src, no_params()).unwrap();
    let e = g
        .add_operator(
            "gray",
            Expr {
                input: Input::default(),
                gray: Output::default(),
            },
            shape_params(""),
        )
        .unwrap();
    g.add_flow(a.frames, e.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let d = plan
        .tensor_byte_span_derivations()
        .iter()
        .find(|d| d.pool == "gray.gray")
        .unwrap();
    assert_eq!(d.per_slot_bytes, 64);
    assert_eq!(
        d.expression,
        "input_max_byte_span(input).ceiling_divided_by(tensor_byte_span(4))"
    );
    assert_eq!(d.dependencies, vec!["input:input".to_owned()]);
}

#[test]
fn input_max_byte_span_over_an_unbounded_producer() {
    let mut g = Graph::new();
    let f = g.add_operator("fwd", Forward::new(), no_params()).unwrap();
    let (src, _) = ByteSource::new(1, 1);
    let a = g.add_operator("src", src, no_params()).unwrap();
    let e = g
        .add_operator(
            "gray",
            Expr {
                input: Input::default(),
                gray: Output::default(),
            },
            shape_params(""),
        )
        .unwrap();
    g.add_flow(a.frames, f.input, ConnectionOptions::default());
    g.add_flow(f.output, e.input, ConnectionOptions::default());
    let d = only(
        &rejected(&g),
        codes::PHYSICAL_TENSOR_BYTE_SPAN_INPUT_UNBOUNDED,
    );
    assert_eq!(
        d.message,
        "the producer connected to `input` has no finite byte bound"
    );
}

#[operator(params = ShapeParams)]
struct DivideByZero {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, byte_span = tensor_byte_span(64).aligned_to(tensor_byte_span(0)))]
    out: Output<Tensor>,
}
impl Operator for DivideByZero {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn aligning_to_zero() {
    let mut g = Graph::new();
    g.add_operator(
        "op",
        DivideByZero {
            out: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_BYTE_SPAN_ZERO);
    assert_eq!(d.message, "`aligned_to` by zero");
}

#[operator(params = ShapeParams)]
struct Deep {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1,
        byte_span = tensor_byte_span(1).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1))
            .maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1))
            .maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1))
            .maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1)).maximum_with(tensor_byte_span(1))
            .maximum_with(tensor_byte_span(1)))]
    out: Output<Tensor>,
}
impl Operator for Deep {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn an_expression_beyond_the_limits() {
    // 16 binary nodes in a left-deep chain over 17 literals: 33 nodes, depth 17.
    let mut g = Graph::new();
    g.add_operator(
        "op",
        Deep {
            out: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_BYTE_SPAN_LIMIT);
    assert_eq!(
        d.message,
        "the byte-span expression has 33 nodes, depth 17 and 0 dependencies; at most 32 nodes, depth 16 and 8 dependencies are admitted"
    );
}

// ---- projectors ----------------------------------------------------------------------

#[byte_span_projector(id = "test.Batch.bytes.v1", reads(width, height))]
fn batch_bytes(params: &ShapeParams) -> Result<u64> {
    params
        .width
        .checked_mul(params.height)
        .ok_or_else(|| Error::overflow("width × height"))
        .and_then(|v| {
            if v == 7 {
                Err(Error::new(ErrorCode::NotSupported, "private detail 7"))
            } else {
                Ok(v)
            }
        })
}

#[byte_span_projector(id = "test.Batch.bytes.v1", reads(width))]
fn other_batch_bytes(params: &ShapeParams) -> Result<u64> {
    Ok(params.width)
}

#[operator(params = ShapeParams)]
struct Projected {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, byte_span = parameter_projected_byte_span::<batch_bytes>())]
    out: Output<Tensor>,
}
impl Operator for Projected {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[operator(params = ShapeParams)]
struct ProjectedOther {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, byte_span = parameter_projected_byte_span::<other_batch_bytes>())]
    out: Output<Tensor>,
}
impl Operator for ProjectedOther {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_projector_runs_once_at_compile_with_its_declared_reads() {
    let mut g = Graph::new();
    g.add_operator(
        "batch",
        Projected {
            out: Output::default(),
        },
        shape_params("width = 6\nheight = 5"),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let d = &plan.tensor_byte_span_derivations()[0];
    assert_eq!(d.per_slot_bytes, 30);
    assert_eq!(
        d.expression,
        "parameter_projected_byte_span(test.Batch.bytes.v1)"
    );
    assert_eq!(
        d.dependencies,
        vec!["height".to_owned(), "width".to_owned()]
    );
}

#[test]
fn a_projector_overflow_and_a_projector_failure() {
    let mut g = Graph::new();
    g.add_operator(
        "batch",
        Projected {
            out: Output::default(),
        },
        shape_params(&format!("width = {}\nheight = 3", u64::MAX / 2)),
    )
    .unwrap();
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW);
    assert_eq!(d.operator.as_deref(), Some("batch"));

    let mut g = Graph::new();
    g.add_operator(
        "batch",
        Projected {
            out: Output::default(),
        },
        shape_params("width = 7\nheight = 1"),
    )
    .unwrap();
    let d = only(
        &rejected(&g),
        codes::PHYSICAL_TENSOR_BYTE_SPAN_PROJECTION_FAILED,
    );
    assert_eq!(
        d.message,
        "projector \"test.Batch.bytes.v1\" failed with NotSupported"
    );
    assert!(
        !d.message.contains("private detail"),
        "only the code's name is exposed"
    );
}

#[test]
fn one_id_for_two_projectors_fails_closed() {
    let mut g = Graph::new();
    g.add_operator(
        "a",
        Projected {
            out: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    g.add_operator(
        "b",
        ProjectedOther {
            out: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    let d = only(
        &rejected(&g),
        codes::PHYSICAL_TENSOR_BYTE_SPAN_PROJECTOR_ID_CONFLICT,
    );
    assert_eq!(d.operator.as_deref(), Some("b"));
}

#[test]
fn the_same_projector_twice_is_not_a_conflict() {
    let mut g = Graph::new();
    g.add_operator(
        "a",
        Projected {
            out: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    g.add_operator(
        "b",
        Projected {
            out: Output::default(),
        },
        shape_params(""),
    )
    .unwrap();
    assert!(compile(&g, CompileOptions::default()).is_ok());
}

// ---- memory kinds and layouts --------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum OutputStorage {
    Host,
    Pinned,
}

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.KindParams", version = 1)]
struct KindParams {
    #[param(recompile_required, default = OutputStorage::Host)]
    storage: OutputStorage,
    #[param(recompile_required, enum_values(Host, PinnedHost), default = MemoryKind::Host)]
    exact: MemoryKind,
}

#[operator(params = KindParams)]
struct KindSource {
    #[output(storage = runtime_pool, dtype = u8, rank = 1, bounds = 64,
        memory_kind = parameter_memory_kind(param_ref!(KindParams::storage), memory_kind_map!(OutputStorage { Host => Host, Pinned => PinnedHost })))]
    mapped: Output<Tensor>,
    #[output(storage = runtime_pool, dtype = u8, rank = 1, bounds = 64, memory_kind = parameter_memory_kind_exact(param_ref!(KindParams::exact)))]
    exact: Output<Tensor>,
}
impl Operator for KindSource {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn memory_kind_is_frozen_from_the_parameter() {
    let mut g = Graph::new();
    g.add_operator(
        "cam",
        KindSource {
            mapped: Output::default(),
            exact: Output::default(),
        },
        ParamSet::from_toml_str("storage = \"pinned\"\nexact = \"pinned\"").unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let mapped = plan.tensor_allocation("cam.mapped").unwrap();
    assert_eq!(mapped.memory_kind, MemoryKind::PinnedHost);
    assert_eq!(mapped.memory_kind_source, "parameter storage");
    assert_eq!(
        plan.tensor_allocation("cam.exact").unwrap().memory_kind,
        MemoryKind::PinnedHost
    );
}

#[test]
fn a_derived_kind_that_misses_a_downstream_requirement_is_a_layout_mismatch() {
    let mut g = Graph::new();
    let a = g
        .add_operator(
            "cam",
            KindSource {
                mapped: Output::default(),
                exact: Output::default(),
            },
            ParamSet::from_toml_str("storage = \"pinned\"").unwrap(),
        )
        .unwrap();
    let (sink, _) = ByteSink::new(0, 0); // requires host u8 rank 1
    let k = g.add_operator("display", sink, no_params()).unwrap();
    g.add_flow(a.mapped, k.frames, ConnectionOptions::default());
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_LAYOUT_MISMATCH);
    assert_eq!(
        (d.operator.as_deref(), d.port.as_deref()),
        (Some("display"), Some("frames"))
    );
    assert_eq!(
        d.message,
        "cam.mapped produces memory kind pinned where host is required"
    );
    // With the host choice the same graph compiles: no copy is ever inserted instead.
    let mut g = Graph::new();
    let a = g
        .add_operator(
            "cam",
            KindSource {
                mapped: Output::default(),
                exact: Output::default(),
            },
            ParamSet::from_toml_str("storage = \"host\"").unwrap(),
        )
        .unwrap();
    let (sink, _) = ByteSink::new(0, 0);
    let k = g.add_operator("display", sink, no_params()).unwrap();
    g.add_flow(a.mapped, k.frames, ConnectionOptions::default());
    assert!(compile(&g, CompileOptions::default()).is_ok());
}

#[operator]
struct F32Sink {
    #[input(dtype = f32, rank = 2)]
    frames: Input<Tensor>,
}
impl Operator for F32Sink {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn declared_dtype_and_rank_mismatches_are_rejected_together() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(1, 1);
    let a = g.add_operator("src", src, no_params()).unwrap();
    let k = g
        .add_operator(
            "f32",
            F32Sink {
                frames: Input::default(),
            },
            no_params(),
        )
        .unwrap();
    g.add_flow(a.frames, k.frames, ConnectionOptions::default());
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_LAYOUT_MISMATCH);
    assert_eq!(
        d.message,
        "src.frames produces dtype u8 where f32 is required, rank 1 where rank 2 is required"
    );
}

#[operator]
struct CudaSource {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 256)]
    frames: Output<Tensor>,
}
impl Operator for CudaSource {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[operator]
struct CudaJoin {
    #[input(memory = cuda_device)]
    a: Input<Tensor>,
    #[input(memory = cuda_device)]
    b: Input<Tensor>,
}
impl Operator for CudaJoin {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn cuda_pools_need_a_bound_device_and_one_operator_uses_one_device() {
    let mut g = Graph::new();
    g.add_operator(
        "cam",
        CudaSource {
            frames: Output::default(),
        },
        no_params(),
    )
    .unwrap();
    let d = only(&rejected(&g), codes::PLACEMENT_DEVICE_REQUIRED);
    assert_eq!(d.operator.as_deref(), Some("cam"));

    let mut g = Graph::new();
    let a = g
        .add_operator(
            "left",
            CudaSource {
                frames: Output::default(),
            },
            no_params(),
        )
        .unwrap();
    let b = g
        .add_operator(
            "right",
            CudaSource {
                frames: Output::default(),
            },
            no_params(),
        )
        .unwrap();
    let j = g
        .add_operator(
            "stereo",
            CudaJoin {
                a: Input::default(),
                b: Input::default(),
            },
            no_params(),
        )
        .unwrap();
    g.add_flow(a.frames, j.a, ConnectionOptions::default());
    g.add_flow(b.frames, j.b, ConnectionOptions::default());
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("left", "frames", 0)
        .bind_tensor_output_device("right", "frames", 1);
    let d = compile(&g, options.clone()).unwrap_err();
    let d = only(&d, codes::PLACEMENT_DEVICE_CONFLICT);
    assert_eq!(d.operator.as_deref(), Some("stereo"));

    options
        .deployment
        .bind_tensor_output_device("ghost", "frames", 0);
    let d = compile(&g, options).unwrap_err();
    assert!(d.has(codes::PLACEMENT_UNKNOWN_BINDING));
}

/// Two subgraphs bound to two devices, no operator spanning both: it compiled, and no
/// session could start the plan (one session drives one device).
#[test]
fn a_plan_on_two_devices_is_a_placement_conflict() {
    let mut g = Graph::new();
    for name in ["left", "right"] {
        g.add_operator(
            name,
            CudaSource {
                frames: Output::default(),
            },
            no_params(),
        )
        .unwrap();
    }
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("left", "frames", 0)
        .bind_tensor_output_device("right", "frames", 1);
    let d = compile(&g, options).unwrap_err();
    let d = only(&d, codes::PLACEMENT_DEVICE_CONFLICT);
    assert_eq!(d.operator, None);
    assert_eq!(
        d.message,
        "the plan places work on cuda:0 and cuda:1: one session drives one device"
    );
}

#[operator]
struct Huge {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = u64::MAX / 2 + 1)]
    frames: Output<Tensor>,
}
impl Operator for Huge {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_pool_whose_aggregate_bytes_overflow() {
    let mut g = Graph::new();
    g.add_operator(
        "huge",
        Huge {
            frames: Output::default(),
        },
        no_params(),
    )
    .unwrap();
    let d = only(&rejected(&g), codes::POOL_CAPACITY_OVERFLOW);
    assert_eq!(d.port.as_deref(), Some("frames"));
}

#[operator]
struct ZeroBound {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 0)]
    frames: Output<Tensor>,
}
impl Operator for ZeroBound {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn zero_bounds_compile_with_a_warning_and_reject_every_allocation() {
    let mut g = Graph::new();
    g.add_operator(
        "z",
        ZeroBound {
            frames: Output::default(),
        },
        no_params(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert_eq!(plan.warnings().len(), 1);
    assert_eq!(plan.warnings()[0].code, codes::PHYSICAL_TENSOR_ZERO_BOUNDS);
    assert_eq!(plan.warnings()[0].severity, Severity::Warning);
    assert_eq!(DType::U8.size_bytes(), 1);
}

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.WideParams", version = 1)]
struct WideParams {
    #[param(recompile_required, default = [1, 1, 1, 1, 1, 1, 1, 1, 1])]
    nine: [u64; 9],
    #[param(recompile_required, default = [1])]
    a: [u64; 1],
    #[param(recompile_required, default = [1])]
    b: [u64; 1],
    #[param(recompile_required, default = [1])]
    c: [u64; 1],
    #[param(recompile_required, default = [1])]
    d: [u64; 1],
    #[param(recompile_required, default = [1])]
    e: [u64; 1],
    #[param(recompile_required, default = [1])]
    f: [u64; 1],
    #[param(recompile_required, default = [1])]
    g: [u64; 1],
    #[param(recompile_required, default = [1])]
    h: [u64; 1],
    #[param(recompile_required, default = [1])]
    i: [u64; 1],
}

#[operator(params = WideParams)]
struct NineExtents {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 8,
             byte_span = parameter_contiguous_byte_span(param_ref!(WideParams::nine)))]
    out: Output<Tensor>,
}
impl Operator for NineExtents {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[operator(params = WideParams)]
struct NineDependencies {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1,
             byte_span = parameter_contiguous_byte_span(param_ref!(WideParams::a))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::b)))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::c)))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::d)))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::e)))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::f)))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::g)))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::h)))
                 .maximum_with(parameter_contiguous_byte_span(param_ref!(WideParams::i))))]
    out: Output<Tensor>,
}
impl Operator for NineDependencies {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_shape_of_nine_extents_and_an_expression_of_nine_dependencies() {
    let mut g = Graph::new();
    g.add_operator(
        "wide",
        NineExtents {
            out: Output::default(),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_BYTE_SPAN_LIMIT);
    assert_eq!(
        d.message,
        "the shape nine has 9 extents; at most 8 are admitted"
    );

    let mut g = Graph::new();
    g.add_operator(
        "many",
        NineDependencies {
            out: Output::default(),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let d = only(&rejected(&g), codes::PHYSICAL_TENSOR_BYTE_SPAN_LIMIT);
    assert_eq!(
        d.message,
        "the byte-span expression has 17 nodes, depth 9 and 9 dependencies; at most 32 nodes, depth 16 and 8 dependencies are admitted"
    );
}
