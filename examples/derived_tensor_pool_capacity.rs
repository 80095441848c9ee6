//! `derived_tensor_pool_capacity`: per-slot bytes and memory kinds derived from
//! deployment parameters when the plan is compiled.
//!
//! ```text
//! camera (RGBA, literal bound) → resize (RGBA, shape parameter, kind parameter) ─┬─ gray (packed ⌈in/4⌉) → batcher (projector)
//!                                                                               └─ archive (conservative: in)
//! ```
//!
//! - `resize.output`: `parameter_contiguous_byte_span(param_ref!(ResizeParams::output_shape))`
//!   — the shape's product × the dtype size, its length checked against rank 3; its memory
//!   kind comes from the `output_storage` parameter through an exhaustive
//!   `memory_kind_map!`.
//! - `gray.output`: `input_max_byte_span(input).ceiling_divided_by(tensor_byte_span(4))` —
//!   valid because the RGBA input is packed.
//! - `archive.output`: `input_max_byte_span(input)` — a conservative bound that holds for
//!   any layout of the input.
//! - `batcher.output`: a `#[byte_span_projector]` that reads exactly `width`, `height` and
//!   `max_batch_size`.
//!
//! A second, finite-maximum lifecycle graph joins byte spans with rate-aware queue sizing:
//!
//! ```text
//! sensor (clock fps; 6 MiB slots from `frame_shape`) → recorder (clock clock_hz; window, history 4)
//! ```
//!
//! The sensor's nominal rate is its `fps` parameter (60 Hz selected, 120 Hz admitted by
//! the field's `max`); the recorder's clock gives a 1/15 s horizon, so the edge is sized
//! automatically: 8 entries at 60 Hz and 16 over the admitted domain. With four
//! retained-history entries, one producer loan and one retirement entry the example
//! prints, from the plan's records:
//!
//! ```text
//! active: 8 + 4 + 1 + 1 = 14 entries; 14 × 6 MiB = 84 MiB
//! admitted: 16 + 4 + 1 + 1 = 22 entries; 22 × 6 MiB = 132 MiB
//! ```
//!
//! The example prints every derivation (expression, what it read, per-slot bytes, slot
//! count, aggregate bytes), then runs the pipeline and renders the edge's inspection
//! against the published rate generation, in human text and canonical JSON.
//!
//! ```text
//! cargo run -p holo-examples --example derived_tensor_pool_capacity -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;

use holo_runtime::app::{App, AppArgs, HumanOutput};
use holo_runtime::plan::{ExecutionPlan, RateQueueInspectionFormat, render_rate_queue_inspection};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EdgeId, EmitOptions, Error, ErrorCode,
    ExecutionContext, Graph, Input, Operator, Output, ParamEnum, ParamSchema, RateRatio, Result,
    RunSession, Tensor, TensorLoanRequest, byte_span_projector, operator,
};

/// The lifecycle sensor: its rate and its slot shape.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Derived.Sensor", version = 1)]
struct SensorParams {
    /// Frames per second; `max` is the admitted domain's maximum nominal rate.
    #[param(min = 1, max = 120, recompile_required, default = 60)]
    fps: u32,
    /// Frame shape: height, width, channels (u8): the per-slot bytes.
    #[param(min = 1, max = 8192, recompile_required, default = [1024, 2048, 3])]
    frame_shape: [u64; 3],
}

/// The lifecycle recorder: its clock and its retained history.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Derived.Recorder", version = 1)]
struct RecorderParams {
    /// The recorder's clock (the accumulation horizon is one period).
    #[param(min = 1, max = 1000, recompile_required, default = 15)]
    clock_hz: u32,
    /// Retained-history entries.
    #[param(min = 0, max = 1024, recompile_required, default = 4)]
    history: u32,
}

/// The compile-wide headroom ratio.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Derived.Sizing", version = 1)]
struct SizingParams {
    /// Headroom numerator.
    #[param(min = 1, max = 1000, default = 2)]
    headroom_numerator: u64,
    /// Headroom denominator.
    #[param(min = 1, max = 1000, default = 1)]
    headroom_denominator: u64,
}

/// A clock-driven sensor whose slot bytes and nominal rate come from its parameters.
#[operator(params = SensorParams, trigger = clock(rate = parameter_rate(param_ref!(SensorParams::fps))))]
struct Sensor {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 3,
        byte_span = parameter_contiguous_byte_span(param_ref!(SensorParams::frame_shape)),
        nominal_rate = parameter_rate(param_ref!(SensorParams::fps)))]
    frames: Output<Tensor>,
    shape: [u64; 3],
}

impl Operator for Sensor {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(loan) = borrow(&mut self.frames, &self.shape)? else {
            return Ok(());
        };
        let committed = loan.write_host_and_commit(|px| px[0] = 1)?;
        ignore_backpressure(self.frames.emit(
            committed,
            EmitOptions::default().with_capture_time(ctx.activation_time()),
        ))
    }
}

/// Records every frame since its last tick, retaining the last `history` frames.
#[operator(params = RecorderParams, trigger = clock(rate = parameter_rate(param_ref!(RecorderParams::clock_hz))))]
struct Recorder {
    #[input(window, missing = reuse_last,
        history = parameter_count(param_ref!(RecorderParams::history)))]
    frames: Input<Tensor>,
    recorded: u64,
}

impl Operator for Recorder {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {
            self.recorded += 1;
        }
        Ok(())
    }
}

/// Camera geometry.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Derived.Camera", version = 1)]
struct CameraParams {
    /// Frame width in pixels.
    #[param(min = 1, max = 1920, default = 640)]
    width: u64,
    /// Frame height in pixels.
    #[param(min = 1, max = 1080, default = 480)]
    height: u64,
}

/// Where resize output slots live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum OutputStorage {
    /// Pageable host memory.
    Host,
    /// Page-locked host memory (needs a CUDA device to materialize).
    Pinned,
}

/// Resize parameters.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Derived.Resize", version = 1)]
struct ResizeParams {
    /// Output shape: height, width, channels (4: RGBA).
    #[param(min = 1, max = 4096, recompile_required, default = [240, 320, 4])]
    output_shape: [u64; 3],
    /// Where output slots are allocated.
    #[param(recompile_required, default = OutputStorage::Host)]
    output_storage: OutputStorage,
}

/// Batcher parameters, read by the projector.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Derived.Batch", version = 1)]
struct BatchParams {
    /// Image width.
    #[param(min = 1, max = 4096, recompile_required, default = 320)]
    width: u64,
    /// Image height.
    #[param(min = 1, max = 4096, recompile_required, default = 240)]
    height: u64,
    /// Images per batch.
    #[param(min = 1, max = 64, recompile_required, default = 4)]
    max_batch_size: u64,
}

/// The batch's maximum bytes: width × height × max_batch_size, overflow-checked.
#[byte_span_projector(
    id = "com.example.BatchOutput.output-max-byte-span.v1",
    reads(width, height, max_batch_size)
)]
fn batch_output_bytes(params: &BatchParams) -> Result<u64> {
    params
        .width
        .checked_mul(params.height)
        .and_then(|p| p.checked_mul(params.max_batch_size))
        .ok_or_else(|| Error::overflow("width × height × max_batch_size"))
}

/// Camera: RGBA frames from a pool bounded by a literal 1920 × 1080 × 4.
#[operator(params = CameraParams)]
struct Camera {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 3, bounds = 1920 * 1080 * 4)]
    frames: Output<Tensor>,
    width: u64,
    height: u64,
    frame: u64,
}

impl Operator for Camera {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let loan = match self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[self.height, self.width, 4],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        #[allow(clippy::cast_possible_truncation, reason = "a test pattern wraps")]
        let shade = self.frame as u8;
        self.frame += 1;
        let committed = loan.write_host_and_commit(|px| {
            for (i, p) in px.chunks_exact_mut(4).enumerate() {
                #[allow(clippy::cast_possible_truncation, reason = "a test pattern wraps")]
                p.copy_from_slice(&[shade, i as u8, 0x80, 0xff]);
            }
        })?;
        ignore_backpressure(self.frames.emit(
            committed,
            EmitOptions::default().with_capture_time(ctx.activation_time()),
        ))
    }
}

fn ignore_backpressure(r: Result<()>) -> Result<()> {
    match r {
        Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
        other => other,
    }
}

fn borrow(
    out: &mut Output<Tensor>,
    shape: &[u64],
) -> Result<Option<holo_runtime::TensorOutputLoan>> {
    match out.allocate_tensor(TensorLoanRequest {
        shape,
        dtype: DType::U8,
    }) {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.code() == ErrorCode::ResourceExhausted => Ok(None),
        Err(e) => Err(e),
    }
}

/// Nearest-neighbour resize of RGBA frames to `output_shape`.
#[operator(params = ResizeParams)]
struct Resize {
    #[input(dtype = u8, rank = 3)]
    input: Input<Tensor>,
    #[output(storage = runtime_pool, dtype = u8, rank = 3,
        byte_span = parameter_contiguous_byte_span(param_ref!(ResizeParams::output_shape)),
        memory_kind = parameter_memory_kind(param_ref!(ResizeParams::output_storage),
            memory_kind_map!(OutputStorage { Host => Host, Pinned => PinnedHost })))]
    output: Output<Tensor>,
    shape: [u64; 3],
}

impl Operator for Resize {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(frame) = self.input.receive() else {
            return Ok(());
        };
        let [oh, ow, oc] = self.shape;
        let (ih, iw) = (frame.shape()[0], frame.shape()[1]);
        let Some(loan) = borrow(&mut self.output, &self.shape)? else {
            return Ok(());
        };
        let src = frame.data()?;
        let committed = loan.write_host_and_commit(|dst| {
            for y in 0..oh {
                for x in 0..ow {
                    let (sy, sx) = (y * ih / oh, x * iw / ow);
                    for c in 0..oc.min(4) {
                        let d = usize::try_from((y * ow + x) * oc + c).unwrap_or(0);
                        let s = usize::try_from((sy * iw + sx) * 4 + c).unwrap_or(0);
                        dst[d] = src[s];
                    }
                }
            }
        })?;
        ignore_backpressure(self.output.emit(committed, EmitOptions::default()))
    }
}

/// Packed RGBA → grayscale: one byte per 4 input bytes.
#[operator]
struct Gray {
    #[input(dtype = u8, rank = 3)]
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 2,
        byte_span = input_max_byte_span(input).ceiling_divided_by(tensor_byte_span(4)))]
    output: Output<Tensor>,
}

impl Operator for Gray {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(frame) = self.input.receive() else {
            return Ok(());
        };
        let (h, w) = (frame.shape()[0], frame.shape()[1]);
        let Some(loan) = borrow(&mut self.output, &[h, w])? else {
            return Ok(());
        };
        let src = frame.data()?;
        let committed = loan.write_host_and_commit(|dst| {
            for (g, px) in dst.iter_mut().zip(src.chunks_exact(4)) {
                let y =
                    (u32::from(px[0]) * 77 + u32::from(px[1]) * 150 + u32::from(px[2]) * 29) >> 8;
                *g = u8::try_from(y).unwrap_or(u8::MAX);
            }
        })?;
        ignore_backpressure(self.output.emit(committed, EmitOptions::default()))
    }
}

/// Keeps a copy of every frame in a pool bounded conservatively by the input's bound.
#[operator]
struct Archive {
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, byte_span = input_max_byte_span(input))]
    output: Output<Tensor>,
    archived: u64,
}

impl Operator for Archive {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(frame) = self.input.receive() else {
            return Ok(());
        };
        let n = frame.byte_size() as u64;
        let Some(loan) = borrow(&mut self.output, &[n])? else {
            return Ok(());
        };
        let src = frame.data()?;
        let _copy = loan.write_host_and_commit(|dst| dst.copy_from_slice(src))?;
        self.archived += 1;
        Ok(())
    }
}

/// Packs up to `max_batch_size` gray images into one batch tensor.
#[operator(params = BatchParams)]
struct Batcher {
    #[input(dtype = u8, rank = 2)]
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 3,
        byte_span = parameter_projected_byte_span::<batch_output_bytes>())]
    output: Output<Tensor>,
    pending: Vec<Tensor>,
    max_batch_size: usize,
}

impl Operator for Batcher {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            self.pending.push(t);
        }
        if self.pending.len() < self.max_batch_size {
            return Ok(());
        }
        let (h, w) = (self.pending[0].shape()[0], self.pending[0].shape()[1]);
        let n = self.pending.len() as u64;
        let Some(loan) = borrow(&mut self.output, &[n, h, w])? else {
            self.pending.clear();
            return Ok(());
        };
        let images = std::mem::take(&mut self.pending);
        let _batch = loan.write_host_and_commit(|dst| {
            for (chunk, img) in dst
                .chunks_exact_mut(usize::try_from(h * w).unwrap_or(0))
                .zip(&images)
            {
                if let Ok(src) = img.data() {
                    chunk.copy_from_slice(src);
                }
            }
        })?;
        self.pending = images;
        self.pending.clear();
        Ok(())
    }
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    let mut g = Graph::new();
    let cam = app.params::<CameraParams>("camera")?;
    let resize = app.params::<ResizeParams>("resize")?;
    let batch = app.params::<BatchParams>("batcher")?;
    let (width, height) = (cam.values().width, cam.values().height);
    let shape = resize.values().output_shape;
    let max_batch = usize::try_from(batch.values().max_batch_size).unwrap_or(1);
    let camera = g.add_operator(
        "camera",
        Camera {
            frames: Output::default(),
            width,
            height,
            frame: 0,
        },
        cam,
    )?;
    let resizer = g.add_operator(
        "resize",
        Resize {
            input: Input::default(),
            output: Output::default(),
            shape,
        },
        resize,
    )?;
    let gr = g.add_operator(
        "gray",
        Gray {
            input: Input::default(),
            output: Output::default(),
        },
        holo_runtime::ParamSet::defaults()?,
    )?;
    let archive = g.add_operator(
        "archive",
        Archive {
            input: Input::default(),
            output: Output::default(),
            archived: 0,
        },
        holo_runtime::ParamSet::defaults()?,
    )?;
    let batcher = g.add_operator(
        "batcher",
        Batcher {
            input: Input::default(),
            output: Output::default(),
            pending: Vec::with_capacity(max_batch),
            max_batch_size: max_batch,
        },
        batch,
    )?;
    g.add_flow(camera.frames, resizer.input, ConnectionOptions::default());
    g.add_flow(resizer.output, gr.input, ConnectionOptions::default());
    g.add_flow(resizer.output, archive.input, ConnectionOptions::default());
    g.add_flow(
        gr.output,
        batcher.input,
        ConnectionOptions::default().with_queue_depth(u32::try_from(max_batch).unwrap_or(1)),
    );
    // The finite-maximum lifecycle graph.
    let sensor_params = app.params::<SensorParams>("sensor")?;
    let shape = sensor_params.values().frame_shape;
    let sensor = g.add_operator(
        "sensor",
        Sensor {
            frames: Output::default(),
            shape,
        },
        sensor_params,
    )?;
    let rec = g.add_operator(
        "recorder",
        Recorder {
            frames: Input::default(),
            recorded: 0,
        },
        app.params::<RecorderParams>("recorder")?,
    )?;
    let lifecycle = g.add_flow(sensor.frames, rec.frames, ConnectionOptions::default());
    let sizing = app.params::<SizingParams>("automatic_queue_sizing")?;
    let mut options = CompileOptions::default();
    options.automatic_queue_sizing.headroom_ratio = RateRatio::new(
        sizing.values().headroom_numerator,
        sizing.values().headroom_denominator,
    );
    app.on_plan(move |plan, out| {
        print_derivations(plan, out);
        print_lifecycle(plan, lifecycle, out);
    });
    app.on_session(move |plan, session, out| inspect_lifecycle(plan, session, lifecycle, out));
    Ok((g, options))
}

fn mib(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        #[allow(clippy::cast_precision_loss, reason = "display only")]
        let m = bytes as f64 / MIB as f64;
        format!("{m:.3} MiB")
    }
}

/// The lifecycle pool's logical capacity, active and admitted, from the plan's records.
fn print_lifecycle(plan: &ExecutionPlan, edge: EdgeId, out: HumanOutput) {
    let Some(d) = plan.pool_capacity_dependency("sensor.frames") else {
        return;
    };
    if let Some(r) = plan.queue_sizing_recipe(u32::try_from(edge.index()).unwrap_or(u32::MAX)) {
        out.println(format_args!(
            "lifecycle edge e{}: {} Hz × {} s, headroom {} → depth {} ({}); admitted {} Hz → {}",
            r.edge,
            r.rate_hz.as_deref().unwrap_or("unavailable"),
            r.horizon_seconds.as_deref().unwrap_or("unavailable"),
            r.headroom_ratio,
            r.queue_depth,
            r.depth_source,
            r.admitted_max_hz.as_deref().unwrap_or("unavailable"),
            r.admitted_ceiling
                .map_or("unavailable".to_owned(), |c| c.to_string()),
        ));
    }
    out.println(format_args!(
        "active: {} + {} + {} + {} = {} entries; {} × {} = {}",
        d.active_queue_entries,
        d.consumer_retention,
        d.producer_loans,
        d.retirement,
        d.active_entries,
        d.active_entries,
        mib(d.per_slot_bytes),
        mib(d.active_logical_payload_bytes)
    ));
    match (
        d.admitted_queue_entries,
        d.admitted_entries,
        d.admitted_logical_payload_bytes,
    ) {
        (Some(q), Some(n), Some(b)) => out.println(format_args!(
            "admitted: {q} + {} + {} + {} = {n} entries; {n} × {} = {}",
            d.consumer_retention,
            d.producer_loans,
            d.retirement,
            mib(d.per_slot_bytes),
            mib(b)
        )),
        _ => out.println("admitted: unavailable (a rate has no admitted maximum)"),
    }
    for p in plan.provider_allocation_plans() {
        if p.pool == d.pool {
            out.println(format_args!(
                "provider {}: {} logical entries, {} logical payload; physical reservation {}",
                p.provider,
                p.logical_entries,
                mib(p.logical_payload_bytes),
                p.physical_reserved_bytes
                    .map_or("unavailable".to_owned(), mib)
            ));
        }
    }
}

/// Renders the lifecycle edge against the session's published generation (and the
/// latest rejected candidate, when there is one), in both formats.
fn inspect_lifecycle(plan: &ExecutionPlan, session: &RunSession, edge: EdgeId, out: HumanOutput) {
    let snapshot = session.capture_rate_generations();
    for generation in [
        snapshot.published().map(|p| p.rate_generation),
        snapshot.last_rejected().map(|r| r.rate_generation),
    ]
    .into_iter()
    .flatten()
    {
        for format in [
            RateQueueInspectionFormat::HumanText,
            RateQueueInspectionFormat::CanonicalJson,
        ] {
            match render_rate_queue_inspection(plan, &snapshot, generation, edge, format) {
                Ok(text) if format == RateQueueInspectionFormat::CanonicalJson => {
                    let marker = text.contains(holo_runtime::plan::RATE_QUEUE_INSPECTION_SCHEMA);
                    out.println(format_args!(
                        "canonical JSON inspection: {} bytes, schema marker present: {marker}",
                        text.len()
                    ));
                }
                Ok(text) => out.print(text),
                Err(e) => eprintln!("inspection failed: {e}"),
            }
        }
    }
}

/// Prints every derivation: the expression, what it read, per-slot bytes (from the
/// derivation), slot count and aggregate bytes (from the allocation, authoritative there).
fn print_derivations(plan: &holo_runtime::plan::ExecutionPlan, out: HumanOutput) {
    out.println("byte-span derivations:");
    for d in plan.tensor_byte_span_derivations() {
        let kind = plan.tensor_allocation(&d.pool).map_or("?".to_owned(), |a| {
            format!("{} (from {})", a.memory_kind, a.memory_kind_source)
        });
        out.println(format_args!(
            "  {}: {}  reads [{}]",
            d.pool,
            d.expression,
            d.dependencies.join(", ")
        ));
        out.println(format_args!(
            "    {} B/slot × {} slots = {} B, {kind}",
            d.per_slot_bytes,
            d.slot_count.map_or("null".to_owned(), |n| n.to_string()),
            d.aggregate_bytes
                .map_or("null".to_owned(), |n| n.to_string()),
        ));
    }
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/derived_tensor_pool_capacity.toml"),
        build,
    )
}
