//! A session stepped on the caller's thread, one scheduling round per `step` (issue 12,
//! item 6), a run report whose latency leaves out a warm-up, and operators added with
//! their default parameters.

mod common;

use common::Counter;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::{
    CompileOptions, ConnectionOptions, EmitOptions, ErrorCode, ExecutionContext, Graph, Input,
    Operator, Output, Result, RunSession, SessionOptions, compile, operator,
};

#[operator]
struct Forward {
    input: Input<u64>,
    out: Output<u64>,
}

impl Operator for Forward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            self.out.emit(v, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// Records what it receives; sleeps `slow` per value while `slow_left` lasts.
#[operator]
struct Sink {
    input: Input<u64>,
    got: Arc<Mutex<Vec<u64>>>,
    slow: Duration,
    slow_left: u32,
}

impl Operator for Sink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            if self.slow_left > 0 {
                self.slow_left -= 1;
                std::thread::sleep(self.slow);
            }
            self.got.lock().unwrap().push(v);
        }
        Ok(())
    }
}

fn graph(got: &Arc<Mutex<Vec<u64>>>, slow_left: u32) -> Graph {
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
        )
        .unwrap();
    let f = g
        .add_operator_with_defaults(
            "forward",
            Forward {
                input: Input::default(),
                out: Output::default(),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            Sink {
                input: Input::default(),
                got: Arc::clone(got),
                slow: Duration::from_millis(20),
                slow_left,
            },
        )
        .unwrap();
    g.add_flow(s.out, f.input, ConnectionOptions::default());
    g.add_flow(f.out, k.input, ConnectionOptions::default());
    g
}

fn options(split: bool) -> CompileOptions {
    common::partitioned(if split {
        &[&["source"], &["forward"], &["sink"]]
    } else {
        &[]
    })
}

#[test]
fn each_step_runs_one_round_on_the_callers_thread() {
    for split in [false, true] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = graph(&got, 0);
        let plan = compile(&g, options(split)).unwrap();
        let mut session = RunSession::start_stepped(g, &plan, SessionOptions::frames(5)).unwrap();
        assert!(
            got.lock().unwrap().is_empty(),
            "nothing runs before the first step"
        );
        for k in 1..=5 {
            // Source, forward and sink each run once: partitions go in plan order.
            assert_eq!(session.step().unwrap(), 3, "step {k}, split {split}");
            assert_eq!(*got.lock().unwrap(), (1..=k).collect::<Vec<u64>>());
        }
        assert_eq!(
            session.step().unwrap(),
            0,
            "the source is done: nothing is ready"
        );
        assert!(session.wait_idle(Duration::ZERO));
        // Another thread may not step it.
        let e = std::thread::scope(|s| s.spawn(|| session.step()).join().unwrap()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotSupported);
        let report = session.join().unwrap();
        assert_eq!(report.received, [("sink".to_owned(), 5)]);
        assert_eq!(report.produced, [("source".to_owned(), 5)]);
    }
}

#[test]
fn a_threaded_session_cannot_be_stepped() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = graph(&got, 0);
    let plan = compile(&g, options(false)).unwrap();
    let mut session = RunSession::start(g, &plan, SessionOptions::frames(3)).unwrap();
    assert_eq!(session.step().unwrap_err().code(), ErrorCode::NotSupported);
    assert!(session.wait_idle(Duration::from_secs(10)));
    session.join().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn reset_latency_leaves_the_warm_up_out_of_the_report() {
    for reset in [false, true] {
        let got = Arc::new(Mutex::new(Vec::new()));
        // The first three frames wait 20 ms at the sink.
        let g = graph(&got, 3);
        let plan = compile(&g, options(false)).unwrap();
        let mut session = RunSession::start_stepped(g, &plan, SessionOptions::frames(40)).unwrap();
        for _ in 0..3 {
            session.step().unwrap();
        }
        if reset {
            session.reset_latency();
        }
        while session.step().unwrap() > 0 {}
        let report = session.join().unwrap();
        let p99 = report.latency_p99.unwrap();
        if reset {
            // Under the warm-up's 18 ms, with room for a loaded machine's preemption.
            assert!(p99 < Duration::from_millis(15), "{p99:?}");
        } else {
            // 3 of 40 frames took 20 ms: the 99th percentile is one of them.
            assert!(p99 >= Duration::from_millis(18), "{p99:?}");
        }
    }
}

#[test]
fn an_operator_without_a_default_for_a_parameter_is_named() {
    #[derive(Clone, Debug, holo_runtime::ParamSchema)]
    #[param(schema = "com.example.Needs", version = 1)]
    struct Needs {
        /// No default.
        #[param(min = 1, max = 10)]
        width: u32,
    }
    #[operator(params = Needs)]
    struct Needy {
        out: Output<u64>,
    }
    impl Operator for Needy {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            Ok(())
        }
    }
    let mut g = Graph::new();
    let e = g
        .add_operator_with_defaults(
            "needy",
            Needy {
                out: Output::default(),
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("needy"), "{e}");
    assert!(e.to_string().contains("width"), "{e}");
}
