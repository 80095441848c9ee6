//! `rate_aware_ports`: rate declarations and the queue depths the compiler derives from
//! them in exact rational arithmetic (the seed's "Size queue entries from nominal rates").
//!
//! ```text
//! camera (clock, nominal fps) → filter (follows 1/1) ─┬→ fusion          (on_arrival(frames); imu window: automatic)
//!                                                     ├→ fusion_explicit (same contract; imu edge: explicit depth)
//!                                                     └→ thumbnailer (follows 1/4) → thumbnails sink
//! imu (clock, nominal rate_hz) ──────────────────────────→ fusion.imu, fusion_explicit.imu
//! legacy (no rate metadata) → logger (clock poll_hz; expected_rate = expected_hz: the fallback)
//! ```
//!
//! It prints the fixed, one-to-one and 1/4 declaration chain; the camera-driven IMU
//! calculation (`⌈1000 × 1/60⌉ = 17` arrivals, `⌈17 × 2⌉ = 34` entries at the default
//! headroom); the explicit-depth sibling (kept, with a warning); and the weaker
//! `expected_rate` fallback, used only because the legacy source declares no rate. Then
//! it runs, and renders the published rate generation's inspection of the IMU edge.
//!
//! ```text
//! cargo run -p holo-examples --example rate_aware_ports -- [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::process::ExitCode;

use holo_runtime::app::{App, AppArgs, HumanOutput};
use holo_runtime::plan::{ExecutionPlan, RateQueueInspectionFormat, render_rate_queue_inspection};
use holo_runtime::{
    CompileOptions, ConnectionOptions, EdgeId, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, Operator, Output, ParamSchema, ParamSet, RateRatio, Result, RunSession, operator,
};

/// The compile-wide headroom ratio.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.RateAware.Sizing", version = 1)]
struct SizingParams {
    /// Headroom numerator.
    #[param(min = 1, max = 1000, default = 2)]
    headroom_numerator: u64,
    /// Headroom denominator.
    #[param(min = 1, max = 1000, default = 1)]
    headroom_denominator: u64,
}

/// Camera rate.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.RateAware.Camera", version = 1)]
struct CameraParams {
    /// Frames per second.
    #[param(min = 1, max = 240, recompile_required, default = 60)]
    fps: u32,
}

/// IMU rate.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.RateAware.Imu", version = 1)]
struct ImuParams {
    /// Samples per second.
    #[param(min = 1, max = 4000, recompile_required, default = 1000)]
    rate_hz: u32,
}

/// The explicit sibling's depth.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.RateAware.Explicit", version = 1)]
struct ExplicitParams {
    /// The exact depth of the IMU edge.
    #[param(min = 1, max = 100_000, default = 20)]
    queue_depth: u32,
}

/// Logger rates.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.RateAware.Logger", version = 1)]
struct LoggerParams {
    /// The rate the logger expects of its (undeclared) upstream.
    #[param(min = 1, max = 100_000, recompile_required, default = 200)]
    expected_hz: u32,
    /// The logger's clock.
    #[param(min = 1, max = 1000, recompile_required, default = 30)]
    poll_hz: u32,
}

/// A camera frame (its sequence number).
#[derive(Clone, Copy, Debug)]
struct Frame(u64);

/// One IMU sample.
#[derive(Clone, Copy, Debug)]
struct ImuSample {
    seq: u64,
}

fn ignore_backpressure(r: Result<()>) -> Result<()> {
    match r {
        Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
        other => other,
    }
}

/// A fixed-rate camera: its clock and its output's nominal rate are the `fps` parameter.
#[operator(params = CameraParams, trigger = clock(rate = parameter_rate(param_ref!(CameraParams::fps))))]
struct Camera {
    #[output(nominal_rate = parameter_rate(param_ref!(CameraParams::fps)))]
    frames: Output<Frame>,
    seq: u64,
}

impl Operator for Camera {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.seq += 1;
        ignore_backpressure(self.frames.emit(Frame(self.seq), EmitOptions::default()))
    }
}

/// The IMU: a clock at `rate_hz`.
#[operator(params = ImuParams, trigger = clock(rate = parameter_rate(param_ref!(ImuParams::rate_hz))))]
struct Imu {
    #[output(nominal_rate = parameter_rate(param_ref!(ImuParams::rate_hz)))]
    samples: Output<ImuSample>,
    seq: u64,
}

impl Operator for Imu {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.seq += 1;
        ignore_backpressure(
            self.samples
                .emit(ImuSample { seq: self.seq }, EmitOptions::default()),
        )
    }
}

/// One-to-one: its output's rate follows its input's by 1/1.
#[operator(trigger = on_arrival(frames))]
struct Filter {
    frames: Input<Frame>,
    #[output(follows(frames, RateRatio::new(1, 1)))]
    filtered: Output<Frame>,
}

impl Operator for Filter {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if let Some(f) = self.frames.receive() {
            ignore_backpressure(self.filtered.emit(f, EmitOptions::default()))?;
        }
        Ok(())
    }
}

/// One thumbnail per four frames: the output follows the input by 1/4. `follows` only
/// declares the rate; the operator decides when to emit.
#[operator(trigger = on_arrival(frames))]
struct Thumbnailer {
    frames: Input<Frame>,
    #[output(follows(frames, RateRatio::new(1, 4)))]
    thumbnails: Output<Frame>,
}

impl Operator for Thumbnailer {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if let Some(f) = self.frames.receive()
            && f.0 % 4 == 0
        {
            ignore_backpressure(self.thumbnails.emit(f, EmitOptions::default()))?;
        }
        Ok(())
    }
}

/// Consumes thumbnails.
#[operator]
struct ThumbnailSink {
    thumbnails: Input<Frame>,
}

impl Operator for ThumbnailSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let _ = self.thumbnails.receive();
        Ok(())
    }
}

/// Camera-driven fusion: fires on each frame and sees every IMU sample since its last
/// activation (a window; the last sample is reused when none arrived).
#[operator(trigger = on_arrival(frames))]
struct Fusion {
    frames: Input<Frame>,
    #[input(window, missing = reuse_last)]
    imu: Input<ImuSample>,
    fused: u64,
}

impl Operator for Fusion {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let _frame = self.frames.receive();
        let _rate = ctx.rate(&self.imu); // O(1), allocation-free
        while let Some(s) = self.imu.receive() {
            self.fused = self.fused.wrapping_add(s.seq);
        }
        Ok(())
    }
}

/// A source that declares no rate at all.
#[operator]
struct Legacy {
    out: Output<u64>,
    n: u64,
}

impl Operator for Legacy {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        ignore_backpressure(self.out.emit(self.n, EmitOptions::default()))
    }
}

/// Polls on its own clock; its input's `expected_rate` is the weaker fallback, used
/// because the legacy upstream positively declares no rate.
#[operator(params = LoggerParams, trigger = clock(rate = parameter_rate(param_ref!(LoggerParams::poll_hz))))]
struct Logger {
    #[input(window, missing = reuse_last, expected_rate = parameter_rate(param_ref!(LoggerParams::expected_hz)))]
    values: Input<u64>,
}

impl Operator for Logger {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.values.receive().is_some() {}
        Ok(())
    }
}

fn fusion() -> Fusion {
    Fusion {
        frames: Input::default(),
        imu: Input::default(),
        fused: 0,
    }
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    let sizing = app.params::<SizingParams>("automatic_queue_sizing")?;
    let explicit = app.params::<ExplicitParams>("fusion_explicit")?;
    let mut options = CompileOptions::default();
    options.automatic_queue_sizing.headroom_ratio = RateRatio::new(
        sizing.values().headroom_numerator,
        sizing.values().headroom_denominator,
    );
    let mut g = Graph::new();
    let cam = g.add_operator(
        "camera",
        Camera {
            frames: Output::default(),
            seq: 0,
        },
        app.params::<CameraParams>("camera")?,
    )?;
    let imu = g.add_operator(
        "imu",
        Imu {
            samples: Output::default(),
            seq: 0,
        },
        app.params::<ImuParams>("imu")?,
    )?;
    let filter = g.add_operator(
        "filter",
        Filter {
            frames: Input::default(),
            filtered: Output::default(),
        },
        ParamSet::defaults()?,
    )?;
    let thumb = g.add_operator(
        "thumbnailer",
        Thumbnailer {
            frames: Input::default(),
            thumbnails: Output::default(),
        },
        ParamSet::defaults()?,
    )?;
    let sink = g.add_operator(
        "thumbnail_sink",
        ThumbnailSink {
            thumbnails: Input::default(),
        },
        ParamSet::defaults()?,
    )?;
    let fus = g.add_operator("fusion", fusion(), ParamSet::defaults()?)?;
    let fus_x = g.add_operator("fusion_explicit", fusion(), ParamSet::defaults()?)?;
    let legacy = g.add_operator(
        "legacy",
        Legacy {
            out: Output::default(),
            n: 0,
        },
        ParamSet::defaults()?,
    )?;
    let logger = g.add_operator(
        "logger",
        Logger {
            values: Input::default(),
        },
        app.params::<LoggerParams>("logger")?,
    )?;
    let auto = ConnectionOptions::default();
    g.add_flow(cam.frames, filter.frames, auto);
    g.add_flow(filter.filtered, fus.frames, auto);
    g.add_flow(filter.filtered, fus_x.frames, auto);
    g.add_flow(filter.filtered, thumb.frames, auto);
    g.add_flow(thumb.thumbnails, sink.thumbnails, auto);
    let imu_edge = g.add_flow(imu.samples, fus.imu, auto);
    let explicit_edge = g.add_flow(
        imu.samples,
        fus_x.imu,
        ConnectionOptions::default().with_queue_depth(explicit.values().queue_depth),
    );
    let fallback_edge = g.add_flow(legacy.out, logger.values, auto);
    app.on_plan(move |plan, out| print_rates(plan, imu_edge, explicit_edge, fallback_edge, out));
    app.on_session(move |plan, session, out| inspect(plan, session, imu_edge, out));
    Ok((g, options))
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("unavailable".to_owned(), |v| v.to_string())
}

/// Prints the declaration chain and the three sizing cases, all from the plan.
fn print_rates(
    plan: &ExecutionPlan,
    imu: EdgeId,
    explicit: EdgeId,
    fallback: EdgeId,
    out: HumanOutput,
) {
    out.println("port rates (Hz):");
    for r in plan.port_rates() {
        if r.active_hz.is_none() && r.expected_rate_hz.is_none() {
            continue;
        }
        out.println(format_args!(
            "  {}.{} ({}): {} [{}{}]{}",
            r.operator_name,
            r.port,
            r.direction,
            opt(r.active_hz.as_deref()),
            r.source,
            r.follows
                .as_deref()
                .map(|f| format!(" {f}"))
                .unwrap_or_default(),
            r.expected_rate_hz
                .as_deref()
                .map(|e| format!(", expected_rate {e}"))
                .unwrap_or_default(),
        ));
    }
    for (label, edge) in [
        ("camera-driven imu (automatic)", imu),
        ("explicit-depth sibling", explicit),
        ("expected_rate fallback", fallback),
    ] {
        let Some(r) = plan.queue_sizing_recipe(u32::try_from(edge.index()).unwrap_or(u32::MAX))
        else {
            continue;
        };
        out.println(format_args!(
            "{label}: e{}: ⌈{} Hz × {} s⌉ = {} arrivals; ⌈{} × {}⌉ = {} recommended; hard floor {}; depth {} ({}); admitted ceiling {}",
            r.edge,
            opt(r.rate_hz.as_deref()),
            opt(r.horizon_seconds.as_deref()),
            opt(r.nominal_arrivals),
            opt(r.nominal_arrivals),
            r.headroom_ratio,
            opt(r.recommendation),
            r.hard_floor,
            r.queue_depth,
            r.depth_source,
            opt(r.admitted_ceiling),
        ));
    }
    for w in plan.warnings() {
        out.println(w);
    }
}

/// Renders the IMU edge against the published generation (and the rejected one, if any).
fn inspect(plan: &ExecutionPlan, session: &RunSession, edge: EdgeId, out: HumanOutput) {
    let snapshot = session.capture_rate_generations();
    if let Some(published) = snapshot.published() {
        match render_rate_queue_inspection(
            plan,
            &snapshot,
            published.rate_generation,
            edge,
            RateQueueInspectionFormat::HumanText,
        ) {
            Ok(text) => out.print(text),
            Err(e) => eprintln!("inspection failed: {e}"),
        }
    }
    if let Some(rejected) = snapshot.last_rejected() {
        out.println(format_args!(
            "rejected rate generation {}: {} ({})",
            rejected.rate_generation, rejected.code, rejected.reason
        ));
    }
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/rate_aware_ports.toml"),
        build,
    )
}
