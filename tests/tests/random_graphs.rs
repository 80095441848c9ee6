//! Random graphs (RELIABILITY.md): a proptest generator of graphs — chains, forks, joins
//! (all-inputs and `any_input`), history and window inputs, pass-through forwarding,
//! drop-oldest and blocking edges of depth 1–4, authored partitions, random rates and
//! clocks, host and `cuda_device` memory — built from small generic operators.
//!
//! For every graph: `compile` never panics and every rejection carries diagnostics with a
//! code. Every accepted plan runs on the software device with a random completion delay
//! and then stops: with no injected error, `join` returns a report in which every pool
//! has every slot back; an operator that fails at a random activation comes back from
//! `join` as exactly that error. Every consumer checks that the bytes it reads are the
//! frame its producer wrote (each frame's bytes are a pattern of its frame id), and checks
//! again a tensor it held since its last activation, so a slot reused early shows.
//!
//! `HOLO_RANDOM_GRAPH_CASES=N` runs N cases (default 128, a few seconds in CI); the summary
//! (cases, compiled, rejected by diagnostic code) goes to stderr:
//! `HOLO_RANDOM_GRAPH_CASES=2000 cargo test --release -p holo-tests --test random_graphs -- --nocapture`.
#![allow(
    clippy::too_many_lines,
    clippy::cast_possible_truncation,
    clippy::many_single_char_names,
    reason = "test fixtures: a generator and a runner (graph handles named by one letter), frame patterns truncated to a byte"
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holo_runtime::device::SoftwareDevice;
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    FrameInfo, Graph, Input, Operator, Output, ParamSet, PartitionSpec, Partitioning, QueuePolicy,
    Rate, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest, compile, operator,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Bytes per frame.
const LEN: usize = 16;

/// The byte every position of frame `f` holds.
fn pattern(frame: u64) -> u8 {
    (frame % 250) as u8 + 1
}

// ---- what every operator shares -------------------------------------------------------

/// Counts of one case, shared by its operators.
#[derive(Debug, Default)]
struct Shared {
    /// Bytes that were not the frame's pattern (a slot reused early or read too soon).
    poisoned: AtomicU64,
    /// Values received and emitted, over all operators (the run's progress).
    progress: AtomicU64,
    /// The first poisoned read, for the failure message.
    first_poison: Mutex<Option<String>>,
}

/// The behaviour every generated operator shares: its name, activation count, the
/// injected failure, the tensors it holds since its last activation, and the checks.
struct Core {
    name: String,
    activations: Arc<AtomicU64>,
    fail_at: Option<u64>,
    shared: Arc<Shared>,
    held: Vec<(Tensor, u64)>,
    next_frame: u64,
    host: Vec<u8>,
}

impl Core {
    fn new(name: &str, fail_at: Option<u64>, shared: &Arc<Shared>) -> (Self, Arc<AtomicU64>) {
        let activations = Arc::new(AtomicU64::new(0));
        (
            Self {
                name: name.to_owned(),
                activations: Arc::clone(&activations),
                fail_at,
                shared: Arc::clone(shared),
                held: Vec::new(),
                next_frame: 0,
                host: vec![0; LEN],
            },
            activations,
        )
    }

    /// Counts the activation; re-checks what was held; the injected failure.
    fn begin(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let n = self.activations.fetch_add(1, Ordering::SeqCst) + 1;
        for (t, frame) in std::mem::take(&mut self.held) {
            self.check(ctx, &t, frame, "held since the last activation")?;
        }
        if self.fail_at == Some(n) {
            return Err(injected(&self.name, n));
        }
        Ok(())
    }

    /// Checks that `t` holds frame `frame`'s bytes.
    fn check(
        &mut self,
        ctx: &mut ExecutionContext<'_>,
        t: &Tensor,
        frame: u64,
        what: &str,
    ) -> Result<()> {
        let bytes: &[u8] = if t.memory_kind() == holo_runtime::MemoryKind::Host {
            t.data()?
        } else {
            let n = t.byte_size().min(LEN);
            t.copy_to_host(&mut self.host[..n], ctx.cuda_stream()?)?;
            &self.host[..n]
        };
        if bytes.len() != LEN || bytes.iter().any(|&b| b != pattern(frame)) {
            self.shared.poisoned.fetch_add(1, Ordering::SeqCst);
            let mut first = self.shared.first_poison.lock().unwrap();
            if first.is_none() {
                *first = Some(format!(
                    "{}: frame {frame} ({what}) reads {bytes:?}, expected {LEN} × {}",
                    self.name,
                    pattern(frame)
                ));
            }
        }
        Ok(())
    }

    /// Receives everything queued on `input`, checks each value, keeps the last one
    /// held until the next activation, and notes the earliest frame id.
    fn drain(
        &mut self,
        ctx: &mut ExecutionContext<'_>,
        input: &mut Input<Tensor>,
        frame: &mut Option<u64>,
    ) -> Result<Option<(Tensor, FrameInfo)>> {
        let mut last = None;
        while let Some((t, info)) = input.receive_with_info() {
            self.shared.progress.fetch_add(1, Ordering::Relaxed);
            self.check(ctx, &t, info.frame, "received")?;
            *frame = Some(frame.map_or(info.frame, |f: u64| f.min(info.frame)));
            last = Some((t, info));
        }
        if let Some((t, info)) = &last {
            self.held.push((t.clone(), info.frame));
        }
        Ok(last)
    }

    /// The frame id of this activation's outputs: the earliest received, else the
    /// operator's own count.
    fn frame(&mut self, received: Option<u64>) -> u64 {
        received.unwrap_or_else(|| {
            self.next_frame += 1;
            self.next_frame - 1
        })
    }

    /// A fresh host tensor of frame `frame` emitted on `out`; exhaustion and
    /// backpressure are counted, not errors.
    fn produce_host(&mut self, out: &mut Output<Tensor>, frame: u64) -> Result<()> {
        let loan = match out.allocate_tensor(request()) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let t = loan.write_host_and_commit(|b| b.fill(pattern(frame)))?;
        self.emit(out, t, frame)
    }

    /// A fresh device tensor of frame `frame`, filled on the operator's stream behind a
    /// delay (a consumer that does not wait for readiness reads the previous frame).
    fn produce_device(
        &mut self,
        ctx: &mut ExecutionContext<'_>,
        out: &mut Output<Tensor>,
        frame: u64,
    ) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a device operator has a device"));
        let loan = match out.allocate_tensor(request()) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let guard = loan.write(stream)?;
        device.enqueue_delay(guard.stream(), Duration::from_micros(20))?;
        // SAFETY: the guard owns the slot until commit, the fill stays inside it, and the
        // stream orders the fill before the readiness event commit records.
        unsafe {
            device.memset_async(
                guard.device_ptr(),
                pattern(frame),
                guard.byte_size(),
                guard.stream(),
            )?;
        }
        let t = guard.commit()?;
        self.emit(out, t, frame)
    }

    fn emit(&mut self, out: &mut Output<Tensor>, t: impl Into<Tensor>, frame: u64) -> Result<()> {
        match out.emit(t, EmitOptions::default().with_frame(frame)) {
            Ok(()) => {
                self.shared.progress.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn request() -> TensorLoanRequest<'static> {
    TensorLoanRequest {
        shape: &[LEN as u64],
        dtype: DType::U8,
    }
}

fn injected(name: &str, activation: u64) -> Error {
    Error::new(
        ErrorCode::Cancelled,
        format!("injected failure of {name} at activation {activation}"),
    )
}

// ---- the generic operators ------------------------------------------------------------

thread_local! {
    // The case's rates, read by the operators' attribute expressions while the graph is
    // built and compiled on this thread.
    static RATES: std::cell::Cell<(Rate, Rate)> = const { std::cell::Cell::new((Rate::hz(1000), Rate::hz(2000))) };
}

fn source_rate() -> Rate {
    RATES.get().0
}

fn clock_rate() -> Rate {
    RATES.get().1
}

/// Host operators: `inputs` all-inputs (or the attribute's trigger), each output a fresh
/// tensor of the earliest frame received.
macro_rules! host_operator {
    ($(#[$m:meta])* $name:ident, [$($i:ident),*], [$($o:ident),*]) => {
        $(#[$m])*
        struct $name {
            $(#[input(memory = host, dtype = u8, rank = 1)] $i: Input<Tensor>,)*
            $(#[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 16)] $o: Output<Tensor>,)*
            core: Core,
        }
        impl $name {
            fn new(core: Core) -> Self {
                Self { $($i: Input::default(),)* $($o: Output::default(),)* core }
            }
        }
        impl Operator for $name {
            #[allow(unused_mut, unused_variables)]
            fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
                self.core.begin(ctx)?;
                let mut received = None;
                $(self.core.drain(ctx, &mut self.$i, &mut received)?;)*
                let frame = self.core.frame(received);
                $(self.core.produce_host(&mut self.$o, frame)?;)*
                Ok(())
            }
        }
    };
}

host_operator!(
    #[operator]
    Src2,
    [],
    [a, b]
);
host_operator!(
    #[operator]
    Src3,
    [],
    [a, b, c]
);
host_operator!(
    #[operator]
    Proc11,
    [x],
    [a]
);
host_operator!(
    #[operator]
    Proc12,
    [x],
    [a, b]
);
host_operator!(
    #[operator]
    Proc21,
    [x, y],
    [a]
);
host_operator!(
    #[operator]
    Proc23,
    [x, y],
    [a, b, c]
);
host_operator!(
    #[operator]
    Proc31,
    [x, y, z],
    [a]
);
host_operator!(
    #[operator(trigger = any_input)]
    Join2,
    [x, y],
    [a]
);
host_operator!(
    #[operator(trigger = any_input)]
    Join3,
    [x, y, z],
    [a]
);
host_operator!(
    #[operator]
    Sink1,
    [x],
    []
);
host_operator!(
    #[operator]
    Sink2,
    [x, y],
    []
);
host_operator!(
    #[operator(trigger = any_input)]
    Sink3,
    [x, y, z],
    []
);
host_operator!(
    #[operator(trigger = clock(rate = clock_rate()))]
    Clocked1,
    [x],
    []
);

/// A host source whose output declares the case's nominal rate.
#[operator]
struct Src1 {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 16, nominal_rate = source_rate())]
    a: Output<Tensor>,
    core: Core,
}

impl Operator for Src1 {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.core.begin(ctx)?;
        let frame = self.core.frame(None);
        self.core.produce_host(&mut self.a, frame)
    }
}

/// Emits the tensors it receives (pass-through, `forwards`).
#[operator]
struct Fwd {
    #[input(memory = host, dtype = u8, rank = 1)]
    x: Input<Tensor>,
    #[output(forwards = x)]
    a: Output<Tensor>,
    core: Core,
}

/// The same on device memory.
#[operator]
struct DevFwd {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    x: Input<Tensor>,
    #[output(forwards = x)]
    a: Output<Tensor>,
    core: Core,
}

macro_rules! forward_compute {
    ($($t:ident),*) => {$(
        impl Operator for $t {
            fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
                self.core.begin(ctx)?;
                while let Some((t, info)) = self.x.receive_with_info() {
                    self.core.shared.progress.fetch_add(1, Ordering::Relaxed);
                    self.core.check(ctx, &t, info.frame, "forwarded")?;
                    self.core.emit(&mut self.a, t, info.frame)?;
                }
                Ok(())
            }
        }
    )*};
}
forward_compute!(Fwd, DevFwd);

/// Keeps the last two received tensors (`history = 2`) and checks them every activation.
#[operator(trigger = on_arrival(x))]
struct Hist {
    #[input(memory = host, dtype = u8, rank = 1, history = 2)]
    x: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 16)]
    a: Output<Tensor>,
    core: Core,
}

impl Operator for Hist {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.core.begin(ctx)?;
        let mut received = None;
        self.core.drain(ctx, &mut self.x, &mut received)?;
        let (older, newer) = self.x.history();
        let kept: Vec<Tensor> = older.iter().chain(newer).cloned().collect();
        for t in &kept {
            // A kept tensor's frame is what its bytes say it is only if no one reused
            // its slot: every byte must still be one pattern.
            let first = t.data()?.first().copied().unwrap_or(0);
            let frame = u64::from(first.wrapping_sub(1));
            self.core.check(ctx, t, frame, "in the history")?;
        }
        let frame = self.core.frame(received);
        self.core.produce_host(&mut self.a, frame)
    }
}

/// Fires on `x`; sees `y` as a window.
#[operator(trigger = on_arrival(x))]
struct Win {
    #[input(memory = host, dtype = u8, rank = 1)]
    x: Input<Tensor>,
    #[input(memory = host, dtype = u8, rank = 1, window = 2)]
    y: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 16)]
    a: Output<Tensor>,
    core: Core,
}

impl Operator for Win {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.core.begin(ctx)?;
        let mut received = None;
        self.core.drain(ctx, &mut self.x, &mut received)?;
        let mut side = None;
        self.core.drain(ctx, &mut self.y, &mut side)?;
        let frame = self.core.frame(received);
        self.core.produce_host(&mut self.a, frame)
    }
}

/// A device source: fresh `cuda_device` tensors.
#[operator]
struct DevSrc {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 16)]
    a: Output<Tensor>,
    core: Core,
}

impl Operator for DevSrc {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.core.begin(ctx)?;
        let frame = self.core.frame(None);
        self.core.produce_device(ctx, &mut self.a, frame)
    }
}

/// A device consumer: copies each tensor to the host on its stream and checks it.
#[operator]
struct DevSink {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    x: Input<Tensor>,
    core: Core,
}

impl Operator for DevSink {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.core.begin(ctx)?;
        let mut received = None;
        self.core.drain(ctx, &mut self.x, &mut received)?;
        Ok(())
    }
}

// ---- the graph description ------------------------------------------------------------

/// Memory of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mem {
    Host,
    Device,
}

/// What an operator of the description is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Src1,
    Src2,
    Src3,
    Proc11,
    Proc12,
    Proc21,
    Proc23,
    Proc31,
    Join2,
    Join3,
    Sink1,
    Sink2,
    Sink3,
    Clocked1,
    Fwd,
    Hist,
    Win,
    DevSrc,
    DevFwd,
    DevSink,
}

impl Kind {
    const ALL: [Kind; 20] = [
        Kind::Src1,
        Kind::Src2,
        Kind::Src3,
        Kind::Proc11,
        Kind::Proc12,
        Kind::Proc21,
        Kind::Proc23,
        Kind::Proc31,
        Kind::Join2,
        Kind::Join3,
        Kind::Sink1,
        Kind::Sink2,
        Kind::Sink3,
        Kind::Clocked1,
        Kind::Fwd,
        Kind::Hist,
        Kind::Win,
        Kind::DevSrc,
        Kind::DevFwd,
        Kind::DevSink,
    ];

    /// (inputs, outputs).
    fn ports(self) -> (usize, usize) {
        match self {
            Kind::Src1 | Kind::DevSrc => (0, 1),
            Kind::Src2 => (0, 2),
            Kind::Src3 => (0, 3),
            Kind::Proc11 | Kind::Fwd | Kind::Hist | Kind::DevFwd => (1, 1),
            Kind::Proc12 => (1, 2),
            Kind::Proc21 | Kind::Join2 | Kind::Win => (2, 1),
            Kind::Proc23 => (2, 3),
            Kind::Proc31 | Kind::Join3 => (3, 1),
            Kind::Sink1 | Kind::Clocked1 | Kind::DevSink => (1, 0),
            Kind::Sink2 => (2, 0),
            Kind::Sink3 => (3, 0),
        }
    }

    fn mem(self) -> Mem {
        match self {
            Kind::DevSrc | Kind::DevFwd | Kind::DevSink => Mem::Device,
            _ => Mem::Host,
        }
    }
}

/// One input's flow: which producer (an index into the candidates), whether to pick from
/// every output of the graph (cycles, memory mismatches), or none; its options.
#[derive(Clone, Copy, Debug)]
struct InputChoice {
    pick: u16,
    anywhere: bool,
    unconnected: bool,
    depth: Option<u32>,
    drop_oldest: bool,
}

#[derive(Clone, Debug)]
struct Desc {
    nodes: Vec<(Kind, [InputChoice; 3])>,
    /// Each operator's partition (authored partitioning), or automatic.
    partitions: Option<Vec<u8>>,
    /// One operator fails at one activation.
    fail: Option<(usize, u64)>,
    completion_delay_us: u64,
    source_rate: Rate,
    clock_rate: Rate,
    frames: u64,
    /// Whether device outputs are bound to device 0 (else `PLACEMENT_DEVICE_REQUIRED`).
    bind_devices: bool,
}

fn input_choice() -> impl Strategy<Value = InputChoice> {
    (
        any::<u16>(),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.03),
        prop_oneof![12 => Just(None), 16 => (1_u32..=4).prop_map(Some), 1 => Just(Some(0))],
        any::<bool>(),
    )
        .prop_map(
            |(pick, anywhere, unconnected, depth, drop_oldest)| InputChoice {
                pick,
                anywhere,
                unconnected,
                depth,
                drop_oldest,
            },
        )
}

fn rate() -> impl Strategy<Value = Rate> {
    prop_oneof![
        8 => (500_u64..50_000).prop_map(Rate::hz),
        1 => (1_i64..1000, 1_i64..1000).prop_map(|(n, d)| Rate::new(n * 1000, d)),
        1 => prop_oneof![Just(Rate::hz(0)), Just(Rate::new(-5, 1)), Just(Rate::new(1, 0)), Just(Rate::new(i64::MAX, 1))],
    ]
}

fn desc() -> impl Strategy<Value = Desc> {
    let node = (
        prop::sample::select(Kind::ALL.to_vec()),
        [input_choice(), input_choice(), input_choice()],
    );
    (
        prop::collection::vec(node, 2..=8),
        prop::option::weighted(0.3, prop::collection::vec(0_u8..3, 8)),
        prop::option::weighted(0.3, (any::<usize>(), 1_u64..=6)),
        0_u64..200,
        rate(),
        rate(),
        1_u64..=24,
        prop::bool::weighted(0.95),
    )
        .prop_map(
            |(
                mut nodes,
                partitions,
                fail,
                completion_delay_us,
                source_rate,
                clock_rate,
                frames,
                bind_devices,
            )| {
                // An operator with inputs needs an earlier producer of its memory: else
                // it becomes a source of that memory.
                let mut produced = [false, false];
                for (kind, _) in &mut nodes {
                    let m = kind.mem() as usize;
                    if kind.ports().0 > 0 && !produced[m] {
                        *kind = if kind.mem() == Mem::Device {
                            Kind::DevSrc
                        } else {
                            Kind::Src1
                        };
                    }
                    produced[m] |= kind.ports().1 > 0;
                }
                let n = nodes.len();
                Desc {
                    nodes,
                    partitions,
                    fail: fail.map(|(i, k)| (i % n, k)),
                    completion_delay_us,
                    source_rate,
                    clock_rate,
                    frames,
                    bind_devices,
                }
            },
        )
}

// ---- building and running -------------------------------------------------------------

/// The port handles of one built operator.
struct Built {
    name: String,
    inputs: Vec<holo_runtime::InPort<Tensor>>,
    outputs: Vec<holo_runtime::OutPort<Tensor>>,
    activations: Arc<AtomicU64>,
}

fn add(g: &mut Graph, kind: Kind, name: &str, core: Core, activations: Arc<AtomicU64>) -> Built {
    macro_rules! build {
        ($t:ident, [$($i:ident),*], [$($o:ident),*]) => {{
            let p = g
                .add_operator(name, $t::new(core), ParamSet::defaults().unwrap())
                .unwrap();
            Built {
                name: name.to_owned(),
                inputs: vec![$(p.$i),*],
                outputs: vec![$(p.$o),*],
                activations,
            }
        }};
    }
    match kind {
        Kind::Src1 => build!(Src1, [], [a]),
        Kind::Src2 => build!(Src2, [], [a, b]),
        Kind::Src3 => build!(Src3, [], [a, b, c]),
        Kind::Proc11 => build!(Proc11, [x], [a]),
        Kind::Proc12 => build!(Proc12, [x], [a, b]),
        Kind::Proc21 => build!(Proc21, [x, y], [a]),
        Kind::Proc23 => build!(Proc23, [x, y], [a, b, c]),
        Kind::Proc31 => build!(Proc31, [x, y, z], [a]),
        Kind::Join2 => build!(Join2, [x, y], [a]),
        Kind::Join3 => build!(Join3, [x, y, z], [a]),
        Kind::Sink1 => build!(Sink1, [x], []),
        Kind::Sink2 => build!(Sink2, [x, y], []),
        Kind::Sink3 => build!(Sink3, [x, y, z], []),
        Kind::Clocked1 => build!(Clocked1, [x], []),
        Kind::Fwd => build!(Fwd, [x], [a]),
        Kind::Hist => build!(Hist, [x], [a]),
        Kind::Win => build!(Win, [x, y], [a]),
        Kind::DevSrc => build!(DevSrc, [], [a]),
        Kind::DevFwd => build!(DevFwd, [x], [a]),
        Kind::DevSink => build!(DevSink, [x], []),
    }
}

macro_rules! with_ports_new {
    ($($t:ident { $($f:ident),* }),*) => {$(
        impl $t {
            fn new(core: Core) -> Self {
                Self { $($f: Default::default(),)* core }
            }
        }
    )*};
}
with_ports_new!(
    Src1 { a },
    Fwd { x, a },
    DevFwd { x, a },
    Hist { x, a },
    Win { x, y, a },
    DevSrc { a },
    DevSink { x }
);

/// What the whole run saw.
#[derive(Debug, Default)]
struct Tally {
    cases: u64,
    compiled: u64,
    rejected: BTreeMap<String, u64>,
    ran_clean: u64,
    failed_as_injected: u64,
    injected_not_reached: u64,
    /// Runs that stopped on a pass-through emit refused at run time (`ProtocolError`):
    /// a forwarding output declares no memory kind, so `compile` cannot see that what it
    /// forwards does not meet the consumer's `TensorInputSpec`; the emit checks it.
    refused_pass_through: u64,
    frames_moved: u64,
}

fn run_case(d: &Desc, tally: &mut Tally) -> std::result::Result<(), TestCaseError> {
    tally.cases += 1;
    RATES.set((d.source_rate, d.clock_rate));
    let shared = Arc::new(Shared::default());
    let mut g = Graph::new();
    let mut built = Vec::new();
    for (i, (kind, _)) in d.nodes.iter().enumerate() {
        let name = format!("n{i}");
        let fail_at = d.fail.and_then(|(f, k)| (f == i).then_some(k));
        let (core, activations) = Core::new(&name, fail_at, &shared);
        built.push(add(&mut g, *kind, &name, core, activations));
    }
    // Flows: each input from an earlier operator's output of its memory (a fork when
    // two inputs pick the same output), or — rarely — from any output, or none.
    let mut pass_through_mismatch = false;
    for (j, (kind, choices)) in d.nodes.iter().enumerate() {
        for (p, c) in choices.iter().take(kind.ports().0).enumerate() {
            if c.unconnected {
                continue;
            }
            let candidates: Vec<(usize, usize)> = d
                .nodes
                .iter()
                .enumerate()
                .filter(|&(i, (k, _))| c.anywhere || (i < j && k.mem() == kind.mem()))
                .flat_map(|(i, (k, _))| (0..k.ports().1).map(move |o| (i, o)))
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let (i, o) = candidates[usize::from(c.pick) % candidates.len()];
            let producer = d.nodes[i].0;
            pass_through_mismatch |=
                matches!(producer, Kind::Fwd | Kind::DevFwd) && producer.mem() != kind.mem();
            let mut options = ConnectionOptions::default().with_policy(if c.drop_oldest {
                QueuePolicy::DropOldest
            } else {
                QueuePolicy::Block
            });
            if let Some(depth) = c.depth {
                options = options.with_queue_depth(depth);
            }
            g.add_flow(built[i].outputs[o], built[j].inputs[p], options);
        }
    }
    let mut options = CompileOptions::default();
    if d.bind_devices {
        let mut deployment = holo_runtime::DeploymentBinding::default();
        for (b, (kind, _)) in built.iter().zip(&d.nodes) {
            if *kind == Kind::DevSrc {
                deployment.bind_tensor_output_device(&b.name, "a", 0);
            }
        }
        options = options.with_deployment(deployment);
    }
    if let Some(parts) = &d.partitions {
        let mut groups: BTreeMap<u8, Vec<String>> = BTreeMap::new();
        for (i, b) in built.iter().enumerate() {
            groups.entry(parts[i]).or_default().push(b.name.clone());
        }
        options = options.with_partitioning(Partitioning::Authored(
            groups
                .into_iter()
                .map(|(k, ops)| PartitionSpec::new(format!("p{k}"), ops))
                .collect(),
        ));
    }

    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile(&g, options)));
    let plan = match compiled {
        Err(_) => return Err(TestCaseError::fail(format!("compile panicked on {d:?}"))),
        Ok(Err(diagnostics)) => {
            prop_assert!(
                !diagnostics.items.is_empty(),
                "a rejection without diagnostics"
            );
            for item in &diagnostics.items {
                prop_assert!(
                    !item.code.name().is_empty() && !item.message.is_empty(),
                    "{item}"
                );
            }
            let mut codes: Vec<&str> = diagnostics.items.iter().map(|i| i.code.name()).collect();
            codes.sort_unstable();
            codes.dedup();
            for c in codes {
                *tally.rejected.entry(c.to_owned()).or_default() += 1;
            }
            return Ok(());
        }
        Ok(Ok(plan)) => plan,
    };
    tally.compiled += 1;

    let device =
        SoftwareDevice::with_completion_delay(Duration::from_micros(d.completion_delay_us));
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(d.frames)
            .on_device(device)
            .with_idle_spin(Duration::ZERO),
    )
    .map_err(|e| TestCaseError::fail(format!("start failed: {e} on {d:?}")))?;
    // Until idle, or no value moved for a while (a join whose other input stays empty,
    // a clocked consumer that keeps firing), or the case's time is up.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut last = (u64::MAX, Instant::now());
    while !session.wait_idle(Duration::from_millis(5)) && Instant::now() < deadline {
        let now = shared.progress.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_millis(150) {
            break;
        }
    }
    let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| session.join()))
        .map_err(|_| TestCaseError::fail(format!("join panicked on {d:?}")))?;
    tally.frames_moved += shared.progress.load(Ordering::Relaxed);
    let poisoned = shared.poisoned.load(Ordering::SeqCst);
    prop_assert_eq!(
        poisoned,
        0,
        "{:?} on {:?}",
        shared.first_poison.lock().unwrap(),
        d
    );
    let reached = d
        .fail
        .filter(|&(i, k)| built[i].activations.load(Ordering::SeqCst) >= k);
    let refused_emit = |e: &Error| {
        pass_through_mismatch
            && e.code() == ErrorCode::ProtocolError
            && e.message()
                .contains("does not meet a consumer's TensorInputSpec")
    };
    match (reached, joined) {
        (_, Err(e)) if refused_emit(&e) => tally.refused_pass_through += 1,
        (Some((i, k)), Err(e)) => {
            let want = injected(&built[i].name, k);
            prop_assert_eq!(e.code(), want.code(), "{} on {:?}", e, d);
            prop_assert_eq!(e.message(), want.message(), "{} on {:?}", e, d);
            tally.failed_as_injected += 1;
        }
        (Some(_), Ok(_)) => {
            return Err(TestCaseError::fail(format!(
                "an injected failure was not reported by join on {d:?}"
            )));
        }
        (None, Err(e)) => {
            return Err(TestCaseError::fail(format!("join failed: {e} on {d:?}")));
        }
        (None, Ok(report)) => {
            for p in &report.pools {
                prop_assert_eq!(p.free_at_end, p.slot_count, "pool {} on {:?}", p.pool, d);
            }
            if d.fail.is_some() {
                tally.injected_not_reached += 1;
            }
            tally.ran_clean += 1;
        }
    }
    Ok(())
}

#[test]
fn random_graphs_compile_or_are_rejected_and_run_clean() {
    let cases = std::env::var("HOLO_RANDOM_GRAPH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    let mut runner = TestRunner::new(Config {
        cases,
        // Each case builds, compiles and runs a session: shrinking a failure is worth
        // it, but bounded.
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    });
    let tally = Mutex::new(Tally::default());
    let result = runner.run(&desc(), |d| run_case(&d, &mut tally.lock().unwrap()));
    let tally = tally.into_inner().unwrap();
    eprintln!("random graphs: {tally:#?}");
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(tally.compiled > 0, "no graph compiled: {tally:?}");
}

// ---- cases the generator found, kept ----------------------------------------------------

fn chain(kinds: &[Kind]) -> Desc {
    let plain = InputChoice {
        pick: 0,
        anywhere: false,
        unconnected: false,
        depth: None,
        drop_oldest: false,
    };
    Desc {
        // Each operator takes the previous one's output (single-output kinds: it is
        // candidate j - 1 of operator j).
        nodes: kinds
            .iter()
            .enumerate()
            .map(|(j, &k)| {
                let previous = InputChoice {
                    pick: u16::try_from(j.saturating_sub(1)).unwrap(),
                    ..plain
                };
                (k, [previous, plain, plain])
            })
            .collect(),
        partitions: None,
        fail: None,
        completion_delay_us: 0,
        source_rate: Rate::hz(1000),
        clock_rate: Rate::hz(2000),
        frames: 10,
        bind_devices: true,
    }
}

/// Found by the generator: a consumer of `cuda_device` tensors fed by a pass-through
/// output that declares no memory kind (`DevSrc → DevFwd → DevFwd`) was placed in a
/// host-only partition, so its `ctx.cuda_stream()` failed with `NotSupported` at run
/// time. Its own input's CUDA memory now makes it CUDA-active on the producer's device.
#[test]
fn a_consumer_of_forwarded_device_tensors_gets_a_stream() {
    let mut tally = Tally::default();
    run_case(
        &chain(&[Kind::DevSrc, Kind::DevFwd, Kind::DevFwd]),
        &mut tally,
    )
    .unwrap();
    run_case(
        &chain(&[Kind::DevSrc, Kind::DevFwd, Kind::DevSink]),
        &mut tally,
    )
    .unwrap();
    assert_eq!(tally.ran_clean, 2, "{tally:?}");
}
