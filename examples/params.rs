//! `params`: holo's deployment parameters end to end.
//!
//! Defines the parameter schema of a resize operator, loads its `[resize]` table from a
//! TOML file (`--config FILE`, default: the embedded `config/params.toml`), prints the
//! accepted generation-zero values (sensitive fields redacted) and the exact error holo
//! gives for each class of bad value, and then runs `resize → display`: the resize's pool
//! takes its per-slot bytes from `output_shape` and its memory kind from
//! `output_storage`. `--schema` prints the schema as JSON instead, and nothing else.
//!
//! ```text
//! cargo run -p holo-examples --example params -- [--schema] [--config FILE.toml]
//!     [--print-plan] [--plan-json] [--plan-dot] [--frames N] [--duration SECS]
//! ```

use std::io::Write as _;
use std::process::ExitCode;

use holo_runtime::app::{App, AppArgs, HumanOutput};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, MemoryKind, Operator, Output, ParamEnum, ParamSchema, ParamSet, Result, Tensor,
    TensorLoanRequest, operator, param_ref,
};

/// The standard flags and this example's own.
#[derive(Debug, clap::Parser)]
#[command(about = "holo's deployment parameters end to end")]
struct Args {
    #[command(flatten)]
    app: AppArgs,
    /// Print the resize parameters' schema as JSON, and nothing else.
    #[arg(long)]
    schema: bool,
}

/// How the resize interpolates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum Interpolation {
    Nearest,
    #[param(name = "bilinear")]
    Linear,
}

/// The output frame's geometry.
#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "com.example.Geometry", version = 1)]
struct Geometry {
    /// Output width in pixels.
    #[param(min = 1, max = 8192, recompile_required)]
    width: u32,
    /// Output height in pixels.
    #[param(min = 1, max = 8192, recompile_required)]
    height: u32,
}

/// Parameters of a resize operator.
#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "com.example.ResizeParams", version = 1)]
struct ResizeParams {
    /// Output geometry.
    geometry: Geometry,
    /// Output tensor shape: height, width, channels.
    #[param(min = 1, max = 8192, recompile_required)]
    output_shape: [u64; 3],
    /// Where output slots are allocated.
    #[param(enum_values(Host, PinnedHost), recompile_required, default = MemoryKind::Host)]
    output_storage: MemoryKind,
    /// Interpolation.
    #[param(default = Interpolation::Linear)]
    interpolation: Interpolation,
    /// Licence key of a vendor resize kernel; never printed.
    #[param(sensitive, default = String::new())]
    licence_key: String,
}

const EMBEDDED: &str = include_str!("config/params.toml");

/// Stands in for a resize (this example has no camera): fills each output frame of
/// `output_shape` with a byte that depends on the interpolation.
#[operator(params = ResizeParams)]
struct Resize {
    #[output(storage = runtime_pool, dtype = u8, rank = 3,
        byte_span = parameter_contiguous_byte_span(param_ref!(ResizeParams::output_shape)),
        memory_kind = parameter_memory_kind_exact(param_ref!(ResizeParams::output_storage)))]
    output: Output<Tensor>,
    shape: [u64; 3],
    fill: u8,
}

impl Operator for Resize {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let loan = match self.output.allocate_tensor(TensorLoanRequest {
            shape: &self.shape,
            dtype: DType::U8,
        }) {
            Ok(loan) => loan,
            // Real-time: a producer that outruns its consumer drops the frame.
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let fill = self.fill;
        let frame = loan.write_host_and_commit(|bytes| bytes.fill(fill))?;
        match self.output.emit(
            frame,
            EmitOptions::default().with_capture_time(ctx.activation_time()),
        ) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// Checks every byte of every frame it receives.
#[operator]
struct Display {
    #[input(dtype = u8, rank = 3)]
    frames: Input<Tensor>,
    expect: u8,
}

impl Operator for Display {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(frame) = self.frames.receive() {
            if frame.data()?.iter().any(|&b| b != self.expect) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    "display saw a byte other than the resize's fill",
                ));
            }
        }
        Ok(())
    }
}

/// Prints the accepted values, then one rejection per class of bad value.
fn explain(set: &ParamSet<ResizeParams>, origin: &str, out: HumanOutput) -> Result<()> {
    out.println(format_args!(
        "accepted [resize] of {origin} as generation {}:",
        set.generation()
    ));
    out.println(format_args!("{:#}", set.to_json()));
    let shape = param_ref!(ResizeParams::output_shape);
    let width = param_ref!(ResizeParams::geometry.width);
    out.println(format_args!(
        "{} = {:?}; {} = {}",
        shape.path(),
        shape.get(set.values()),
        width.path(),
        width.get(set.values())
    ));

    out.println("\nrejections (each names the field path, what was expected and what was found):");
    let bad = [
        (
            "unknown key",
            "output_shap = [1, 2, 3]\n[geometry]\nwidth = 1\nheight = 1",
        ),
        (
            "wrong type",
            "output_shape = [1, 2, 3]\n[geometry]\nwidth = \"wide\"\nheight = 1",
        ),
        (
            "out of bounds",
            "output_shape = [1, 2, 3]\n[geometry]\nwidth = 9000\nheight = 1",
        ),
        (
            "outside the enum domain",
            "output_shape = [1, 2, 3]\noutput_storage = \"cuda_device\"\n[geometry]\nwidth = 1\nheight = 1",
        ),
        (
            "array of the wrong length",
            "output_shape = [1, 2]\n[geometry]\nwidth = 1\nheight = 1",
        ),
        ("malformed file", "output_shape = [1, 2, 3\n"),
    ];
    for (what, doc) in bad {
        match ParamSet::<ResizeParams>::from_toml_str(doc) {
            Ok(_) => {
                return Err(Error::new(
                    ErrorCode::Internal,
                    format!("the {what} document was accepted"),
                ));
            }
            Err(e) => out.println(format_args!("  {what:<26} {e}")),
        }
    }
    Ok(())
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    let set = app.params::<ResizeParams>("resize")?;
    let origin = app.args().config.as_ref().map_or_else(
        || "the embedded config/params.toml".to_owned(),
        |p| p.display().to_string(),
    );
    explain(&set, &origin, app.human_output())?;
    let fill = match set.values().interpolation {
        Interpolation::Nearest => 0x4e,
        Interpolation::Linear => 0x4c,
    };
    let mut graph = Graph::new();
    let resize = Resize {
        output: Output::default(),
        shape: set.values().output_shape,
        fill,
    };
    let resize = graph.add_operator("resize", resize, set)?;
    let display = Display {
        frames: Input::default(),
        expect: fill,
    };
    let display = graph.add_operator("display", display, ParamSet::defaults()?)?;
    graph.add_flow(resize.output, display.frames, ConnectionOptions::default());
    Ok((graph, CompileOptions::default()))
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    if args.schema {
        // A flag that prints a document prints that document alone.
        let a = &args.app;
        if a.print_plan || a.plan_json || a.plan_dot {
            eprintln!(
                "error: InvalidArgument: --schema and the plan flags each print a document on stdout; give one of them"
            );
            return ExitCode::FAILURE;
        }
        // The schema is the same for every config and run: a flag that would change
        // either is a mistake to say, not to ignore.
        let ignored: Vec<&str> = [
            (a.config.is_some(), "--config"),
            (a.frames.is_some(), "--frames"),
            (a.duration.is_some(), "--duration"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        if !ignored.is_empty() {
            eprintln!(
                "error: InvalidArgument: --schema prints the parameter schema, which no {} changes; give it alone",
                ignored.join(" or ")
            );
            return ExitCode::FAILURE;
        }
        // A closed pipe (`--schema | head`) is ignored: the reader has what it wanted.
        let schema = holo_runtime::params::schema_json::<ResizeParams>();
        let _ = writeln!(std::io::stdout(), "{schema:#}");
        return ExitCode::SUCCESS;
    }
    App::main(args.app, EMBEDDED, build)
}
