//! `params`: holo's deployment parameters end to end.
//!
//! Defines the parameter schema a resize operator would use, lists it as JSON, loads a
//! TOML file (`--config FILE`, default: the embedded `config/params.toml`), prints the
//! accepted generation-zero values (sensitive fields redacted), and then shows the exact
//! error holo gives for each class of bad value.
//!
//! ```text
//! cargo run -p holo-examples --example params -- [--config FILE.toml] [--schema]
//! ```

use std::process::ExitCode;

use holo_runtime::{MemoryKind, ParamEnum, ParamSchema, ParamSet, param_ref};

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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config: Option<String> = None;
    let mut show_schema = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => {
                let Some(path) = it.next() else {
                    eprintln!("error: --config needs a file path");
                    return ExitCode::from(2);
                };
                config = Some(path.clone());
            }
            "--schema" => show_schema = true,
            other => {
                eprintln!(
                    "error: unknown argument {other:?}; usage: params [--config FILE.toml] [--schema]"
                );
                return ExitCode::from(2);
            }
        }
    }
    if show_schema {
        println!(
            "schema:\n{:#}",
            holo_runtime::params::schema_json::<ResizeParams>()
        );
    }
    let (origin, text) = match &config {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) => (path.clone(), t),
            Err(e) => {
                eprintln!("error: cannot read {path}: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => (
            "embedded config/params.toml".to_owned(),
            EMBEDDED.to_owned(),
        ),
    };
    let set = match ParamSet::<ResizeParams>::from_toml_str(&text) {
        Ok(set) => set,
        Err(e) => {
            eprintln!("error: {origin}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("accepted {origin} as generation {}:", set.generation());
    println!("{:#}", set.to_json());
    let shape = param_ref!(ResizeParams::output_shape);
    let width = param_ref!(ResizeParams::geometry.width);
    println!(
        "{} = {:?}; {} = {}",
        shape.path(),
        shape.get(set.values()),
        width.path(),
        width.get(set.values())
    );

    println!("\nrejections (each names the field path, what was expected and what was found):");
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
                eprintln!("error: the {what} document was accepted");
                return ExitCode::FAILURE;
            }
            Err(e) => println!("  {what:<26} {e}"),
        }
    }
    ExitCode::SUCCESS
}
