//! The operator macros, re-exported with their documentation.

/// Turns a struct into an operator: its `Input<T>` / `Output<T>` fields become typed
/// ports, and tensor ports carry the spec the plan compiler checks and sizes pools from.
///
/// The macro implements [`OperatorPorts`](crate::OperatorPorts) and defines a
/// `<Name>Ports` struct of typed handles that [`Graph::add_operator`](crate::Graph::add_operator)
/// returns; `graph.add_flow(a.frames, b.input, …)` compiles only when the payload types
/// match. Implement [`Operator`](crate::Operator) (at least `compute`) yourself. Construct
/// port fields with `Input::default()` / `Output::default()`; every other field is plain
/// operator state.
///
/// A port whose payload is [`Tensor`](crate::Tensor) is a tensor port; any other payload
/// (`Clone + Send + 'static`) is a message port. The port's name is the field name.
///
/// # Struct attributes: `#[operator(...)]`
///
/// | key | meaning |
/// |---|---|
/// | `params = Type` | the operator's `#[derive(ParamSchema)]` type (default: [`NoParams`](crate::NoParams)) |
/// | `trigger = …` | when `compute()` fires — the temporal contract, the only scheduling authority: `all_inputs` (the default: every required input has data; a source runs whenever its outputs have room), `any_input`, `on_arrival(input)`, `clock(hz = N)` (below) or `clock(rate = EXPR)` (a [`Rate`](crate::spec::rates::Rate), e.g. `Rate::new(1, 4)` or `parameter_rate(param_ref!(P::fps))`) |
/// | `crate = "path"` | the crate root generated code names (default `::holo_runtime`) |
///
/// In `clock(hz = N)`, `N` is one of:
///
/// - an integer literal, `clock(hz = 60)`;
/// - any `u64` const expression, `clock(hz = TICK_HZ)` or `clock(hz = 30 * 2)`: rustc
///   evaluates it, so a value of another type or one known only at run time is rustc's
///   error on your token;
/// - a parameter, `clock(hz = param_ref!(P::fps))` (or, as the rate keys write it,
///   `clock(hz = parameter_rate(param_ref!(P::fps)))`): the integer field's value in
///   hertz, read when the plan is compiled. As for any rate read from a parameter, the
///   field must be `compile_time` or `recompile_required` and not `sensitive`
///   (`RATE_UNREADABLE_PARAMETER` otherwise), of an integer type (a compile error
///   otherwise), and its value positive (`RATE_INVALID` otherwise).
///
/// The plan's [trigger record](crate::plan::TriggerRecord) holds the resolved
/// `clock_hz` and `clock_period_ns`, and for a parameter its path in `clock_parameter`;
/// compile again to apply another value.
///
/// # Tensor outputs: `#[output(...)]`
///
/// | key | meaning |
/// |---|---|
/// | `name = "port"` | the port's name (default: the field name); names are unique |
/// | `storage = runtime_pool` / `pass_through` | a pool the runtime provisions, or caller-supplied backing (default `pass_through`) |
/// | `memory = host \| pinned \| cuda_device \| cuda_managed \| opencl_device \| device` | the memory kind (`device`: the bound device's, CUDA or OpenCL) |
/// | `memory_kind = EXPR` | the memory kind from a parameter: `parameter_memory_kind(param_ref!(P::field), memory_kind_map!(…))` or `parameter_memory_kind_exact(param_ref!(P::kind))` |
/// | `dtype = u8 \| … \| f64` | the element type |
/// | `rank = N` | the exact rank, 1 to [`MAX_TENSOR_RANK`](crate::spec::MAX_TENSOR_RANK) |
/// | `max_rank = N` | the largest rank a loan may request (default: `rank`, else [`MAX_TENSOR_RANK`](crate::spec::MAX_TENSOR_RANK)) |
/// | `bounds = EXPR` | a hard per-slot byte cap, fixed when the program is built: a `u64` const expression (`4096`, `FRAME_BYTES`, `64 * 1024`) that rustc evaluates; zero rejects every loan. Slots sized from a parameter are a `byte_span`. With a declared `dtype`, a cap (or span) that is no multiple of its size is rounded up to one, so every slot starts aligned for it |
/// | `byte_span = EXPR` | a per-slot byte span resolved when the plan is compiled (below) |
/// | `max_loans = N` | loans the producer may hold at once (default 1) |
/// | `nominal_rate = EXPR` | the output's declared rate (`Rate::hz(60)`, `parameter_rate(…)`) |
/// | `follows(input, RATIO)` | the output's rate derived from an input of this operator (`RateRatio::new(1, 4)`); never triggers anything |
/// | `burst = N` | entries one activation may emit at once (a hard-floor contributor) |
/// | `forwards = input` | the output emits tensors received on `input` (an `Input<Tensor>` field of this operator), unchanged: the pool they come from is sized for this output's queues and holds too (below) |
///
/// A `runtime_pool` needs a finite bound (`bounds` or `byte_span`) and a memory kind
/// (`memory` or `memory_kind`); `bounds` and `byte_span` exclude each other, as do
/// `memory` and `memory_kind`. Each of these is a compile error on your token, with every
/// mistake of one struct reported together.
///
/// Every expression in these attributes (byte spans, memory kinds, rates, counts) is
/// evaluated with a prelude in scope — `Rate`, `RateRatio`, `MemoryKind` and its
/// variants, `param_ref!`, `memory_kind_map!` and the functions below — so it needs no
/// `use` of its own (an import used only there would be reported unused).
///
/// **Forwarding.** A received tensor keeps its slot in the pool it came from as it travels
/// on, so an output that emits what an input received declares it:
/// `#[output(storage = pass_through, forwards = frames)]`. The compiler then follows each
/// pool's tensors through every output that forwards them — any number of forwarders,
/// across partitions and fan-outs — and adds to the origin pool's slot count each queue
/// depth and each consumer's retention (`max(1, history)`, or a reused last sample) they
/// can occupy, term by term in the plan
/// ([`SlotCountTerms::forwarded_through`](crate::plan::SlotCountTerms::forwarded_through),
/// rendered as `forwarded through relay.out → sink.frames: queue depth 4`). `forwards`
/// naming a field that is not an `Input<Tensor>` of the operator is a compile error on that
/// name. An output without it that emits a tensor of another operator's pool is refused
/// on emit with `ProtocolError` naming the port and the pool: that pool was not sized for
/// it. So is a tensor that an output declaring `forwards = frames` emits from a pool
/// `frames` does not receive from (one another input received), and, for an output with
/// a pool of its own, a forwarded tensor that does not meet a consumer's declared
/// memory kind, dtype or rank. Tensors a pass-through output makes itself
/// (`Tensor::from_host_vec`) need no declaration.
///
/// Byte-span expressions see, in scope: `tensor_byte_span(n)`,
/// `parameter_contiguous_byte_span(param_ref!(P::shape))` (the shape's product times the
/// dtype size; the shape's length must equal `rank`), `input_max_byte_span(input)` (each
/// input field's name is in scope; the input needs exactly one bounded producer),
/// `parameter_projected_byte_span::<projector>()` (a [`byte_span_projector`]), combined
/// with `.multiplied_by(…)`, `.ceiling_divided_by(…)`, `.maximum_with(…)` and
/// `.aligned_to(…)`. At most 32 nodes, depth 16, 8 dependencies and 8 shape extents;
/// overflow is `PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW`, zero `PHYSICAL_TENSOR_BYTE_SPAN_ZERO`.
/// The expression must be over this operator's own `params` type: another schema does
/// not type-check. The runtime never evaluates it; the plan holds the result.
///
/// # Tensor inputs: `#[input(...)]`
///
/// | key | meaning |
/// |---|---|
/// | `name = "port"` | the port's name |
/// | `memory`, `dtype`, `rank` | exact requirements: a producer that does not meet them is `PHYSICAL_TENSOR_LAYOUT_MISMATCH` at compile time (declared producers) or `ProtocolError` on emit (pass-through values) |
/// | `optional` | the input may stay unconnected |
/// | `latest` / `window` / `window = N` | what one activation sees: the newest sample, or every sample since the last activation (N: the samples the window must hold) |
/// | `history = N` / `history = parameter_count(param_ref!(P::n))` | retained history entries ([`Input::history`](crate::Input::history)); they count in the producer's pool, so the field is, like a byte span's, not `sensitive` and `compile_time` or `recompile_required` (a compile error otherwise) |
/// | `missing = skip \| reuse_last` | what happens when the input has no new data at an activation |
/// | `expected_rate = EXPR` | a weaker fallback rate, used only when the producer declares none |
///
/// Rate keys (`nominal_rate`, `follows`, `burst`, `expected_rate`, and the temporal keys
/// on inputs) apply to message ports too. Automatic queue depths, hard floors and the
/// admitted ceilings come from them when the plan is compiled: see
/// [`Rate`](crate::Rate) and `CompileOptions::automatic_queue_sizing`.
///
/// Message ports take `name` (and `optional` on inputs) plus the rate and temporal keys.
///
/// A `pub` operator needs a `pub` params type (it appears in `OperatorPorts::Params`).
///
/// The ports are read from the struct as configured: a field under a `#[cfg(...)]` that
/// is off is no port, and `#[cfg_attr(feature = "…", output(...))]` applies its keys only
/// when the condition holds. (The attribute re-emits the struct under an internal derive,
/// which rustc hands the fields after `cfg` is applied.)
///
/// ```
/// use holo_runtime::{ExecutionContext, Input, Operator, Output, ParamSchema, Result, Tensor, operator};
///
/// #[derive(Clone, ParamSchema)]
/// #[param(schema = "com.example.GrayParams", version = 1)]
/// struct GrayParams {}
///
/// /// Packed RGBA → grayscale: one byte per four input bytes.
/// #[operator(params = GrayParams)]
/// struct Gray {
///     #[input(dtype = u8, rank = 3)]
///     rgba: Input<Tensor>,
///     #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 2,
///              byte_span = input_max_byte_span(rgba).ceiling_divided_by(tensor_byte_span(4)))]
///     gray: Output<Tensor>,
///     /// A message port.
///     frames_seen: Output<u64>,
/// }
///
/// impl Operator for Gray {
///     fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
///         Ok(())
///     }
/// }
/// ```
///
/// A clock and bounds from constants, and a clock from a parameter:
///
/// ```
/// use holo_runtime::{
///     CompileOptions, ExecutionContext, Graph, Operator, Output, ParamSchema, ParamSet, Result,
///     Tensor, compile, operator,
/// };
///
/// const FRAME_BYTES: u64 = 640 * 480;
///
/// #[derive(Clone, ParamSchema)]
/// #[param(schema = "com.example.CameraParams", version = 1)]
/// struct CameraParams {
///     #[param(min = 1, max = 240, recompile_required, default = 60)]
///     fps: u32,
/// }
///
/// #[operator(params = CameraParams, trigger = clock(hz = param_ref!(CameraParams::fps)))]
/// struct Camera {
///     #[output(storage = runtime_pool, memory = host, dtype = u8, bounds = 2 * FRAME_BYTES)]
///     frames: Output<Tensor>,
/// }
///
/// #[operator(trigger = clock(hz = 2 * 50))]
/// struct Ticker {
///     ticks: Output<u64>,
/// }
/// # impl Operator for Camera {
/// #     fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> { Ok(()) }
/// # }
/// # impl Operator for Ticker {
/// #     fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> { Ok(()) }
/// # }
///
/// let mut g = Graph::new();
/// let camera = Camera { frames: Output::default() };
/// g.add_operator("camera", camera, ParamSet::from_toml_str("fps = 30")?)?;
/// g.add_operator("ticker", Ticker { ticks: Output::default() }, ParamSet::defaults()?)?;
/// let plan = compile(&g, CompileOptions::default())?;
/// let [camera, ticker] = plan.operator_triggers() else { unreachable!() };
/// assert_eq!(camera.clock_period_ns, Some(33_333_334));
/// assert_eq!(camera.clock_parameter.as_deref(), Some("fps"));
/// assert_eq!((ticker.clock_period_ns, ticker.clock_parameter.as_deref()), (Some(10_000_000), None));
/// assert_eq!(plan.tensor_allocation("camera.frames").unwrap().per_slot_bytes, 2 * FRAME_BYTES);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub use holo_macros::operator;

/// Declares a free function a named, versioned byte-span formula:
/// `#[byte_span_projector(id = "com.example.Op.output-max-byte-span.v1", reads(a, b.c))]`
/// on `fn name(params: &Params) -> Result<u64>`.
///
/// The function runs once, when the plan is compiled, with the accepted generation-zero
/// parameters, and returns the maximum bytes of one slot. Use it from `#[operator]` as
/// `byte_span = parameter_projected_byte_span::<name>()` (the macro defines a type `name`
/// beside the function).
///
/// - `id` must end in `.vN`; bump the version whenever the function could return a
///   different result for the same reads. One id used by two different projectors in one
///   compile is `PHYSICAL_TENSOR_BYTE_SPAN_PROJECTOR_ID_CONFLICT`.
/// - `reads(...)` lists every field the function reads (nested paths as `outer.inner`).
///   The function body sees only those fields: reading any other one does not compile.
///   Each read must exist and be non-sensitive and `compile_time` or
///   `recompile_required`, else it does not compile either.
/// - Return `ErrorCode::ArithmeticOverflow` for overflow
///   (`PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW`); any other error becomes
///   `PHYSICAL_TENSOR_BYTE_SPAN_PROJECTION_FAILED`, which shows only the code's name.
///
/// ```
/// use holo_runtime::{Error, ParamSchema, Result, byte_span_projector};
///
/// #[derive(Clone, ParamSchema)]
/// #[param(schema = "com.example.BatchParams", version = 1)]
/// struct BatchParams {
///     #[param(recompile_required, default = 640)]
///     width: u64,
///     #[param(recompile_required, default = 480)]
///     height: u64,
///     #[param(recompile_required, default = 4)]
///     max_batch_size: u64,
/// }
///
/// #[byte_span_projector(id = "com.example.BatchOutput.output-max-byte-span.v1",
///                       reads(width, height, max_batch_size))]
/// fn batch_bytes(params: &BatchParams) -> Result<u64> {
///     params.width.checked_mul(params.height)
///         .and_then(|p| p.checked_mul(params.max_batch_size))
///         .ok_or_else(|| Error::overflow("width × height × max_batch_size"))
/// }
/// ```
pub use holo_macros::byte_span_projector;

/// An exhaustive mapping from a `#[derive(ParamEnum)]` enum to memory kinds, for
/// `parameter_memory_kind`: `memory_kind_map!(OutputStorage { Host => Host, Pinned =>
/// PinnedHost })`.
///
/// Every variant must appear once: a missing one is rustc's non-exhaustive `match` error,
/// a duplicate a macro error. The right-hand side is one of `Host`, `PinnedHost`,
/// `CudaDevice`, `CudaManaged`, `OpenClDevice` or `Device` (the bound device's memory;
/// optionally `MemoryKind::…`); there is no `Unknown` kind. The plan freezes the kind the
/// parameter selects.
///
/// ```
/// use holo_runtime::{MemoryKind, ParamEnum, memory_kind_map};
///
/// #[derive(Clone, Copy, PartialEq, Eq, ParamEnum)]
/// enum OutputStorage { Host, Pinned }
///
/// let map = memory_kind_map!(OutputStorage { Host => Host, Pinned => PinnedHost });
/// assert_eq!(map(OutputStorage::Pinned), MemoryKind::PinnedHost);
/// ```
pub use holo_macros::memory_kind_map;
