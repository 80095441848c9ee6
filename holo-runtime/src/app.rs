//! The standard command line of every holo application.
//!
//! ```text
//! --config FILE.toml   parameters, one table per operator name ([camera], [resize], …)
//! --print-plan         print the plan as text
//! --plan-json          print the plan as canonical JSON
//! --plan-dot           print the plan as Graphviz DOT
//! --frames N           run until every source has produced N frames and the graph drained
//! --duration SECS      run for SECS seconds
//! ```
//!
//! With a plan flag and neither `--frames` nor `--duration`, the application prints and
//! exits without running. Otherwise it runs (`--frames 100` when neither is given) and
//! prints a run summary: frames, drops, p50/p99 latency from capture time, and every
//! pool's slots after teardown.
//!
//! A flag that prints a document prints exactly that document on stdout: with
//! `--print-plan`, `--plan-json` or `--plan-dot`, everything else the application says
//! (its title, its explanations, the `device:` line, the run summary) goes to stderr, so
//! `--plan-json | jq` and `--plan-dot | dot -Tsvg` work. That is what [`HumanOutput`] is
//! for: an application prints its human text there, never with `println!`. The three plan
//! flags each print a document, so two of them together are a usage error.
//!
//! The device a run opens is the one the plan binds (`open_backend_for`): `cuda:N` or
//! `opencl:N` exactly, or, for CUDA device 0, the software device where no CUDA device
//! opens; `HOLO_DEVICE` overrides it. A device this machine lacks is `DeviceUnavailable`
//! naming the bound pool, and the configuration field that chose the device when the
//! application said which ([`App::device_binding_from`]); nothing runs elsewhere.
//!
//! ```no_run
//! use holo_runtime::app::{App, AppArgs};
//! # use holo_runtime::{CompileOptions, Graph};
//! # fn build(app: &mut App) -> holo_runtime::Result<Graph> { Ok(Graph::new()) }
//! fn main() -> std::process::ExitCode {
//!     let args = AppArgs::from_env();
//!     App::main(args, "[camera]\nwidth = 640\n", |app| {
//!         app.human_output().println("camera → display");
//!         let graph = build(app)?;
//!         Ok((graph, CompileOptions::default()))
//!     })
//! }
//! ```

use std::collections::BTreeSet;
use std::fmt::Display;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use holo_params::{FieldPath, ParamSchema, ParamSet};

use crate::plan::ExecutionPlan;
use crate::{
    CompileOptions, Error, ErrorCode, Graph, Result, RunReport, RunSession, SessionOptions,
};

/// The standard flags (derive `clap::Parser`; embed with `#[command(flatten)]`).
#[derive(Clone, Debug, Default, clap::Parser)]
#[command(about = "A holo application")]
pub struct AppArgs {
    /// Parameters: a TOML file with one table per operator name.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Print the execution plan as text.
    #[arg(long)]
    pub print_plan: bool,
    /// Print the execution plan as canonical JSON.
    #[arg(long)]
    pub plan_json: bool,
    /// Print the execution plan as Graphviz DOT.
    #[arg(long)]
    pub plan_dot: bool,
    /// Run until every source has produced N frames and the graph has drained.
    #[arg(long, value_name = "N")]
    pub frames: Option<u64>,
    /// Run for SECS seconds.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub duration: Option<f64>,
}

impl AppArgs {
    /// Parses the process's command line (exits with clap's usage message on a bad flag).
    pub fn from_env() -> AppArgs {
        <AppArgs as clap::Parser>::parse()
    }

    /// Checks what clap cannot: at most one plan flag (each prints a document on stdout),
    /// and a `--duration` that is a representable run length. A failure is
    /// `InvalidArgument` naming the flags.
    pub fn check(&self) -> Result<()> {
        let documents: Vec<&str> = [
            (self.print_plan, "--print-plan"),
            (self.plan_json, "--plan-json"),
            (self.plan_dot, "--plan-dot"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        if let [first, .., last] = documents[..] {
            let all = if documents.len() == 2 {
                format!("{first} and {last}")
            } else {
                format!(
                    "{}, and {last}",
                    documents[..documents.len() - 1].join(", ")
                )
            };
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("{all} each print the plan on stdout; give one of them"),
            ));
        }
        run_length(self.duration).map(|_| ())
    }

    /// Where human text goes under these flags.
    pub fn human_output(&self) -> HumanOutput {
        HumanOutput {
            to_stderr: self.print_plan || self.plan_json || self.plan_dot,
        }
    }
}

/// Where an application's human text goes — its title and explanations, the `device:`
/// line, the run summary: stdout, or stderr when stdout carries a document
/// (`--print-plan`, `--plan-json`, `--plan-dot`).
///
/// A failed write (a closed pipe) is ignored: human text is never worth a panic or an
/// error of the pipeline.
#[derive(Clone, Copy, Debug)]
pub struct HumanOutput {
    to_stderr: bool,
}

impl HumanOutput {
    /// Human text on stdout (what [`run_plan`] uses: it prints no document).
    pub fn stdout() -> HumanOutput {
        HumanOutput { to_stderr: false }
    }

    /// Prints `text` as it is.
    pub fn print(self, text: impl Display) {
        if self.to_stderr {
            let _ = write!(std::io::stderr().lock(), "{text}");
        } else {
            let _ = write!(std::io::stdout().lock(), "{text}");
        }
    }

    /// Prints `text` and a newline.
    pub fn println(self, text: impl Display) {
        self.print(format_args!("{text}\n"));
    }
}

/// An application's configuration: the parsed TOML and which operator tables were used.
pub struct App {
    args: AppArgs,
    source: String,
    table: toml::Table,
    used: BTreeSet<String>,
    on_plan: Option<PlanHook>,
    on_session: Option<Box<SessionHook>>,
    /// The device to run on instead of the one the environment selects.
    device: Option<std::sync::Arc<dyn crate::device::DeviceBackend>>,
    /// Where the configuration names the plan's device ([`App::device_binding_from`]).
    binding_source: Option<String>,
}

type PlanHook = Box<dyn Fn(&ExecutionPlan, HumanOutput)>;
type SessionHook = dyn Fn(&ExecutionPlan, &RunSession, HumanOutput);

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("args", &self.args)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Checks the flags ([`AppArgs::check`]) and loads `--config FILE` (or
    /// `embedded_default` when no file is given). A missing file is `NotFound`; one that
    /// cannot be a config (a directory, more than 16 MiB, bytes that are not UTF-8 text,
    /// malformed TOML) is `InvalidArgument`; both are located at the file.
    pub fn new(args: AppArgs, embedded_default: &str) -> Result<App> {
        args.check()?;
        let (source, text) = match &args.config {
            Some(path) => (path.display().to_string(), read_config(path)?),
            None => (
                "the embedded default config".to_owned(),
                embedded_default.to_owned(),
            ),
        };
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let at = e.span().map_or_else(
                || source.clone(),
                |s| {
                    let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                    format!("{source}, line {line}")
                },
            );
            Error::new(
                ErrorCode::InvalidArgument,
                format!("malformed TOML: {}", e.message()),
            )
            .at(at)
        })?;
        Ok(App {
            args,
            source,
            table,
            used: BTreeSet::new(),
            on_plan: None,
            on_session: None,
            device: None,
            binding_source: None,
        })
    }

    /// Calls `f` with the compiled plan before the flags' printing and the run (for an
    /// application that explains part of its plan every time it starts); `f` prints to
    /// the [`HumanOutput`] it is given.
    pub fn on_plan(&mut self, f: impl Fn(&ExecutionPlan, HumanOutput) + 'static) {
        self.on_plan = Some(Box::new(f));
    }

    /// Calls `f` with the plan and the running session right after it starts (for an
    /// application that inspects its rate generations); `f` prints to the [`HumanOutput`]
    /// it is given.
    pub fn on_session(&mut self, f: impl Fn(&ExecutionPlan, &RunSession, HumanOutput) + 'static) {
        self.on_session = Some(Box::new(f));
    }

    /// Runs the plan on `device` instead of the one `HOLO_DEVICE` selects (for an
    /// application that opens its device itself, such as one given a caller's OpenCL
    /// context).
    pub fn with_device(&mut self, device: std::sync::Arc<dyn crate::device::DeviceBackend>) {
        self.device = Some(device);
    }

    /// Says that the configuration's field `field_path` (`deployment.device`) names the
    /// device the application binds its outputs to: when that device is missing, the
    /// error then names this file and field, not only the binding.
    pub fn device_binding_from(&mut self, field_path: &str) {
        self.binding_source = Some(self.config_location(field_path));
    }

    /// `field_path` of this application's configuration, as errors name it
    /// (`config/app.toml: deployment.device`).
    pub fn config_location(&self, field_path: &str) -> String {
        format!("{}: {field_path}", self.source)
    }

    /// The parsed flags.
    pub fn args(&self) -> &AppArgs {
        &self.args
    }

    /// Where the application prints human text: stdout, or stderr when a flag prints a
    /// document on stdout.
    pub fn human_output(&self) -> HumanOutput {
        self.args.human_output()
    }

    /// The parameters of operator `operator`: its table (absent means all defaults),
    /// validated against `S`. Errors name the operator and the field path.
    pub fn params<S: ParamSchema>(&mut self, operator: &str) -> Result<ParamSet<S>> {
        self.used.insert(operator.to_owned());
        let empty = toml::Table::new();
        let table = match self.table.get(operator) {
            None => &empty,
            Some(toml::Value::Table(t)) => t,
            Some(other) => {
                return Err(Error::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "expected a table of parameters, found a {}",
                        other.type_str()
                    ),
                )
                .at(format!("{}: {operator}", self.source)));
            }
        };
        ParamSet::<S>::from_toml_table(table, &FieldPath::root().key(operator)).map_err(|e| {
            let at = format!("{}: {}", self.source, e.location().unwrap_or(operator));
            e.at(at)
        })
    }

    /// Rejects tables that name no operator the application asked for (a typo in an
    /// operator name would otherwise be silently ignored).
    pub fn check_unused(&self) -> Result<()> {
        let unknown: Vec<&String> = self
            .table
            .keys()
            .filter(|k| !self.used.contains(*k))
            .collect();
        if let Some(first) = unknown.first() {
            let known: Vec<&str> = self.used.iter().map(String::as_str).collect();
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "no operator is named {first:?}; the operators are: {}",
                    known.join(", ")
                ),
            )
            .at(format!("{}: [{first}]", self.source)));
        }
        Ok(())
    }

    /// Compiles `graph`, prints what the flags ask for, runs it, and prints the summary.
    /// Returns `None` when only printing was asked for.
    pub fn run(&self, graph: Graph, options: CompileOptions) -> Result<Option<RunReport>> {
        let a = &self.args;
        self.check_unused()?;
        // Every diagnostic travels in the error, as its message and its detail.
        let plan = crate::compile(&graph, options)?;
        let human = self.human_output();
        if let Some(f) = &self.on_plan {
            f(&plan, human);
        }
        // The document, alone on stdout (`App::new` checked that one flag at most asks).
        let document = if a.print_plan {
            Some(plan.render_human())
        } else if a.plan_json {
            Some(format!("{}\n", plan.json()))
        } else if a.plan_dot {
            Some(plan.dot())
        } else {
            None
        };
        if let Some(document) = &document {
            let _ = std::io::stdout().lock().write_all(document.as_bytes());
        }
        if document.is_some() && a.frames.is_none() && a.duration.is_none() {
            return Ok(None);
        }
        let report = run_plan_with(
            graph,
            &plan,
            a.frames,
            a.duration,
            human,
            self.on_session.as_deref(),
            RunDevice {
                given: self.device.clone(),
                binding_source: self.binding_source.as_deref(),
            },
        )?;
        human.print(summary(&report));
        Ok(Some(report))
    }

    /// The whole `main` of an application: loads the config, builds the graph with
    /// `build`, runs it, and turns an error into a message on stderr and exit code 1.
    pub fn main(
        args: AppArgs,
        embedded_default: &str,
        build: impl FnOnce(&mut App) -> Result<(Graph, CompileOptions)>,
    ) -> ExitCode {
        let result = App::new(args, embedded_default).and_then(|mut app| {
            let (graph, options) = build(&mut app)?;
            app.run(graph, options)
        });
        match result {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    }
}

/// Runs a plan for `frames` source activations (default 100 when neither limit is given)
/// or for `duration` seconds (a `duration` that is not a representable run length is
/// `InvalidArgument` naming `--duration`, before anything starts). Prints which device
/// runs the plan on stdout.
pub fn run_plan(
    graph: Graph,
    plan: &ExecutionPlan,
    frames: Option<u64>,
    duration: Option<f64>,
) -> Result<RunReport> {
    run_plan_with(
        graph,
        plan,
        frames,
        duration,
        HumanOutput::stdout(),
        None,
        RunDevice {
            given: None,
            binding_source: None,
        },
    )
}

/// The device a run opens: `given`, else the plan's, whose missing device names
/// `binding_source` (the configuration field that chose it) when there is one.
struct RunDevice<'a> {
    given: Option<std::sync::Arc<dyn crate::device::DeviceBackend>>,
    binding_source: Option<&'a str>,
}

/// `--duration SECS` as a run length: a non-negative number of seconds whose deadline,
/// counted from now, the monotonic clock can represent.
fn run_length(duration: Option<f64>) -> Result<Option<Duration>> {
    let Some(secs) = duration else {
        return Ok(None);
    };
    // `{secs:?}` prints `1e300` as the user wrote it, where `{secs}` prints 301 digits.
    let usage = |why: &str| {
        Error::new(
            ErrorCode::InvalidArgument,
            format!("--duration {secs:?}: {why}"),
        )
    };
    if secs.is_nan() || secs < 0.0 {
        return Err(usage("must be a non-negative number of seconds"));
    }
    let length = Duration::try_from_secs_f64(secs)
        .map_err(|_| usage("is longer than a duration can be (about 1.8e19 s)"))?;
    if Instant::now().checked_add(length).is_none() {
        return Err(usage(
            "is longer than this platform's monotonic clock can count from now",
        ));
    }
    Ok(Some(length))
}

fn run_plan_with(
    graph: Graph,
    plan: &ExecutionPlan,
    frames: Option<u64>,
    duration: Option<f64>,
    human: HumanOutput,
    on_session: Option<&SessionHook>,
    device: RunDevice<'_>,
) -> Result<RunReport> {
    let RunDevice {
        given: device,
        binding_source,
    } = device;
    let frames = match (frames, duration) {
        (None, None) => Some(100),
        (f, _) => f,
    };
    let limit = run_length(duration)?;
    let device = if plan_needs_device(plan) {
        let d = match device {
            Some(d) => d,
            // The device the plan binds (one at most: compile refuses two), not device 0:
            // a binding to a device this machine lacks is an error naming the binding.
            None => match plan.devices().first() {
                Some(r) => crate::device::open_backend_for(r.device).map_err(|e| {
                    let what = r.pools.first().map_or_else(
                        || format!("the plan's operators are bound to {}", r.device),
                        |p| format!("pool {p} is bound to {}", r.device),
                    );
                    e.at(match binding_source {
                        Some(field) => format!("{field} ({what})"),
                        None => format!(
                            "{what} (the deployment binding of the application's CompileOptions)"
                        ),
                    })
                })?,
                None => crate::device::open_backend_from_env()?,
            },
        };
        match d.backend_kind() {
            crate::device::BackendKind::Cuda => {
                human.println(format_args!("device: cuda:{}", d.ordinal()));
            }
            crate::device::BackendKind::OpenCl => {
                human.println(format_args!("device: opencl:{}", d.ordinal()));
            }
            crate::device::BackendKind::Software => human.println(
                "device: no CUDA device here, so the plan runs on holo's software device (worker-thread streams over host memory); set HOLO_REQUIRE_DEVICE=cuda to make this an error",
            ),
        }
        Some(d)
    } else {
        None
    };
    let session = RunSession::start(
        graph,
        plan,
        SessionOptions::default()
            .with_max_source_activations(frames)
            .with_device(device),
    )?;
    if let Some(f) = on_session {
        f(plan, &session, human);
    }
    // `run_length` checked that the deadline is representable; should the clock have moved
    // past that since, the run has no deadline rather than a panic.
    let deadline = limit.and_then(|d| Instant::now().checked_add(d));
    match (frames, limit) {
        (Some(_), Some(_)) => {
            if let Some(deadline) = deadline {
                let _ = session.wait_idle(deadline.saturating_duration_since(Instant::now()));
            } else {
                while !session.wait_idle(Duration::from_hours(1)) && !session.is_stopping() {}
            }
        }
        (Some(_), None) => {
            if !session.wait_idle(Duration::from_mins(10)) && !session.is_stopping() {
                session.stop();
                let _ = session.join();
                return Err(Error::new(
                    ErrorCode::Cancelled,
                    "the pipeline did not drain within 600 s",
                ));
            }
        }
        (None, Some(_)) => {
            while deadline.is_none_or(|d| Instant::now() < d) && !session.is_stopping() {
                let left = deadline.map_or(Duration::MAX, |d| {
                    d.saturating_duration_since(Instant::now())
                });
                std::thread::sleep(Duration::from_millis(5).min(left));
            }
        }
        (None, None) => {}
    }
    session.join()
}

/// The largest config file [`App::new`] reads (16 MiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The text of the config file at `path`, with the errors [`App::new`] documents.
fn read_config(path: &Path) -> Result<String> {
    let at = || path.display().to_string();
    let invalid = |why: String| Error::new(ErrorCode::InvalidArgument, why).at(at());
    // Reading a directory fails with a platform-specific error (or, on some, succeeds with
    // nothing), so ask first.
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(invalid("the config file is a directory".to_owned()));
    }
    let unreadable = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => Error::new(
            ErrorCode::NotFound,
            format!("cannot read the config file: {e}"),
        )
        .at(at()),
        _ => invalid(format!("cannot read the config file: {e}")),
    };
    // At most one byte past the limit is read: `/dev/zero` or a runaway generator behind
    // a pipe is refused, not read until memory runs out.
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(unreadable)?,
            MAX_CONFIG_BYTES + 1,
        ),
        &mut bytes,
    )
    .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(invalid(format!(
            "the config file is larger than {} MiB: a parameter file is a few kilobytes",
            MAX_CONFIG_BYTES >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        invalid(format!(
            "the config file is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Whether a plan needs a device backend: it has CUDA streams or device-backed pools.
pub fn plan_needs_device(plan: &ExecutionPlan) -> bool {
    plan.needs_device()
}

/// The run summary, as the applications print it.
pub fn summary(r: &RunReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let ms = |d: Option<Duration>| {
        d.map_or("n/a".to_owned(), |d| {
            format!("{:.3} ms", d.as_secs_f64() * 1e3)
        })
    };
    // A refusal handed back (`try_emit`, `try_publish`) and sent again is counted too:
    // say what the figure counts wherever it is not zero.
    let what = if r.drops == 0 {
        ""
    } else {
        " (entries evicted, or refused as Backpressured)"
    };
    let _ = writeln!(
        out,
        "run summary: {} drops{what}, latency p50 {}, p99 {} (from capture time), {:.3} s",
        r.drops,
        ms(r.latency_p50),
        ms(r.latency_p99),
        r.elapsed.as_secs_f64()
    );
    for (name, n) in &r.produced {
        let _ = writeln!(out, "  source {name}: {n} frames produced");
    }
    for (name, n) in &r.received {
        let _ = writeln!(out, "  sink {name}: {n} frames received");
    }
    for (name, n) in &r.activations {
        let _ = writeln!(out, "  {name}: {n} activations");
    }
    for p in &r.pools {
        let _ = writeln!(
            out,
            "  pool {}: {} loans, {} exhausted, {}/{} slots free after teardown",
            p.pool, p.loans, p.exhausted, p.free_at_end, p.slot_count
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::RunReport;

    fn report(drops: u64) -> RunReport {
        RunReport {
            produced: Vec::new(),
            received: Vec::new(),
            drops,
            activations: Vec::new(),
            latency_p50: None,
            latency_p99: None,
            pools: Vec::new(),
            elapsed: Duration::from_millis(5),
            ipc_imports: Vec::new(),
        }
    }

    #[test]
    fn the_summary_says_what_its_drops_count_where_there_are_any() {
        assert_eq!(
            super::summary(&report(0)).lines().next(),
            Some("run summary: 0 drops, latency p50 n/a, p99 n/a (from capture time), 0.005 s")
        );
        assert_eq!(
            super::summary(&report(34)).lines().next(),
            Some(
                "run summary: 34 drops (entries evicted, or refused as Backpressured), latency p50 n/a, p99 n/a (from capture time), 0.005 s"
            )
        );
    }
}
