//! `--duration`: every value that is not a representable run length is a usage error
//! (`InvalidArgument` naming the flag) returned before any session starts — never a panic
//! (issue 11: `1e300` panicked converting to a `Duration`, `1e19` overflowed the deadline
//! after the session had started).

mod common;

use common::{ByteSink, ByteSource};
use holo_runtime::app::{App, AppArgs, run_plan};
use holo_runtime::{CompileOptions, ConnectionOptions, ErrorCode, Graph, ParamSet, compile};

const OUT_OF_RANGE: [f64; 6] = [1e300, 1e19, f64::INFINITY, f64::NAN, -1.0, -1e-9];

fn graph() -> Graph {
    let (src, _) = ByteSource::new(16, 7);
    let (sink, _) = ByteSink::new(7, 0);
    let mut g = Graph::new();
    let a = g
        .add_operator("camera", src, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator("display", sink, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    g
}

fn assert_usage_error(err: &holo_runtime::Error, secs: f64) {
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{secs}: {err}");
    assert!(
        err.message().starts_with("--duration "),
        "{secs}: the message names the flag: {err}"
    );
}

#[test]
fn run_plan_rejects_an_out_of_range_duration_with_and_without_frames() {
    for secs in OUT_OF_RANGE {
        for frames in [None, Some(5)] {
            let g = graph();
            let plan = compile(&g, CompileOptions::default()).unwrap();
            let err = run_plan(g, &plan, frames, Some(secs)).unwrap_err();
            assert_usage_error(&err, secs);
        }
    }
}

#[test]
fn app_rejects_an_out_of_range_duration_before_any_session_starts() {
    for secs in OUT_OF_RANGE {
        let args = AppArgs {
            duration: Some(secs),
            ..AppArgs::default()
        };
        // The flags are checked when the application is set up, before the graph is built
        // (and so before any session could start).
        let err = App::new(args, "").unwrap_err();
        assert_usage_error(&err, secs);
    }
}

#[test]
fn a_representable_duration_runs() {
    for frames in [None, Some(3)] {
        let g = graph();
        let plan = compile(&g, CompileOptions::default()).unwrap();
        let report = run_plan(g, &plan, frames, Some(0.05)).unwrap();
        assert!(report.elapsed.as_secs_f64() < 30.0, "{report:?}");
    }
}
