//! A source paced on its consumers (docs/STREAMS.md, "Pacing a source"):
//! `Output::queued()` is how many of the output's messages wait in its fullest consumer
//! queue, and a source that fills only while it is 0 never has more than one frame
//! waiting at its slowest consumer; `Output::in_use()` counts a frame until the device
//! finished its consumers' work on it. Stepped sessions, so every count is exact. And the
//! order a fan-out serves its consumers in, which turns with each emit, so that a source
//! paced to idle consumers does not serve the same one first every time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::{
    ChannelSubscriber, CompileOptions, ConnectionOptions, EmitOptions, ExecutionContext, Graph,
    Input, Operator, Output, PartitionSpec, Partitioning, Result, RunSession, SessionOptions,
    SubscriberOptions, TopicOptions, compile, operator,
};

/// Each activation: notes `queued()`, then emits the next value unless paced and a
/// consumer still has one waiting.
#[operator]
struct Source {
    out: Output<u64>,
    paced: bool,
    next: u64,
    /// (queued() seen, emitted) per activation.
    log: Arc<Mutex<Vec<(usize, bool)>>>,
    /// Activations where `in_flight()` differed from `queued()` (stepped, every
    /// consumer's activation has returned when the source runs: never).
    differ: Arc<AtomicU64>,
}

impl Operator for Source {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let queued = self.out.queued();
        if self.out.in_flight() != queued {
            self.differ.fetch_add(1, Ordering::Relaxed);
        }
        let emit = !(self.paced && queued > 0) && self.out.has_room();
        if emit {
            self.out.emit(self.next, EmitOptions::default())?;
            self.next += 1;
        }
        self.log.lock().unwrap().push((queued, emit));
        Ok(())
    }
}

/// Takes everything that waits, or (`open` false) nothing: a sink that has fallen behind.
#[operator]
struct Gated {
    input: Input<u64>,
    open: bool,
    got: Arc<Mutex<Vec<u64>>>,
}

impl Operator for Gated {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if self.open {
            while let Some(v) = self.input.receive() {
                self.got.lock().unwrap().push(v);
            }
        }
        Ok(())
    }
}

/// Each operator in a partition of its own.
fn one_partition_each(names: &[&str]) -> CompileOptions {
    CompileOptions::default().with_partitioning(Partitioning::Authored(
        names
            .iter()
            .map(|&n| PartitionSpec::new(n, vec![n]))
            .collect(),
    ))
}

struct Rig {
    session: RunSession,
    log: Arc<Mutex<Vec<(usize, bool)>>>,
    differ: Arc<AtomicU64>,
    /// What the fast and the slow sink received (the slow one takes nothing).
    got: [Arc<Mutex<Vec<u64>>>; 2],
}

impl Rig {
    /// source → {fast, slow}, queues of depth 3; one partition, or one per operator
    /// (queues between partitions are another ring than those inside one).
    fn new(paced: bool, split: bool) -> Rig {
        let log = Arc::new(Mutex::new(Vec::new()));
        let differ = Arc::new(AtomicU64::new(0));
        let got = [
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        ];
        let mut g = Graph::new();
        let s = g
            .add_operator_with_defaults(
                "source",
                Source {
                    out: Output::default(),
                    paced,
                    next: 0,
                    log: Arc::clone(&log),
                    differ: Arc::clone(&differ),
                },
            )
            .unwrap();
        for (i, name) in ["fast", "slow"].into_iter().enumerate() {
            let k = g
                .add_operator_with_defaults(
                    name,
                    Gated {
                        input: Input::default(),
                        open: name == "fast",
                        got: Arc::clone(&got[i]),
                    },
                )
                .unwrap();
            g.add_flow(
                s.out,
                k.input,
                ConnectionOptions::default().with_queue_depth(3),
            );
        }
        let options = if split {
            one_partition_each(&["source", "fast", "slow"])
        } else {
            CompileOptions::default()
        };
        let plan = compile(&g, options).unwrap();
        let session = RunSession::start_stepped(g, &plan, SessionOptions::default()).unwrap();
        Rig {
            session,
            log,
            differ,
            got,
        }
    }

    fn steps(&mut self, n: usize) {
        for _ in 0..n {
            self.session.step().unwrap();
        }
    }

    fn log(&self) -> Vec<(usize, bool)> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    fn finish(self) {
        assert_eq!(self.differ.load(Ordering::Relaxed), 0);
        self.session.stop();
        self.session.join().unwrap();
    }
}

#[test]
fn queued_counts_the_fullest_consumer_queue_up_to_its_depth() {
    for split in [false, true] {
        let mut rig = Rig::new(false, split);
        rig.steps(5);
        // The slow sink's queue fills to its depth of 3 (the fast one's stays empty);
        // then the source has no room and is not activated.
        assert_eq!(
            rig.log(),
            [(0, true), (1, true), (2, true)],
            "split {split}"
        );
        assert_eq!(*rig.got[0].lock().unwrap(), [0, 1, 2], "split {split}");
        rig.finish();
    }
}

#[test]
fn a_paced_source_skips_while_a_frame_of_its_waits() {
    for split in [false, true] {
        let mut rig = Rig::new(true, split);
        rig.steps(4);
        // One frame goes out; while the slow sink leaves it unreceived, every tick is
        // skipped: its queue never holds a second.
        assert_eq!(
            rig.log(),
            [(0, true), (1, false), (1, false), (1, false)],
            "split {split}"
        );
        assert_eq!(*rig.got[0].lock().unwrap(), [0], "split {split}");
        rig.finish();
    }
}

/// Blocks on its first frame until its gate opens (a sink that fell behind), then takes
/// everything.
#[operator]
struct Slow {
    input: Input<u64>,
    open: Arc<AtomicBool>,
    got: Arc<Mutex<Vec<u64>>>,
}

impl Operator for Slow {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            while !self.open.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.got.lock().unwrap().push(v);
        }
        Ok(())
    }
}

/// Emits while `queued()` (or `in_flight()`) is 0; counts what it saw.
#[operator]
struct PacedSource {
    out: Output<u64>,
    next: u64,
    /// Paced on `in_flight()` instead of `queued()`.
    on_in_flight: bool,
    /// The largest count paced on, the emits, the skipped activations, and `queued()`
    /// at the last skip.
    seen: Arc<[AtomicU64; 4]>,
}

impl Operator for PacedSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let queued = self.out.queued() as u64;
        let count = if self.on_in_flight {
            self.out.in_flight() as u64
        } else {
            queued
        };
        self.seen[0].fetch_max(count, Ordering::AcqRel);
        if count > 0 {
            self.seen[2].fetch_add(1, Ordering::AcqRel);
            self.seen[3].store(queued, Ordering::Release);
            return Ok(());
        }
        self.out.emit(self.next, EmitOptions::default())?;
        self.next += 1;
        self.seen[1].fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// Opens its gate when dropped.
struct Opens(Arc<AtomicBool>);

impl Drop for Opens {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// source → {fast, slow} on three threads, the slow sink blocked in its activation on
/// frame 0 until released; the source paced on `queued()` or `in_flight()`. Returns
/// the emits while the slow sink was blocked and `queued()` at the source's last skip
/// then; checks that nothing was lost and no count passed 1.
fn paced_on_threads(on_in_flight: bool) -> (u64, u64) {
    let open = Arc::new(AtomicBool::new(false));
    let seen: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
    let got = [
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    ];
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            PacedSource {
                out: Output::default(),
                next: 0,
                on_in_flight,
                seen: Arc::clone(&seen),
            },
        )
        .unwrap();
    let f = g
        .add_operator_with_defaults(
            "fast",
            Gated {
                input: Input::default(),
                open: true,
                got: Arc::clone(&got[0]),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "slow",
            Slow {
                input: Input::default(),
                open: Arc::clone(&open),
                got: Arc::clone(&got[1]),
            },
        )
        .unwrap();
    let depth = || ConnectionOptions::default().with_queue_depth(4);
    g.add_flow(s.out, f.input, depth());
    g.add_flow(s.out, k.input, depth());
    let options = one_partition_each(&["source", "fast", "slow"]);
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    let until = |what: &str, cond: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // Opens the gate however the test ends, so a failed assertion cannot leave the slow
    // sink blocked and the session's teardown waiting for it.
    let _opens = Opens(Arc::clone(&open));
    // The slow sink takes frame 0 and blocks. Paced on `queued()`, frame 1 goes out and
    // waits in its queue; paced on `in_flight()`, nothing more goes out. From then on
    // the source skips, however long it runs.
    let emits = if on_in_flight { 1 } else { 2 };
    until("the emits", &|| seen[1].load(Ordering::Acquire) == emits);
    until("the slow sink's frame", &|| {
        !on_in_flight || seen[3].load(Ordering::Acquire) == 0 && seen[2].load(Ordering::Acquire) > 0
    });
    let skipped = seen[2].load(Ordering::Acquire);
    until("skipped activations", &|| {
        seen[2].load(Ordering::Acquire) > skipped + 1_000
    });
    let blocked = (
        seen[1].load(Ordering::Acquire),
        seen[3].load(Ordering::Acquire),
    );
    assert_eq!(seen[0].load(Ordering::Acquire), 1);
    // The fast sink takes what was emitted (its thread may wake after the skips began).
    until("the fast sink's frames", &|| {
        got[0].lock().unwrap().len() as u64 >= emits
    });
    let fast = got[0].lock().unwrap().clone();
    assert_eq!(fast, (0..emits).collect::<Vec<_>>());
    open.store(true, Ordering::Release);
    until("frames after the slow sink caught up", &|| {
        got[1].lock().unwrap().len() > 100
    });
    session.stop();
    session.join().unwrap();
    // Nothing was skipped over: each sink received 0, 1, 2, … in order. The stop drops
    // what still waited, at most one frame per queue; and no queue ever held two.
    for got in &got {
        let got = got.lock().unwrap();
        assert_eq!(*got, (0..got.len() as u64).collect::<Vec<_>>());
    }
    let (fast, slow) = (got[0].lock().unwrap().len(), got[1].lock().unwrap().len());
    assert!(fast.abs_diff(slow) <= 1, "{fast} against {slow}");
    assert_eq!(seen[0].load(Ordering::Acquire), 1);
    blocked
}

#[test]
fn a_source_paced_on_queued_keeps_one_frame_waiting_behind_its_blocked_sink() {
    // Two emits: the frame the sink works on, and one in its queue (`queued()` 1).
    assert_eq!(paced_on_threads(false), (2, 1));
}

#[test]
fn a_source_paced_on_in_flight_waits_until_its_sink_returns() {
    // One emit: the frame the sink works on is in flight though no longer queued
    // (`queued()` 0 at the source's skips).
    assert_eq!(paced_on_threads(true), (1, 0));
}

#[test]
fn queued_counts_an_attached_subscribers_queue_and_is_zero_unbound() {
    assert_eq!(Output::<u64>::default().queued(), 0);
    let log = Arc::new(Mutex::new(Vec::new()));
    let differ = Arc::new(AtomicU64::new(0));
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            Source {
                out: Output::default(),
                paced: false,
                next: 0,
                log: Arc::clone(&log),
                differ: Arc::clone(&differ),
            },
        )
        .unwrap();
    g.export_topic(s.out, "cam", TopicOptions::DEFAULT.with_depth(3));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let mut session = RunSession::start_stepped(g, &plan, SessionOptions::default()).unwrap();
    // No subscriber attached: nothing waits anywhere.
    session.step().unwrap();
    let mut subscriber =
        ChannelSubscriber::<u64>::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    for _ in 0..3 {
        session.step().unwrap();
    }
    let seen: Vec<usize> = log.lock().unwrap().iter().map(|&(q, _)| q).collect();
    assert_eq!(seen, [0, 0, 1, 2], "{:?}", log.lock().unwrap());
    while subscriber.try_receive().unwrap().is_some() {}
    session.step().unwrap();
    assert_eq!(log.lock().unwrap().last().map(|&(q, _)| q), Some(0));
    assert_eq!(differ.load(Ordering::Relaxed), 0);
    drop(subscriber);
    session.stop();
    session.join().unwrap();
}

/// Never emits.
#[operator]
struct Silent {
    out: Output<u64>,
}

impl Operator for Silent {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        std::thread::sleep(Duration::from_millis(1));
        Ok(())
    }
}

/// Triggered by `frames`; `other` (required, so `missing = skip`) never has data, so
/// every arrival is skipped: dropped without an activation.
#[operator(trigger = on_arrival(frames))]
struct Skipping {
    frames: Input<u64>,
    other: Input<u64>,
}

impl Operator for Skipping {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let _ = (self.frames.receive(), self.other.receive());
        Ok(())
    }
}

#[test]
fn a_skipped_arrival_is_finished_with_so_a_source_paced_on_in_flight_goes_on() {
    let seen: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            PacedSource {
                out: Output::default(),
                next: 0,
                on_in_flight: true,
                seen: Arc::clone(&seen),
            },
        )
        .unwrap();
    let o = g
        .add_operator_with_defaults(
            "silent",
            Silent {
                out: Output::default(),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "skipping",
            Skipping {
                frames: Input::default(),
                other: Input::default(),
            },
        )
        .unwrap();
    g.add_flow(s.out, k.frames, ConnectionOptions::default());
    g.add_flow(o.out, k.other, ConnectionOptions::default());
    let options = one_partition_each(&["source", "silent", "skipping"]);
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    // Each skipped arrival frees the source for the next frame; without the skip's
    // finish, the first would be in flight for good and the source would stop at 1.
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen[1].load(Ordering::Acquire) < 100 {
        assert!(
            Instant::now() < deadline,
            "the paced source stopped after {} emits",
            seen[1].load(Ordering::Acquire)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    session.stop();
    session.join().unwrap();
    assert!(seen[0].load(Ordering::Acquire) <= 1);
}

/// A value that knows whether it is a clone: a fan-out's emit clones it for every
/// consumer but the one it pushes to last, which gets the value itself.
#[derive(Debug)]
struct Marked {
    n: u64,
    cloned: bool,
}

impl Clone for Marked {
    fn clone(&self) -> Self {
        Marked {
            n: self.n,
            cloned: true,
        }
    }
}

#[operator]
struct MarkedSource {
    out: Output<Marked>,
    next: u64,
}

impl Operator for MarkedSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let n = self.next;
        self.next += 1;
        self.out
            .emit(Marked { n, cloned: false }, EmitOptions::default())
    }
}

#[operator]
struct MarkedSink {
    input: Input<Marked>,
    /// The frames this sink got the emitted value itself for (not a clone).
    originals: Arc<Mutex<Vec<u64>>>,
}

impl Operator for MarkedSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(m) = self.input.receive() {
            if !m.cloned {
                self.originals.lock().unwrap().push(m.n);
            }
        }
        Ok(())
    }
}

/// A fan-out serves its consumers in an order that turns with each emit, so no consumer
/// is always the first to see a frame (nor the first to the device's lock to receive
/// it): frame k is pushed first to consumer k mod 3, and last — with the value itself,
/// the others getting clones — to consumer (k + 2) mod 3. Consumers in one partition
/// and in partitions of their own.
#[test]
fn a_fan_out_turns_which_consumer_it_serves_first() {
    for split in [false, true] {
        let originals: Vec<Arc<Mutex<Vec<u64>>>> =
            (0..3).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        let mut g = Graph::new();
        let s = g
            .add_operator_with_defaults(
                "source",
                MarkedSource {
                    out: Output::default(),
                    next: 0,
                },
            )
            .unwrap();
        for (i, name) in ["sink0", "sink1", "sink2"].into_iter().enumerate() {
            let k = g
                .add_operator_with_defaults(
                    name,
                    MarkedSink {
                        input: Input::default(),
                        originals: Arc::clone(&originals[i]),
                    },
                )
                .unwrap();
            g.add_flow(s.out, k.input, ConnectionOptions::default());
        }
        let options = if split {
            one_partition_each(&["source", "sink0", "sink1", "sink2"])
        } else {
            CompileOptions::default()
        };
        let plan = compile(&g, options).unwrap();
        let mut session = RunSession::start_stepped(g, &plan, SessionOptions::default()).unwrap();
        // Each step: the source emits one frame, each sink takes what waits.
        for _ in 0..9 {
            session.step().unwrap();
        }
        session.stop();
        session.join().unwrap();
        let got: Vec<Vec<u64>> = originals
            .iter()
            .map(|o| o.lock().unwrap().clone())
            .collect();
        assert_eq!(
            got,
            [vec![1, 4, 7], vec![2, 5, 8], vec![0, 3, 6]],
            "split {split}"
        );
    }
}

/// Per activation: `queued()`, `in_flight()`, `in_use()`, and whether it emitted.
type CountLog = Arc<Mutex<Vec<(usize, usize, usize, bool)>>>;

/// Logs its pacing counts each activation and fills a device frame only while
/// `in_use()` is 0: every frame it sent is back in its pool, the consumer's device
/// work on it finished.
#[operator]
struct DevicePaced {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 16)]
    out: Output<holo_runtime::Tensor>,
    log: CountLog,
}

impl Operator for DevicePaced {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let counts = (self.out.queued(), self.out.in_flight(), self.out.in_use());
        let emit = counts.2 == 0;
        if emit {
            let stream = ctx.cuda_stream()?;
            let loan = self.out.allocate_tensor(holo_runtime::TensorLoanRequest {
                shape: &[16],
                dtype: holo_runtime::DType::U8,
            })?;
            let w = loan.write(stream)?;
            self.out.emit(w.commit()?, EmitOptions::default())?;
        }
        self.log
            .lock()
            .unwrap()
            .push((counts.0, counts.1, counts.2, emit));
        Ok(())
    }
}

/// Receives each frame, enqueues `delay` of device work on its stream after it, and
/// drops the frame at once: the activation returns, the slot retires when the work ends.
#[operator]
struct SlowOnDevice {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    input: Input<holo_runtime::Tensor>,
    delay: Duration,
}

impl Operator for SlowOnDevice {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            let stream = ctx.cuda_stream()?;
            ctx.device()
                .expect("a device")
                .enqueue_delay(stream.handle(), self.delay)?;
            drop(t);
        }
        Ok(())
    }
}

/// `Output::in_use()` counts a slot until the device has finished its consumer's work on
/// it, where `queued()` and `in_flight()` are already 0: the consumer's activation
/// returned once it had enqueued that work. A source paced on it sends the next frame
/// only then. The software device; the consumer in a partition (and on a stream) of its
/// own, so the slot retires through its release event. Fails with `in_use()` answering 0:
/// the second activation emits.
#[test]
fn in_use_counts_a_slot_until_the_consumers_device_work_on_it_finished() {
    let device: Arc<dyn holo_runtime::device::DeviceBackend> =
        holo_runtime::device::SoftwareDevice::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            DevicePaced {
                out: Output::default(),
                log: Arc::clone(&log),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            SlowOnDevice {
                input: Input::default(),
                delay: Duration::from_millis(1500),
            },
        )
        .unwrap();
    g.add_flow(s.out, k.input, ConnectionOptions::default());
    let mut options = one_partition_each(&["source", "sink"]);
    options
        .deployment
        .bind_tensor_output_device("source", "out", device.ordinal());
    let plan = compile(&g, options).unwrap();
    let mut session = RunSession::start_stepped(
        g,
        &plan,
        SessionOptions::default().on_device(Arc::clone(&device)),
    )
    .unwrap();
    // The frame goes out, the sink takes it, enqueues its work and drops it.
    session.step().unwrap();
    session.step().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        {
            let log = log.lock().unwrap();
            if log.len() >= 2 && log.last().is_some_and(|e| e.3) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the source never sent again");
        std::thread::sleep(Duration::from_millis(20));
        session.step().unwrap();
    }
    let log = log.lock().unwrap().clone();
    session.stop();
    session.join().unwrap();
    // First activation: nothing out. Then, while the sink's device work runs, nothing
    // queued or in flight but one slot in use: skipped. Then it is back: the next frame.
    assert_eq!(log[0], (0, 0, 0, true));
    let (waiting, last) = log[1..].split_at(log.len() - 2);
    assert!(
        !waiting.is_empty() && waiting.iter().all(|&e| e == (0, 0, 1, false)),
        "{log:?}"
    );
    assert_eq!(last, [(0, 0, 0, true)], "{log:?}");
}
