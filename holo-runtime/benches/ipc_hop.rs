//! The host hop across processes beside raw iceoryx2, in the same run (DESIGN.md,
//! "Performance method"; issue 15, "host hop across processes p50 ≤ 1.5× raw iceoryx2").
//!
//! - **raw iceoryx2**: this process publishes a 160-byte `#[repr(C)]` message (the size of
//!   holo's slot descriptor) every 100 µs through an iceoryx2 publish-subscribe service and
//!   notifies an iceoryx2 event; a second process (this binary, `--role raw`) receives it
//!   the way `ProcessSubscriber` does (`receive`, else the listener's `timed_wait`) and
//!   records send → receipt on `CLOCK_MONOTONIC`.
//! - **holo**: a session in this process whose source emits a 256-byte host frame every
//!   100 µs (capture time at the emit) exports it across processes (depth 4, 2 holds); the
//!   second process (`--role holo`) attaches a `ProcessSubscriber`, reads the frame's last
//!   byte, drops it (its release word) and records capture → receipt.
//!
//! Each run: 10,000 frames after 1,000 of warm-up; 3 interleaved pairs; printed: both
//! p50/p99, the p50 and p99 ratios, and allocations per frame on each side (a counting
//! allocator in both processes, over the measured frames).
//!
//! ```text
//! cargo bench -p holo-runtime --bench ipc_hop
//! ```

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "bench arithmetic on nanosecond timings and frame counts"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::ipc::{EndpointCatalog, ProcessSubscriber, ProcessSubscriberOptions};
use holo_runtime::{
    CompileOptions, DType, EmitOptions, ExecutionContext, Graph, Operator, Output, ParamSet,
    Result, RunSession, SessionOptions, Tensor, TensorLoanRequest, TopicOptions, compile, operator,
};
use iceoryx2::prelude::*;

#[path = "common/counting.rs"]
mod counting;
#[path = "common/raw_iox.rs"]
mod raw_iox;
#[path = "common/timing.rs"]
mod timing;
use counting::ALLOCATIONS;
use raw_iox::raw_services;
use timing::{mono_ns, pace, percentiles};

const FRAME: u64 = 256;
const FRAMES: u64 = 10_000;
const WARMUP: u64 = 1_000;
const PERIOD: Duration = Duration::from_micros(100);
const PAIRS: usize = 3;
/// Frames sent after the measured ones, neither timed nor counted: the other process is
/// still attached when a side's allocation count ends (its detach is not a frame's work).
const TAIL: u64 = 100;

/// The raw message: as large as holo's slot descriptor (160 bytes).
#[derive(Debug, Clone, Copy, ZeroCopySend)]
#[repr(C)]
struct RawDesc {
    stamp: u64,
    rest: [u64; 19],
}

// ---- the second process ---------------------------------------------------------------

fn raw_child(service: &str) {
    let (_node, svc, ev) = raw_services::<RawDesc>(service, 8);
    let sub = svc.subscriber_builder().create().expect("a subscriber");
    let listener = ev.listener_builder().create().expect("a listener");
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut lat = Vec::with_capacity(FRAMES as usize);
    let (mut allocs, mut end) = (0u64, None);
    // Until the last message (by its number: an overflowing buffer may drop some).
    let mut heard = Instant::now();
    loop {
        let Some(s) = sub.receive().expect("receive") else {
            assert!(
                heard.elapsed() < Duration::from_secs(5),
                "no message for 5 s"
            );
            listener
                .timed_wait(|_| {}, Duration::from_millis(20))
                .expect("wait");
            continue;
        };
        let now = mono_ns();
        let (stamp, n) = (s.payload().stamp, s.payload().rest[0]);
        drop(s);
        heard = Instant::now();
        if n == WARMUP {
            allocs = ALLOCATIONS.load(Ordering::Relaxed);
        }
        if (WARMUP..WARMUP + FRAMES).contains(&n) {
            lat.push(now.saturating_sub(stamp));
        }
        if n + 1 >= WARMUP + FRAMES && end.is_none() {
            end = Some(ALLOCATIONS.load(Ordering::Relaxed));
        }
        if n + 1 >= WARMUP + FRAMES + TAIL {
            break;
        }
    }
    let allocs = end.unwrap_or(allocs) - allocs;
    let (p50, p99) = percentiles(lat);
    println!("{p50} {p99} {}", allocs as f64 / FRAMES as f64);
}

fn holo_child(catalog: &str) {
    let catalog = EndpointCatalog::read(catalog).expect("the catalog");
    let mut sub = ProcessSubscriber::attach(
        &catalog,
        "bench",
        ProcessSubscriberOptions::DEFAULT.with_wait_for_exporter(Duration::from_secs(10)),
    )
    .expect("attach");
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut lat = Vec::with_capacity(FRAMES as usize);
    let (mut n, mut allocs, mut end) = (0u64, 0u64, 0u64);
    while n < WARMUP + FRAMES + TAIL {
        let Some(t) = sub.receive(Duration::from_secs(10)).expect("receive") else {
            panic!("no frame in 10 s");
        };
        let now = mono_ns();
        let byte = t.data().expect("host bytes")[FRAME as usize - 1];
        std::hint::black_box(byte);
        drop(t);
        let capture = sub.last_info().capture_ns.expect("a capture time");
        if n == WARMUP {
            allocs = ALLOCATIONS.load(Ordering::Relaxed);
        }
        if (WARMUP..WARMUP + FRAMES).contains(&n) {
            lat.push(now.saturating_sub(capture));
        }
        n += 1;
        if n == WARMUP + FRAMES {
            end = ALLOCATIONS.load(Ordering::Relaxed);
        }
    }
    let allocs = end - allocs;
    let (p50, p99) = percentiles(lat);
    println!("{p50} {p99} {}", allocs as f64 / FRAMES as f64);
}

// ---- this process ---------------------------------------------------------------------

/// The second process and its first line (`ready`).
fn spawn(args: &[&str]) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the second process");
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    assert_eq!(line.trim(), "ready");
    (child, out)
}

/// The second process's result: p50, p99 (ns), allocations per frame.
fn result(
    mut child: std::process::Child,
    mut out: BufReader<std::process::ChildStdout>,
) -> (u64, u64, f64) {
    let mut line = String::new();
    out.read_line(&mut line).expect("the result");
    assert!(
        child.wait().expect("exit").success(),
        "the second process failed"
    );
    let v: Vec<&str> = line.split_whitespace().collect();
    (
        v[0].parse().expect("p50"),
        v[1].parse().expect("p99"),
        v[2].parse().expect("allocations"),
    )
}

fn raw_run(pair: usize) -> (u64, u64, f64, f64) {
    let service = format!("holo-bench/raw/{}/{pair}", std::process::id());
    let (_node, svc, ev) = raw_services::<RawDesc>(&service, 8);
    let publisher = svc.publisher_builder().create().expect("a publisher");
    let notifier = ev.notifier_builder().create().expect("a notifier");
    let (child, out) = spawn(&["--role", "raw", &service]);
    std::thread::sleep(Duration::from_millis(50));
    let mut deadline = Instant::now();
    let mut allocs = 0;
    let mut end = 0;
    for n in 0..WARMUP + FRAMES + TAIL {
        deadline += PERIOD;
        pace(deadline);
        if n == WARMUP {
            allocs = ALLOCATIONS.load(Ordering::Relaxed);
        }
        if n == WARMUP + FRAMES {
            end = ALLOCATIONS.load(Ordering::Relaxed);
        }
        publisher
            .send_copy(RawDesc {
                stamp: mono_ns(),
                rest: [n; 19],
            })
            .expect("send");
        notifier.notify().expect("notify");
    }
    let allocs = (end - allocs) as f64 / FRAMES as f64;
    let (p50, p99, child_allocs) = result(child, out);
    (p50, p99, allocs, child_allocs)
}

/// Emits a 256-byte host frame every `PERIOD`, with its capture time, once `go` is set,
/// until it emitted the warm-up, measured and tail frames.
#[operator]
struct Paced {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
    go: Arc<AtomicBool>,
    deadline: Option<Instant>,
    emitted: Arc<AtomicU64>,
}

impl Operator for Paced {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if !self.go.load(Ordering::Acquire)
            || self.emitted.load(Ordering::Relaxed) >= WARMUP + FRAMES + TAIL
        {
            std::thread::sleep(Duration::from_micros(200));
            return Ok(());
        }
        let deadline = *self.deadline.get_or_insert_with(Instant::now) + PERIOD;
        self.deadline = Some(deadline);
        pace(deadline);
        let loan = self.out.allocate_tensor(TensorLoanRequest {
            shape: &[FRAME],
            dtype: DType::U8,
        })?;
        let t = loan.write_host_and_commit(|b| b.fill(7))?;
        self.out
            .emit(t, EmitOptions::default().with_capture_time(Instant::now()))?;
        self.emitted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn holo_run(pair: usize) -> (u64, u64, f64, f64) {
    let go = Arc::new(AtomicBool::new(false));
    let emitted = Arc::new(AtomicU64::new(0));
    let mut graph = Graph::new();
    let src = graph
        .add_operator(
            "src",
            Paced {
                out: Output::default(),
                go: Arc::clone(&go),
                deadline: None,
                emitted: Arc::clone(&emitted),
            },
            ParamSet::defaults().expect("defaults"),
        )
        .expect("the source");
    graph.export_topic(
        src.out,
        "bench",
        TopicOptions::DEFAULT
            .with_depth(4)
            .with_holds_per_subscriber(2)
            .across_processes(),
    );
    let plan = compile(&graph, CompileOptions::default()).expect("the plan");
    let namespace = format!("bench{}-{pair}", std::process::id());
    let session = RunSession::start(
        graph,
        &plan,
        SessionOptions::default().with_ipc_namespace(namespace),
    )
    .expect("the session");
    let path =
        std::env::temp_dir().join(format!("holo-bench-ipc-{}-{pair}.toml", std::process::id()));
    session
        .endpoint_catalog()
        .write(&path)
        .expect("the catalog");
    let (child, out) = spawn(&["--role", "holo", path.to_str().expect("utf-8")]);
    while session.topic_attachments("bench") != Some((1, 1)) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let start_allocs = Arc::new(AtomicU64::new(0));
    go.store(true, Ordering::Release);
    // The allocations of this process over the measured frames.
    while emitted.load(Ordering::Relaxed) < WARMUP {
        std::thread::sleep(Duration::from_micros(200));
    }
    start_allocs.store(ALLOCATIONS.load(Ordering::Relaxed), Ordering::Relaxed);
    while emitted.load(Ordering::Relaxed) < WARMUP + FRAMES {
        std::thread::sleep(Duration::from_micros(200));
    }
    let allocs = (ALLOCATIONS.load(Ordering::Relaxed) - start_allocs.load(Ordering::Relaxed))
        as f64
        / FRAMES as f64;
    let r = result(child, out);
    session.stop();
    session.join().expect("the session ends");
    let _ = std::fs::remove_file(path);
    (r.0, r.1, allocs, r.2)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--role") {
        match (args.get(i + 1).map(String::as_str), args.get(i + 2)) {
            (Some("raw"), Some(service)) => raw_child(service),
            (Some("holo"), Some(catalog)) => holo_child(catalog),
            _ => panic!("--role raw <service> | --role holo <catalog>"),
        }
        return;
    }
    println!(
        "ipc_hop: host hop across processes, {FRAMES} frames every {PERIOD:?} after {WARMUP} of warm-up, {PAIRS} interleaved pairs"
    );
    println!(
        "{:>4} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9} {:>14} {:>14}",
        "pair",
        "raw p50",
        "raw p99",
        "holo p50",
        "holo p99",
        "p50 ×",
        "p99 ×",
        "allocs/frame",
        "raw allocs"
    );
    let mut ratios = Vec::new();
    for pair in 0..PAIRS {
        let raw = raw_run(pair);
        let holo = holo_run(pair);
        let r50 = holo.0 as f64 / raw.0 as f64;
        let r99 = holo.1 as f64 / raw.1 as f64;
        ratios.push(r50);
        println!(
            "{pair:>4} {:>9.1} µs {:>9.1} µs {:>9.1} µs {:>9.1} µs {r50:>9.2} {r99:>9.2} {:>6.2} / {:<5.2} {:>6.2} / {:<5.2}",
            raw.0 as f64 / 1e3,
            raw.1 as f64 / 1e3,
            holo.0 as f64 / 1e3,
            holo.1 as f64 / 1e3,
            holo.2,
            holo.3,
            raw.2,
            raw.3,
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median p50 ratio holo/raw: {:.2} (target ≤ 1.5); allocations per frame: exporter / subscriber",
        ratios[ratios.len() / 2]
    );
}
