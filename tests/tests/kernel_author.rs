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

// ---- fills and copies on the operator's stream ---------------------------------------------

/// Fills each frame with its number through `ctx.cuda()?.memset_async`.
#[operator]
struct Filler {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
    next: u8,
}

impl Operator for Filler {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        let Ok(loan) = self.out.allocate_tensor(TensorLoanRequest {
            shape: &[256],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let w = loan.write(cuda.stream())?;
        // SAFETY: the fill stays inside the loaned slot, before commit's event.
        unsafe { cuda.memset_async(w.device_ptr(), self.next, w.byte_size())? };
        // An empty fill is no driver call; it is counted as the backend's own is.
        // SAFETY: zero bytes.
        unsafe { cuda.memset_async(w.device_ptr(), 0xEE, 0)? };
        match self.out.emit(w.commit()?, EmitOptions::default()) {
            Ok(()) => self.next = self.next.wrapping_add(1),
            Err(e) if e.code() == ErrorCode::Backpressured => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

/// Copies each received frame into a slot of its own through `ctx.cuda()?.copy_async`.
#[operator]
struct Copier {
    #[input(memory = device)]
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
}

impl Operator for Copier {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        while self.out.has_room() {
            let Some(t) = self.input.receive() else {
                break;
            };
            let loan = self.out.allocate_tensor(TensorLoanRequest {
                shape: &[256],
                dtype: DType::U8,
            })?;
            let w = loan.write(cuda.stream())?;
            // SAFETY: the writer owns its slot, `t` keeps the input's, and the stream
            // orders the copy after the input's readiness.
            unsafe { cuda.copy_async(w.device_ptr(), t.device_ptr(), t.byte_size())? };
            self.out.emit(w.commit()?, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// Checks every byte of each frame against its number.
#[operator]
struct Check {
    #[input(memory = device)]
    input: Input<Tensor>,
    next: u8,
    /// (frames checked, the first frame number whose bytes were wrong).
    seen: Arc<Mutex<(u64, Option<u8>)>>,
}

impl Operator for Check {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        while let Some(t) = self.input.receive() {
            let mut host = [0u8; 256];
            t.copy_to_host(&mut host, stream)?;
            let mut seen = self.seen.lock().unwrap();
            seen.0 += 1;
            if host.iter().any(|&b| b != self.next) && seen.1.is_none() {
                seen.1 = Some(self.next);
            }
            self.next = self.next.wrapping_add(1);
        }
        Ok(())
    }
}

/// `DeviceAccess::memset_async` and `copy_async` (the backend's fill and copy on the
/// operator's own stream, without a handle check on CUDA) write what they say, in stream
/// order, on every test backend (the software device in CI, CUDA on the GPU machine),
/// and the device counters count each call as the backend's own calls are counted.
#[test]
fn device_access_fills_and_copies_on_the_operators_stream() {
    const FRAMES: u64 = 300;
    for device in holo_runtime::__test_support::test_backends() {
        let kind = device.backend_kind();
        let seen = Arc::new(Mutex::new((0, None)));
        let mut g = Graph::new();
        let d = || ParamSet::defaults().unwrap();
        let f = g
            .add_operator(
                "filler",
                Filler {
                    out: Output::default(),
                    next: 0,
                },
                d(),
            )
            .unwrap();
        let c = g
            .add_operator(
                "copier",
                Copier {
                    input: Input::default(),
                    out: Output::default(),
                },
                d(),
            )
            .unwrap();
        let k = g
            .add_operator(
                "check",
                Check {
                    input: Input::default(),
                    next: 0,
                    seen: Arc::clone(&seen),
                },
                d(),
            )
            .unwrap();
        g.add_flow(f.out, c.input, ConnectionOptions::default());
        g.add_flow(c.out, k.input, ConnectionOptions::default());
        let mut options = CompileOptions::default();
        for op in ["filler", "copier"] {
            options
                .deployment
                .bind_tensor_output_device(op, "out", device.device_id());
        }
        let plan = compile(&g, options).unwrap();
        let before = device.counters().snapshot();
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(FRAMES).on_device(Arc::clone(&device)),
        )
        .unwrap();
        assert!(session.wait_idle(Duration::from_mins(1)), "{kind:?}");
        session.join().unwrap();
        let calls = device.counters().snapshot() - before;
        assert_eq!(*seen.lock().unwrap(), (FRAMES, None), "{kind:?}");
        // Per frame: two fills (one of 256 bytes, one empty) and two copies (the
        // copier's, and the check's to the host, which the counters count as copies too).
        assert_eq!(
            (calls.memset, calls.copy),
            (2 * FRAMES, 2 * FRAMES),
            "{kind:?}"
        );
    }
}
