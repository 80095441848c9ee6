//! Port fields of operators: [`Input`] and [`Output`], bound by the session at start.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::hint::cold_path;
use std::sync::Arc;
use std::time::Instant;

use super::context::ActivationState;
use crate::channel::OrderingDomain;
use crate::channel::pool::Pool;
use crate::channel::queue::{EdgeQueue, Stamp};
use crate::device::StreamHandle;
use crate::graph::QueuePolicy;
use crate::spec::{InputMode, MissingPolicy, TensorInputSpec};
use crate::tensor::{Tensor, TensorLoanRequest, TensorOutputLoan};
use crate::topic::{BoundSeat, SeatState};
use crate::{Error, ErrorCode, Result};

/// Options of one emit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EmitOptions {
    /// When the data was captured, for end-to-end latency. `None` carries the earliest
    /// capture time of the values received since the activation's last emit (all of
    /// them, for an activation that emits once at the end; each value's own, for one
    /// that receives and emits value by value); a source's is the moment its
    /// partition was free to begin the activation (the clock reading that ended the
    /// previous activation, when the partition went straight on), else its activation
    /// time.
    pub capture_time: Option<Instant>,
    /// The frame id. `None` carries the id of the input the capture time comes from, or
    /// for an activation that received nothing the output's own count of frames (0, 1,
    /// 2, …).
    pub frame: Option<u64>,
}

impl EmitOptions {
    /// These options with the capture time `t`.
    #[must_use]
    pub const fn with_capture_time(mut self, t: Instant) -> Self {
        self.capture_time = Some(t);
        self
    }

    /// These options with the frame id `frame`.
    #[must_use]
    pub const fn with_frame(mut self, frame: u64) -> Self {
        self.frame = Some(frame);
        self
    }
}

/// An emit that published nothing ([`Output::try_emit`]): the value, handed back, and
/// why.
pub struct Refused<T> {
    /// The value that was not published.
    pub value: T,
    /// Why: `Backpressured`, `ResourceExhausted` (a release-stream cap), `ProtocolError`,
    /// `NotSupported` or `InvalidArgument`, as [`Output::emit`] documents.
    pub error: Error,
}

impl<T> Refused<T> {
    #[cold]
    fn new(value: T, error: Error) -> Self {
        crate::trace::event!(debug, error = %error, "emit refused: nothing was published");
        Self { value, error }
    }
}

impl<T> fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// An input port. Declare it as a field of an `#[operator]` struct and construct it with
/// `Input::default()`; the session binds it at start.
pub struct Input<T> {
    binding: Option<InputBinding<T>>,
}

/// A bound port's mark, in its binding's first cache line: eight bytes with two valid
/// values have a larger niche than any other field a binding holds (a `VecDeque`'s
/// capacity has 2^63 spare values, an `Option`'s tag 254), so `Option<…Binding>` tells a
/// bound port from an unbound one by this field. (It used a field further on, on a line
/// an emit or a receive had no other use for: `.ci/count-data-lines.sh`.)
#[derive(Clone, Copy)]
#[repr(u64)]
enum Bound {
    Input = 1,
    Output = 2,
}

#[repr(C, align(64))]
struct InputBinding<T> {
    // First cache line: what a plain `receive` touches (see `OutputBinding`).
    bound: Bound,
    queue: Option<Arc<EdgeQueue<T>>>,
    activation: Arc<ActivationState>,
    /// What travelled with the value received last.
    last_stamp: Stamp,
    /// A queue or window input with no history, no `reuse_last` and no wait of either
    /// kind: `receive` is a pop and a capture-time update.
    plain: bool,
    /// The port's index in its operator (for `ctx.rate`).
    port: u32,
    // The rest.
    /// `operator "…", port "…"`, for errors.
    location: &'static str,
    mode: InputMode,
    missing: MissingPolicy,
    /// Retained entries, newest last; capacity fixed at bind time (never grows).
    history: VecDeque<T>,
    history_cap: usize,
    /// The last sample, kept for `missing = reuse_last`.
    last: Option<T>,
    /// The activation in which `last` was last reused.
    reused_in: u64,
    /// Where a received tensor is delivered, when that takes work: `Host` — the consumer
    /// has no planned stream and the flow may carry stream-written tensors, so it waits
    /// on the host for readiness; a stream — the consumer's planned stream on a flow that
    /// is not fused waits on the readiness event (a stream wait enqueued on the
    /// consumer's own thread, so a producer never submits to a stream another thread is
    /// submitting to). `None`: nothing to do (no tensors, a fused flow, host memory).
    deliver: Option<OrderingDomain>,
}

// A plain receive's fields, and the mark, fill the first cache line.
const _: () =
    assert!(std::mem::offset_of!(InputBinding<u64>, port) + std::mem::size_of::<u32>() <= 64);
// The mark's niche is the one `Option` uses: an unbound port's binding is one word.
const _: () = assert!(
    std::mem::size_of::<Option<InputBinding<Vec<u8>>>>()
        == std::mem::size_of::<InputBinding<Vec<u8>>>()
);

impl<T> InputBinding<T> {
    fn info(&self) -> FrameInfo {
        let s = self.last_stamp;
        FrameInfo {
            frame: s.frame,
            capture_time: (s.capture_ns != super::context::NO_CAPTURE)
                .then(|| self.activation.instant(s.capture_ns)),
            publish_time: self.activation.instant(s.publish_ns),
        }
    }
}

/// What travels with every value on a flow ([`Input::receive_with_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameInfo {
    /// The frame id: a source's emits number their frames 0, 1, 2, … per output; a value
    /// emitted by an activation that received something carries the id of the value it
    /// takes its capture time from — the earliest received since the activation's last
    /// emit, so a forwarder keeps each value's id even when it drains several values in
    /// one activation; `EmitOptions::frame` sets it.
    pub frame: u64,
    /// When the data was captured (`EmitOptions::capture_time`, or carried forward).
    ///
    /// The session keeps times on a faster clock than `Instant` and converts at the emit
    /// and at the receipt, each time through the present moment: the `Instant` given
    /// comes back within about a microsecond plus tens of ppm of its age (a thread
    /// preempted between the two clocks' reads reads them again, up to 8 times).
    pub capture_time: Option<Instant>,
    /// When the activation that published the value ran: the moment its partition was
    /// free to begin it (when the partition went straight on from an activation it
    /// timed), else its activation time — never later than the emit.
    pub publish_time: Instant,
}

impl<T> Default for Input<T> {
    fn default() -> Self {
        Self { binding: None }
    }
}

impl<T> fmt::Debug for Input<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Input")
            .field("bound", &self.binding.is_some())
            .field(
                "connected",
                &self.binding.as_ref().is_some_and(|b| b.queue.is_some()),
            )
            .finish()
    }
}

impl<T: Clone + Send + 'static> Input<T> {
    /// Takes the next entry as the input's temporal contract says: the oldest queued
    /// entry (one per call; a `window` input drains its window this way), or for a
    /// `latest` input the newest (older ones are dropped). When nothing is queued, a
    /// `missing = reuse_last` input returns its last sample once per activation; otherwise
    /// `None` (also when unconnected). A received `Tensor` is read-only.
    ///
    /// A consumer with a planned stream gets a received tensor with its stream already
    /// ordered after the producer's writes (a stream wait on the readiness event,
    /// enqueued here on the consumer's thread; nothing blocks). A stream-less consumer (a
    /// host-only partition) of a stream-written tensor gets it only after a host wait for
    /// its readiness — the runtime's one blocking call of its own. If either wait fails,
    /// the entry is dropped, `None` is returned and the session stops with the error after
    /// this activation.
    ///
    /// Called on a thread that is not the operator's (the port was moved or shared out
    /// of the operator), it takes nothing, returns `None`, and the session stops with
    /// `NotSupported` naming the port.
    #[allow(
        clippy::inline_always,
        reason = "the fast path is a pop; left to the heuristic it stayed out of line in operators' compute (measured in benches/host_hop.rs)"
    )]
    #[inline(always)]
    pub fn receive(&mut self) -> Option<T> {
        let b = self.binding.as_mut()?;
        let q = b.queue.as_ref()?;
        if !b.activation.on_operator_thread() {
            cold_path();
            b.activation.fail(wrong_thread(b.location));
            return None;
        }
        if b.plain {
            let value = q.pop_value(&mut b.last_stamp)?;
            b.activation.observe(&b.last_stamp);
            return Some(value);
        }
        self.receive_full()
    }

    /// [`receive`](Self::receive), lending the value to `f` instead of moving it out:
    /// on a flow within one partition `f` reads it where it lies in the queue, and it is
    /// dropped there when `f` returns — a forwarder that clones it into its output, or a
    /// sink that reads a few bytes of it, copies nothing else. Returns what `f` returned,
    /// or `None` (without calling `f`) where `receive` returns `None`.
    ///
    /// Every rule of `receive` holds: the oldest entry (the newest for a `latest` input),
    /// the stream or host wait of a received tensor, `history`, `missing = reuse_last`
    /// (`f` sees the last sample once per activation), the capture time and frame id the
    /// activation carries forward (already updated while `f` runs, so an emit inside `f`
    /// carries them), and a port on another thread takes nothing and stops the session
    /// with `NotSupported`. Where a rule needs the value itself — a cross-partition flow,
    /// history, `reuse_last`, `latest`, a wait — it is received as `receive` does and `f`
    /// reads it from there. If `f` panics, the value stays queued. Otherwise the value is
    /// consumed whatever `f` did with it: a forwarder that must not lose one to
    /// `Backpressured` looks at [`Output::has_room`] first.
    ///
    /// ```
    /// use holo_runtime::{EmitOptions, ExecutionContext, Input, Operator, Output, Result, operator};
    ///
    /// #[derive(Clone)]
    /// struct Frame([u8; 256]);
    ///
    /// #[operator]
    /// struct Forward {
    ///     input: Input<Frame>,
    ///     out: Output<Frame>,
    /// }
    ///
    /// impl Operator for Forward {
    ///     fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
    ///         // One copy per frame: the clone, from the input's slot to the output's.
    ///         while let Some(sent) = self
    ///             .input
    ///             .receive_with(|f| self.out.emit(f.clone(), EmitOptions::default()))
    ///         {
    ///             sent?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    #[allow(
        clippy::inline_always,
        reason = "the fast path is a read in place; as `receive`"
    )]
    #[inline(always)]
    pub fn receive_with<R>(&mut self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let received;
        // `f` is called in one place only, so that it is inlined here.
        let (value, lent_by) = {
            let b = self.binding.as_mut()?;
            let q = b.queue.as_ref()?;
            if b.plain && q.is_local() {
                if !b.activation.on_operator_thread() {
                    b.activation.fail(wrong_thread(b.location));
                    return None;
                }
                let (value, stamp) = q.front()?;
                b.last_stamp = stamp;
                b.activation.observe(&stamp);
                (value, Some(q))
            } else {
                received = self.receive_moved()?;
                (&received, None)
            }
        };
        let out = f(value);
        if let Some(q) = lent_by {
            // SAFETY: `front` lent `value` above (nothing popped this edge since: `f`
            // cannot reach this input), and `value` is not used after this.
            unsafe { q.drop_front() };
        }
        Some(out)
    }

    /// `receive`, for `receive_with` where the value cannot be lent in place.
    #[inline(never)]
    fn receive_moved(&mut self) -> Option<T> {
        self.receive()
    }

    /// [`receive`](Self::receive), with what travelled with the value: its frame id, its
    /// capture time and when the activation that published it ran. (A value reused by
    /// `missing = reuse_last` comes with the information of its original receipt.)
    pub fn receive_with_info(&mut self) -> Option<(T, FrameInfo)> {
        let value = self.receive()?;
        let b = self.binding.as_ref()?;
        Some((value, b.info()))
    }

    /// `receive` for the inputs that keep history, reuse their last sample, take the
    /// latest or wait on the host (out of line, so `receive` stays small).
    #[inline(never)]
    fn receive_full(&mut self) -> Option<T> {
        let b = self.binding.as_mut()?;
        let q = b.queue.as_ref()?;
        let mut popped = q.pop();
        if b.mode == InputMode::Latest {
            while let Some(newer) = q.pop() {
                popped = Some(newer);
            }
        }
        let Some(mut s) = popped else {
            let seq = b.activation.sequence();
            if b.missing == MissingPolicy::ReuseLast && b.reused_in != seq {
                b.reused_in = seq;
                return b.last.clone();
            }
            return None;
        };
        b.last_stamp = s.stamp;
        b.activation.observe(&s.stamp);
        if let Some(domain) = b.deliver
            && let Some(t) = (&mut s.value as &mut dyn Any).downcast_mut::<Tensor>()
            && let Err(e) = t.deliver_to(domain)
        {
            b.activation.fail(e);
            return None;
        }
        if b.history_cap > 0 {
            if b.history.len() == b.history_cap {
                b.history.pop_front();
            }
            b.history.push_back(s.value.clone());
        }
        if b.missing == MissingPolicy::ReuseLast {
            b.last = Some(s.value.clone());
        }
        Some(s.value)
    }

    /// The retained history (`#[input(history = N)]`): up to the last N received
    /// entries, including the one received most recently, oldest first — the first slice
    /// then the second (a ring buffer's two halves). Allocation-free.
    pub fn history(&self) -> (&[T], &[T]) {
        self.binding
            .as_ref()
            .map_or((&[], &[]), |b| b.history.as_slices())
    }

    /// The port's index in its operator, once bound (for `ExecutionContext::rate`).
    pub(crate) fn port_index(&self) -> Option<u32> {
        self.binding.as_ref().map(|b| b.port)
    }

    /// Takes every queued entry and returns the newest (the older ones are dropped).
    pub fn receive_latest(&mut self) -> Option<T> {
        let mut latest = None;
        while let Some(v) = self.receive() {
            latest = Some(v);
        }
        latest
    }

    /// Entries waiting.
    pub fn pending(&self) -> usize {
        self.binding
            .as_ref()
            .and_then(|b| b.queue.as_ref())
            .map_or(0, |q| q.len())
    }

    /// Whether a flow feeds this input.
    pub fn is_connected(&self) -> bool {
        self.binding.as_ref().is_some_and(|b| b.queue.is_some())
    }
}

/// An output port. Declare it as a field of an `#[operator]` struct and construct it
/// with `Output::default()`; the session binds it at start.
pub struct Output<T> {
    binding: Option<OutputBinding<T>>,
}

/// The stream contract of one flow, as the session resolved it at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EdgeContract {
    /// The consumer's ordering domain: its planned stream (and whether its partition
    /// owns it alone), or the host.
    pub(crate) consumer: OrderingDomain,
    /// The plan proved the edge fused and the session re-validated it (both ends on this
    /// same stream, sole successor): no wait, no release registration.
    pub(crate) fused: bool,
    /// The consumer has no stream and the edge may carry stream-written tensors (a
    /// device pool or a pass-through output in a session with a device): host wait on
    /// receive.
    pub(crate) host_wait: bool,
}

impl EdgeContract {
    /// The consumer's stream, on a flow that is not fused: registered as a release stream
    /// on emit, and made to wait on the readiness event on receive. `None` for a fused
    /// flow or a consumer with no stream.
    fn consumer_stream(&self) -> Option<OrderingDomain> {
        Some(self.consumer).filter(|d| !self.fused && d.stream().is_some())
    }
}

#[repr(C, align(64))]
struct OutputBinding<T> {
    // First cache line: what `allocate_tensor` and an emit with none of the rare work
    // touch. The binding is aligned to a line of its own, so that after a GPU driver
    // call has evicted the core's caches an emit fetches one line of it again, not the
    // three its fields were spread over (`.ci/count-data-lines.sh`).
    bound: Bound,
    edges: Box<[Arc<EdgeQueue<T>>]>,
    activation: Arc<ActivationState>,
    pool: Option<Arc<Pool>>,
    /// Frames this output numbered itself (emits that inherited no frame id).
    next_frame: u64,
    /// Whether every edge blocks (then a full edge refuses the whole emit).
    any_block: bool,
    /// Whether emit has a refusal to check before the room check out of line
    /// ([`OutputBinding::refusal_before_room`]).
    rare_before_room: bool,
    /// Whether emit has work after the room check out of line
    /// ([`OutputBinding::work_after_room`]).
    rare_after_room: bool,
    /// A `Tensor` output that does not declare `forwards`: a tensor from another
    /// operator's runtime pool is refused on emit, since that pool is not sized for the
    /// queues and holds after this output.
    refuse_forwarded: bool,
    // The rest.
    /// The subscriber seats of the topic this output exports (empty: none; else
    /// `rare_after_room` is set).
    seats: Box<[TopicSeat<T>]>,
    port: u32,
    location: &'static str,
    /// Per edge, its contract; empty when no edge needs device work on emit.
    contracts: Box<[EdgeContract]>,
    /// The consumers' exact tensor requirements, checked on emit for tensors that did
    /// not come from this output's own (compile-checked) pool.
    requirements: Box<[(TensorInputSpec, &'static str)]>,
    /// The edge a fan-out's next emit pushes to first (the order turns with each emit).
    first_served: usize,
    /// The boundary pool of the topic this pass-through output exports across processes:
    /// each tensor emitted is copied once into it, and the seats receive the copy.
    boundary: Option<Arc<Pool>>,
    /// The operator's planned stream (the boundary copy's).
    stream: Option<StreamHandle>,
    /// An output that forwards an input: the pools sized for what follows it. A runtime
    /// pool's tensor of another (one another input received) is refused: no pool counts
    /// this output's queues and holds for it. Empty: nothing to check.
    forward_origins: Box<[Arc<Pool>]>,
}

// An emit's common fields fill the first cache line.
const _: () = assert!(std::mem::offset_of!(OutputBinding<u64>, refuse_forwarded) < 64);

/// One subscriber seat of the topic an output exports: its queue, and whether a
/// subscriber holds it (only then is anything pushed into it).
struct TopicSeat<T> {
    queue: Arc<EdgeQueue<T>>,
    state: Arc<SeatState>,
}

/// The first attached `Block` seat that is full, if any.
#[inline(never)]
fn full_seat<T>(seats: &[TopicSeat<T>]) -> Option<&EdgeQueue<T>> {
    seats
        .iter()
        .find(|s| {
            s.queue.policy == QueuePolicy::Block
                && s.state.is_attached(std::sync::atomic::Ordering::Acquire)
                && s.queue.is_full()
        })
        .map(|s| &*s.queue)
}

/// `value`'s copy in a topic's boundary pool `pool` (`Tensor::copy_across_boundary` on
/// `stream`), as a `T`; `None` for a value that is no tensor or is in the pool already.
#[cold]
#[inline(never)]
fn cross_boundary<T: 'static>(
    pool: &Arc<Pool>,
    stream: Option<StreamHandle>,
    value: &T,
) -> Result<Option<T>> {
    let Some(t) = (value as &dyn Any).downcast_ref::<Tensor>() else {
        return Ok(None);
    };
    if t.in_pool(pool) {
        return Ok(None);
    }
    let mut copy = Some(t.copy_across_boundary(pool, stream)?);
    Ok((&mut copy as &mut dyn Any)
        .downcast_mut::<Option<T>>()
        .and_then(Option::take))
}

/// Pushes a clone of `value` into every attached seat. A seat whose subscriber detached
/// as the push went in is emptied here (the subscriber's detach empties it too; the
/// fences order the two checks, so one of them sees the entry): a seat that is not
/// attached keeps no slot.
#[inline(never)]
fn push_to_seats<T: Clone + Send + 'static>(seats: &[TopicSeat<T>], value: &T, stamp: Stamp) {
    use std::sync::atomic::{Ordering, fence};
    for s in seats {
        if !s.state.is_attached(Ordering::Acquire) {
            continue;
        }
        if s.state.1.active.load(Ordering::Acquire) && send_to_process(s, value, stamp) {
            continue;
        }
        s.queue.push(value.clone(), stamp);
        fence(Ordering::SeqCst);
        if !s.state.is_attached(Ordering::Relaxed) {
            crate::channel::queue::ErasedEdge::clear(&*s.queue);
        }
    }
}

/// A seat served to another process: sends `value` (a tensor) from this thread when
/// nothing waits in the seat's queue before it and the subscriber has room. `false`: the
/// caller queues it (a single producer pushes in order; the seat's thread pops and sends
/// under the sender's lock, so nothing overtakes a queued value).
#[inline(never)]
fn send_to_process<T: Clone + Send + 'static>(s: &TopicSeat<T>, value: &T, stamp: Stamp) -> bool {
    let Some(t) = (value as &dyn Any).downcast_ref::<Tensor>() else {
        return false;
    };
    let mut sender = s
        .state
        .1
        .sender
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let sent = match sender.as_mut() {
        Some(sender) => s.queue.len() == 0 && sender.try_send(t, stamp),
        None => false,
    };
    if sent {
        crate::channel::queue::bump(&s.queue.counters.pushed);
        crate::channel::queue::bump(&s.queue.counters.delivered);
    }
    sent
}

impl<T> Default for Output<T> {
    fn default() -> Self {
        Self { binding: None }
    }
}

impl<T> fmt::Debug for Output<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Output")
            .field("bound", &self.binding.is_some())
            .field("edges", &self.binding.as_ref().map_or(0, |b| b.edges.len()))
            .finish()
    }
}

const UNBOUND: &str = "the port is not bound: ports work only inside a running session";

/// A port used on a thread that is not its operator's (moved out of the operator, or
/// shared with a thread the operator spawned): refused, so the queue and pool state that
/// only the operator's partition thread touches is never touched by two threads at once.
#[cold]
#[inline(never)]
fn wrong_thread(location: &'static str) -> Error {
    crate::trace::event!(
        error,
        port = location,
        "a port was used on a thread that is not its operator's"
    );
    Error::new(
        ErrorCode::NotSupported,
        "a port was used on a thread that is not its operator's: ports work only inside the operator's own callbacks (start, compute, stop), on the thread that runs them",
    )
    .at(location)
}

/// A tensor of another operator's pool emitted on an output that does not declare
/// `forwards`.
#[cold]
#[inline(never)]
fn undeclared_forward(location: &'static str, origin: &'static str) -> Error {
    Error::new(
        ErrorCode::ProtocolError,
        format!(
            "the output emits a tensor of the runtime pool of {origin} but does not declare `#[output(forwards = <input>)]`, so that pool is not sized for the queues and holds after this output; nothing was published"
        ),
    )
    .at(location)
}

#[cold]
fn unsized_forward(location: &'static str, origin: &'static str) -> Error {
    Error::new(
        ErrorCode::ProtocolError,
        format!(
            "the output forwards one input, and this tensor is of the runtime pool of {origin}, which that input does not receive from: no pool is sized for the queues and holds after this output for it (emit the forwarded input's tensors, or forward from the input that received this one); nothing was published"
        ),
    )
    .at(location)
}

#[cold]
fn not_in_served_pool(location: &'static str) -> Error {
    Error::new(
        ErrorCode::ProtocolError,
        "the output exports its topic across processes from its own pool, which is what another process maps, and this tensor is not in it (a pass-through tensor, or one of another pool); nothing was published",
    )
    .at(location)
}

fn check_requirement(t: &Tensor, req: &TensorInputSpec) -> bool {
    req.memory_kind.is_none_or(|k| k.accepts(t.memory_kind()))
        && req.dtype.is_none_or(|d| d == t.dtype())
        && req.rank.is_none_or(|r| r == t.rank())
}

/// A blocking consumer queue was full on emit: counts it, and says so.
#[cold]
#[inline(never)]
fn backpressured<T>(e: &EdgeQueue<T>, location: &'static str) -> Error {
    crate::channel::queue::bump(&e.counters.backpressured);
    Error::new(
        ErrorCode::Backpressured,
        "a consumer's queue is full; nothing was published",
    )
    .at(location)
}

impl<T: Clone + Send + 'static> OutputBinding<T> {
    /// [`Output::try_emit`]'s refusals before the room check that only some outputs can
    /// make (`rare_before_room`): a forwarded tensor of a pool the output does not forward
    /// from, a tensor short of a consumer's `TensorInputSpec`, a full topic seat.
    #[inline(never)]
    fn refusal_before_room(&self, value: &T) -> Option<Error> {
        if !self.forward_origins.is_empty()
            && let Some(t) = (value as &dyn Any).downcast_ref::<Tensor>()
            && let Some(origin) = t.foreign_pool(self.pool.as_ref())
            && !self.forward_origins.iter().any(|p| t.in_pool(p))
        {
            return Some(unsized_forward(self.location, origin));
        }
        if !self.requirements.is_empty()
            && let Some(t) = (value as &dyn Any).downcast_ref::<Tensor>()
        {
            for (req, consumer) in &self.requirements {
                if !check_requirement(t, req) {
                    return Some(
                        Error::new(
                            ErrorCode::ProtocolError,
                            "the tensor does not meet a consumer's TensorInputSpec (memory kind, dtype or rank)",
                        )
                        .at(*consumer),
                    );
                }
            }
        }
        // Room first: a refused emit registers no release stream.
        if !self.seats.is_empty()
            && let Some(full) = full_seat(&self.seats)
        {
            crate::channel::queue::bump(&full.counters.backpressured);
            return Some(
                Error::new(
                    ErrorCode::Backpressured,
                    "a topic subscriber's queue is full; nothing was published",
                )
                .at(self.location),
            );
        }
        None
    }

    /// [`Output::try_emit`]'s work after the room check that only some outputs have
    /// (`rare_after_room`): a topic across processes, and each consumer stream
    /// registered as a release stream. Returns the boundary copy, if one was made.
    #[inline(never)]
    fn work_after_room(&self, value: &T) -> Result<Option<T>> {
        // A topic across processes from an output with a pool of its own: that pool is
        // what the other process maps, so a tensor of any other pool (a pass-through one,
        // `Tensor::from_host_vec`) cannot be described to it; it was sent as the served
        // pool's slot of the same index.
        if self.boundary.is_none()
            && !self.seats.is_empty()
            && let Some(own) = &self.pool
            && let Some(t) = (value as &dyn Any).downcast_ref::<Tensor>()
            && !t.in_pool(own)
            && self
                .seats
                .iter()
                .any(|s| s.state.1.active.load(std::sync::atomic::Ordering::Acquire))
        {
            return Err(not_in_served_pool(self.location));
        }
        // A topic across processes from a pass-through output: the one copy into its
        // boundary pool, which every subscriber in another process receives (before
        // anything is published: a refused copy publishes nothing).
        let crossing = match &self.boundary {
            Some(pool)
                if self
                    .seats
                    .iter()
                    .any(|s| s.state.is_attached(std::sync::atomic::Ordering::Acquire)) =>
            {
                cross_boundary(pool, self.stream, value)?
            }
            _ => None,
        };
        if !self.contracts.is_empty()
            && let Some(t) = (value as &dyn Any).downcast_ref::<Tensor>()
        {
            // Before anything is published, each consumer stream is registered as a
            // release stream (no device call: the cap is checked here, so the stream
            // past it refuses the emit). Each consumer's stream waits on the readiness
            // event when it receives the tensor, on its own thread.
            for c in &self.contracts {
                if let Some(consumer) = c.consumer_stream() {
                    t.register_release_stream(consumer)?;
                }
            }
        }
        Ok(crossing)
    }
}

impl<T: Clone + Send + 'static> Output<T> {
    /// Publishes `value` to every connected consumer. Several consumers are served in
    /// turn, the first of them changing with each emit (the output's k-th emit, from 0,
    /// goes first to consumer k mod n, in the order the flows were added): none is
    /// always the first to see a message.
    ///
    /// With a blocking queue that is full, nothing is published and `Backpressured` is
    /// returned (the value is dropped; a tensor's slot goes back to its pool): the
    /// operator decides whether to drop, degrade or retry on its next activation. A
    /// drop-oldest queue evicts its oldest entry instead. A tensor that does not meet a
    /// consumer's declared `TensorInputSpec` is refused with `ProtocolError`, and so is a
    /// tensor from another operator's runtime pool (a received tensor) on an output that
    /// does not declare `#[output(forwards = input)]`: its pool was sized without the
    /// queues and holds after this output. On a thread that is not the operator's,
    /// nothing is published: `NotSupported`.
    #[inline]
    pub fn emit(&mut self, value: impl Into<T>, options: EmitOptions) -> Result<()> {
        self.try_emit(value, options).map_err(|r| r.error)
    }

    /// [`emit`](Self::emit), handing the value back when nothing was published — on
    /// `Backpressured` (a forwarder keeps it and retries in its next activation, without
    /// a clone) as on any other refusal.
    #[allow(
        clippy::inline_always,
        reason = "on the in-partition hop; out of line it cost ~20 instructions per frame in register saves (callgrind, benches/host_hop.rs)"
    )]
    #[inline(always)]
    pub fn try_emit(
        &mut self,
        value: impl Into<T>,
        options: EmitOptions,
    ) -> std::result::Result<(), Refused<T>> {
        let value = value.into();
        // Every refusal, and the work most outputs have none of, is marked cold
        // (`cold_path`): the compiler then lays it out after the function's common path,
        // whose code is fetched again after every driver call (BENCHMARKS.md, "This VM,
        // thirty-second session").
        let Some(b) = self.binding.as_mut() else {
            cold_path();
            return Err(Refused::new(
                value,
                Error::new(ErrorCode::InvalidArgument, UNBOUND),
            ));
        };
        if !b.activation.on_operator_thread() {
            cold_path();
            return Err(Refused::new(value, wrong_thread(b.location)));
        }
        if b.refuse_forwarded
            && let Some(t) = (&value as &dyn Any).downcast_ref::<Tensor>()
            && let Some(origin) = t.foreign_pool(b.pool.as_ref())
        {
            cold_path();
            return Err(Refused::new(value, undeclared_forward(b.location, origin)));
        }
        // What most outputs have none of (a forwarding output's origins, a consumer's
        // exact requirements, a topic's seats, a boundary pool, a consumer stream to
        // register) is out of line: the common path is one test of each flag.
        if b.rare_before_room {
            cold_path();
            if let Some(e) = b.refusal_before_room(&value) {
                return Err(Refused::new(value, e));
            }
        }
        if b.any_block {
            for e in &b.edges {
                if e.policy == QueuePolicy::Block && e.is_full() {
                    cold_path();
                    return Err(Refused::new(value, backpressured(e, b.location)));
                }
            }
        }
        let crossing = if b.rare_after_room {
            cold_path();
            match b.work_after_room(&value) {
                Ok(c) => c,
                Err(e) => return Err(Refused::new(value, e)),
            }
        } else {
            None
        };
        let frame = match options.frame {
            Some(f) => f,
            None => b.activation.received_frame().unwrap_or_else(|| {
                let f = b.next_frame;
                b.next_frame += 1;
                f
            }),
        };
        let stamp = Stamp {
            capture_ns: match options.capture_time {
                Some(t) => b.activation.ns_since_epoch(t),
                None => b.activation.default_capture_ns(),
            },
            frame,
            publish_ns: b.activation.publish_ns(),
        };
        b.activation.note_emit();
        if b.rare_after_room && !b.seats.is_empty() {
            cold_path();
            push_to_seats(&b.seats, crossing.as_ref().unwrap_or(&value), stamp);
        }
        match &*b.edges {
            [] => {}
            [only] => only.push(value, stamp),
            edges => {
                // A fan-out: the consumer served first turns with each emit, so none is
                // always the first to see a message (and the first to make its device
                // calls for it while the others wait for the same driver lock).
                let n = edges.len();
                let first = b.first_served;
                b.first_served = if first + 1 == n { 0 } else { first + 1 };
                let (before, from) = edges.split_at(first);
                for e in from.iter().chain(before).take(n - 1) {
                    e.push(value.clone(), stamp);
                }
                edges[if first == 0 { n - 1 } else { first - 1 }].push(value, stamp);
            }
        }
        Ok(())
    }

    /// Whether an emit now would find room: no blocking consumer queue is full (a
    /// drop-oldest queue always has room). `false` for an unbound output.
    pub fn has_room(&self) -> bool {
        self.binding.as_ref().is_some_and(|b| {
            b.edges
                .iter()
                .all(|e| e.policy != QueuePolicy::Block || !e.is_full())
                && full_seat(&b.seats).is_none()
        })
    }

    /// How many of this output's messages wait, not yet received, in its fullest consumer
    /// queue (its flows and the attached subscribers of its topic); 0 for an unbound
    /// output.
    ///
    /// What a source paces itself on when latency matters more than throughput: a source
    /// faster than its slowest consumer keeps that consumer's queue full, and every frame
    /// then waits behind the queue's depth of others (a blocking queue bounds how many
    /// messages wait, not how long). A source that fills only while `queued()` is at most
    /// a window of its choosing (`0`: every consumer has taken the last frame) skips the
    /// ticks its consumers cannot take, as a camera drops frames, and its frames wait
    /// behind at most that many others. docs/STREAMS.md, "Pacing a source", says what
    /// pacing does not do.
    ///
    /// ```
    /// # use holo_runtime::*;
    /// #[operator(trigger = clock(hz = 1_000_000))]
    /// struct Camera {
    ///     #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256, max_loans = 4)]
    ///     out: Output<Tensor>,
    ///     skipped: u64,
    /// }
    ///
    /// impl Operator for Camera {
    ///     fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
    ///         // A frame of ours still waits at a consumer: skip this tick, as a camera
    ///         // drops a frame, rather than queue one more behind it.
    ///         if self.out.queued() > 0 {
    ///             self.skipped += 1;
    ///             return Ok(());
    ///         }
    ///         let loan = match self.out.allocate_tensor(TensorLoanRequest {
    ///             shape: &[256],
    ///             dtype: DType::U8,
    ///         }) {
    ///             Ok(loan) => loan,
    ///             Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
    ///             Err(e) => return Err(e),
    ///         };
    ///         let cuda = ctx.cuda()?;
    ///         let w = loan.write(cuda.stream())?;
    ///         // … fill `w` on the stream …
    ///         self.out.emit(w.commit()?.into_tensor(), EmitOptions::default())
    ///     }
    /// }
    /// ```
    pub fn queued(&self) -> usize {
        self.fullest(EdgeQueue::len)
    }

    /// [`queued`](Self::queued), counting also what a consumer in another partition has
    /// taken and is still working on: the messages of this output in its fullest
    /// consumer that are queued, or were received by an activation that has not
    /// returned yet. (A consumer in this output's own partition never runs at the same
    /// time as its producer, and a topic's subscriber has no activation: for them it is
    /// the queue's length.) 0 for an unbound output.
    ///
    /// The other window to pace a source on: at `in_flight() == 0` every consumer is
    /// idle, so a frame filled now is taken the moment it is emitted, with no wait behind
    /// the consumer's previous frame; the price is that the source's fill no longer
    /// overlaps the consumers' work, so they take fewer frames per second. docs/STREAMS.md,
    /// "Pacing a source", measures both.
    pub fn in_flight(&self) -> usize {
        self.fullest(EdgeQueue::in_flight)
    }

    /// The largest `count` over this output's flows, and the queue lengths of its
    /// topic's attached subscribers; 0 unbound.
    fn fullest(&self, count: impl Fn(&EdgeQueue<T>) -> usize) -> usize {
        self.binding.as_ref().map_or(0, |b| {
            let edges = b.edges.iter().map(|e| count(e)).max().unwrap_or(0);
            let seats = b
                .seats
                .iter()
                .filter(|s| s.state.is_attached(std::sync::atomic::Ordering::Acquire))
                .map(|s| s.queue.len())
                .max()
                .unwrap_or(0);
            edges.max(seats)
        })
    }

    /// Whether a flow leaves this output.
    pub fn is_connected(&self) -> bool {
        self.binding.as_ref().is_some_and(|b| !b.edges.is_empty())
    }

    /// The port's index in its operator, once bound (for `ExecutionContext::rate`).
    pub(crate) fn port_index(&self) -> Option<u32> {
        self.binding.as_ref().map(|b| b.port)
    }
}

impl Output<Tensor> {
    /// How many slots of this output's runtime pool are not free: loaned, queued,
    /// received and held, or retiring — every handle dropped, but a consumer's device
    /// work on the slot not yet seen complete. 0 for an output without a pool (a
    /// pass-through output) and an unbound one.
    ///
    /// The third count to pace a source on (docs/STREAMS.md, "Pacing a source"): a
    /// consumer's activation returns once it has *enqueued* its work on the frame, so
    /// [`in_flight`](Output::in_flight) can be 0 while the device is still behind; a
    /// slot counts here until the device has finished every consumer's work on it. A
    /// source that fills only while `in_use()` is at most a window of its choosing
    /// bounds the frames of its whole pipeline's GPU work (the seed's "pace on
    /// end-to-end GPU completion"), without waiting on an event: it skips the tick. A
    /// retiring slot is seen complete when the retirement worker, or a loan that found
    /// the pool empty, polls its release events, a few microseconds after the device
    /// finished it.
    pub fn in_use(&self) -> usize {
        self.binding
            .as_ref()
            .and_then(|b| b.pool.as_ref())
            .map_or(0, |p| p.slot_count.saturating_sub(p.free_slots()) as usize)
    }

    /// Borrows a slot of this output's runtime pool, or fails at once: `ResourceExhausted`
    /// when every slot is in use (there is no waiting variant), `InvalidArgument` when the
    /// request exceeds the declared bounds or dtype, `NotSupported` for a pass-through
    /// output (it has no pool), and `NotSupported` on a thread that is not the operator's.
    ///
    /// A device pool with no free slot first polls, on this thread and without waiting,
    /// the release events of the slots waiting on the session's retirement worker (unless
    /// the worker is polling them now) and returns those that completed: a slot every
    /// consumer is done with on the device is loaned, however far behind the worker is.
    #[inline]
    pub fn allocate_tensor(&mut self, request: TensorLoanRequest<'_>) -> Result<TensorOutputLoan> {
        let Some(b) = self.binding.as_ref() else {
            cold_path();
            return Err(Error::new(ErrorCode::InvalidArgument, UNBOUND));
        };
        if !b.activation.on_operator_thread() {
            cold_path();
            return Err(wrong_thread(b.location));
        }
        let Some(pool) = &b.pool else {
            cold_path();
            return Err(Error::new(
                ErrorCode::NotSupported,
                "a pass-through output has no runtime pool: declare `storage = runtime_pool` with bounds",
            )
            .at(b.location));
        };
        TensorOutputLoan::new(pool, request)
    }
}

/// Binds an operator's port fields to the session's queues and pools. Used by the code
/// `#[operator]` generates.
pub struct PortBinder<'a> {
    pub(crate) operator: &'a str,
    pub(crate) activation: &'a Arc<ActivationState>,
    /// Per port: the typed queues (one for an input, every edge for an output).
    pub(crate) edges: &'a [Vec<Arc<dyn Any + Send + Sync>>],
    pub(crate) locations: &'a [&'static str],
    pub(crate) pools: &'a [Option<Arc<Pool>>],
    pub(crate) requirements: &'a [Vec<(TensorInputSpec, &'static str)>],
    /// The operator's port records (their input bindings), from the plan.
    pub(crate) ports: &'a [crate::plan::PortRecord],
    /// Per port, the contract of each of its edges (same order as `edges`).
    pub(crate) contracts: &'a [Vec<EdgeContract>],
    /// The operator's planned stream.
    pub(crate) stream: Option<StreamHandle>,
    /// Per port: the subscriber seats of the topic an output exports.
    pub(crate) seats: &'a [Vec<BoundSeat>],
    /// Per port: the boundary pool of the topic a pass-through output exports across
    /// processes.
    pub(crate) boundaries: &'a [Option<Arc<Pool>>],
    /// Per port: for an output that forwards an input (`forwards = input`), the pools the
    /// plan sized for its downstream queues and holds (`slot_terms.forwarded_through`).
    pub(crate) forward_origins: &'a [Vec<Arc<Pool>>],
}

impl PortBinder<'_> {
    fn typed<T: Send + 'static>(&self, port: u32) -> Result<Vec<Arc<EdgeQueue<T>>>> {
        let Some(edges) = self.edges.get(port as usize) else {
            return Err(Error::new(
                ErrorCode::Internal,
                format!("operator {:?} has no port {port}", self.operator),
            ));
        };
        edges
            .iter()
            .map(|e| {
                Arc::clone(e).downcast::<EdgeQueue<T>>().map_err(|_| {
                    Error::new(
                        ErrorCode::Internal,
                        format!("operator {:?}, port {port}: the flow's payload type differs from the port's", self.operator),
                    )
                })
            })
            .collect()
    }

    /// Binds input port `port`.
    pub fn bind_input<T: Clone + Send + 'static>(
        &mut self,
        port: u32,
        input: &mut Input<T>,
    ) -> Result<()> {
        let queue = self.typed::<T>(port)?.into_iter().next();
        let Some(crate::plan::InputBindingRecord {
            mode,
            missing,
            history,
        }) = self.ports.get(port as usize).and_then(|p| p.input)
        else {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "the operator binds port {port} as an input, and the plan has no input record for it: start a plan that `compile` made from this graph"
                ),
            )
            .at(format!("operator {:?}", self.operator)));
        };
        let history_cap = history as usize;
        // Reserved before the first `compute()`, never grown: a failure (a history from a
        // parameter, of a large message type) is an error naming the input, not an abort.
        // Past the host's physical memory it is refused whatever the kernel's overcommit
        // policy would grant (a GPU host granted the 1 TiB this VM refused).
        let mut retained = VecDeque::new();
        crate::cold::checked_bytes(history_cap, size_of::<T>())
            .ok()
            .and_then(|_| retained.try_reserve_exact(history_cap).ok())
            .ok_or_else(|| {
                Error::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "a history of {history_cap} entries of {} bytes each does not fit in memory",
                    size_of::<T>()
                ),
            )
            .at(self
                .locations
                .get(port as usize)
                .copied()
                .unwrap_or("an input"))
            })?;
        let contract = self
            .contracts
            .get(port as usize)
            .and_then(|c| c.first())
            .filter(|_| queue.is_some());
        let deliver = contract.and_then(|c| {
            if c.host_wait {
                Some(OrderingDomain::Host)
            } else {
                c.consumer_stream()
            }
        });
        input.binding = Some(InputBinding {
            bound: Bound::Input,
            plain: mode != InputMode::Latest
                && missing != MissingPolicy::ReuseLast
                && history_cap == 0
                && deliver.is_none(),
            queue,
            activation: Arc::clone(self.activation),
            location: self
                .locations
                .get(port as usize)
                .copied()
                .unwrap_or("an input"),
            deliver,
            port,
            mode,
            missing,
            history: retained,
            history_cap,
            last: None,
            reused_in: u64::MAX,
            last_stamp: Stamp::default(),
        });
        Ok(())
    }

    /// Binds output port `port`.
    pub fn bind_output<T: Send + 'static>(
        &mut self,
        port: u32,
        output: &mut Output<T>,
    ) -> Result<()> {
        let edges: Box<[_]> = self.typed::<T>(port)?.into();
        let i = port as usize;
        let contracts: Vec<EdgeContract> = self.contracts.get(i).cloned().unwrap_or_default();
        // Every flow fused (one, or a fan-out whose consumers all share this stream):
        // commit records no readiness event.
        let fused = (!contracts.is_empty() && contracts.iter().all(|c| c.fused))
            .then_some(self.stream)
            .flatten();
        let pool = self.pools.get(i).cloned().flatten();
        if let Some(p) = &pool {
            p.bind_loan_streams(crate::channel::pool::LoanStreams {
                planned: self.stream,
                fused,
            });
        }
        let forwards = self.ports.get(i).is_some_and(|p| p.forwards.is_some());
        let boundary = self.boundaries.get(i).cloned().flatten();
        if let Some(p) = &boundary {
            p.bind_loan_streams(crate::channel::pool::LoanStreams {
                planned: self.stream,
                fused: None,
            });
        }
        let seats = self
            .seats
            .get(i)
            .into_iter()
            .flatten()
            .map(|(queue, state)| {
                Ok(TopicSeat {
                    queue: Arc::clone(queue).downcast::<EdgeQueue<T>>().map_err(|_| {
                        Error::new(
                            ErrorCode::Internal,
                            format!("operator {:?}, port {port}: the topic's payload type differs from the port's", self.operator),
                        )
                    })?,
                    state: Arc::clone(state),
                })
            })
            .collect::<Result<Box<[_]>>>()?;
        let needs_device_work = contracts.iter().any(|c| c.consumer_stream().is_some());
        let requirements: Box<[_]> = self.requirements.get(i).cloned().unwrap_or_default().into();
        let forward_origins: Box<[_]> = self
            .forward_origins
            .get(i)
            .cloned()
            .unwrap_or_default()
            .into();
        output.binding = Some(OutputBinding {
            bound: Bound::Output,
            rare_before_room: !forward_origins.is_empty()
                || !requirements.is_empty()
                || !seats.is_empty(),
            rare_after_room: !seats.is_empty() || boundary.is_some() || needs_device_work,
            port,
            contracts: if needs_device_work {
                contracts.into()
            } else {
                Box::new([])
            },
            location: self.locations.get(i).copied().unwrap_or("an output"),
            any_block: edges.iter().any(|e| e.policy == QueuePolicy::Block),
            edges,
            requirements,
            pool,
            refuse_forwarded: std::any::TypeId::of::<T>() == std::any::TypeId::of::<Tensor>()
                && !forwards,
            activation: Arc::clone(self.activation),
            next_frame: 0,
            first_served: 0,
            seats,
            boundary,
            stream: self.stream,
            forward_origins,
        });
        Ok(())
    }
}
