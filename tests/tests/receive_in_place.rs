//! `Input::receive_with`: a value read in place in its queue slot (issue 12, item 6). It
//! gives the exact values and frame ids `receive` gives, in order; each value is dropped
//! exactly once (also when the callback panics, or the session ends with values queued);
//! and `receive`'s rules hold: history, `reuse_last`, a port on another thread
//! (`NotSupported`), the stream wait of a tensor on a consumer with a stream.
#![allow(
    clippy::many_single_char_names,
    reason = "graph-building tests name port handles by one letter"
)]

mod common;

use common::Counter;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::__test_support::test_backends;
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, compile, operator,
};

/// A payload that counts its drops: a value dropped twice, or never, shows.
#[derive(Clone, Debug)]
struct Tracked {
    n: u64,
    bytes: [u8; 256],
    drops: Arc<AtomicU64>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

/// Emits `Tracked` values 1, 2, 3, …
#[operator]
struct TrackedSource {
    out: Output<Tracked>,
    n: u64,
    drops: Arc<AtomicU64>,
    made: Arc<AtomicU64>,
}

impl Operator for TrackedSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        let mut bytes = [0u8; 256];
        bytes[255] = self.n.to_le_bytes()[0];
        self.made.fetch_add(1, Ordering::Relaxed);
        self.out.emit(
            Tracked {
                n: self.n,
                bytes,
                drops: Arc::clone(&self.drops),
            },
            EmitOptions::default(),
        )
    }
}

/// Forwards a clone of each value it reads in place (the original is dropped in its slot).
#[operator]
struct InPlaceForward {
    input: Input<Tracked>,
    out: Output<Tracked>,
    made: Arc<AtomicU64>,
}

impl Operator for InPlaceForward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(r) = self.input.receive_with(|v| {
            self.made.fetch_add(1, Ordering::Relaxed);
            self.out.emit(v.clone(), EmitOptions::default())
        }) {
            r?;
        }
        Ok(())
    }
}

/// Per value read: its number, its last byte, the frame id carried forward.
type Received = Arc<Mutex<Vec<(u64, u8, Option<u64>)>>>;

/// Records, per value read in place: its number, its last byte, and the frame id the
/// activation carries forward while the callback runs.
#[operator]
struct InPlaceSink {
    input: Input<Tracked>,
    got: Received,
    /// Panic inside the callback when reading this number.
    panic_at: Option<u64>,
}

impl Operator for InPlaceSink {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let panic_at = self.panic_at;
        while self
            .input
            .receive_with(|v| {
                assert_ne!(Some(v.n), panic_at, "the sink's callback panics");
                self.got
                    .lock()
                    .unwrap()
                    .push((v.n, v.bytes[255], ctx.input_frame()));
            })
            .is_some()
        {}
        Ok(())
    }
}

struct Chain {
    got: Received,
    drops: Arc<AtomicU64>,
    made: Arc<AtomicU64>,
}

/// source → forward → forward → sink, every hop after the source read in place; the
/// queues are deep enough for every frame (a forwarder here never meets backpressure).
fn chain(panic_at: Option<u64>) -> (Graph, Chain) {
    let deep = ConnectionOptions::default().with_queue_depth(512);
    let c = Chain {
        got: Arc::new(Mutex::new(Vec::new())),
        drops: Arc::new(AtomicU64::new(0)),
        made: Arc::new(AtomicU64::new(0)),
    };
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            TrackedSource {
                out: Output::default(),
                n: 0,
                drops: Arc::clone(&c.drops),
                made: Arc::clone(&c.made),
            },
        )
        .unwrap();
    let mut prev = s.out;
    for name in ["fwd1", "fwd2"] {
        let f = g
            .add_operator_with_defaults(
                name,
                InPlaceForward {
                    input: Input::default(),
                    out: Output::default(),
                    made: Arc::clone(&c.made),
                },
            )
            .unwrap();
        g.add_flow(prev, f.input, deep);
        prev = f.out;
    }
    let k = g
        .add_operator_with_defaults(
            "sink",
            InPlaceSink {
                input: Input::default(),
                got: Arc::clone(&c.got),
                panic_at,
            },
        )
        .unwrap();
    g.add_flow(prev, k.input, deep);
    (g, c)
}

fn expected(frames: u64) -> Vec<(u64, u8, Option<u64>)> {
    (1..=frames)
        .map(|n| (n, n.to_le_bytes()[0], Some(n - 1)))
        .collect()
}

#[test]
fn values_read_in_place_arrive_in_order_with_their_frame_ids_and_drop_once() {
    let (g, c) = chain(None);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert_eq!(
        plan.partitions().len(),
        1,
        "one partition: same-thread rings"
    );
    let session = RunSession::start(g, &plan, SessionOptions::frames(300)).unwrap();
    let _ = session.wait_idle(holo_tests::IDLE_WAIT);
    session.join().unwrap();
    assert_eq!(*c.got.lock().unwrap(), expected(300));
    // 300 made by the source, 600 clones by the forwarders: each dropped once.
    assert_eq!(c.made.load(Ordering::Relaxed), 900);
    assert_eq!(c.drops.load(Ordering::Relaxed), 900);
}

#[test]
fn values_read_in_place_across_partitions_arrive_in_order_and_drop_once() {
    let (g, c) = chain(None);
    let plan = compile(
        &g,
        common::partitioned(&[&["source"], &["fwd1"], &["fwd2", "sink"]]),
    )
    .unwrap();
    assert_eq!(plan.partitions().len(), 3);
    let session = RunSession::start(g, &plan, SessionOptions::frames(300)).unwrap();
    let _ = session.wait_idle(holo_tests::IDLE_WAIT);
    session.join().unwrap();
    let got = c.got.lock().unwrap().clone();
    let values: Vec<_> = got.iter().map(|&(n, b, _)| (n, b)).collect();
    let want: Vec<_> = expected(300).iter().map(|&(n, b, _)| (n, b)).collect();
    assert_eq!(values, want);
    // A forwarder on its own thread may drain several values in one activation: each
    // emit then carries the frame id of the activation's earliest capture (as with
    // `receive`), never a later one.
    let frames: Vec<u64> = got.iter().map(|&(_, _, f)| f.unwrap()).collect();
    assert!(
        frames.is_sorted() && frames.iter().zip(1..).all(|(&f, n)| f < n),
        "{frames:?}"
    );
    assert_eq!(c.made.load(Ordering::Relaxed), 900);
    assert_eq!(c.drops.load(Ordering::Relaxed), 900);
}

#[test]
fn a_stepped_session_reads_in_place_one_frame_per_step() {
    let (g, c) = chain(None);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let mut session = RunSession::start_stepped(g, &plan, SessionOptions::frames(5)).unwrap();
    for frame in 1..=5 {
        session.step().unwrap();
        assert_eq!(*c.got.lock().unwrap(), expected(frame));
    }
    session.join().unwrap();
    assert_eq!(
        c.drops.load(Ordering::Relaxed),
        c.made.load(Ordering::Relaxed)
    );
}

#[test]
fn a_panicking_callback_fails_the_session_and_its_value_is_dropped_once() {
    let (g, c) = chain(Some(3));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(10)).unwrap();
    let _ = session.wait_idle(holo_tests::IDLE_WAIT);
    let e = session.join().unwrap_err();
    assert_eq!(e.code(), ErrorCode::Internal, "{e}");
    assert!(e.to_string().contains("the sink's callback panics"), "{e}");
    assert_eq!(*c.got.lock().unwrap(), expected(2));
    // The value the callback panicked on stayed queued and was dropped with the queue.
    assert_eq!(
        c.drops.load(Ordering::Relaxed),
        c.made.load(Ordering::Relaxed)
    );
}

// ---- receive's rules ------------------------------------------------------------------

/// Emits 7 once.
#[operator]
struct One {
    out: Output<u64>,
    sent: bool,
}

impl Operator for One {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if !self.sent {
            self.sent = true;
            let _ = self.out.emit(7u64, EmitOptions::default());
        }
        Ok(())
    }
}

#[test]
fn reuse_last_lends_the_last_sample_once_per_activation() {
    #[derive(Default)]
    struct Log {
        got: Mutex<Vec<(Option<u64>, Option<u64>)>>,
    }
    /// On a 200 Hz clock: two in-place reads per activation.
    #[operator(trigger = clock(hz = 200))]
    struct Reuse {
        #[input(missing = reuse_last)]
        v: Input<u64>,
        log: Arc<Log>,
    }
    impl Operator for Reuse {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            let a = self.v.receive_with(|v| *v);
            let b = self.v.receive_with(|v| *v);
            if a.is_some() {
                self.log.got.lock().unwrap().push((a, b));
            }
            Ok(())
        }
    }
    let log = Arc::new(Log::default());
    let mut g = Graph::new();
    let o = g
        .add_operator_with_defaults(
            "one",
            One {
                out: Output::default(),
                sent: false,
            },
        )
        .unwrap();
    let r = g
        .add_operator_with_defaults(
            "reuse",
            Reuse {
                v: Input::default(),
                log: Arc::clone(&log),
            },
        )
        .unwrap();
    g.add_flow(o.out, r.v, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let s = RunSession::start(
        g,
        &plan,
        SessionOptions::default().with_max_source_activations(Some(3)),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.join().unwrap();
    let got = log.got.lock().unwrap().clone();
    assert!(got.len() >= 3, "{got:?}");
    assert_eq!(got[0], (Some(7), Some(7)));
    for (a, b) in &got[1..] {
        assert_eq!((*a, *b), (Some(7), None), "{got:?}");
    }
}

#[test]
fn history_keeps_the_values_read_in_place() {
    /// Per value read: the value and the history after it.
    type History = Arc<Mutex<Vec<(u64, Vec<u64>)>>>;
    /// Reads in place; after each value, records the history's content.
    #[operator]
    struct Historian {
        #[input(history = 2)]
        v: Input<u64>,
        log: History,
    }
    impl Operator for Historian {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            while let Some(v) = self.v.receive_with(|v| *v) {
                let (a, b) = self.v.history();
                let h = a.iter().chain(b).copied().collect();
                self.log.lock().unwrap().push((v, h));
            }
            Ok(())
        }
    }
    let log = Arc::new(Mutex::new(Vec::new()));
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
    let h = g
        .add_operator_with_defaults(
            "historian",
            Historian {
                v: Input::default(),
                log: Arc::clone(&log),
            },
        )
        .unwrap();
    g.add_flow(s.out, h.v, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(4)).unwrap();
    let _ = session.wait_idle(holo_tests::IDLE_WAIT);
    session.join().unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            (1, vec![1]),
            (2, vec![1, 2]),
            (3, vec![2, 3]),
            (4, vec![3, 4])
        ]
    );
}

#[test]
fn an_input_moved_to_another_thread_lends_nothing_and_stops_the_session() {
    #[operator]
    struct MovesItsInput {
        input: Input<u64>,
        calls: Arc<AtomicU64>,
        got: Arc<Mutex<Vec<Option<u64>>>>,
    }
    impl Operator for MovesItsInput {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            let mut input = std::mem::take(&mut self.input);
            let calls = Arc::clone(&self.calls);
            let got = std::thread::spawn(move || {
                input.receive_with(|v| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    *v
                })
            })
            .join()
            .unwrap();
            self.got.lock().unwrap().push(got);
            Ok(())
        }
    }
    let calls = Arc::new(AtomicU64::new(0));
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let s = g
        .add_operator(
            "source",
            Counter {
                out: Output::default(),
                n: 0,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "thief",
            MovesItsInput {
                input: Input::default(),
                calls: Arc::clone(&calls),
                got: Arc::clone(&got),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(s.out, k.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(3)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(10));
    let e = session.join().unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
    assert!(e.to_string().contains("\"thief\", port \"input\""), "{e}");
    assert_eq!(got.lock().unwrap().first(), Some(&None));
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the callback never ran");
}

#[test]
fn an_unbound_or_unconnected_input_lends_nothing() {
    #[operator]
    struct Lonely {
        #[input(optional)]
        input: Input<u64>,
        out: Output<u64>,
        looked: Arc<AtomicU64>,
    }
    impl Operator for Lonely {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            assert!(self.input.receive_with(|_| unreachable!()).is_none());
            self.looked.fetch_add(1, Ordering::Relaxed);
            self.out.emit(1u64, EmitOptions::default())
        }
    }
    let mut unbound = Input::<u64>::default();
    assert_eq!(unbound.receive_with(|_| unreachable!()), None::<()>);

    let looked = Arc::new(AtomicU64::new(0));
    let mut g = Graph::new();
    g.add_operator_with_defaults(
        "lonely",
        Lonely {
            input: Input::default(),
            out: Output::default(),
            looked: Arc::clone(&looked),
        },
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(3)).unwrap();
    let _ = session.wait_idle(holo_tests::IDLE_WAIT);
    session.join().unwrap();
    assert_eq!(looked.load(Ordering::Relaxed), 3);
}

// ---- a tensor read in place keeps the stream contract ----------------------------------

/// Fills frame k (every byte `k % 128`) on its stream, commits, emits.
#[operator]
struct DevSource {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 64)]
    frames: Output<Tensor>,
    k: u64,
    emitted: Arc<AtomicU64>,
}

impl Operator for DevSource {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a CUDA-active operator has a device"));
        let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let guard = loan.write(stream)?;
        let value = u8::try_from(self.k % 128).unwrap();
        // SAFETY: the guard owns the slot until commit, the fill stays inside it, and
        // the stream orders the fill before the readiness event commit records.
        unsafe {
            device.memset_async(guard.device_ptr(), value, guard.byte_size(), guard.stream())?;
        }
        let committed = guard.commit()?;
        // A refused frame is made again with the same bytes: the checkers expect 0, 1, …
        if self.frames.emit(committed, EmitOptions::default()).is_ok() {
            self.k += 1;
            self.emitted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Copies each tensor it reads (in place, or moved out by `receive`) to the host on its
/// own stream and checks it.
#[operator]
struct DevCheck {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    in_place: bool,
    host: Vec<u8>,
    k: u64,
    good: Arc<AtomicU64>,
}

impl DevCheck {
    fn next(&mut self, stream: holo_runtime::CudaStream<'_>) -> Option<Result<()>> {
        if self.in_place {
            self.frames
                .receive_with(|t| t.copy_to_host(&mut self.host, stream))
        } else {
            let t = self.frames.receive()?;
            Some(t.copy_to_host(&mut self.host, stream))
        }
    }
}

impl Operator for DevCheck {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        while let Some(r) = self.next(stream) {
            r?;
            let expect = u8::try_from(self.k % 128).unwrap();
            self.k += 1;
            if self.host.iter().all(|&b| b == expect) {
                self.good.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

/// src → two checkers (a fan-out: not fused, so each consumer's stream waits on the
/// readiness event as it receives): the device calls per frame emitted, and whether every
/// frame's bytes were as written.
fn device_run(
    device: &Arc<dyn holo_runtime::device::DeviceBackend>,
    in_place: bool,
) -> (u64, holo_runtime::device::CounterSnapshot) {
    let emitted = Arc::new(AtomicU64::new(0));
    let goods: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "src",
            DevSource {
                frames: Output::default(),
                k: 0,
                emitted: Arc::clone(&emitted),
            },
        )
        .unwrap();
    for (i, good) in goods.iter().enumerate() {
        let c = g
            .add_operator_with_defaults(
                &format!("check{i}"),
                DevCheck {
                    frames: Input::default(),
                    in_place,
                    host: vec![0; 64],
                    k: 0,
                    good: Arc::clone(good),
                },
            )
            .unwrap();
        g.add_flow(s.frames, c.frames, ConnectionOptions::default());
    }
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("src", "frames", device.device_id());
    let plan = compile(&g, options).unwrap();
    let before = device.counters().snapshot();
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(20).on_device(Arc::clone(device)),
    )
    .unwrap();
    let _ = session.wait_idle(holo_tests::IDLE_WAIT);
    session.join().unwrap();
    let calls = device.counters().snapshot() - before;
    let emitted = emitted.load(Ordering::Relaxed);
    assert!(emitted > 0);
    for good in &goods {
        assert_eq!(
            good.load(Ordering::Relaxed),
            emitted,
            "every byte as written"
        );
    }
    (emitted, calls)
}

#[test]
fn a_tensor_read_in_place_is_waited_on_by_each_consumer_stream() {
    for device in test_backends() {
        let (moved_frames, moved) = device_run(&device, false);
        let (lent_frames, lent) = device_run(&device, true);
        // Each consumer's stream waits on the readiness event once per frame it receives
        // — at least — and reading in place makes exactly the calls `receive` makes.
        // (Per frame emitted: a source activation that finds the pool exhausted emits
        // nothing, so the two runs may emit different counts.)
        assert!(lent.stream_wait >= lent_frames * 2, "{lent:?}");
        let per_frame = |c: &holo_runtime::device::CounterSnapshot, frames: u64| {
            [c.stream_wait, c.event_record, c.copy, c.event_synchronize].map(|n| n * 1000 / frames)
        };
        assert_eq!(
            per_frame(&lent, lent_frames),
            per_frame(&moved, moved_frames),
            "in place {lent:?} over {lent_frames} frames, moved {moved:?} over {moved_frames}"
        );
    }
}
