//! A Chrome/Perfetto timeline of a run: holo-runtime's `tracing` feature reports a span
//! per compile pass, per start-up phase and per activation (operator, partition, frame
//! id), and `tracing-chrome` writes them as a trace file to open in `chrome://tracing`
//! or <https://ui.perfetto.dev>.
//!
//! ```text
//! cargo run -p holo-examples --features trace --example trace_timeline -- [TRACE.json] [FRAMES]
//! ```
//!
//! The pipeline: a source → a forwarder in a second partition → a sink in a third, so
//! the timeline shows three partition threads handing each frame on.

use std::process::ExitCode;
use std::time::Duration;

use holo_runtime::{
    CompileOptions, ConnectionOptions, EmitOptions, ExecutionContext, Graph, Input, Operator,
    Output, PartitionSpec, Partitioning, Result, RunSession, SessionOptions, compile, operator,
};
use tracing_subscriber::layer::SubscriberExt;

#[operator]
struct Source {
    out: Output<u64>,
    n: u64,
}

impl Operator for Source {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        // A full queue drops the frame: the timeline shows the refusal as an event.
        let _ = self.out.try_emit(self.n, EmitOptions::default());
        Ok(())
    }
}

#[operator]
struct Forward {
    input: Input<u64>,
    out: Output<u64>,
}

impl Operator for Forward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            let _ = self.out.try_emit(v * 2, EmitOptions::default());
        }
        Ok(())
    }
}

#[operator]
struct Sink {
    input: Input<u64>,
}

impl Operator for Sink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
}

fn run(frames: u64) -> Result<holo_runtime::RunReport> {
    let mut g = Graph::new();
    let s = g.add_operator_with_defaults(
        "source",
        Source {
            out: Output::default(),
            n: 0,
        },
    )?;
    let f = g.add_operator_with_defaults(
        "forward",
        Forward {
            input: Input::default(),
            out: Output::default(),
        },
    )?;
    let k = g.add_operator_with_defaults(
        "sink",
        Sink {
            input: Input::default(),
        },
    )?;
    g.add_flow(s.out, f.input, ConnectionOptions::default());
    g.add_flow(f.out, k.input, ConnectionOptions::default());
    let partitioning = Partitioning::Authored(
        ["source", "forward", "sink"]
            .iter()
            .map(|&o| PartitionSpec::new(o.to_owned(), vec![o.to_owned()]))
            .collect(),
    );
    let plan = compile(
        &g,
        CompileOptions::default().with_partitioning(partitioning),
    )?;
    let session = RunSession::start(g, &plan, SessionOptions::frames(frames))?;
    let _ = session.wait_idle(Duration::from_mins(1));
    session.join()
}

fn main() -> ExitCode {
    // `args_os`: a path need not be UTF-8 (`args` panics on one that is not).
    let mut args = std::env::args_os().skip(1);
    let path = args
        .next()
        .map_or_else(|| std::path::PathBuf::from("trace.json"), Into::into);
    let frames = match args.next().map(|n| n.to_str().map(str::parse::<u64>)) {
        None => 200,
        Some(Some(Ok(n))) => n,
        Some(Some(Err(e))) => {
            eprintln!("error: FRAMES: {e}");
            return ExitCode::FAILURE;
        }
        Some(None) => {
            eprintln!("error: FRAMES is not a number");
            return ExitCode::FAILURE;
        }
    };
    let file = match std::fs::File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: cannot create {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let (chrome, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .writer(file)
        .include_args(true)
        .build();
    if let Err(e) =
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(chrome))
    {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let result = run(frames);
    // Flushes and closes the trace file.
    drop(guard);
    match result {
        Ok(report) => {
            eprintln!(
                "wrote {}: {frames} frames, {} received; open it in chrome://tracing or https://ui.perfetto.dev",
                path.display(),
                report.received.first().map_or(0, |r| r.1)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
