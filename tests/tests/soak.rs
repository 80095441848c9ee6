//! A soak of the device pipelines (issue 16, item 6): the fork (A → {B, C}, three
//! partitions, as `fork_streams`) and a 4-operator chain (source → two forwarders → sink,
//! each forwarder copying into its own pool on its own stream) run side by side on the
//! environment's device for `HOLO_SOAK_SECONDS` (3 by default: the CI run), sampled every
//! `HOLO_SOAK_EVERY` seconds (1 by default). Every sink reads each frame back and checks
//! its bytes. Each sample prints the resident memory, the streams, events and
//! allocations alive on the device (a [`FaultInjecting`] wrapper that injects nothing
//! counts them), the frames each sink checked and the free slots of every pool; the test
//! asserts the live device objects never change after the first sample, the resident
//! memory grows less than 8 MiB from the first sample to the last, every frame checked
//! out, and everything is freed once both sessions joined.
//!
//! ```text
//! cargo test -p holo-tests --release --test soak -- --nocapture
//! HOLO_DEVICE=cuda HOLO_SOAK_SECONDS=570 HOLO_SOAK_EVERY=10 ./soak-* --nocapture   # the H200
//! ```
//! (`.ci/h200-soak.sh` runs it on the GPU machine, and a minute of it under
//! `compute-sanitizer --tool memcheck`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::device::{DeviceBackend, FaultInjecting, LiveObjects, open_backend_from_env};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, compile, operator,
};

const LEN: u64 = 256;
const FILL: u8 = 7;

fn env_secs(name: &str, default: f64) -> Duration {
    Duration::from_secs_f64(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// Fills each frame with [`FILL`] on its stream.
#[operator]
struct Fill {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    frames: Output<Tensor>,
}

impl Operator for Fill {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device operator has a device"));
        let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[LEN],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let w = loan.write(stream)?;
        // SAFETY: the writer owns the slot until commit; the fill stays inside it.
        unsafe { device.memset_async(w.device_ptr(), FILL, w.byte_size(), w.stream())? };
        match self.frames.emit(w.commit()?, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// Copies each frame into its own pool on its stream.
#[operator]
struct Copy {
    #[input(memory = device, dtype = u8, rank = 1)]
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
}

impl Operator for Copy {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device operator has a device"));
        while let Some(t) = self.input.receive() {
            let Ok(loan) = self.out.allocate_tensor(TensorLoanRequest {
                shape: &[LEN],
                dtype: DType::U8,
            }) else {
                continue;
            };
            let w = loan.write(stream)?;
            // SAFETY: both slots hold LEN bytes until commit / drop; the copy is ordered
            // after the input's readiness (received on this stream).
            unsafe {
                device.copy_async(w.device_ptr(), t.device_ptr(), t.byte_size(), w.stream())?;
            };
            match self.out.emit(w.commit()?, EmitOptions::default()) {
                Err(e) if e.code() == ErrorCode::Backpressured => {}
                other => other?,
            }
        }
        Ok(())
    }
}

/// Reads every frame back and checks it.
#[operator]
struct Check {
    #[input(memory = device, dtype = u8, rank = 1)]
    input: Input<Tensor>,
    host: Vec<u8>,
    checked: Arc<AtomicU64>,
}

impl Operator for Check {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        while let Some(t) = self.input.receive() {
            let n = t.byte_size();
            t.copy_to_host(&mut self.host[..n], stream)?;
            if self.host[..n].iter().any(|&b| b != FILL) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    "a frame read back other bytes than its fill",
                ));
            }
            self.checked.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

fn check(checked: &Arc<AtomicU64>) -> Check {
    Check {
        input: Input::default(),
        host: vec![0; usize::try_from(LEN).unwrap()],
        checked: Arc::clone(checked),
    }
}

/// The fork: A → {B, C}; the automatic partitioner gives each leg its own partition.
fn fork(device: &Arc<dyn DeviceBackend>, b: &Arc<AtomicU64>, c: &Arc<AtomicU64>) -> RunSession {
    let mut g = Graph::new();
    let params = || ParamSet::defaults().unwrap();
    let a = g
        .add_operator(
            "A",
            Fill {
                frames: Output::default(),
            },
            params(),
        )
        .unwrap();
    for (name, counter) in [("B", b), ("C", c)] {
        let leg = g.add_operator(name, check(counter), params()).unwrap();
        g.add_flow(a.frames, leg.input, ConnectionOptions::default());
    }
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("A", "frames", device.device_id());
    let plan = compile(&g, options).unwrap();
    RunSession::start(
        g,
        &plan,
        SessionOptions::default().on_device(Arc::clone(device)),
    )
    .unwrap()
}

/// The chain: source → copy → copy → check.
fn chain(device: &Arc<dyn DeviceBackend>, sink: &Arc<AtomicU64>) -> RunSession {
    let mut g = Graph::new();
    let params = || ParamSet::defaults().unwrap();
    let src = g
        .add_operator(
            "src",
            Fill {
                frames: Output::default(),
            },
            params(),
        )
        .unwrap();
    let copy = || Copy {
        input: Input::default(),
        out: Output::default(),
    };
    let f1 = g.add_operator("f1", copy(), params()).unwrap();
    let f2 = g.add_operator("f2", copy(), params()).unwrap();
    let k = g.add_operator("sink", check(sink), params()).unwrap();
    g.add_flow(src.frames, f1.input, ConnectionOptions::default());
    g.add_flow(f1.out, f2.input, ConnectionOptions::default());
    g.add_flow(f2.out, k.input, ConnectionOptions::default());
    let mut options = CompileOptions::default();
    for (op, port) in [("src", "frames"), ("f1", "out"), ("f2", "out")] {
        options
            .deployment
            .bind_tensor_output_device(op, port, device.device_id());
    }
    let plan = compile(&g, options).unwrap();
    RunSession::start(
        g,
        &plan,
        SessionOptions::default().on_device(Arc::clone(device)),
    )
    .unwrap()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn the_fork_and_the_chain_run_flat() {
    let seconds = env_secs("HOLO_SOAK_SECONDS", 3.0);
    let every = env_secs("HOLO_SOAK_EVERY", 1.0);
    let inner = open_backend_from_env().unwrap();
    let kind = inner.backend_kind().name();
    let counting = FaultInjecting::new(inner);
    let device: Arc<dyn DeviceBackend> = Arc::clone(&counting) as Arc<dyn DeviceBackend>;
    let (b, c, sink) = (Arc::default(), Arc::default(), Arc::default());
    let fork = fork(&device, &b, &c);
    let chain = chain(&device, &sink);
    let pools = ["A.frames", "src.frames", "f1.out", "f2.out"];
    eprintln!(
        "soak on {kind} for {seconds:?}, a sample every {every:?}\n{:>7} {:>10} {:>7} {:>6} {:>6} {:>12} {:>12} {:>12}  free slots {pools:?}",
        "t (s)",
        "RSS (KiB)",
        "streams",
        "events",
        "allocs",
        "B checked",
        "C checked",
        "sink checked"
    );
    let start = Instant::now();
    let mut samples: Vec<(u64, LiveObjects)> = Vec::new();
    let mut last = [0_u64; 3];
    loop {
        let live = counting.live();
        let rss = rss_kib();
        let checked = [&b, &c, &sink].map(|n| n.load(Ordering::Relaxed));
        let free: Vec<u32> = pools
            .iter()
            .map(|p| {
                fork.pool_free_slots(p)
                    .or_else(|| chain.pool_free_slots(p))
                    .unwrap_or(u32::MAX)
            })
            .collect();
        eprintln!(
            "{:>7.1} {rss:>10} {:>7} {:>6} {:>6} {:>12} {:>12} {:>12}  {free:?}",
            start.elapsed().as_secs_f64(),
            live.streams,
            live.events,
            live.allocations,
            checked[0],
            checked[1],
            checked[2]
        );
        assert!(
            !fork.is_stopping() && !chain.is_stopping(),
            "a session stopped on its own"
        );
        if !samples.is_empty() {
            for (i, (now, before)) in checked.iter().zip(last).enumerate() {
                assert!(
                    now > &before,
                    "sink {i} checked no frame in the last {every:?}"
                );
            }
        }
        last = checked;
        samples.push((rss, live));
        if start.elapsed() >= seconds {
            break;
        }
        std::thread::sleep(every.min(seconds.saturating_sub(start.elapsed())));
    }
    fork.stop();
    chain.stop();
    let fork_report = fork.join().expect("the fork joins cleanly");
    let chain_report = chain.join().expect("the chain joins cleanly");
    for p in fork_report.pools.iter().chain(&chain_report.pools) {
        assert_eq!(
            p.free_at_end, p.slot_count,
            "pool {} after teardown",
            p.pool
        );
    }
    assert!(
        counting.live().is_empty(),
        "left alive after both joins: {:?}",
        counting.live()
    );
    let (first_rss, first_live) = samples[0];
    for (rss, live) in &samples {
        assert_eq!(live, &first_live, "the device objects alive changed");
        assert!(
            rss.saturating_sub(first_rss) < 8 * 1024,
            "resident memory grew from {first_rss} KiB to {rss} KiB"
        );
    }
}
