//! Every value on a flow carries a frame id, its capture time and its publish time, and a
//! forwarding operator keeps the first two (issue 12, item 4).
#![allow(
    clippy::many_single_char_names,
    clippy::type_complexity,
    clippy::single_match_else,
    reason = "test fixtures: short names for graph handles, shared result logs"
)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::FrameInfo;
use holo_runtime::{
    ConnectionOptions, EmitOptions, ExecutionContext, Graph, Input, Operator, Output, ParamSet,
    Result, RunSession, SessionOptions, compile, operator,
};

/// Emits its activation number; frames numbered by the output unless `ids` says.
#[operator]
struct Source {
    out: Output<u64>,
    n: u64,
    explicit: Option<u64>,
    captures: Arc<Mutex<Vec<Instant>>>,
}

impl Operator for Source {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let capture = Instant::now();
        self.captures.lock().unwrap().push(capture);
        let frame = self.explicit.map(|base| base + self.n);
        self.n += 1;
        let mut options = EmitOptions::default().with_capture_time(capture);
        options.frame = frame;
        self.out.emit(self.n, options)
    }
}

/// Receives one value and forwards it with default options.
#[operator]
struct Forward {
    input: Input<u64>,
    out: Output<u64>,
    seen: Arc<Mutex<Vec<Option<u64>>>>,
}

impl Operator for Forward {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(v) = self.input.receive() else {
            return Ok(());
        };
        self.seen.lock().unwrap().push(ctx.input_frame());
        std::thread::sleep(Duration::from_micros(50));
        self.out.emit(v, EmitOptions::default())
    }
}

#[operator]
struct Sink {
    input: Input<u64>,
    got: Arc<Mutex<Vec<(u64, FrameInfo, Instant)>>>,
}

impl Operator for Sink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some((v, info)) = self.input.receive_with_info() {
            self.got.lock().unwrap().push((v, info, Instant::now()));
        }
        Ok(())
    }
}

type Got = Vec<(u64, FrameInfo, Instant)>;

fn chain(explicit: Option<u64>, split: bool) -> (Got, Vec<Instant>, Vec<Option<u64>>) {
    let captures = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g
        .add_operator(
            "source",
            Source {
                out: Output::default(),
                n: 0,
                explicit,
                captures: Arc::clone(&captures),
            },
            d(),
        )
        .unwrap();
    let f = g
        .add_operator(
            "forward",
            Forward {
                input: Input::default(),
                out: Output::default(),
                seen: Arc::clone(&seen),
            },
            d(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "sink",
            Sink {
                input: Input::default(),
                got: Arc::clone(&got),
            },
            d(),
        )
        .unwrap();
    let c = ConnectionOptions::default().with_queue_depth(16);
    g.add_flow(s.out, f.input, c);
    g.add_flow(f.out, k.input, c);
    let groups: &[&[&str]] = if split {
        &[&["source"], &["forward"], &["sink"]]
    } else {
        &[]
    };
    let plan = compile(&g, common::partitioned(groups)).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(10)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.join().unwrap();
    let got = got.lock().unwrap().clone();
    let captures = captures.lock().unwrap().clone();
    let seen = seen.lock().unwrap().clone();
    (got, captures, seen)
}

#[test]
fn a_forwarder_keeps_the_frame_id_and_capture_time_and_the_sink_sees_the_publish_time() {
    for split in [false, true] {
        for explicit in [None, Some(1000)] {
            let (got, captures, seen) = chain(explicit, split);
            let base = explicit.unwrap_or(0);
            let frames: Vec<u64> = got.iter().map(|(_, i, _)| i.frame).collect();
            assert_eq!(
                frames,
                (base..base + 10).collect::<Vec<_>>(),
                "split {split}"
            );
            assert_eq!(
                seen,
                (base..base + 10).map(Some).collect::<Vec<_>>(),
                "ctx.input_frame() in the forwarder"
            );
            for (k, (v, info, received)) in got.iter().enumerate() {
                assert_eq!(*v, k as u64 + 1);
                // The capture time crossed the forwarder unchanged (within the
                // conversion through the session clock: tens of ppm of the age).
                let capture = info.capture_time.expect("a capture time");
                let error = if capture > captures[k] {
                    capture - captures[k]
                } else {
                    captures[k] - capture
                };
                assert!(error < Duration::from_micros(20), "frame {k}: {error:?}");
                // Published by the forwarder after the capture (it slept 50 µs), before
                // the sink received it.
                assert!(info.publish_time >= captures[k], "frame {k}");
                assert!(info.publish_time <= *received, "frame {k}");
            }
        }
    }
}
