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
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
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
                // The capture time crossed the forwarder unchanged: within its two
                // conversions through the session clock, each off by at most half a
                // pair's width (a pair wider than 2 µs is read again, so a preemption
                // between the reads does not count) plus tens of ppm of the age.
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

/// Drains every queued value in one activation (after a pause that lets several queue up)
/// and forwards each with default options as it goes.
#[operator]
struct Drain {
    input: Input<u64>,
    out: Output<u64>,
    batches: Arc<Mutex<Vec<usize>>>,
}

impl Operator for Drain {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        std::thread::sleep(Duration::from_millis(3));
        let mut n = 0;
        while let Some(v) = self.input.receive() {
            self.out.emit(v, EmitOptions::default())?;
            n += 1;
        }
        self.batches.lock().unwrap().push(n);
        Ok(())
    }
}

/// Emits its frame ids in one activation: 3 per activation.
#[operator]
struct Burst {
    out: Output<u64>,
    n: u64,
}

impl Operator for Burst {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        for _ in 0..3 {
            self.out.emit(self.n, EmitOptions::default())?;
            self.n += 1;
        }
        Ok(())
    }
}

#[test]
fn a_forwarder_that_drains_several_values_in_one_activation_keeps_each_frame_id() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let batches = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            Burst {
                out: Output::default(),
                n: 0,
            },
        )
        .unwrap();
    let f = g
        .add_operator_with_defaults(
            "drain",
            Drain {
                input: Input::default(),
                out: Output::default(),
                batches: Arc::clone(&batches),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            Sink {
                input: Input::default(),
                got: Arc::clone(&got),
            },
        )
        .unwrap();
    let c = ConnectionOptions::default().with_queue_depth(64);
    g.add_flow(s.out, f.input, c);
    g.add_flow(f.out, k.input, c);
    let plan = compile(
        &g,
        common::partitioned(&[&["source"], &["drain"], &["sink"]]),
    )
    .unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(8)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.join().unwrap();
    let got = got.lock().unwrap();
    // Each value reaches the sink with the frame id its source gave it (the source's
    // output numbers its emits 0, 1, 2, …), however the drainer batched them.
    let frames: Vec<(u64, u64)> = got.iter().map(|(v, info, _)| (*v, info.frame)).collect();
    let want: Vec<(u64, u64)> = (0..24).map(|n| (n, n)).collect();
    assert_eq!(frames, want);
    assert!(
        batches.lock().unwrap().iter().any(|&n| n > 1),
        "the drainer took several values in one activation: {:?}",
        batches.lock().unwrap()
    );
}

/// Receives one value on each input, then emits their sum once.
#[operator]
struct Join {
    a: Input<u64>,
    b: Input<u64>,
    out: Output<u64>,
}

impl Operator for Join {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if self.a.pending() == 0 || self.b.pending() == 0 {
            return Ok(());
        }
        let (Some(x), Some(y)) = (self.a.receive(), self.b.receive()) else {
            return Ok(());
        };
        self.out.emit(x + y, EmitOptions::default())
    }
}

/// Emits `base + n` with frame id `base + n` and capture time `epoch + delay`.
#[operator]
struct Stamped {
    out: Output<u64>,
    n: u64,
    base: u64,
    epoch: Instant,
    delay: Duration,
}

impl Operator for Stamped {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let v = self.base + self.n;
        self.n += 1;
        self.out.emit(
            v,
            EmitOptions::default()
                .with_frame(v)
                .with_capture_time(self.epoch + self.delay),
        )
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn a_join_carries_the_frame_id_and_capture_time_of_its_earliest_input() {
    let got = Arc::new(Mutex::new(Vec::new()));
    // After the session's start: a capture time before its clock's epoch reads as the
    // epoch.
    let epoch = Instant::now() + Duration::from_secs(1);
    let mut g = Graph::new();
    let mut stamped = |name: &str, base: u64, delay_ms: u64| {
        g.add_operator_with_defaults(
            name,
            Stamped {
                out: Output::default(),
                n: 0,
                base,
                epoch,
                delay: Duration::from_millis(delay_ms),
            },
        )
        .unwrap()
        .out
    };
    // `late`'s values were captured 5 ms after `early`'s.
    let late = stamped("late", 100, 5);
    let early = stamped("early", 200, 0);
    let j = g
        .add_operator_with_defaults(
            "join",
            Join {
                a: Input::default(),
                b: Input::default(),
                out: Output::default(),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            Sink {
                input: Input::default(),
                got: Arc::clone(&got),
            },
        )
        .unwrap();
    let c = ConnectionOptions::default().with_queue_depth(8);
    g.add_flow(late, j.a, c);
    g.add_flow(early, j.b, c);
    g.add_flow(j.out, k.input, c);
    let plan = compile(&g, common::partitioned(&[])).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(4)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.join().unwrap();
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 4);
    for (n, (v, info, _)) in got.iter().enumerate() {
        let n = n as u64;
        assert_eq!(*v, 300 + 2 * n);
        assert_eq!(info.frame, 200 + n, "the earliest input's frame id");
        // The session's clock carries a capture time to within a microsecond; the late
        // input's is 5 ms off.
        let c = info.capture_time.expect("a capture time");
        let off = if c > epoch { c - epoch } else { epoch - c };
        assert!(
            off < Duration::from_micros(100),
            "the earliest capture time: {off:?} off"
        );
    }
}
