//! A standalone subscriber's hop beside the same hop between two operators, in the same
//! process, interleaved (DESIGN.md, "Performance method").
//!
//! - **operator hop**: a paced source (a 256-byte host frame every 5 µs) emits into a
//!   depth-1 blocking flow to a sink operator in another partition (its own thread),
//!   which reads the frame's last byte and records capture → receipt.
//! - **subscriber hop**: the same source exports its output as a topic (one subscriber, a
//!   depth-1 blocking queue: the same pool size) and a `ChannelSubscriber` on a thread of
//!   its own receives (`receive`, the default idle spin, as a partition's), reads the last
//!   byte and records capture → receipt (the capture time from `last_info`, read after
//!   the time of receipt, as the sink reads its own).
//!
//! Reported: p50 and p99 over 20,000 frames, medians of 7 interleaved run pairs; the
//! ratio is the median of the pairs' p50 ratios (target ≤ 1.20). A saturating run (no
//! pacing) follows for reference.
//!
//! ```text
//! cargo bench -p holo-runtime --bench topics
//! ```

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    reason = "bench arithmetic on nanosecond timings and frame counts"
)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::{
    ChannelSubscriber, CompileOptions, ConnectionOptions, DType, EmitOptions, ExecutionContext,
    Graph, Input, Operator, Output, ParamSet, PartitionSpec, Partitioning, Result, RunSession,
    SessionOptions, SubscriberOptions, Tensor, TensorLoanRequest, TopicOptions, compile, operator,
};

const FRAME: usize = 256;
const FRAMES: u64 = 20_000;
/// Frames before the measured ones (pools warm, threads spinning).
const WARMUP: u64 = 1_000;

/// Emits `WARMUP + FRAMES` frames once `go` is set, a frame every `pace`, each with its
/// capture time taken as it is emitted.
#[operator]
struct PacedSource {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
    pace: Duration,
    last: Option<Instant>,
    go: Arc<AtomicBool>,
    sent: u64,
}

impl Operator for PacedSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if self.sent == WARMUP + FRAMES || !self.go.load(Ordering::Acquire) {
            std::thread::yield_now();
            return Ok(());
        }
        if let Some(last) = self.last {
            while last.elapsed() < self.pace {
                std::hint::spin_loop();
            }
        }
        let loan = self.out.allocate_tensor(TensorLoanRequest {
            shape: &[FRAME as u64],
            dtype: DType::U8,
        })?;
        let fill = self.sent as u8;
        let t = loan.write_host_and_commit(|b| b.fill(fill))?;
        let r = self
            .out
            .emit(t, EmitOptions::default().with_capture_time(Instant::now()));
        self.last = Some(Instant::now());
        if r.is_ok() {
            self.sent += 1;
        }
        Ok(())
    }
}

/// Records capture → receipt of every frame after the warm-up.
#[operator]
struct LatencySink {
    input: Input<Tensor>,
    received: Arc<AtomicU64>,
    latencies: Arc<Mutex<Vec<u64>>>,
    local: Vec<u64>,
    count: u64,
}

impl Operator for LatencySink {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            let now = Instant::now();
            std::hint::black_box(t.data()?[FRAME - 1]);
            self.count += 1;
            if self.count > WARMUP
                && let Some(c) = ctx.input_capture_time()
            {
                self.local.push(nanos(now.duration_since(c)));
            }
            drop(t);
            self.received.store(self.count, Ordering::Release);
        }
        Ok(())
    }

    fn stop(&mut self, _ctx: &mut holo_runtime::LifecycleContext<'_>) -> Result<()> {
        *self.latencies.lock().unwrap() = std::mem::take(&mut self.local);
        Ok(())
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn source(pace: Duration, go: &Arc<AtomicBool>) -> PacedSource {
    PacedSource {
        out: Output::default(),
        pace,
        last: None,
        go: Arc::clone(go),
        sent: 0,
    }
}

fn quantile(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    #[allow(clippy::cast_sign_loss)]
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// p50, p99 of capture → receipt between two operators in two partitions.
fn operator_hop(pace: Duration) -> (u64, u64) {
    let go = Arc::new(AtomicBool::new(true));
    let received = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let s = g
        .add_operator("src", source(pace, &go), ParamSet::defaults().unwrap())
        .unwrap();
    let k = g
        .add_operator(
            "sink",
            LatencySink {
                input: Input::default(),
                received: Arc::clone(&received),
                latencies: Arc::clone(&latencies),
                local: Vec::with_capacity(FRAMES as usize),
                count: 0,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(
        s.out,
        k.input,
        ConnectionOptions::default().with_queue_depth(1),
    );
    let options = CompileOptions::default().with_partitioning(Partitioning::Authored(vec![
        PartitionSpec::new("producer", vec!["src"]),
        PartitionSpec::new("consumer", vec!["sink"]),
    ]));
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    while received.load(Ordering::Acquire) < WARMUP + FRAMES {
        std::thread::sleep(Duration::from_micros(200));
    }
    session.join().unwrap();
    let mut v = std::mem::take(&mut *latencies.lock().unwrap());
    (quantile(&mut v, 0.5), quantile(&mut v, 0.99))
}

/// p50, p99 of capture → receipt from an operator to a standalone subscriber.
fn subscriber_hop(pace: Duration) -> (u64, u64) {
    let go = Arc::new(AtomicBool::new(false));
    let mut g = Graph::new();
    let s = g
        .add_operator("src", source(pace, &go), ParamSet::defaults().unwrap())
        .unwrap();
    g.export_topic(s.out, "frames", TopicOptions::DEFAULT.with_depth(1));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "frames", SubscriberOptions::DEFAULT).unwrap();
    let reader = std::thread::spawn(move || {
        let mut lat = Vec::with_capacity(FRAMES as usize);
        for n in 0..WARMUP + FRAMES {
            let t = sub
                .receive(Duration::from_secs(10))
                .unwrap()
                .expect("a frame within 10 s");
            // As the operator's sink: the time of receipt first, then the capture time.
            let now = Instant::now();
            std::hint::black_box(t.data().unwrap()[FRAME - 1]);
            if n >= WARMUP
                && let Some(c) = sub.last_info().capture_time
            {
                lat.push(nanos(now.duration_since(c)));
            }
        }
        lat
    });
    go.store(true, Ordering::Release);
    let mut v = reader.join().unwrap();
    session.join().unwrap();
    (quantile(&mut v, 0.5), quantile(&mut v, 0.99))
}

fn main() {
    hop(
        Duration::from_micros(5),
        "paced, a frame every 5 µs: the latency target",
    );
    hop(
        Duration::ZERO,
        "saturating: queueing behind the consumer's work, not the hop (for reference)",
    );
}

fn hop(pace: Duration, what: &str) {
    // Interleaved pairs, so a change in the machine's speed reaches both sides of a pair
    // alike; each run's p50 and p99, their medians, and the median of the pairs' p50
    // ratios.
    const PAIRS: usize = 7;
    let (mut o50, mut o99, mut s50, mut s99, mut ratios) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..PAIRS {
        // Alternate which runs first in a pair.
        let (op, sub) = if i % 2 == 0 {
            let op = operator_hop(pace);
            (op, subscriber_hop(pace))
        } else {
            let sub = subscriber_hop(pace);
            (operator_hop(pace), sub)
        };
        o50.push(op.0 as f64);
        o99.push(op.1 as f64);
        s50.push(sub.0 as f64);
        s99.push(sub.1 as f64);
        ratios.push(sub.0 as f64 / op.0 as f64);
    }
    if std::env::var_os("HOLO_BENCH_VERBOSE").is_some() {
        println!("  operator p50s: {o50:?}\n  subscriber p50s: {s50:?}\n  ratios: {ratios:.2?}");
    }
    println!(
        "topic hop (256 B, capture → receipt, medians of {PAIRS} interleaved runs of {FRAMES} frames), {what}:"
    );
    let target = if pace.is_zero() {
        ""
    } else {
        " (target ≤ 1.20)"
    };
    println!(
        "  p50: subscriber {:>7.0} ns   operator {:>7.0} ns   ratio {:.2}{target}",
        median(s50),
        median(o50),
        median(ratios)
    );
    println!(
        "  p99: subscriber {:>7.0} ns   operator {:>7.0} ns",
        median(s99),
        median(o99)
    );
}
