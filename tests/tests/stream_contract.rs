//! The stream contract, written once and run on every backend `test_backends()` returns:
//! the software device here and in CI, and CUDA device 0 on a GPU machine (with
//! `HOLO_REQUIRE_DEVICE=cuda` the CUDA run is mandatory).
//!
//! Each test provokes one rule: a consumer sees the producer's bytes; a slot is never
//! reused while a consumer's stream still reads it (a delayed read on the consumer stream
//! and a producer that would overwrite the slot); exhaustion, the stream check, the release
//! cap and read-only access give their exact codes; fusion elides exactly the calls the
//! seed names (counted) and falls back on host access; each consumer waits and records
//! its release event on its own thread.
#![allow(
    clippy::many_single_char_names,
    reason = "test fixtures: short names for graph handles"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::__test_support::test_backends;
use holo_runtime::device::{
    CounterSnapshot, DeviceApi, DeviceBackend, DeviceCall, Observed, StreamHandle,
};
use holo_runtime::plan::ExecutionPlan;
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, Diagnostics, EmitOptions, ErrorCode,
    ExecutionContext, Graph, Input, Operator, Output, ParamSet, QueuePolicy, Result, RunSession,
    SessionOptions, Tensor, TensorLoanRequest, TensorReadiness, codes, compile, operator,
};

/// Frame `k` is `64 + k % 128` bytes, every byte `k % 128`: a consumer knows what it must
/// see from the size alone.
fn frame_len(k: u64) -> u64 {
    64 + k % 128
}

#[derive(Default)]
struct Stats {
    emitted: AtomicU64,
    exhausted: AtomicU64,
    received: AtomicU64,
    bad: AtomicU64,
    codes: Mutex<Vec<ErrorCode>>,
}

/// Writes frame k on its runtime stream (optionally after a delay), commits, emits.
#[operator]
struct DevSource {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    frames: Output<Tensor>,
    k: u64,
    delay: Duration,
    stats: Arc<Stats>,
}

impl Operator for DevSource {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a CUDA-active operator has a device"));
        let len = frame_len(self.k);
        let loan = match self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[len],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let guard = loan.write(stream)?;
        if !self.delay.is_zero() {
            device.enqueue_delay(guard.stream(), self.delay)?;
        }
        #[allow(clippy::cast_possible_truncation)]
        let value = (self.k % 128) as u8;
        // SAFETY: the guard owns the slot until commit, the fill stays inside it, and
        // the stream orders the fill before the readiness event commit records.
        unsafe {
            device.memset_async(guard.device_ptr(), value, guard.byte_size(), guard.stream())?;
        }
        let committed = guard.commit()?;
        self.k += 1;
        match self.frames.emit(committed, EmitOptions::default()) {
            Ok(()) => {
                self.stats.emitted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.stats.codes.lock().unwrap().push(e.code());
                Ok(())
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Blocking `copy_to_host` on the consumer stream, then check every byte.
    Copy,
    /// Delay the consumer stream, enqueue an async copy, drop the tensor at once, then
    /// (test only) wait and check: a slot reused before the copy ran would show.
    DelayedAsyncCopy(Duration),
    /// Delay the consumer stream, enqueue a copy through the backend (as a kernel of the
    /// consumer's would read the tensor: no registration of its own), drop the tensor at
    /// once, then (test only) wait and check.
    DelayedRawCopy(Duration),
    /// Only receive and drop (for exact call counts).
    Drop,
    /// `synchronize_for_host`, then drop (an unproven host access).
    HostSync,
}

#[operator]
struct DevCheck {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    check: Check,
    host: Vec<u8>,
    stats: Arc<Stats>,
    release_counts: Arc<Mutex<Vec<(u32, TensorReadiness)>>>,
}

impl Operator for DevCheck {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            self.release_counts
                .lock()
                .unwrap()
                .push((t.release_stream_count(), t.readiness()));
            let n = t.byte_size();
            #[allow(clippy::cast_possible_truncation)]
            let expect = (n - 64) as u8;
            let stream = ctx.cuda_stream()?;
            match self.check {
                Check::Copy => t.copy_to_host(&mut self.host[..n], stream)?,
                Check::DelayedAsyncCopy(d) => {
                    let device = Arc::clone(ctx.device().unwrap());
                    device.enqueue_delay(stream.handle(), d)?;
                    // SAFETY: `host` lives in the operator and is not touched until the
                    // stream synchronization below.
                    unsafe { t.copy_to_host_async(self.host.as_mut_ptr(), stream)? };
                    drop(t);
                    device.synchronize_stream(stream.handle())?;
                }
                Check::DelayedRawCopy(d) => {
                    let device = Arc::clone(ctx.device().unwrap());
                    device.enqueue_delay(stream.handle(), d)?;
                    // SAFETY: `host` lives in the operator and is not touched until the
                    // stream synchronization below; the tensor's release event on this
                    // stream (recorded when it drops) keeps its slot until the copy ran.
                    unsafe {
                        device.copy_to_host_async(
                            self.host.as_mut_ptr(),
                            t.device_ptr(),
                            n,
                            stream.handle(),
                        )?;
                    }
                    drop(t);
                    device.synchronize_stream(stream.handle())?;
                }
                Check::Drop => continue,
                Check::HostSync => {
                    t.synchronize_for_host()?;
                    continue;
                }
            }
            if self.host[..n].iter().any(|&b| b != expect) {
                self.stats.bad.fetch_add(1, Ordering::Relaxed);
            }
            self.stats.received.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

fn checker(
    check: Check,
    stats: &Arc<Stats>,
    counts: &Arc<Mutex<Vec<(u32, TensorReadiness)>>>,
) -> DevCheck {
    DevCheck {
        frames: Input::default(),
        check,
        host: vec![0; 256],
        stats: Arc::clone(stats),
        release_counts: Arc::clone(counts),
    }
}

struct Run {
    plan: holo_runtime::plan::ExecutionPlan,
    stats: Arc<Stats>,
    counts: Arc<Mutex<Vec<(u32, TensorReadiness)>>>,
    calls: CounterSnapshot,
    result: Result<holo_runtime::RunReport>,
}

/// src → `consumers` checkers, on `device`; returns what happened.
fn run(
    device: &Arc<dyn DeviceBackend>,
    consumers: usize,
    check: Check,
    frames: u64,
    producer_delay: Duration,
    connection: ConnectionOptions,
    options: CompileOptions,
) -> Run {
    let stats = Arc::new(Stats::default());
    let counts = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let src = DevSource {
        frames: Output::default(),
        k: 0,
        delay: producer_delay,
        stats: Arc::clone(&stats),
    };
    let s = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    for i in 0..consumers {
        let c = g
            .add_operator(
                &format!("check{i}"),
                checker(check, &stats, &counts),
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(s.frames, c.frames, connection);
    }
    let mut options = options;
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.device_id());
    let plan = compile(&g, options).unwrap();
    let before = device.counters().snapshot();
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(frames).on_device(Arc::clone(device)),
    )
    .unwrap();
    let _ = session.wait_idle(holo_tests::IDLE_WAIT);
    let result = session.join();
    let calls = device.counters().snapshot() - before;
    Run {
        plan,
        stats,
        counts,
        calls,
        result,
    }
}

fn name(d: &Arc<dyn DeviceBackend>) -> &'static str {
    d.backend_kind().name()
}

#[test]
fn a_consumer_always_sees_the_producers_bytes() {
    for device in test_backends() {
        // The producer's fill waits behind a 2 ms delay on its stream: a consumer that
        // read without waiting on the readiness event would see stale bytes.
        let r = run(
            &device,
            2,
            Check::Copy,
            40,
            Duration::from_millis(2),
            ConnectionOptions::default(),
            CompileOptions::default(),
        );
        r.result
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        let emitted = r.stats.emitted.load(Ordering::Relaxed);
        assert!(emitted > 0, "{}", name(&device));
        assert_eq!(
            r.stats.received.load(Ordering::Relaxed),
            2 * emitted,
            "{}",
            name(&device)
        );
        assert_eq!(
            r.stats.bad.load(Ordering::Relaxed),
            0,
            "{}: a consumer saw bytes before the producer's fill",
            name(&device)
        );
    }
}

/// A fork (so producer and consumers run on three partitions and three streams) whose
/// consumers read each frame on their stream 3 ms late, after dropping their handle;
/// drop-oldest keeps the producer free-running through its pool. No slot may be reused
/// before the read ran.
///
/// The rule is checked on every run; the run must also have provoked it — the producer
/// ran into slots still retiring — which depends on how the threads interleave, so a run
/// that did not is repeated (up to three runs; on the H200 one run in a few leases did not).
fn assert_no_reuse_while_a_consumer_stream_reads(check: Check) {
    for device in test_backends() {
        let mut provoked = false;
        for _ in 0..3 {
            let r = run(
                &device,
                2,
                check,
                2_000,
                Duration::ZERO,
                ConnectionOptions::default()
                    .with_queue_depth(1)
                    .with_policy(QueuePolicy::DropOldest),
                CompileOptions::default(),
            );
            let report = r
                .result
                .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
            assert!(r.stats.received.load(Ordering::Relaxed) > 0);
            assert_eq!(
                r.stats.bad.load(Ordering::Relaxed),
                0,
                "{}: a slot was overwritten while a consumer stream read it",
                name(&device)
            );
            assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
            if r.stats.exhausted.load(Ordering::Relaxed) > 0 {
                provoked = true;
                break;
            }
        }
        assert!(
            provoked,
            "{}: in three runs the producer never ran into slots still retiring",
            name(&device)
        );
    }
}

#[test]
fn a_slot_is_never_reused_while_a_consumer_stream_still_reads_it() {
    // The read is `Tensor::copy_to_host_async`, which registers its stream itself.
    assert_no_reuse_while_a_consumer_stream_reads(Check::DelayedAsyncCopy(Duration::from_millis(
        3,
    )));
}

#[test]
fn a_fork_consumer_reading_on_its_stream_after_dropping_keeps_the_slot() {
    // The read is a plain backend copy on the consumer's stream (as its kernel would
    // read the tensor; no registration of its own): the release event its own thread
    // records when it drops its handle (or the last handle's) must cover it.
    assert_no_reuse_while_a_consumer_stream_reads(Check::DelayedRawCopy(Duration::from_millis(3)));
}

#[test]
fn each_consumer_waits_and_records_its_release_on_its_own_thread() {
    for inner in test_backends() {
        // Which thread made each event record (true) and stream wait (false), on which stream.
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let device: Arc<dyn DeviceBackend> =
            Observed::new(Arc::clone(&inner), move |call, _| match call {
                DeviceCall::RecordEvent { stream, .. } | DeviceCall::WaitEvent { stream, .. } => {
                    let record = matches!(call, DeviceCall::RecordEvent { .. });
                    sink.lock()
                        .unwrap()
                        .push((std::thread::current().id(), record, stream.raw()));
                }
                _ => {}
            });
        let r = run(
            &device,
            3,
            Check::Drop,
            200,
            Duration::ZERO,
            ConnectionOptions::default(),
            CompileOptions::default(),
        );
        r.result.unwrap_or_else(|e| panic!("{}: {e}", name(&inner)));
        let emitted = r.stats.emitted.load(Ordering::Relaxed);
        let log = log.lock().unwrap();
        // Each consumer stream is waited on by exactly one thread: its consumer's.
        let mut waiter: std::collections::HashMap<u64, std::thread::ThreadId> =
            std::collections::HashMap::new();
        for &(thread, record, stream) in log.iter() {
            if !record {
                assert_eq!(
                    *waiter.entry(stream).or_insert(thread),
                    thread,
                    "{}: two threads waited on one consumer stream",
                    name(&inner)
                );
            }
        }
        assert_eq!(waiter.len(), 3, "{}", name(&inner));
        // ... by three threads: the consumers' own, not the producer's.
        let threads: std::collections::HashSet<_> = waiter.values().collect();
        assert_eq!(threads.len(), 3, "{}", name(&inner));
        // Every release record on a consumer stream is made by that consumer's thread:
        // no thread records on a stream another thread submits to.
        let releases: Vec<_> = log
            .iter()
            .filter(|(_, record, stream)| *record && waiter.contains_key(stream))
            .collect();
        assert_eq!(releases.len() as u64, emitted * 3, "{}", name(&inner));
        for &&(thread, _, stream) in &releases {
            assert_eq!(
                waiter[&stream],
                thread,
                "{}: a release event was recorded by another stream's thread",
                name(&inner)
            );
        }
        assert_eq!(log.iter().filter(|e| !e.1).count() as u64, emitted * 3);
    }
}

/// Under `SharedProcessDevice` the partitions that submit on the one shared stream are run
/// by one thread (several threads submitting to one stream serialize in the driver): the
/// plan says so, and every device call of a partition comes from that thread.
/// The default policy keeps a thread per partition.
#[test]
fn under_the_shared_policy_one_thread_submits_to_the_shared_stream() {
    use holo_runtime::plan::CudaComputeStreamPolicy;
    for inner in test_backends() {
        let submitters = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let sink = Arc::clone(&submitters);
        let device: Arc<dyn DeviceBackend> = Observed::new(Arc::clone(&inner), move |_, _| {
            // Every call a partition thread makes (not the retirement worker's, nor
            // the test thread's setup and teardown).
            let name = std::thread::current().name().map(str::to_owned);
            if name.as_deref().is_some_and(|n| n.starts_with("holo-p")) {
                sink.lock().unwrap().insert(name);
            }
        });
        let shared = CompileOptions::default()
            .with_compute_stream_policy(CudaComputeStreamPolicy::SharedProcessDevice);
        let r = run(
            &device,
            3,
            Check::Copy,
            200,
            Duration::ZERO,
            ConnectionOptions::default(),
            shared,
        );
        r.result.unwrap_or_else(|e| panic!("{}: {e}", name(&inner)));
        assert!(r.stats.emitted.load(Ordering::Relaxed) > 0);
        let threads: Vec<u32> = r.plan.partitions().iter().map(|p| p.thread).collect();
        assert_eq!(threads, [0, 0, 0, 0], "{}", name(&inner));
        assert_eq!(r.plan.cuda_compute_streams().len(), 1);
        assert!(
            r.plan.render_human().contains("; thread 0 with p1, p2, p3"),
            "{}",
            r.plan.render_human()
        );
        assert_eq!(
            *submitters.lock().unwrap(),
            std::collections::HashSet::from([Some("holo-p0".to_owned())]),
            "{}",
            name(&inner)
        );
        // The default policy: a thread and a stream per partition.
        submitters.lock().unwrap().clear();
        let r = run(
            &device,
            3,
            Check::Copy,
            200,
            Duration::ZERO,
            ConnectionOptions::default(),
            CompileOptions::default(),
        );
        r.result.unwrap_or_else(|e| panic!("{}: {e}", name(&inner)));
        let threads: Vec<u32> = r.plan.partitions().iter().map(|p| p.thread).collect();
        assert_eq!(threads, [0, 1, 2, 3], "{}", name(&inner));
        assert!(!r.plan.render_human().contains("; thread "));
        assert_eq!(submitters.lock().unwrap().len(), 4, "{}", name(&inner));
    }
}

#[test]
fn fan_out_to_three_has_one_readiness_event_and_three_release_streams() {
    for device in test_backends() {
        let r = run(
            &device,
            3,
            Check::Drop,
            20,
            Duration::ZERO,
            ConnectionOptions::default(),
            CompileOptions::default(),
        );
        r.result
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        let emitted = r.stats.emitted.load(Ordering::Relaxed);
        assert!(emitted > 0);
        // Every receipt sees the slot already registered for all three consumer streams.
        assert!(
            r.counts
                .lock()
                .unwrap()
                .iter()
                .all(|&c| c == (3, TensorReadiness::Recorded)),
            "{}",
            name(&device)
        );
        // Per frame: one readiness record and three release records; three stream waits.
        assert_eq!(
            r.calls.event_record,
            emitted * 4,
            "{}: {:?}",
            name(&device),
            r.calls
        );
        assert_eq!(r.calls.stream_wait, emitted * 3, "{}", name(&device));
        assert!(
            r.calls.event_query >= emitted * 3,
            "{}: retirement polls every release event",
            name(&device)
        );
        assert_eq!(
            r.calls.event_synchronize,
            0,
            "{}: no host wait on the hot path",
            name(&device)
        );
    }
}

/// Three consumers in three partitions: three consumer streams on every slot of `src`'s
/// pool.
fn three_stream_fan_out(
    device: &Arc<dyn DeviceBackend>,
    cap: u32,
) -> Result<ExecutionPlan, Diagnostics> {
    let stats = Arc::new(Stats::default());
    let counts = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let src = DevSource {
        frames: Output::default(),
        k: 0,
        delay: Duration::ZERO,
        stats: Arc::clone(&stats),
    };
    let s = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    for i in 0..3 {
        let c = g
            .add_operator(
                &format!("check{i}"),
                checker(Check::Drop, &stats, &counts),
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(s.frames, c.frames, ConnectionOptions::default());
    }
    let mut options = CompileOptions::default().with_max_fanout_release_streams(cap);
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.device_id());
    compile(&g, options)
}

#[test]
fn a_fan_out_to_more_streams_than_the_cap_does_not_compile() {
    for device in test_backends() {
        // The third consumer stream could never be registered: every emit would be
        // refused, so compile refuses the graph and names the pool.
        let d = three_stream_fan_out(&device, 2).unwrap_err();
        assert_eq!(d.codes(), [codes::POOL_RELEASE_STREAMS_EXCEEDED], "{d}");
        let item = &d.items[0];
        assert_eq!(item.operator.as_deref(), Some("src"));
        assert_eq!(item.port.as_deref(), Some("frames"));
        assert!(item.message.contains("3 distinct device streams"), "{item}");
        assert!(
            item.hint.contains("max_fanout_release_streams to 3"),
            "{item}"
        );
        let plan = three_stream_fan_out(&device, 3).unwrap();
        assert_eq!(plan.tensor_allocations()[0].release_stream_capacity, 3);
    }
}

/// Forwards every tensor it receives (`forwards = input`).
#[operator]
struct DevRelay {
    input: Input<Tensor>,
    #[output(forwards = input)]
    out: Output<Tensor>,
}

impl Operator for DevRelay {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            self.out.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

#[test]
fn the_streams_after_a_forwarding_output_count_toward_the_cap() {
    for device in test_backends() {
        // src → check0, and src → relay → check1, check2: each partition its own. The
        // source's slots reach three consumer streams, two of them through the relay.
        let stats = Arc::new(Stats::default());
        let counts = Arc::new(Mutex::new(Vec::new()));
        let mut g = Graph::new();
        let src = DevSource {
            frames: Output::default(),
            k: 0,
            delay: Duration::ZERO,
            stats: Arc::clone(&stats),
        };
        let s = g.add_operator_with_defaults("src", src).unwrap();
        let relay = DevRelay {
            input: Input::default(),
            out: Output::default(),
        };
        let r = g.add_operator_with_defaults("relay", relay).unwrap();
        g.add_flow(s.frames, r.input, ConnectionOptions::default());
        for (i, from) in [s.frames, r.out, r.out].into_iter().enumerate() {
            let c = g
                .add_operator_with_defaults(
                    &format!("check{i}"),
                    checker(Check::Drop, &stats, &counts),
                )
                .unwrap();
            g.add_flow(from, c.frames, ConnectionOptions::default());
        }
        let options = |cap| {
            let mut o = CompileOptions::default().with_max_fanout_release_streams(cap);
            o.deployment
                .bind_tensor_output_device("src", "frames", device.device_id());
            o
        };
        let d = compile(&g, options(2)).unwrap_err();
        assert_eq!(d.codes(), [codes::POOL_RELEASE_STREAMS_EXCEEDED], "{d}");
        assert_eq!(d.items[0].operator.as_deref(), Some("src"));
        let plan = compile(&g, options(4)).unwrap();
        let streams: std::collections::BTreeSet<_> = plan
            .edges()
            .iter()
            .filter(|e| !e.contract.fused)
            .filter_map(|e| e.contract.consumer_stream)
            .collect();
        assert!(streams.len() > 2, "{streams:?}");
        let d = compile(&g, options(u32::try_from(streams.len()).unwrap() - 1)).unwrap_err();
        assert!(d.has(codes::POOL_RELEASE_STREAMS_EXCEEDED), "{d}");
        compile(&g, options(u32::try_from(streams.len()).unwrap())).unwrap();
    }
}

/// A linear chain in one partition: src → check, proven and fused on one stream.
fn fused_run(device: &Arc<dyn DeviceBackend>, check: Check, frames: u64) -> Run {
    run(
        device,
        1,
        check,
        frames,
        Duration::ZERO,
        ConnectionOptions::default(),
        CompileOptions::default(),
    )
}

#[test]
fn a_proven_linear_edge_records_no_event_and_waits_on_nothing() {
    for device in test_backends() {
        let r = fused_run(&device, Check::Drop, 50);
        let plan = &r.plan;
        assert_eq!(plan.partitions().len(), 1);
        let fusion = plan.edges()[0]
            .fusion
            .as_ref()
            .expect("the plan proves the edge");
        assert_eq!(fusion.stream, 0);
        r.result
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        let emitted = r.stats.emitted.load(Ordering::Relaxed);
        assert!(emitted > 0);
        assert!(
            r.counts
                .lock()
                .unwrap()
                .iter()
                .all(|&c| c == (0, TensorReadiness::Elided))
        );
        assert_eq!(
            r.calls.event_record,
            0,
            "{}: fusion elides the readiness and release records",
            name(&device)
        );
        assert_eq!(
            r.calls.stream_wait,
            0,
            "{}: and the self-wait",
            name(&device)
        );
        assert_eq!(
            r.calls.event_query,
            0,
            "{}: and the release polling",
            name(&device)
        );
    }
}

/// src → three checkers, all in one partition (`one_partition`) or on one shared stream:
/// every consumer is on the producer's stream.
fn same_stream_fan_out(
    device: &Arc<dyn DeviceBackend>,
    check: Check,
    frames: u64,
    one_partition: bool,
) -> Run {
    let mut options = CompileOptions::default();
    options = if one_partition {
        options.with_partitioning(holo_runtime::Partitioning::Authored(vec![
            holo_runtime::PartitionSpec::new("all", ["src", "check0", "check1", "check2"]),
        ]))
    } else {
        options.with_compute_stream_policy(
            holo_runtime::plan::CudaComputeStreamPolicy::SharedProcessDevice,
        )
    };
    run(
        device,
        3,
        check,
        frames,
        Duration::ZERO,
        ConnectionOptions::default(),
        options,
    )
}

/// A fan-out whose consumers all share the producer's stream is fused on every edge
/// (holo's own extension of the seed's linear-chain proof): no readiness event, no
/// self-wait, no release event, no polling — and every consumer's copy on that stream
/// still reads the producer's bytes.
#[test]
fn a_fan_out_on_its_producers_stream_records_no_event() {
    for device in test_backends() {
        for one_partition in [true, false] {
            let what = format!(
                "{}, {}",
                name(&device),
                if one_partition {
                    "one partition"
                } else {
                    "shared stream"
                }
            );
            let r = same_stream_fan_out(&device, Check::Copy, 50, one_partition);
            r.result.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(r.plan.cuda_compute_streams().len(), 1, "{what}");
            for e in r.plan.edges() {
                let f = e.fusion.as_ref().expect("the plan proves every edge");
                assert!(!f.sole_successor, "{what}");
            }
            let emitted = r.stats.emitted.load(Ordering::Relaxed);
            assert!(emitted > 0, "{what}");
            assert_eq!(
                r.stats.received.load(Ordering::Relaxed),
                emitted * 3,
                "{what}"
            );
            assert_eq!(r.stats.bad.load(Ordering::Relaxed), 0, "{what}");
            assert!(
                r.counts
                    .lock()
                    .unwrap()
                    .iter()
                    .all(|&c| c == (0, TensorReadiness::Elided)),
                "{what}"
            );
            assert_eq!(r.calls.event_record, 0, "{what}: {:?}", r.calls);
            assert_eq!(r.calls.stream_wait, 0, "{what}");
            assert_eq!(r.calls.event_query, 0, "{what}");
        }
        // A host access falls back to the full contract: one lazy readiness record per
        // frame, however many consumers ask.
        let r = same_stream_fan_out(&device, Check::HostSync, 50, true);
        r.result
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        let emitted = r.stats.emitted.load(Ordering::Relaxed);
        assert!(emitted > 0);
        assert_eq!(r.calls.event_record, emitted, "{}", name(&device));
        assert_eq!(r.calls.event_synchronize, emitted * 3, "{}", name(&device));
    }
}

/// A fan-out with one consumer on the producer's stream and one on its own: no fusion;
/// the consumer on the producer's stream makes no self-wait, the other waits.
#[test]
fn a_consumer_on_the_writers_stream_makes_no_self_wait() {
    for device in test_backends() {
        let options = CompileOptions::default().with_partitioning(
            holo_runtime::Partitioning::Authored(vec![
                holo_runtime::PartitionSpec::new("a", ["src", "check0"]),
                holo_runtime::PartitionSpec::new("b", ["check1"]),
            ]),
        );
        let r = run(
            &device,
            2,
            Check::Drop,
            50,
            Duration::ZERO,
            ConnectionOptions::default(),
            options,
        );
        r.result
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        assert!(r.plan.edges().iter().all(|e| e.fusion.is_none()));
        let emitted = r.stats.emitted.load(Ordering::Relaxed);
        assert!(emitted > 0);
        // Per frame: one readiness record (check1 needs it) and a release record on each
        // consumer's stream (an unfused consumer registers its stream, its producer's
        // too).
        assert_eq!(r.calls.event_record, emitted * 3, "{}", name(&device));
        assert_eq!(r.calls.stream_wait, emitted, "{}", name(&device));
    }
}

#[test]
fn host_access_on_a_fused_edge_records_the_event_lazily() {
    for device in test_backends() {
        let r = fused_run(&device, Check::HostSync, 20);
        r.result
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        let emitted = r.stats.emitted.load(Ordering::Relaxed);
        assert!(emitted > 0);
        // One lazy readiness record and one host wait per frame; still no stream wait.
        assert_eq!(r.calls.event_record, emitted, "{}", name(&device));
        assert_eq!(r.calls.event_synchronize, emitted, "{}", name(&device));
        assert_eq!(r.calls.stream_wait, 0, "{}", name(&device));
    }
}

/// Tries the wrong stream, then mutation of a received device tensor.
#[operator]
struct Misuse {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 64)]
    frames: Output<Tensor>,
    codes: Arc<Mutex<Vec<ErrorCode>>>,
}

impl Operator for Misuse {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let device = Arc::clone(ctx.device().unwrap());
        let own = device.create_stream()?;
        let req = TensorLoanRequest {
            shape: &[8],
            dtype: DType::U8,
        };
        let mut codes = self.codes.lock().unwrap();
        // A stream that is not the runtime-assigned one.
        codes.push(
            self.frames
                .allocate_tensor(req)?
                .write(own)
                .unwrap_err()
                .code(),
        );
        // Exhaustion: 1 loan + 1 retirement = 2 slots (unconnected output).
        let a = self.frames.allocate_tensor(req)?;
        let b = self.frames.allocate_tensor(req)?;
        codes.push(self.frames.allocate_tensor(req).unwrap_err().code());
        drop((a, b));
        // A committed device tensor is read-only, and not host-readable.
        let c = self
            .frames
            .allocate_tensor(req)?
            .write(ctx.cuda_stream()?)?
            .commit()?;
        let mut t: Tensor = c.into();
        codes.push(t.mutable_data().unwrap_err().code());
        codes.push(t.data().unwrap_err().code());
        device.destroy_stream(own)?;
        ctx.request_stop();
        Ok(())
    }
}

#[test]
fn the_stream_check_exhaustion_and_read_only_access_give_their_codes() {
    for device in test_backends() {
        let codes = Arc::new(Mutex::new(Vec::new()));
        let mut g = Graph::new();
        g.add_operator(
            "m",
            Misuse {
                frames: Output::default(),
                codes: Arc::clone(&codes),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("m", "frames", device.device_id());
        let plan = compile(&g, options).unwrap();
        assert_eq!(plan.tensor_allocation("m.frames").unwrap().slot_count, 2);
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(1).on_device(Arc::clone(&device)),
        )
        .unwrap();
        let _ = session.wait_idle(Duration::from_secs(20));
        session.join().unwrap();
        assert_eq!(
            *codes.lock().unwrap(),
            vec![
                ErrorCode::NotSupported,
                ErrorCode::ResourceExhausted,
                ErrorCode::PermissionDenied,
                ErrorCode::NotSupported
            ],
            "{}",
            name(&device)
        );
    }
}

/// A delay whose end the host clock cannot represent is refused on every backend: on
/// OpenCL its end was computed in a driver callback, where the overflow's panic aborted
/// the process. Nothing is enqueued, nothing counted, and the stream stays usable.
#[test]
fn a_delay_past_the_clocks_range_is_invalid_argument_on_every_backend() {
    for device in test_backends() {
        let stream = device.create_stream().unwrap();
        let before = device.counters().snapshot();
        let error = device.enqueue_delay(stream, Duration::MAX).unwrap_err();
        assert_eq!(
            error.code(),
            ErrorCode::InvalidArgument,
            "{}: {error}",
            name(&device)
        );
        assert!(error.message().contains("monotonic clock"), "{error}");
        assert_eq!((device.counters().snapshot() - before).delay, 0);
        device
            .enqueue_delay(stream, Duration::from_millis(1))
            .unwrap();
        device.synchronize_stream(stream).unwrap();
        device.destroy_stream(stream).unwrap();
    }
}

/// A host-only operator asks for a stream.
#[operator]
struct NoStream {
    code: Arc<Mutex<Option<ErrorCode>>>,
}
impl Operator for NoStream {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        *self.code.lock().unwrap() = Some(ctx.cuda_stream().unwrap_err().code());
        Ok(())
    }
}

#[test]
fn a_host_only_operator_has_no_stream() {
    let code = Arc::new(Mutex::new(None));
    let mut g = Graph::new();
    g.add_operator(
        "h",
        NoStream {
            code: Arc::clone(&code),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert!(plan.partitions()[0].host_only);
    let session = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(20));
    session.join().unwrap();
    assert_eq!(*code.lock().unwrap(), Some(ErrorCode::NotSupported));
}

/// A device loan written on a stream that is not the operator's, and a host-pool loan
/// given to the device writer: what each refusal said, and the free slots of both pools
/// after the refused loans dropped.
#[operator]
struct WrongWrites {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 64)]
    dev: Output<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 64)]
    host: Output<Tensor>,
    other: StreamHandle,
    seen: Arc<Mutex<Vec<(ErrorCode, String)>>>,
}

impl Operator for WrongWrites {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let request = || TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        };
        let mut seen = self.seen.lock().unwrap();
        let e = self
            .dev
            .allocate_tensor(request())?
            .write(self.other)
            .unwrap_err();
        seen.push((e.code(), e.to_string()));
        let e = self
            .host
            .allocate_tensor(request())?
            .write(stream)
            .unwrap_err();
        seen.push((e.code(), e.to_string()));
        Ok(())
    }
}

#[test]
fn a_device_write_on_another_stream_or_of_a_host_pool_is_refused_and_the_slot_returns() {
    for device in test_backends() {
        let other = device.create_stream().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut g = Graph::new();
        g.add_operator(
            "w",
            WrongWrites {
                dev: Output::default(),
                host: Output::default(),
                other,
                seen: Arc::clone(&seen),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("w", "dev", device.device_id());
        let plan = compile(&g, options).unwrap();
        let slots = |pool: &str| {
            plan.tensor_allocations()
                .iter()
                .find(|a| a.pool == pool)
                .map(|a| a.slot_count)
        };
        let (dev_slots, host_slots) = (slots("w.dev"), slots("w.host"));
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(3).on_device(Arc::clone(&device)),
        )
        .unwrap();
        assert!(
            session.wait_idle(Duration::from_secs(20)),
            "{}",
            name(&device)
        );
        assert_eq!(
            session.pool_free_slots("w.dev"),
            dev_slots,
            "{}",
            name(&device)
        );
        assert_eq!(
            session.pool_free_slots("w.host"),
            host_slots,
            "{}",
            name(&device)
        );
        session.stop();
        session.join().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 6, "{}", name(&device));
        for pair in seen.chunks(2) {
            assert_eq!(pair[0].0, ErrorCode::NotSupported, "{}", pair[0].1);
            assert!(
                pair[0].1.contains("runtime-assigned compute stream"),
                "{}",
                pair[0].1
            );
            assert!(
                pair[0].1.contains(r#"operator "w", port "dev""#),
                "{}",
                pair[0].1
            );
            assert_eq!(pair[1].0, ErrorCode::NotSupported, "{}", pair[1].1);
            assert!(pair[1].1.contains("write_host"), "{}", pair[1].1);
            assert!(
                pair[1].1.contains(r#"operator "w", port "host""#),
                "{}",
                pair[1].1
            );
        }
        device.destroy_stream(other).unwrap();
    }
}

/// Writes a pinned slot on its stream (`write_and_commit`) or on the host
/// (`write_host_and_commit`), after delaying its stream.
#[operator]
struct PinnedWriter {
    #[output(storage = runtime_pool, memory = pinned, dtype = u8, rank = 1, bounds = 256)]
    frames: Output<Tensor>,
    on_stream: bool,
    k: u64,
}

impl Operator for PinnedWriter {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let len = frame_len(self.k);
        #[allow(clippy::cast_possible_truncation)]
        let value = (self.k % 128) as u8;
        self.k += 1;
        let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[len],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let committed = if self.on_stream {
            loan.write_and_commit(ctx.cuda_stream()?, |device, ptr, n, stream| {
                device.enqueue_delay(stream, Duration::from_millis(1))?;
                // SAFETY: the slot is the loan's, `n` is its byte size.
                unsafe { device.memset_async(ptr, value, n, stream) }
            })?
        } else {
            loan.write_host_and_commit(|b| b.fill(value))?
        };
        match self.frames.emit(committed, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// A host-only reader of pinned frames (no planned stream).
#[operator]
struct HostReader {
    #[input(memory = pinned)]
    frames: Input<Tensor>,
    stats: Arc<Stats>,
    seen: Arc<Mutex<Vec<TensorReadiness>>>,
}

impl Operator for HostReader {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            self.seen.lock().unwrap().push(t.readiness());
            #[allow(clippy::cast_possible_truncation)]
            let expect = (t.byte_size() - 64) as u8;
            // The runtime already waited on the host before handing the frame over, so
            // reading needs no call here.
            if t.data()?.iter().any(|&b| b != expect) {
                self.stats.bad.fetch_add(1, Ordering::Relaxed);
            }
            self.stats.received.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[test]
fn pinned_readiness_follows_the_writer_and_a_stream_less_reader_gets_a_host_wait() {
    for device in test_backends() {
        for on_stream in [true, false] {
            let stats = Arc::new(Stats::default());
            let seen = Arc::new(Mutex::new(Vec::new()));
            let mut g = Graph::new();
            let w = g
                .add_operator(
                    "writer",
                    PinnedWriter {
                        frames: Output::default(),
                        on_stream,
                        k: 0,
                    },
                    ParamSet::defaults().unwrap(),
                )
                .unwrap();
            let r = g
                .add_operator(
                    "reader",
                    HostReader {
                        frames: Input::default(),
                        stats: Arc::clone(&stats),
                        seen: Arc::clone(&seen),
                    },
                    ParamSet::defaults().unwrap(),
                )
                .unwrap();
            g.add_flow(w.frames, r.frames, ConnectionOptions::default());
            let mut options = CompileOptions::default();
            if on_stream {
                // A stream writer needs a planned stream: bind the pinned output to the device.
                options.deployment.bind_tensor_output_device(
                    "writer",
                    "frames",
                    device.device_id(),
                );
            }
            if device.device_id().api == DeviceApi::OpenCl {
                // Pinned memory is CUDA's (page-locked, `cuMemHostAlloc`): compile refuses
                // to bind it to an OpenCL device, and an OpenCL session refuses the pool.
                if on_stream {
                    let d = compile(&g, options).unwrap_err();
                    assert!(d.has(codes::PLACEMENT_API_MISMATCH), "{d}");
                } else {
                    let plan = compile(&g, options).unwrap();
                    let e = RunSession::start(
                        g,
                        &plan,
                        SessionOptions::frames(1).on_device(Arc::clone(&device)),
                    )
                    .expect_err("an OpenCL session refuses a pinned pool");
                    assert_eq!(e.code(), ErrorCode::DeviceUnavailable, "{e}");
                    assert!(
                        e.to_string()
                            .contains("pool writer.frames is pinned memory"),
                        "{e}"
                    );
                }
                continue;
            }
            let plan = compile(&g, options).unwrap();
            assert_eq!(plan.cuda_compute_streams().len(), usize::from(on_stream));
            let before = device.counters().snapshot();
            let session = RunSession::start(
                g,
                &plan,
                SessionOptions::frames(20).on_device(Arc::clone(&device)),
            )
            .unwrap();
            let _ = session.wait_idle(holo_tests::IDLE_WAIT);
            session
                .join()
                .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
            let calls = device.counters().snapshot() - before;
            let received = stats.received.load(Ordering::Relaxed);
            assert!(received > 0);
            assert_eq!(
                stats.bad.load(Ordering::Relaxed),
                0,
                "{} on_stream={on_stream}",
                name(&device)
            );
            let want = if on_stream {
                TensorReadiness::Recorded
            } else {
                TensorReadiness::Host
            };
            assert!(seen.lock().unwrap().iter().all(|&r| r == want));
            if on_stream {
                assert_eq!(
                    calls.event_synchronize, received,
                    "one host wait per stream-written frame"
                );
            } else {
                assert_eq!(
                    (calls.event_record, calls.event_synchronize),
                    (0, 0),
                    "a host writer records no fence"
                );
            }
        }
    }
}

/// Per frame: the call's code, and the release streams before and after it.
type BogusSeen = Arc<Mutex<Vec<(Option<ErrorCode>, u32, u32)>>>;

/// Hands each host-written pinned frame a stream handle no device made.
#[operator]
struct BogusStreamReader {
    #[input(memory = pinned)]
    frames: Input<Tensor>,
    seen: BogusSeen,
}

impl Operator for BogusStreamReader {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            let before = t.release_stream_count();
            let code = t
                .synchronize_for_consumer_stream(StreamHandle::from_raw(0xdead))
                .err()
                .map(|e| e.code());
            self.seen
                .lock()
                .unwrap()
                .push((code, before, t.release_stream_count()));
        }
        Ok(())
    }
}

/// A host-written frame has no readiness event to wait on, so the stream given to
/// `synchronize_for_consumer_stream` reached no device call: a bad handle was registered
/// as a release stream, and the session failed at retirement, naming the pool instead of
/// the call. It is refused at the call now, and nothing is registered.
#[test]
fn a_bad_stream_for_a_host_written_frame_is_refused_at_the_call() {
    for device in test_backends() {
        if device.device_id().api == DeviceApi::OpenCl {
            // No pinned pools on OpenCL (`pinned_readiness_follows_the_writer…`).
            continue;
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut g = Graph::new();
        let w = g
            .add_operator(
                "writer",
                PinnedWriter {
                    frames: Output::default(),
                    on_stream: false,
                    k: 0,
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        let r = g
            .add_operator(
                "reader",
                BogusStreamReader {
                    frames: Input::default(),
                    seen: Arc::clone(&seen),
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(w.frames, r.frames, ConnectionOptions::default());
        let plan = compile(&g, CompileOptions::default()).unwrap();
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(5).on_device(Arc::clone(&device)),
        )
        .unwrap();
        let _ = session.wait_idle(holo_tests::IDLE_WAIT);
        session
            .join()
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty(), "{}", name(&device));
        for &(code, before, after) in seen.iter() {
            assert_eq!(code, Some(ErrorCode::InvalidArgument), "{}", name(&device));
            assert_eq!(after, before, "nothing registered");
        }
    }
}

/// Forwards received device frames through a pass-through output.
#[operator]
struct DevForward {
    #[input(memory = device)]
    input: Input<Tensor>,
    #[output(storage = pass_through, memory = device, forwards = input)]
    output: Output<Tensor>,
}

impl Operator for DevForward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            match self.output.emit(t, EmitOptions::default()) {
                Err(e) if e.code() == ErrorCode::Backpressured => {}
                other => other?,
            }
        }
        Ok(())
    }
}

#[test]
fn forwarding_keeps_the_backing_and_extends_its_release_list() {
    for device in test_backends() {
        let stats = Arc::new(Stats::default());
        let counts = Arc::new(Mutex::new(Vec::new()));
        let mut g = Graph::new();
        let src = DevSource {
            frames: Output::default(),
            k: 0,
            delay: Duration::ZERO,
            stats: Arc::clone(&stats),
        };
        let s = g
            .add_operator("src", src, ParamSet::defaults().unwrap())
            .unwrap();
        let side = g
            .add_operator(
                "side",
                checker(Check::Copy, &stats, &counts),
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        let f = g
            .add_operator(
                "fwd",
                DevForward {
                    input: Input::default(),
                    output: Output::default(),
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(s.frames, side.frames, ConnectionOptions::default());
        g.add_flow(s.frames, f.input, ConnectionOptions::default());
        for i in 0..2 {
            let c = g
                .add_operator(
                    &format!("after{i}"),
                    checker(Check::Copy, &stats, &counts),
                    ParamSet::defaults().unwrap(),
                )
                .unwrap();
            g.add_flow(f.output, c.frames, ConnectionOptions::default());
        }
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "frames", device.device_id());
        // The pass-through output does not inherit the input's device: it must be bound.
        let d = compile(&g, options.clone()).unwrap_err();
        assert!(d.has(holo_runtime::codes::PLACEMENT_DEVICE_REQUIRED), "{d}");
        options
            .deployment
            .bind_tensor_output_device("fwd", "output", device.device_id());
        let plan = compile(&g, options).unwrap();
        assert_eq!(
            plan.tensor_allocations().len(),
            1,
            "forwarding allocates no pool"
        );
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(30).on_device(Arc::clone(&device)),
        )
        .unwrap();
        let _ = session.wait_idle(holo_tests::IDLE_WAIT);
        session
            .join()
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        assert_eq!(stats.bad.load(Ordering::Relaxed), 0);
        // side and fwd register at the first emit; after0 and after1 at the forward:
        // the forwarded frames carry the original slot's list, grown to four streams.
        let max = counts.lock().unwrap().iter().map(|c| c.0).max().unwrap();
        assert_eq!(max, 4, "{}", name(&device));
    }
}
