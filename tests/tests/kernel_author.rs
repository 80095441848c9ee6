//! What an operator author needs (issue 12, item 4), on the software device: typed device
//! access in `start` and `compute`, an output that says whether it has room and hands a
//! refused value back, an activation time never earlier than the activation's entry, and
//! copies of a tensor's prefix to the host. (The same device access launching a real PTX
//! kernel is `holo-runtime/tests/kernel_launch.rs`, on CUDA.)
#![allow(
    clippy::many_single_char_names,
    clippy::type_complexity,
    clippy::single_match_else,
    reason = "test fixtures: short names for graph handles, shared result logs"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::device::{DeviceBackend, SoftwareDevice};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, LifecycleContext, Operator, Output, ParamSet, Result, RunSession, SessionOptions,
    Tensor, TensorLoanRequest, compile, operator,
};

#[derive(Default)]
struct Seen {
    /// (ordinal, raw context, raw stream == cuda_stream().raw()) from `start`.
    start: Mutex<Option<(u32, Option<u64>, bool)>>,
    /// The same from the first `compute`.
    compute: Mutex<Option<(u32, Option<u64>, bool)>>,
    /// Per emit: `has_room()` just before it, and for a refusal its code, whether the
    /// value came back with its bytes, and the release streams it registered.
    emits: Mutex<Vec<(bool, Option<(ErrorCode, bool, u32)>)>>,
    /// Prefix copies: (1-byte copy's byte, 65-byte copy's code).
    prefix: Mutex<Option<(u8, Option<ErrorCode>)>>,
}

#[operator]
struct Writer {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 64)]
    out: Output<Tensor>,
    seen: Arc<Seen>,
    /// A tensor the queue refused, kept for the next activation.
    held: Option<Tensor>,
}

impl Operator for Writer {
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        *self.seen.start.lock().unwrap() = Some((
            cuda.ordinal(),
            cuda.raw_context(),
            cuda.raw_stream() == cuda.stream().raw(),
        ));
        Ok(())
    }

    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        self.seen.compute.lock().unwrap().get_or_insert((
            cuda.ordinal(),
            cuda.raw_context(),
            cuda.raw_stream() == ctx.cuda_stream()?.raw(),
        ));
        // Up to three emits per activation: the held tensor (or a new one), then new ones.
        // A source runs only when its queues have room, so the refusal must come within
        // one activation: with depth-1 queues and gates that each hold one tensor, the
        // third emit at the latest finds both queues full, whatever the gates popped
        // meanwhile.
        for _ in 0..3 {
            let tensor = match self.held.take() {
                Some(t) => t,
                None => {
                    let Ok(loan) = self.out.allocate_tensor(TensorLoanRequest {
                        shape: &[64],
                        dtype: DType::U8,
                    }) else {
                        return Ok(());
                    };
                    let w = loan.write(cuda.stream())?;
                    // SAFETY: the fill stays inside the loaned slot, before commit's event.
                    unsafe {
                        cuda.backend().memset_async(
                            w.device_ptr(),
                            9,
                            w.byte_size(),
                            w.stream(),
                        )?;
                    }
                    w.commit()?.into_tensor()
                }
            };
            let room = self.out.has_room();
            match self.out.try_emit(tensor, EmitOptions::default()) {
                Ok(()) => self.seen.emits.lock().unwrap().push((room, None)),
                Err(refused) => {
                    let t = refused.value;
                    let mut one = [0u8; 1];
                    t.copy_to_host(&mut one, cuda.stream())?;
                    self.seen.emits.lock().unwrap().push((
                        room,
                        Some((refused.error.code(), one[0] == 9, t.release_stream_count())),
                    ));
                    self.held = Some(t);
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Takes one tensor, then holds its partition until told to go on (its queue fills), then
/// drains.
#[operator]
struct Gate {
    #[input(memory = cuda_device)]
    input: Input<Tensor>,
    open: Arc<AtomicU64>,
    seen: Arc<Seen>,
}

impl Operator for Gate {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let mut first = self.input.receive();
        // Bounded, so a failed assertion on the test's thread cannot hang the teardown.
        let until = Instant::now() + Duration::from_secs(30);
        while self.open.load(Ordering::Acquire) == 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(100));
        }
        while let Some(t) = first.take().or_else(|| self.input.receive()) {
            let stream = ctx.cuda_stream()?;
            let mut one = [0u8; 1];
            t.copy_to_host(&mut one, stream)?;
            let mut too_long = [0u8; 65];
            let code = t
                .copy_to_host(&mut too_long, stream)
                .err()
                .map(|e| e.code());
            *self.seen.prefix.lock().unwrap() = Some((one[0], code));
        }
        Ok(())
    }
}

#[test]
fn device_access_room_refusal_and_prefix_copies() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let seen = Arc::new(Seen::default());
    let open = Arc::new(AtomicU64::new(0));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let w = g
        .add_operator(
            "writer",
            Writer {
                out: Output::default(),
                seen: Arc::clone(&seen),
                held: None,
            },
            d(),
        )
        .unwrap();
    for i in 0..2 {
        let k = g
            .add_operator(
                &format!("gate{i}"),
                Gate {
                    input: Input::default(),
                    open: Arc::clone(&open),
                    seen: Arc::clone(&seen),
                },
                d(),
            )
            .unwrap();
        g.add_flow(
            w.out,
            k.input,
            ConnectionOptions::default().with_queue_depth(1),
        );
    }
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("writer", "out", device.ordinal());
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(6).on_device(Arc::clone(&device)),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.emits.lock().unwrap().iter().any(|e| e.1.is_some()) {
        assert!(Instant::now() < deadline, "the queues never filled");
        std::thread::sleep(Duration::from_millis(1));
    }
    open.store(1, Ordering::Release);
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.join().unwrap();

    assert_eq!(*seen.start.lock().unwrap(), Some((0, None, true)));
    assert_eq!(*seen.compute.lock().unwrap(), Some((0, None, true)));
    let emits = seen.emits.lock().unwrap().clone();
    assert_eq!(emits.first(), Some(&(true, None)), "{emits:?}");
    // With the gates holding, an emit finds no room, is refused, hands the tensor back
    // with its bytes and registers no release stream.
    for (room, refusal) in &emits {
        if let Some((code, bytes_back, streams)) = refusal {
            assert!(
                !room && *code == ErrorCode::Backpressured && *bytes_back && *streams == 0,
                "{emits:?}"
            );
        }
    }
    assert_eq!(
        *seen.prefix.lock().unwrap(),
        Some((9, Some(ErrorCode::InvalidArgument)))
    );
}

// ---- activation time ---------------------------------------------------------------------

#[operator]
struct Timed {
    out: Output<u64>,
    early: Arc<Mutex<Vec<Duration>>>,
}

impl Operator for Timed {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let entry = Instant::now();
        std::thread::sleep(Duration::from_micros(200));
        let t = ctx.activation_time();
        if t < entry {
            self.early.lock().unwrap().push(entry - t);
        }
        self.out.emit(1u64, EmitOptions::default())
    }
}

#[operator]
struct Drop64 {
    input: Input<u64>,
}

impl Operator for Drop64 {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
}

#[test]
fn activation_time_is_never_earlier_than_the_activations_entry() {
    let early = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let s = g
        .add_operator(
            "source",
            Timed {
                out: Output::default(),
                early: Arc::clone(&early),
            },
            d(),
        )
        .unwrap();
    let k = g
        .add_operator(
            "sink",
            Drop64 {
                input: Input::default(),
            },
            d(),
        )
        .unwrap();
    g.add_flow(s.out, k.input, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(50)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.join().unwrap();
    assert_eq!(*early.lock().unwrap(), Vec::<Duration>::new());
}
