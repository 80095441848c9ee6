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
//! The example prints every derivation (expression, what it read, per-slot bytes, slot
//! count, aggregate bytes), then runs the pipeline.
//!
//! ```text
//! cargo run -p holo-examples --example derived_tensor_pool_capacity -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;

use holo_runtime::app::{App, AppArgs};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, Operator, Output, ParamEnum, ParamSchema, Result, Tensor, TensorLoanRequest,
    byte_span_projector, operator,
};

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
            EmitOptions {
                capture_time: Some(ctx.activation_time()),
            },
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
    let camera_ports = g.add_operator(
        "camera",
        Camera {
            frames: Output::default(),
            width,
            height,
            frame: 0,
        },
        cam,
    )?;
    let resize_ports = g.add_operator(
        "resize",
        Resize {
            input: Input::default(),
            output: Output::default(),
            shape,
        },
        resize,
    )?;
    let gray_ports = g.add_operator(
        "gray",
        Gray {
            input: Input::default(),
            output: Output::default(),
        },
        holo_runtime::ParamSet::defaults()?,
    )?;
    let archive_ports = g.add_operator(
        "archive",
        Archive {
            input: Input::default(),
            output: Output::default(),
            archived: 0,
        },
        holo_runtime::ParamSet::defaults()?,
    )?;
    let batcher_ports = g.add_operator(
        "batcher",
        Batcher {
            input: Input::default(),
            output: Output::default(),
            pending: Vec::with_capacity(max_batch),
            max_batch_size: max_batch,
        },
        batch,
    )?;
    g.add_flow(
        camera_ports.frames,
        resize_ports.input,
        ConnectionOptions::default(),
    );
    g.add_flow(
        resize_ports.output,
        gray_ports.input,
        ConnectionOptions::default(),
    );
    g.add_flow(
        resize_ports.output,
        archive_ports.input,
        ConnectionOptions::default(),
    );
    g.add_flow(
        gray_ports.output,
        batcher_ports.input,
        ConnectionOptions {
            queue_depth: Some(u32::try_from(max_batch).unwrap_or(1)),
            ..Default::default()
        },
    );
    app.on_plan(print_derivations);
    Ok((g, CompileOptions::default()))
}

/// Prints every derivation: the expression, what it read, per-slot bytes (from the
/// derivation), slot count and aggregate bytes (from the allocation, authoritative there).
fn print_derivations(plan: &holo_runtime::ExecutionPlan) {
    println!("byte-span derivations:");
    for d in plan.tensor_byte_span_derivations() {
        let kind = plan.tensor_allocation(&d.pool).map_or("?".to_owned(), |a| {
            format!("{} (from {})", a.memory_kind, a.memory_kind_source)
        });
        println!(
            "  {}: {}  reads [{}]",
            d.pool,
            d.expression,
            d.dependencies.join(", ")
        );
        println!(
            "    {} B/slot × {} slots = {} B, {kind}",
            d.per_slot_bytes,
            d.slot_count.map_or("null".to_owned(), |n| n.to_string()),
            d.aggregate_bytes
                .map_or("null".to_owned(), |n| n.to_string()),
        );
    }
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/derived_tensor_pool_capacity.toml"),
        build,
    )
}
