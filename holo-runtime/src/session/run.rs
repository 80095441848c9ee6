//! The cold start and the partition threads.

use std::any::Any;
use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::context::{ActivationState, ExecutionContext, LifecycleContext, NO_CAPTURE, UNSET};
use super::idle::{Idle, IdleWait};
use super::ports::{EdgeContract, PortBinder};
use super::rates::{OperatorRates, RateCandidate, RateTable};
use super::signal::PartitionSignal;
use super::streams::Streams;
use super::{RunSession, SessionOptions};
use crate::channel::pool::{Pool, PoolOwner, PoolSpec};
use crate::channel::queue::{EdgeProbe, ErasedEdge};
use crate::channel::retire::Retirer;
use crate::device::{DeviceBackend, StreamHandle};
use crate::graph::Graph;
use crate::operator::OperatorBox;
use crate::plan::{ExecutionPlan, TriggerKind};
use crate::spec::{PortDirection, TensorInputSpec};
use crate::topic::{Materials, TopicRegistry};
use crate::{Error, ErrorCode, Result};
use crossbeam_utils::CachePadded;

/// Interns a location string, so hot-path errors can name their operator and port with a
/// `&'static str` (no allocation). Bounded by the distinct names a process uses.
pub(crate) fn intern(s: String) -> &'static str {
    static SET: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = SET
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&existing) = set.get(s.as_str()) {
        return existing;
    }
    let leaked: &'static str = Box::leak(s.into_boxed_str());
    set.insert(leaked);
    leaked
}

pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    sources_pending: AtomicUsize,
    error: Mutex<Option<Error>>,
    pub(crate) signals: Vec<Arc<CachePadded<PartitionSignal>>>,
    pub(crate) rates: RateTable,
    /// `SessionOptions::idle_spin`.
    idle_spin: Duration,
}

impl Shared {
    pub(crate) fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        for s in &self.signals {
            s.wake();
        }
    }

    pub(crate) fn fail(&self, e: Error) {
        let mut slot = self
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(e);
        }
        drop(slot);
        self.request_stop();
    }

    pub(crate) fn take_error(&self) -> Option<Error> {
        self.error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    pub(crate) fn sources_done(&self) -> bool {
        self.sources_pending.load(Ordering::Acquire) == 0
    }

    /// Activations begun so far, over every partition.
    pub(crate) fn activations_started(&self) -> u64 {
        self.signals
            .iter()
            .map(|s| s.started.load(Ordering::Acquire))
            .sum()
    }

    /// Activations finished so far, over every partition.
    pub(crate) fn activations_finished(&self) -> u64 {
        self.signals
            .iter()
            .map(|s| s.progress.load(Ordering::Acquire))
            .sum()
    }
}

/// One operator on its partition thread.
///
/// Laid out in order (`repr(C)`, from a cache line's start): what the scheduler and an
/// activation touch fill three lines (decide in the first, the activation's own state and
/// inputs in the second, the operator and its device in the third), the rest follows.
/// After a GPU driver call has evicted the core's caches, an activation fetches those
/// three lines of its operator again, not the five its fields were spread over
/// (`.ci/count-data-lines.sh`). Const assertions below keep the lines.
#[repr(C, align(64))]
pub(crate) struct OpRuntime {
    // First line: `decide`.
    done: bool,
    pub(crate) is_source: bool,
    pub(crate) is_sink: bool,
    /// The temporal contract's trigger: the only scheduling authority.
    schedule: Schedule,
    block_outputs: Box<[EdgeProbe]>,
    pub(crate) activations: u64,
    // Second line: the inputs and the activation's state.
    required_inputs: Box<[EdgeProbe]>,
    optional_inputs: Box<[EdgeProbe]>,
    /// When the last activation consumed nothing, the entries pushed into the inputs by
    /// then ([`NOT_STALLED`] when it consumed something): the operator waits for a push
    /// past that count before it runs again, instead of spinning on entries it chose to
    /// leave queued.
    stalled_at: u64,
    activation: Arc<ActivationState>,
    /// The operator's first slot in the session's rate table.
    rate_offset: usize,
    /// The source's activations before it is done ([`UNLIMITED`]: no limit).
    max_activations: u64,
    // Third line: the operator and its device.
    op: OperatorBox,
    stream: Option<StreamHandle>,
    device: Option<Arc<dyn DeviceBackend>>,
    /// The inputs from other partitions: each activation's end marks what it took
    /// finished (`Output::in_flight` on the producer's side).
    cross_inputs: Box<[Arc<dyn ErasedEdge>]>,
    // The rest, off the activation's path.
    pub(crate) index: usize,
    /// The operator's execution partition (the plan's index).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) partition: u32,
    /// Its name (an activation's context borrows the field, reading it only for an error
    /// or when the operator asks).
    pub(crate) name: String,
    started: bool,
    /// Required inputs with `missing = skip` (other than an `on_arrival` trigger input):
    /// when one is empty at a tick or arrival, the activation is skipped.
    skip_inputs: Box<[EdgeProbe]>,
    /// Activations skipped by `missing = skip`.
    pub(crate) skipped: u64,
    /// The pools of this operator's outputs: its partition thread owns their free lists.
    pools: Vec<Arc<Pool>>,
}

/// [`OpRuntime::stalled_at`] when the last activation consumed something.
const NOT_STALLED: u64 = u64::MAX;
/// [`OpRuntime::max_activations`] of an operator with no limit.
const UNLIMITED: u64 = u64::MAX;

// The three lines of the activation's path (see the type's documentation).
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(OpRuntime, activations) + size_of::<u64>() <= 64);
    assert!(offset_of!(OpRuntime, required_inputs) >= 64);
    assert!(offset_of!(OpRuntime, max_activations) + size_of::<u64>() <= 128);
    assert!(offset_of!(OpRuntime, op) >= 128);
    assert!(offset_of!(OpRuntime, cross_inputs) + size_of::<Box<[u8]>>() <= 192);
};

/// How the scheduler decides an activation, from the operator's trigger.
pub(crate) enum Schedule {
    /// Every required input has data (a source: every blocking output has room).
    AllInputs,
    /// Any connected input has data.
    AnyInput,
    /// The named input has a new arrival.
    OnArrival(EdgeProbe),
    /// A clock: fires when `next_ns` (session clock) is reached.
    Clock { period_ns: u64, next_ns: u64 },
    /// An `on_arrival` trigger on an optional input with no flow: never fires.
    Never,
}

/// What the scheduler does with an operator now.
#[derive(PartialEq, Eq)]
enum Decision {
    Wait,
    Run,
    /// The trigger fired but a `missing = skip` input has no data.
    Skip,
}

impl OpRuntime {
    #[allow(
        clippy::inline_always,
        reason = "the scheduler's hot path: with two callers (the partition loop and stepping) it was left out of line, ~40 instructions per activation more (callgrind, benches/host_hop.rs)"
    )]
    #[inline(always)]
    fn decide(&self) -> Decision {
        if self.done {
            return Decision::Wait;
        }
        // The common trigger tested first, the others out of line: a `match` over every
        // trigger compiled to a jump table, one more line of data to fetch again after
        // each driver call.
        if matches!(self.schedule, Schedule::AllInputs) {
            self.decide_all_inputs()
        } else {
            self.decide_other()
        }
    }

    /// [`decide`](Self::decide) for an `all_inputs` trigger: every required input has
    /// data (a source: every blocking output has room).
    #[allow(
        clippy::inline_always,
        reason = "decide's common case, inlined into the partition loop as decide is"
    )]
    #[inline(always)]
    fn decide_all_inputs(&self) -> Decision {
        if self.is_source {
            return if self.block_outputs.iter().all(|e| !e.is_full()) {
                Decision::Run
            } else {
                Decision::Wait
            };
        }
        let fired = if self.required_inputs.is_empty() {
            self.optional_inputs.iter().any(|e| e.len() > 0)
        } else {
            self.required_inputs.iter().all(|e| e.len() > 0)
        };
        self.unless_stalled(fired)
    }

    /// `Run` when the trigger `fired`, unless the operator is stalled (its last
    /// activation consumed nothing and nothing was pushed since).
    #[inline]
    fn unless_stalled(&self, fired: bool) -> Decision {
        if !fired || (self.stalled_at != NOT_STALLED && self.stalled_at == self.pushed()) {
            Decision::Wait
        } else {
            Decision::Run
        }
    }

    /// [`decide`](Self::decide) for the other triggers.
    #[inline(never)]
    fn decide_other(&self) -> Decision {
        let fired = match &self.schedule {
            Schedule::Clock { next_ns, .. } => return self.decide_clock(*next_ns),
            Schedule::AllInputs => return self.decide_all_inputs(),
            Schedule::AnyInput => self
                .required_inputs
                .iter()
                .chain(&self.optional_inputs)
                .any(|e| e.len() > 0),
            Schedule::OnArrival(e) => e.len() > 0,
            Schedule::Never => false,
        };
        match self.unless_stalled(fired) {
            Decision::Run
                if matches!(self.schedule, Schedule::OnArrival(_))
                    && self.skip_inputs.iter().any(|e| e.len() == 0) =>
            {
                Decision::Skip
            }
            d => d,
        }
    }

    /// [`decide`](Self::decide) for a clock-triggered operator (out of line: the clock's
    /// reading and its skip inputs stay out of the other operators' hot path).
    #[inline(never)]
    fn decide_clock(&self, next_ns: u64) -> Decision {
        if self.activation.now_ns() < next_ns {
            Decision::Wait
        } else if self.skip_inputs.iter().any(|e| e.len() == 0) {
            Decision::Skip
        } else {
            Decision::Run
        }
    }

    /// The trigger fired but the activation is skipped: consume the trigger.
    fn skip(&mut self) {
        self.skipped += 1;
        match &mut self.schedule {
            Schedule::OnArrival(e) => e.edge().drop_one(),
            Schedule::Clock { .. } => self.advance_clock(),
            Schedule::AllInputs | Schedule::AnyInput | Schedule::Never => {}
        }
        // The dropped entry is finished with: a source paced on `Output::in_flight`
        // must not wait for an activation that an arrival it holds back would trigger.
        self.finish_inputs();
    }

    /// Marks what this operator took from other partitions finished with
    /// (`Output::in_flight` on the producers' side): after each activation and skip.
    #[inline]
    fn finish_inputs(&self) {
        for e in &self.cross_inputs {
            e.finish();
        }
    }

    #[inline(never)]
    fn advance_clock(&mut self) {
        let now = self.activation.now_ns();
        if let Schedule::Clock { period_ns, next_ns } = &mut self.schedule {
            *next_ns = next_ns.saturating_add(*period_ns);
            // Behind by more than a period: resume from now rather than firing a burst.
            if next_ns.saturating_add(*period_ns) <= now {
                *next_ns = now;
            }
        }
    }

    /// The next clock deadline, for parking.
    fn deadline_ns(&self) -> Option<u64> {
        match self.schedule {
            Schedule::Clock { next_ns, .. } if !self.done => Some(next_ns),
            _ => None,
        }
    }

    /// Entries pushed into this operator's inputs so far (out of line: asked only when
    /// an activation received nothing, and of a stalled operator).
    #[inline(never)]
    fn pushed(&self) -> u64 {
        self.required_inputs
            .iter()
            .chain(&self.optional_inputs)
            .map(|e| e.edge().counters().pushed.load(Ordering::Relaxed))
            .sum()
    }
}

fn panic_message(p: &(dyn Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string payload")
}

fn locate(e: Error, operator: &str) -> Error {
    let at = match e.location() {
        Some(l) if l.contains(operator) => l.to_owned(),
        Some(l) => format!("operator {operator:?}: {l}"),
        None => format!("operator {operator:?}"),
    };
    e.at(at)
}

/// Runs one activation. `fresh` is a clock reading taken as the previous activation
/// ended, with nothing but scheduling since (else `UNSET`): when the partition was free
/// to begin this one, so a source that emits without a capture time does not read the
/// clock again (its activation time is still read at or after entry, when asked). A
/// sink's end-of-activation reading becomes the next `fresh`.
#[allow(
    clippy::inline_always,
    reason = "the scheduler's hot path: with two callers (the partition loop and stepping) it was left out of line (callgrind, benches/host_hop.rs)"
)]
#[inline(always)]
fn run_compute(shared: &Shared, signal: &PartitionSignal, op: &mut OpRuntime, fresh: &mut u64) {
    // Counted as begun before `compute` can pop anything: an observer that sees an input
    // emptied by this activation (a release on the queue's index) sees it begun
    // (`RunSession::wait_idle`).
    crate::channel::queue::bump(&signal.started);
    op.activation.begin(*fresh);
    *fresh = UNSET;
    #[cfg(feature = "tracing")]
    let span = tracing::info_span!(
        "activation",
        operator = %op.name,
        partition = op.partition,
        activation = op.activations,
        frame = tracing::field::Empty
    )
    .entered();
    let mut ctx = ExecutionContext {
        operator: &op.name,
        activation: &op.activation,
        activation_index: op.activations,
        stop: &shared.stop,
        rates: OperatorRates {
            table: &shared.rates,
            offset: op.rate_offset,
        },
        stream: op.stream,
        device: op.device.as_ref(),
    };
    let result = catch_unwind(AssertUnwindSafe(|| op.op.compute(&mut ctx)));
    op.finish_inputs();
    #[cfg(feature = "tracing")]
    if let Some(frame) = op.activation.received_frame() {
        span.record("frame", frame);
    }
    if matches!(op.schedule, Schedule::Clock { .. }) {
        op.advance_clock();
    } else if !op.is_source {
        // Nothing received: run again only after a new push, instead of spinning on
        // entries the operator chose to leave queued. (Entries pushed during this
        // activation may be counted here; the scheduler then waits for one more push or
        // a wake — a bounded delay, never a lost entry, as every push wakes the thread.)
        op.stalled_at = if op.activation.received() {
            NOT_STALLED
        } else {
            op.pushed()
        };
    }
    op.activations += 1;
    signal.progress.store(
        signal.progress.load(Ordering::Relaxed) + 1,
        Ordering::Release,
    );
    if op.is_sink {
        let c = op.activation.received_capture_ns();
        if c != NO_CAPTURE {
            let end = op.activation.now_ns();
            signal.latency.record(end.saturating_sub(c));
            *fresh = end;
        }
    }
    if op.is_source && op.max_activations == op.activations {
        std::hint::cold_path();
        op.done = true;
        shared.sources_pending.fetch_sub(1, Ordering::AcqRel);
    }
    if matches!(result, Ok(None)) && !op.activation.has_failure() {
        return;
    }
    fail_activation(shared, op, result);
}

/// Fails the session with what an activation raised (off the hot path).
#[cold]
#[inline(never)]
fn fail_activation(
    shared: &Shared,
    op: &OpRuntime,
    result: std::thread::Result<Option<Box<Error>>>,
) {
    // A port call that could not return its error (a failed host wait in `receive`)
    // left it on the activation; it wins over what compute returned.
    let fail = |e: Error| {
        crate::trace::event!(error, operator = %op.name, error = %e, "an activation failed; the session stops");
        shared.fail(e);
    };
    match (result, op.activation.take_failure()) {
        (Ok(None), None) => {}
        (_, Some(e)) => fail(locate(e, &op.name)),
        (Ok(Some(e)), None) => fail(locate(*e, &op.name)),
        (Err(p), None) => fail(
            Error::new(
                ErrorCode::Internal,
                format!("compute panicked: {}", panic_message(p.as_ref())),
            )
            .at(format!("operator {:?}", op.name)),
        ),
    }
}

/// One scheduling round over a partition's operators: each runs, is skipped, or waits,
/// as its trigger decides. Returns how many ran or were skipped.
#[allow(
    clippy::inline_always,
    reason = "the partition loop's body: kept inline as it was before it served stepping too"
)]
#[inline(always)]
fn scan(
    shared: &Shared,
    signal: &PartitionSignal,
    ops: &mut [OpRuntime],
    fresh: &mut u64,
) -> usize {
    let mut ran = 0;
    for op in ops {
        match op.decide() {
            Decision::Wait => {}
            Decision::Skip => {
                ran += 1;
                op.skip();
            }
            Decision::Run => {
                ran += 1;
                run_compute(shared, signal, op, fresh);
                if shared.stop.load(Ordering::Acquire) {
                    std::hint::cold_path();
                    break;
                }
            }
        }
    }
    ran
}

/// The operators a thread runs, taken onto it: their ports are bound to it, it owns their
/// pools' free lists, and the device's context is current on it (so an operator's own
/// driver calls, a kernel launch on `ctx.cuda()?.raw_stream()`, need no call of their own).
/// Dropping it — also by unwinding — gives the free lists back and unbinds the ports, before
/// the thread leaves (a later thread may reuse its token). A partition thread takes its
/// partition's operators; a stepped session's caller takes every partition's.
struct Adopted(Vec<Arc<Pool>>, Vec<Arc<ActivationState>>);

impl Adopted {
    fn take<'a>(
        shared: &Shared,
        ops: impl IntoIterator<Item = &'a OpRuntime> + Clone,
        thread: &str,
    ) -> Adopted {
        let adopted = Adopted(
            ops.clone()
                .into_iter()
                .flat_map(|o| o.pools.iter().cloned())
                .collect(),
            ops.clone()
                .into_iter()
                .map(|o| Arc::clone(&o.activation))
                .collect(),
        );
        for a in &adopted.1 {
            a.bind_thread();
        }
        for p in &adopted.0 {
            p.claim_free_list();
        }
        if let Some(d) = ops.into_iter().find_map(|o| o.device.as_ref())
            && let Err(e) = d.bind_to_thread()
        {
            shared.fail(e.at(format!("binding the device's context to {thread}")));
        }
        adopted
    }
}

impl Drop for Adopted {
    fn drop(&mut self) {
        for p in &self.0 {
            p.give_back_free_list();
        }
        for a in &self.1 {
            a.unbind_thread();
        }
    }
}

/// A session stepped on its caller's thread (`RunSession::start_stepped`): every
/// partition's operators, run one scheduling round per `step`.
pub(crate) struct Stepped {
    pub(crate) partitions: Vec<Vec<OpRuntime>>,
    /// The operators taken onto the thread that started the session.
    adopted: Adopted,
    /// The thread that started the session: the only one that may step it.
    thread: usize,
    fresh: Vec<u64>,
}

impl Stepped {
    /// Takes every partition's operators onto the calling thread, as a partition thread
    /// does when it starts.
    fn new(shared: &Shared, partitions: Vec<Vec<OpRuntime>>) -> Stepped {
        for signal in &shared.signals {
            signal.register();
        }
        let adopted = Adopted::take(shared, partitions.iter().flatten(), "the stepping thread");
        // The free lists are claimed for the length of each step only (`step`): between
        // steps the caller's thread may end, or the session move to another thread and be
        // joined there, and a private stack left owned by a thread that no longer runs
        // kept a count of its pool each (never freed), or passed to an unrelated thread
        // that reused the dead thread's token.
        for p in &adopted.0 {
            p.give_back_free_list();
        }
        Stepped {
            adopted,
            fresh: vec![UNSET; partitions.len()],
            partitions,
            thread: crate::channel::free_list::token(),
        }
    }

    /// One scheduling round of every partition, in plan order, on the calling thread.
    pub(crate) fn step(&mut self, shared: &Shared) -> Result<usize> {
        if crate::channel::free_list::token() != self.thread {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "a stepped session is stepped on the thread that started it",
            ));
        }
        for p in &self.adopted.0 {
            p.claim_free_list();
        }
        let mut ran = 0;
        for (k, ops) in self.partitions.iter_mut().enumerate() {
            if shared.stop.load(Ordering::Acquire) {
                break;
            }
            ran += scan(shared, &shared.signals[k], ops, &mut self.fresh[k]);
        }
        for p in &self.adopted.0 {
            p.give_back_free_list();
        }
        if shared.stop.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorCode::Cancelled,
                "the session is stopping: join returns why",
            ));
        }
        Ok(ran)
    }

    /// Unbinds the ports (before teardown), on whichever thread tears the session down
    /// (each step gave its free lists back already).
    pub(crate) fn finish(self) -> Vec<OpRuntime> {
        drop(self.adopted);
        self.partitions.into_iter().flatten().collect()
    }
}

fn partition_loop(
    shared: &Shared,
    signal: &PartitionSignal,
    mut ops: Vec<OpRuntime>,
) -> Vec<OpRuntime> {
    signal.register();
    let adopted = Adopted::take(shared, &ops, "a partition thread");
    // Between rounds that ran nothing: `session::idle`'s policy, as a subscriber's.
    let mut idle = IdleWait::new();
    // A clock reading from the end of the last activation, while the partition goes
    // straight on (`UNSET` once it idles).
    let mut fresh = UNSET;
    while !shared.stop.load(Ordering::Acquire) {
        signal.scanning.store(true, Ordering::Release);
        let ran = scan(shared, signal, &mut ops, &mut fresh) > 0;
        if ran {
            idle.reset();
            continue;
        }
        fresh = UNSET;
        if idle.snooze(shared.idle_spin) == Idle::Park {
            signal.scanning.store(false, Ordering::Release);
            // Woken by a push into an input, a pop from an output, or stop — or by the
            // earliest clock deadline of the partition's clock-triggered operators.
            let mut timeout = Duration::from_millis(50);
            if let Some(d) = ops.iter().filter_map(OpRuntime::deadline_ns).min() {
                let now = ops[0].activation.now_ns();
                timeout = timeout.min(Duration::from_nanos(d.saturating_sub(now)));
            }
            if !timeout.is_zero() {
                std::thread::park_timeout(timeout);
            }
            idle.reset();
        }
    }
    signal.scanning.store(false, Ordering::Release);
    drop(adopted);
    ops
}

pub(crate) fn stop_operator(shared: &Shared, op: &mut OpRuntime) {
    if !op.started {
        return;
    }
    op.started = false;
    op.activation.bind_thread();
    if let Some(d) = &op.device
        && let Err(e) = d.bind_to_thread()
    {
        shared.fail(locate(e, &op.name));
    }
    let mut ctx = LifecycleContext {
        operator: &op.name,
        rates: OperatorRates {
            table: &shared.rates,
            offset: op.rate_offset,
        },
        stream: op.stream,
        device: op.device.as_ref(),
    };
    let result = catch_unwind(AssertUnwindSafe(|| op.op.stop(&mut ctx)));
    op.activation.unbind_thread();
    // What a port call left on the activation outside any `compute` (a port used on
    // another thread after the operator's last activation, a failed host wait in `stop`):
    // only an activation took it before, so after the last one it was lost.
    if let Some(e) = op.activation.take_failure() {
        shared.fail(locate(e, &op.name));
    }
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => shared.fail(locate(e, &op.name)),
        Err(p) => shared.fail(
            Error::new(
                ErrorCode::Internal,
                format!("stop panicked: {}", panic_message(p.as_ref())),
            )
            .at(format!("operator {:?}", op.name)),
        ),
    }
}

/// The pool of topic `t` (its record's `pool`: an export's own or boundary pool, an
/// import's), among the session's `pools`.
fn topic_pool<'p>(pools: &'p [PoolOwner], t: &crate::plan::TopicRecord) -> Result<&'p PoolOwner> {
    t.pool
        .as_deref()
        .and_then(|name| pools.iter().find(|p| p.name == name))
        .ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                format!("the plan gives topic {:?} no pool it materialized", t.name),
            )
        })
}

/// The session's device runs the plan: every device the plan names is this one (same API
/// — the software device stands in for CUDA — and ordinal), and every pool's memory kind
/// lives on this API. Otherwise `DeviceUnavailable`, before anything is created.
fn check_device(plan: &ExecutionPlan, d: &dyn crate::device::DeviceBackend) -> Result<()> {
    let mine = d.device_id();
    let described = || format!("{} {}", d.backend_kind().name(), d.ordinal());
    let used = plan
        .cuda_compute_streams()
        .iter()
        .map(|s| s.device)
        .chain(plan.tensor_allocations().iter().filter_map(|a| a.device));
    for device in used {
        if device != mine {
            return Err(Error::new(
                ErrorCode::DeviceUnavailable,
                format!(
                    "the plan places work on device {device}, but the session's device is {}: one session drives one device",
                    described()
                ),
            ));
        }
    }
    if let Some(a) = plan
        .tensor_allocations()
        .iter()
        .find(|a| a.memory_kind != crate::MemoryKind::Host && !mine.api.holds(a.memory_kind))
    {
        return Err(Error::new(
            ErrorCode::DeviceUnavailable,
            format!(
                "pool {} is {} memory, which the session's device ({}, a {} device) does not hold: compile the plan for this device's API (`memory = device` and a `{}:N` binding)",
                a.pool,
                a.memory_kind,
                described(),
                mine.api,
                mine.api
            ),
        ));
    }
    Ok(())
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "the session takes the graph: its operators move onto the partition threads"
)]
pub(crate) fn start(
    mut graph: Graph,
    plan: &ExecutionPlan,
    options: SessionOptions,
    candidate: Option<RateCandidate>,
    stepped: bool,
) -> Result<RunSession> {
    if plan.fingerprint() != crate::compile::fingerprint(&graph) {
        return Err(Error::new(
            ErrorCode::InvalidArgument,
            "the plan was compiled from a different graph (its fingerprint differs): compile this graph and start that plan",
        ));
    }
    if graph.operators.iter().any(|o| o.instance.is_none()) {
        return Err(Error::new(
            ErrorCode::InvalidArgument,
            "the graph's operators were already taken by a session",
        ));
    }
    // From here on the session reads the plan's records, the graph's operator instances
    // and its flows' queue factories: nothing else of the graph.
    let (factories, topic_factories) = super::records::check(&graph, plan)?;
    let clock = super::context::SessionClock::new();
    let n_ops = plan.operators().len();

    // 0. The device the plan needs, and its streams.
    let device = match (&options.device, plan.needs_device()) {
        (_, false) => None,
        (Some(d), true) => Some(Arc::clone(d)),
        (None, true) => {
            return Err(Error::new(
                ErrorCode::DeviceUnavailable,
                "the plan has CUDA streams or device-backed pools, and the session has no device: set SessionOptions::device (holo_runtime::device::open_backend_from_env())",
            ));
        }
    };
    if let Some(d) = &device {
        check_device(plan, d.as_ref())?;
    }
    let _start = crate::trace::span!("session.start", operators = n_ops);
    #[cfg(feature = "tracing")]
    let mut phase = None::<tracing::span::EnteredSpan>;
    crate::trace::phase!(phase, "session.create_streams");
    let streams = Streams::create(device.as_ref(), plan)?;
    let retirer = Retirer::new();

    crate::trace::phase!(phase, "session.materialize_pools");
    // 1. Every pool, before anything else; the first failure drops the ones built.
    let mut pools: Vec<PoolOwner> = Vec::with_capacity(plan.tensor_allocations().len());
    let mut pool_of = std::collections::HashMap::new();
    for a in plan.tensor_allocations() {
        let op = &plan.operators()[a.operator as usize];
        let location = intern(format!("operator {:?}, port {:?}", op.name, a.port));
        let pool = Pool::materialize(
            PoolSpec {
                name: a.pool.clone(),
                location,
                kind: a.memory_kind,
                dtype: a.dtype,
                rank: a.rank,
                max_rank: a.max_rank,
                per_slot_bytes: a.per_slot_bytes,
                slot_count: a.slot_count,
                release_capacity: plan.max_fanout_release_streams(),
                // The pool of a topic exported across processes lives in shared memory.
                shared_memory: plan
                    .topics()
                    .iter()
                    .any(|t| t.across_processes && t.pool.as_deref() == Some(a.pool.as_str())),
            },
            device.as_ref().map(|d| (d, &retirer)),
        )?;
        // An imported topic's pool is its publishers' (bound to no port); its slots are
        // borrowed from any thread, so no partition thread claims its free list.
        if a.topic.is_none() {
            pool_of.insert((a.operator as usize, a.port_index as usize), pools.len());
        }
        pools.push(pool);
    }

    crate::trace::phase!(phase, "session.create_queues");
    // 2. Every queue.
    // One signal per partition thread (the record check made the plan's thread numbers
    // dense, in order of each thread's first partition).
    let n_threads = plan
        .partitions()
        .iter()
        .map(|p| p.thread as usize + 1)
        .max()
        .unwrap_or(0);
    let signals: Vec<Arc<CachePadded<PartitionSignal>>> = (0..n_threads)
        .map(|_| Arc::new(CachePadded::new(PartitionSignal::default())))
        .collect();
    // Each operator's thread: whose signal its inputs wake and its outputs' pops notify.
    let partition_of: Vec<usize> = plan
        .operators()
        .iter()
        .map(|o| plan.partitions()[o.partition as usize].thread as usize)
        .collect();
    let mut typed: Vec<Vec<Vec<Arc<dyn Any + Send + Sync>>>> = plan
        .operators()
        .iter()
        .map(|o| vec![Vec::new(); o.ports.len()])
        .collect();
    let mut erased_in: Vec<Vec<(usize, Arc<dyn ErasedEdge>)>> = vec![Vec::new(); n_ops];
    let mut erased_out: Vec<Vec<Arc<dyn ErasedEdge>>> = vec![Vec::new(); n_ops];
    let mut edges = Vec::with_capacity(plan.edges().len());
    let mut edge_ends = Vec::with_capacity(plan.edges().len());
    for (rec, factory) in plan.edges().iter().zip(factories) {
        let (fo, fp) = (rec.from_operator as usize, rec.from_port_index as usize);
        let (to, tp) = (rec.to_operator as usize, rec.to_port_index as usize);
        let new = factory(
            rec.queue_depth as usize,
            rec.policy,
            Arc::clone(&signals[partition_of[to]].endpoint),
            Arc::clone(&signals[partition_of[fo]].endpoint),
        )
        .map_err(|err| {
            let (from, to) = (&plan.operators()[fo].name, &plan.operators()[to].name);
            Error::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "the queue of depth {} of the flow {from}.{} -> {to}.{}: {err}",
                    rec.queue_depth, rec.from_port, rec.to_port
                ),
            )
            .at(format!(
                "flow {from}.{} -> {to}.{}",
                rec.from_port, rec.to_port
            ))
        })?;
        typed[fo][fp].push(Arc::clone(&new.typed));
        typed[to][tp].push(new.typed);
        erased_in[to].push((tp, Arc::clone(&new.erased)));
        erased_out[fo].push(Arc::clone(&new.erased));
        edges.push(new.erased);
        edge_ends.push((fo, to));
    }

    crate::trace::phase!(phase, "session.create_topics");
    // 2b. Every topic's queues: an export's subscriber seats, an import's input queue.
    let (registry, wiring) = TopicRegistry::create(
        plan,
        Materials {
            factories: topic_factories,
            endpoint_of: &|o| Arc::clone(&signals[partition_of[o]].endpoint),
            domain_of: &|id| streams.domain(id),
            pool: &|id| {
                pools
                    .iter()
                    .find(|p| p.name == id)
                    .map(|p| Arc::clone(&**p))
            },
            clock: clock.clone(),
        },
    )?;
    let mut seats_of: Vec<Vec<Vec<_>>> = plan
        .operators()
        .iter()
        .map(|o| vec![Vec::new(); o.ports.len()])
        .collect();
    for (o, p, seats) in wiring.seats {
        seats_of[o][p] = seats;
    }
    let mut topic_block: Vec<Vec<Arc<dyn ErasedEdge>>> = vec![Vec::new(); n_ops];
    for (o, e) in wiring.block {
        topic_block[o].push(e);
    }
    let mut import_contracts = Vec::with_capacity(wiring.imports.len());
    for i in wiring.imports {
        let (o, p) = (i.operator, i.port);
        typed[o][p].push(i.typed);
        erased_in[o].push((p, Arc::clone(&i.erased)));
        edges.push(i.erased);
        // Fed by publishers, not by an operator.
        edge_ends.push((usize::MAX, o));
        import_contracts.push((o, p, i.contract));
    }

    let ports_per_op: Vec<usize> = plan.operators().iter().map(|o| o.ports.len()).collect();
    let rates = RateTable::new(plan, &ports_per_op);
    let rate_offsets = rates.offsets.clone();
    // Every edge's stream contract as the plan decided it, and the consumers' exact
    // requirements that pass-through outputs check on emit (pool outputs were checked
    // against them by `compile`). Fusion is re-validated against the streams this session
    // really created.
    let mut requirements_of: Vec<Vec<Vec<(TensorInputSpec, &'static str)>>> = plan
        .operators()
        .iter()
        .map(|o| vec![Vec::new(); o.ports.len()])
        .collect();
    let mut contracts_of: Vec<Vec<Vec<EdgeContract>>> = plan
        .operators()
        .iter()
        .map(|o| vec![Vec::new(); o.ports.len()])
        .collect();
    for rec in plan.edges() {
        let (fo, fp) = (rec.from_operator as usize, rec.from_port_index as usize);
        let (to, tp) = (rec.to_operator as usize, rec.to_port_index as usize);
        let contract = &rec.contract;
        if let Some(req) = contract.emit_check {
            let at = intern(format!(
                "operator {:?}, port {:?}",
                plan.operators()[to].name,
                rec.to_port
            ));
            requirements_of[fo][fp].push((req.spec(), at));
        }
        let consumer = match contract.consumer_stream {
            None => crate::channel::OrderingDomain::Host,
            Some(id) => streams.domain(id).ok_or_else(|| {
                Error::new(
                    ErrorCode::Internal,
                    format!("compute stream S{id} of the plan was not created"),
                )
                .at(format!("plan edge record e{}", rec.id))
            })?,
        };
        if contract.fused
            && (consumer.stream().is_none() || streams.of_operator(plan, fo) != consumer.stream())
        {
            return Err(Error::new(
                ErrorCode::Internal,
                "the plan's fused edge does not have both ends on one created stream",
            )
            .at(format!("plan edge record e{}", rec.id)));
        }
        let c = EdgeContract {
            consumer,
            fused: contract.fused,
            host_wait: contract.host_wait,
        };
        contracts_of[fo][fp].push(c);
        contracts_of[to][tp].push(c);
    }

    for (o, p, contract) in import_contracts {
        contracts_of[o][p].push(contract);
    }

    crate::trace::phase!(phase, "session.bind_ports");
    // 3. Bind every port.
    let mut runtimes = Vec::with_capacity(n_ops);
    // The graph's operator instances, by the index of their plan record (the record check
    // matched the counts).
    let instances = graph.operators.iter_mut().map(|node| node.instance.take());
    for (i, (rec, instance)) in plan.operators().iter().zip(instances).enumerate() {
        let activation = Arc::new(ActivationState::new(clock.clone()));
        let locations: Vec<&'static str> = rec
            .ports
            .iter()
            .map(|p| intern(format!("operator {:?}, port {:?}", rec.name, p.name)))
            .collect();
        let port_pools: Vec<Option<Arc<Pool>>> = (0..rec.ports.len())
            .map(|p| pool_of.get(&(i, p)).map(|&k| Arc::clone(&*pools[k])))
            .collect();
        // A pass-through output exporting across processes copies into its topic's
        // boundary pool.
        let mut boundaries: Vec<Option<Arc<Pool>>> = vec![None; rec.ports.len()];
        for t in plan
            .topics()
            .iter()
            .filter(|t| t.boundary.is_some() && t.operator as usize == i)
        {
            let pool = topic_pool(&pools, t)?;
            if let Some(b) = boundaries.get_mut(t.port_index as usize) {
                *b = Some(Arc::clone(&**pool));
            }
        }
        // A forwarding output's origin pools: those the plan sized for what follows it.
        let forward_origins: Vec<Vec<Arc<Pool>>> = rec
            .ports
            .iter()
            .map(|p| {
                if p.forwards.is_none() {
                    return Vec::new();
                }
                let through = format!("{}.{}", rec.name, p.name);
                plan.tensor_allocations()
                    .iter()
                    .zip(&pools)
                    .filter(|(a, _)| {
                        a.slot_terms
                            .forwarded_through
                            .iter()
                            .any(|t| t.through == through)
                    })
                    .map(|(_, pool)| Arc::clone(&**pool))
                    .collect()
            })
            .collect();
        let requirements = std::mem::take(&mut requirements_of[i]);
        let mut op =
            instance.ok_or_else(|| Error::new(ErrorCode::Internal, "operator instance missing"))?;
        let mut binder = PortBinder {
            operator: &rec.name,
            activation: &activation,
            edges: &typed[i],
            locations: &locations,
            pools: &port_pools,
            requirements: &requirements,
            ports: &rec.ports,
            contracts: &contracts_of[i],
            stream: streams.of_operator(plan, i),
            seats: &seats_of[i],
            boundaries: &boundaries,
            forward_origins: &forward_origins,
        };
        op.bind(&mut binder).map_err(|e| locate(e, &rec.name))?;
        let connected_inputs = &erased_in[i];
        let required_inputs = connected_inputs
            .iter()
            .filter(|(p, _)| !rec.ports[*p].optional)
            .map(|(_, e)| EdgeProbe::new(Arc::clone(e)))
            .collect();
        let optional_inputs = connected_inputs
            .iter()
            .filter(|(p, _)| rec.ports[*p].optional)
            .map(|(_, e)| EdgeProbe::new(Arc::clone(e)))
            .collect();
        let is_source = connected_inputs.is_empty();
        // The record check matched the trigger list to the operators.
        let trigger = &plan.operator_triggers()[i];
        let unusable = |why: String| {
            Error::new(ErrorCode::InvalidArgument, why).at(format!("operator {:?}", rec.name))
        };
        let (schedule, trigger_input) = match trigger.trigger {
            TriggerKind::Clock => {
                let Some(period_ns) = trigger.clock_period_ns.filter(|&p| p > 0) else {
                    return Err(unusable(format!(
                        "the plan's clock trigger has no usable period ({:?} Hz)",
                        trigger.clock_hz
                    )));
                };
                (
                    Schedule::Clock {
                        period_ns,
                        next_ns: 0,
                    },
                    None,
                )
            }
            TriggerKind::OnArrival => {
                let port = trigger.input_port.map(|p| p as usize);
                let edge = port.and_then(|p| connected_inputs.iter().find(|(q, _)| *q == p));
                match (edge, port) {
                    (Some((p, e)), _) => {
                        (Schedule::OnArrival(EdgeProbe::new(Arc::clone(e))), Some(*p))
                    }
                    // An optional input with no flow: nothing ever arrives.
                    (None, Some(p)) if rec.ports[p].optional => (Schedule::Never, None),
                    (None, _) => {
                        let name = trigger.input.as_deref().unwrap_or_default();
                        return Err(unusable(format!(
                            "the plan's trigger is on_arrival({name}), but the operator has no connected input {name:?}"
                        )));
                    }
                }
            }
            TriggerKind::AnyInput => (Schedule::AnyInput, None),
            TriggerKind::AllInputs => (Schedule::AllInputs, None),
        };
        let skip_inputs = if matches!(schedule, Schedule::Clock { .. } | Schedule::OnArrival(_)) {
            connected_inputs
                .iter()
                .filter(|(p, _)| {
                    let port = &rec.ports[*p];
                    !port.optional
                        && port
                            .input
                            .is_some_and(|b| b.missing == crate::spec::MissingPolicy::Skip)
                        && trigger_input != Some(*p)
                })
                .map(|(_, e)| EdgeProbe::new(Arc::clone(e)))
                .collect()
        } else {
            Box::default()
        };
        let has_inputs = rec
            .ports
            .iter()
            .any(|p| p.direction == PortDirection::Input);
        let stream = streams.of_operator(plan, i);
        runtimes.push(OpRuntime {
            index: i,
            partition: rec.partition,
            name: rec.name.clone(),
            op,
            activation,
            stream,
            device: stream.and(device.clone()),
            required_inputs,
            optional_inputs,
            cross_inputs: connected_inputs
                .iter()
                .filter(|(_, e)| e.is_cross_partition())
                .map(|(_, e)| Arc::clone(e))
                .collect(),
            // A source waits for room in its blocking flows and in its topics' blocking
            // subscriber seats (a free seat is never full).
            block_outputs: erased_out[i]
                .iter()
                .filter(|e| e.policy() == crate::graph::QueuePolicy::Block)
                .chain(&topic_block[i])
                .map(|e| EdgeProbe::new(Arc::clone(e)))
                .collect(),
            is_source,
            is_sink: erased_out[i].is_empty() && (has_inputs || !is_source),
            activations: 0,
            max_activations: if is_source {
                options.max_source_activations.unwrap_or(UNLIMITED)
            } else {
                UNLIMITED
            },
            // An operator that can never fire (an `on_arrival` input nothing feeds, an
            // `any_input` trigger with no connected input) is done from the start: counted
            // as a pending source, it kept `wait_idle` from ever seeing the run end.
            done: (is_source && options.max_source_activations == Some(0))
                || matches!(schedule, Schedule::Never)
                || (matches!(schedule, Schedule::AnyInput) && connected_inputs.is_empty()),
            started: false,
            stalled_at: NOT_STALLED,
            schedule,
            skip_inputs,
            rate_offset: rate_offsets[i],
            skipped: 0,
            pools: port_pools.iter().flatten().cloned().collect(),
        });
    }
    let sources = runtimes.iter().filter(|o| o.is_source && !o.done).count();
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        sources_pending: AtomicUsize::new(if options.max_source_activations.is_some() {
            sources
        } else {
            usize::MAX
        }),
        error: Mutex::new(None),
        signals: signals.clone(),
        rates,
        idle_spin: options.idle_spin,
    });
    registry.set_shared(Arc::clone(&shared));
    // A device call that fails on the release path (the retirement worker's poll, a
    // release record) stops the session; `join` reports its error.
    let stop_on_error = Arc::downgrade(&shared);
    retirer.set_on_error(Box::new(move || {
        if let Some(shared) = stop_on_error.upgrade() {
            shared.request_stop();
        }
    }));
    let topics = Arc::new(registry);
    // The topics exported or imported across processes: each one's socket is bound (a
    // second session serving the topic in the namespace is refused here) and served from
    // now on; a remote subscriber receives nothing before the operators run.
    let mut ipc = Vec::new();
    for t in plan.topics().iter().filter(|t| t.across_processes) {
        let pool = topic_pool(&pools, t)?;
        let ns = &options.ipc_namespace;
        let mut server = match t.direction {
            crate::plan::TopicDirection::Export => {
                crate::ipc::Server::Export(crate::ipc::ExportServer::bind(&topics, t, pool, ns)?)
            }
            crate::plan::TopicDirection::Import => {
                crate::ipc::Server::Import(crate::ipc::ImportServer::bind(&topics, t, pool, ns)?)
            }
        };
        server.spawn()?;
        ipc.push(server);
    }
    // The imports fed by another process's export: each attaches to its exporting session
    // now (a refusal fails the start, having attached nothing) and starts its bridge.
    for t in plan.topics().iter().filter(|t| t.from_export.is_some()) {
        let bridge = crate::ipc::ImportBridge::start(
            &topics,
            t,
            device.as_ref(),
            options.wait_for_exporters,
        )?;
        ipc.push(crate::ipc::Server::Bridge(bridge));
    }
    // The first rate generation: the plan's compiled rates, or the caller's candidate.
    // A rejected first candidate leaves nothing published; the session still runs on the
    // plan's compiled nominal rates, and the rejection is kept as evidence.
    let _ = shared.rates.propose(plan, &candidate.unwrap_or_default());

    // The retirement worker, parked until a device slot needs it: before any operator's
    // `start`, which may already release a device slot a stream still reads (a slot
    // handed back without the worker would not wait for its release events).
    let device_slots: usize = pools
        .iter()
        .filter(|p| p.device().is_some())
        .map(|p| p.slot_count as usize)
        .sum();
    let retire_thread = if device_slots > 0 {
        Some(retirer.start(device_slots, options.idle_spin)?)
    } else {
        None
    };
    // From here a failed start unwinds as the teardown does: device work an operator's
    // `start` enqueued runs before the pools it writes are freed.
    let unwind = Unwind {
        streams: &streams,
        retirer: &retirer,
        retire_thread,
        armed: true,
    };

    crate::trace::phase!(phase, "session.start_operators");
    // 4. Every operator's start, in partition order; the first failure stops the
    //    started ones and fails the session before any compute.
    for p in plan.partitions() {
        for &o in &p.operators {
            let rt = &mut runtimes[o as usize];
            let mut ctx = LifecycleContext {
                operator: &rt.name,
                rates: OperatorRates {
                    table: &shared.rates,
                    offset: rt.rate_offset,
                },
                stream: rt.stream,
                device: rt.device.as_ref(),
            };
            rt.activation.bind_thread();
            let r = match rt.device.as_ref().map(|d| d.bind_to_thread()) {
                Some(Err(e)) => Ok(Err(e)),
                _ => catch_unwind(AssertUnwindSafe(|| rt.op.start(&mut ctx))),
            };
            rt.activation.unbind_thread();
            let err = match r {
                Ok(Ok(())) => {
                    rt.started = true;
                    continue;
                }
                Ok(Err(e)) => locate(e, &rt.name),
                Err(p) => Error::new(
                    ErrorCode::Internal,
                    format!("start panicked: {}", panic_message(p.as_ref())),
                )
                .at(format!("operator {:?}", rt.name)),
            };
            for rt in runtimes.iter_mut().rev() {
                stop_operator(&shared, rt);
            }
            return Err(err);
        }
    }

    crate::trace::phase!(phase, "session.spawn_partitions");
    // 5. Arm: one thread per partition thread of the plan (a partition's own, or the one
    //    that runs every partition on a shared stream), its partitions' operators in
    //    partition order.
    let mut by_partition: Vec<Vec<OpRuntime>> = (0..n_threads).map(|_| Vec::new()).collect();
    let mut thread_names: Vec<Option<&str>> = vec![None; n_threads];
    let mut slots: Vec<Option<OpRuntime>> = runtimes.into_iter().map(Some).collect();
    for p in plan.partitions() {
        let k = p.thread as usize;
        thread_names[k].get_or_insert(p.name.as_str());
        for &o in &p.operators {
            if let Some(rt) = slots[o as usize].take() {
                by_partition[k].push(rt);
            }
        }
    }
    // The session, stepped or threaded (each branch moves the parts once).
    macro_rules! session {
        ($threads:expr, $stepped:expr, $retire_thread:expr) => {
            RunSession {
                shared,
                threads: $threads,
                stepped: Mutex::new($stepped),
                edges,
                edge_ends,
                pools,
                streams,
                retirer,
                retire_thread: $retire_thread,
                started: Instant::now(),
                plan: plan.clone(),
                topics,
                ipc,
                ipc_namespace: options.ipc_namespace.clone(),
                torn_down: false,
                latency_baseline: Mutex::new(None),
                owner: crate::fork::Owner::current(),
            }
        };
    }
    if stepped {
        let retire_thread = unwind.disarm();
        let stepped = Stepped::new(&shared, by_partition);
        return Ok(session!(Vec::new(), Some(stepped), retire_thread));
    }
    // Every partition thread is spawned before any of them gets its operators: a spawn
    // that fails leaves every operator on this thread, where each is stopped, the
    // retirement worker is shut down and nothing ran `compute`.
    let mut threads = Vec::with_capacity(by_partition.len());
    let mut handoffs = Vec::with_capacity(by_partition.len());
    let mut spawn_error = None;
    for (k, signal) in signals.iter().enumerate().take(by_partition.len()) {
        let shared_t = Arc::clone(&shared);
        let signal = Arc::clone(signal);
        let partition = thread_names[k].unwrap_or_default();
        let name = format!("holo-{partition}");
        let handoff = Arc::new(Handoff::default());
        let thread_handoff = Arc::clone(&handoff);
        let spawned = if fault::spawn_fails(k) {
            Err(std::io::Error::other("injected by the test fault hook"))
        } else {
            std::thread::Builder::new().name(name).spawn(move || {
                // No operators: a sibling failed to spawn and the session is not starting.
                let Some(ops) = thread_handoff.receive() else {
                    return Vec::new();
                };
                partition_loop(&shared_t, &signal, ops)
            })
        };
        match spawned {
            Ok(t) => {
                handoffs.push((handoff, t.thread().clone()));
                threads.push(t);
            }
            Err(e) => {
                spawn_error = Some(Error::new(
                    ErrorCode::ResourceExhausted,
                    format!("cannot spawn the thread of partition {partition:?}: {e}"),
                ));
                break;
            }
        }
    }
    if let Some(err) = spawn_error {
        for (h, thread) in &handoffs {
            h.give(None, thread);
        }
        shared.request_stop();
        for t in threads {
            let _ = t.join();
        }
        for rt in by_partition.iter_mut().flatten().rev() {
            stop_operator(&shared, rt);
        }
        return Err(err);
    }
    let retire_thread = unwind.disarm();
    for ((h, thread), ops) in handoffs.iter().zip(by_partition) {
        h.give(Some(ops), thread);
    }
    Ok(session!(threads, None, retire_thread))
}

/// Undoes a session start that fails after its operators may have run `start` (armed
/// until the session is built), in the teardown's order: the retirer is closed and its
/// outstanding slots awaited (bounded), the streams are synchronized, and the worker is
/// stopped. Then the caller's locals drop: the pools are freed only after every stream
/// ran what was enqueued on their memory (a software device frees at once, under a fill
/// still queued), and the streams are destroyed.
struct Unwind<'a> {
    streams: &'a Streams,
    retirer: &'a Arc<Retirer>,
    retire_thread: Option<std::thread::JoinHandle<()>>,
    armed: bool,
}

impl Unwind<'_> {
    /// The start succeeded: the session owns the worker's thread from here.
    fn disarm(mut self) -> Option<std::thread::JoinHandle<()>> {
        self.armed = false;
        self.retire_thread.take()
    }
}

impl Drop for Unwind<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.retirer.close();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.retirer.outstanding() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        // The start's error is what the caller reports; a stream that cannot be
        // synchronized leaves nothing better to do than free after the attempt.
        if self.streams.synchronize().is_ok() {
            self.retirer.mark_quiesced();
        }
        self.retirer.shutdown();
        if self.retirer.outstanding() == 0
            && let Some(t) = self.retire_thread.take()
        {
            let _ = t.join();
        }
    }
}

/// A partition thread's operators, handed over once every partition thread exists: the
/// thread parks until it gets them (`None`: the session is not starting). Parking
/// allocates nothing (a channel's first blocking receive would, on the partition thread,
/// at a moment no one controls).
#[derive(Default)]
struct Handoff {
    given: Mutex<Given>,
}

/// What a partition thread was handed.
#[derive(Default)]
enum Given {
    #[default]
    Nothing,
    Operators(Vec<OpRuntime>),
    /// The session is not starting.
    Abort,
}

impl Handoff {
    fn give(&self, ops: Option<Vec<OpRuntime>>, thread: &std::thread::Thread) {
        *self
            .given
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            ops.map_or(Given::Abort, Given::Operators);
        thread.unpark();
    }

    fn receive(&self) -> Option<Vec<OpRuntime>> {
        loop {
            let given = std::mem::take(
                &mut *self
                    .given
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            match given {
                Given::Nothing => std::thread::park(),
                Given::Operators(ops) => return Some(ops),
                Given::Abort => return None,
            }
        }
    }
}

/// Fault injection for the session's own tests: which partition's thread spawn fails.
pub(crate) mod fault {
    use std::sync::atomic::{AtomicUsize, Ordering};

    static FAIL_SPAWN: AtomicUsize = AtomicUsize::new(usize::MAX);

    /// Makes the spawn of partition `k`'s thread fail in every later `RunSession::start`
    /// of this process (`None`: none fails). For tests only.
    pub fn fail_partition_spawn(k: Option<usize>) {
        FAIL_SPAWN.store(k.unwrap_or(usize::MAX), Ordering::SeqCst);
    }

    pub(super) fn spawn_fails(k: usize) -> bool {
        FAIL_SPAWN.load(Ordering::Relaxed) == k
    }
}
