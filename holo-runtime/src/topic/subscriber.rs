//! [`ChannelSubscriber`]: a standalone client that receives an exported topic.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::{SeatState, Side, TopicRegistry, TopicState, seat};
use crate::channel::queue::{EdgeQueue, Endpoint, ErasedEdge, Stamp};
use crate::device::StreamOrQueue;
use crate::plan::{TopicContractRecord, TopicDirection};
use crate::session::FrameInfo;
use crate::session::idle::{Idle, IdleWait};
use crate::spec::TensorInputSpec;
use crate::tensor::{DeviceArray, Tensor};
use crate::{Error, ErrorCode, Result, RunSession};

/// Options of one subscriber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriberOptions {
    /// The tensor contract the subscriber relies on: every field it states must be one
    /// the topic declares, with the same value, or the attach is refused
    /// (`ProtocolError`). `None`: any contract.
    pub expected: Option<TensorInputSpec>,
    /// How long a [`receive`](ChannelSubscriber::receive) that finds nothing keeps
    /// polling — spinning, then re-checking with a yield every few microseconds, as an
    /// idle partition thread does — before it parks until the producer's push wakes it.
    /// Default [`SessionOptions::DEFAULT_IDLE_SPIN`](crate::SessionOptions::DEFAULT_IDLE_SPIN),
    /// as a partition thread.
    pub idle_spin: Duration,
}

impl Default for SubscriberOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl SubscriberOptions {
    /// Any contract, the default idle spin.
    pub const DEFAULT: Self = Self {
        expected: None,
        idle_spin: crate::SessionOptions::DEFAULT_IDLE_SPIN,
    };

    /// These options expecting `contract`.
    #[must_use]
    pub const fn with_expected(mut self, contract: TensorInputSpec) -> Self {
        self.expected = Some(contract);
        self
    }

    /// These options with `idle_spin`.
    #[must_use]
    pub const fn with_idle_spin(mut self, idle_spin: Duration) -> Self {
        self.idle_spin = idle_spin;
        self
    }
}

/// A standalone client outside any graph that receives an exported topic of a running
/// session: every value the exporting output emits from the moment it attaches, in emit
/// order, through a queue of its own (one of the topic's declared subscriber seats).
///
/// `T` is the port's payload: [`Tensor`] (the default) or a message type; a subscriber of
/// another type is refused at attach.
///
/// A received tensor is read-only and arrives unordered with respect to any stream:
/// [`receive_on`](Self::receive_on) hands it to the caller's stream as a
/// [`DeviceArray`] (a stream wait, no host block; the array's drop records the stream's
/// release); a host reader calls [`Tensor::synchronize_for_host`] first (at once for
/// host-written bytes). A standalone client keeps the duty the seed gives it: the stream
/// it passes to `receive_on` stays alive until the array has dropped.
///
/// The topic's declared subscribers each count one received tensor held at a time in
/// the producer's pool: a subscriber that keeps more starves the producer
/// (`ResourceExhausted` on its `allocate_tensor`). Dropping the subscriber detaches it:
/// its seat is free again and the slots its queue held go back to the pool.
///
/// ```
/// use std::time::Duration;
///
/// use holo_runtime::{
///     ChannelSubscriber, CompileOptions, DType, EmitOptions, ExecutionContext, Graph,
///     Operator, Output, ParamSet, Result, RunSession, SessionOptions, SubscriberOptions,
///     Tensor, TensorLoanRequest, TopicOptions, compile, operator,
/// };
///
/// #[operator]
/// struct Camera {
///     #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 64)]
///     frames: Output<Tensor>,
/// }
///
/// impl Operator for Camera {
///     fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
///         let loan = self
///             .frames
///             .allocate_tensor(TensorLoanRequest { shape: &[64], dtype: DType::U8 })?;
///         let frame = loan.write_host_and_commit(|b| b.fill(7))?;
///         self.frames.emit(frame, EmitOptions::default())
///     }
/// }
///
/// let mut graph = Graph::new();
/// let camera = graph.add_operator("camera", Camera { frames: Default::default() }, ParamSet::defaults()?)?;
/// graph.export_topic(camera.frames, "camera/frames", TopicOptions::DEFAULT.with_depth(2));
/// let plan = compile(&graph, CompileOptions::default())?;
/// // Stepped here, so that the camera's activation comes after the attach; a threaded
/// // session (`RunSession::start`) takes clients the same way.
/// let mut session = RunSession::start_stepped(graph, &plan, SessionOptions::default())?;
/// let mut frames: ChannelSubscriber =
///     ChannelSubscriber::attach(&session, "camera/frames", SubscriberOptions::DEFAULT)?;
/// session.step()?;
/// let (frame, info) = frames
///     .receive_with_info(Duration::from_secs(5))?
///     .expect("the camera's first frame");
/// assert_eq!((frame.data()?, info.frame), (&[7; 64][..], 0));
/// drop((frame, frames));
/// session.join()?;
/// # Ok::<(), holo_runtime::Error>(())
/// ```
pub struct ChannelSubscriber<T = Tensor> {
    topic: Arc<TopicState>,
    registry: Arc<TopicRegistry>,
    seat: usize,
    queue: Arc<EdgeQueue<T>>,
    /// The seat's state, its queue erased (to empty it on detach) and its end.
    state: Arc<SeatState>,
    erased: Arc<dyn ErasedEdge>,
    endpoint: Arc<CachePadded<Endpoint>>,
    idle_spin: Duration,
    last: Stamp,
}

impl<T> fmt::Debug for ChannelSubscriber<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelSubscriber")
            .field("topic", &self.topic.record.name)
            .field("seat", &self.seat)
            .field("pending", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl<T: Clone + Send + 'static> ChannelSubscriber<T> {
    /// Attaches to the exported topic `topic` of `session`, taking one of its free
    /// subscriber seats. Refused, with nothing attached and nothing of the topic changed:
    /// `NotFound` for a topic the session does not have; `InvalidArgument` for an
    /// imported topic or a payload other than the port's; `ProtocolError` when
    /// `options.expected` states a contract the topic does not declare; `ResourceExhausted`
    /// when every declared subscriber is attached; `Cancelled` once the session stops.
    pub fn attach(session: &RunSession, topic: &str, options: SubscriberOptions) -> Result<Self> {
        Self::attach_to(session.topic_registry(), topic, options)
    }

    /// [`attach`](Self::attach) to a session's topic registry (the cross-process server
    /// attaches each remote subscriber's seat so).
    pub(crate) fn attach_to(
        registry: &Arc<TopicRegistry>,
        topic: &str,
        options: SubscriberOptions,
    ) -> Result<Self> {
        let sub = Self::claim(registry, topic, options)?;
        sub.activate();
        Ok(sub)
    }

    /// Takes a free seat of `topic` without attaching it yet: the seat counts as taken
    /// (no other client gets it) but the exporting output pushes nothing into it until
    /// [`activate`](Self::activate) — a subscriber in another process is not ready to
    /// receive before its handshake ends, and a `Block` seat filling meanwhile would hold
    /// the producer back.
    pub(crate) fn claim(
        registry: &Arc<TopicRegistry>,
        topic: &str,
        options: SubscriberOptions,
    ) -> Result<Self> {
        let state = registry.find(topic)?;
        state.expect_direction(TopicDirection::Export)?;
        let Side::Export(seats) = &state.side else {
            return Err(Error::new(ErrorCode::Internal, "an export without seats"));
        };
        // Every check before a seat is claimed: a refused attach changes nothing.
        let first = seats
            .first()
            .ok_or_else(|| Error::new(ErrorCode::Internal, "an export without seats"))?;
        state.typed::<T>(&first.typed)?;
        state.check_expected(options.expected.as_ref())?;
        let Some((i, s)) = seats.iter().enumerate().find(|(_, s)| {
            s.state
                .0
                .compare_exchange(
                    seat::FREE,
                    seat::CLAIMED,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        }) else {
            return Err(Error::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "every one of the topic's {} declared subscribers is attached; declare more with `TopicOptions::with_subscribers`",
                    seats.len()
                ),
            )
            .at(state.location));
        };
        let queue = match state.typed::<T>(&s.typed) {
            Ok(q) => q,
            Err(e) => {
                s.state.0.store(seat::FREE, Ordering::Release);
                return Err(e);
            }
        };
        // Entries left by a producer's push that raced the previous subscriber's detach.
        s.erased.clear();
        Ok(Self {
            topic: Arc::clone(state),
            registry: Arc::clone(registry),
            seat: i,
            queue,
            state: Arc::clone(&s.state),
            erased: Arc::clone(&s.erased),
            endpoint: Arc::clone(&s.endpoint),
            idle_spin: options.idle_spin,
            last: Stamp::default(),
        })
    }

    /// The oldest queued value, or `None` when the queue is empty; `Cancelled` once the
    /// session stops (what was queued is dropped then).
    pub fn try_receive(&mut self) -> Result<Option<T>> {
        if let Some(s) = self.queue.pop() {
            self.last = s.stamp;
            return Ok(Some(s.value));
        }
        if self.topic.closed.load(Ordering::Acquire) || self.registry.stopping() {
            // A value pushed before the stop is still delivered.
            if let Some(s) = self.queue.pop() {
                self.last = s.stamp;
                return Ok(Some(s.value));
            }
            return Err(self.topic.cancelled());
        }
        Ok(None)
    }

    /// The oldest queued value, waiting up to `timeout` for one (`Duration::MAX`: no
    /// deadline): `None` when none arrived in time; `Cancelled` once the session stops.
    /// The wait polls for [`SubscriberOptions::idle_spin`] as an idle partition thread
    /// does (spinning, then re-checking with a yield every few microseconds), then parks
    /// until the producer's push wakes it.
    pub fn receive(&mut self, timeout: Duration) -> Result<Option<T>> {
        // A value already queued is taken without reading the clock.
        if let Some(v) = self.try_receive()? {
            return Ok(Some(v));
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut idle = IdleWait::new();
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            if idle.snooze(self.idle_spin) == Idle::Park {
                // Parked, bounded so that a stop (which pushes nothing) is seen.
                let cap = Instant::now() + Duration::from_millis(50);
                let wake = deadline.map_or(cap, |d| d.min(cap));
                let queue = &self.queue;
                self.endpoint.park_client(|| queue.len() > 0, Some(wake));
                idle.reset();
            }
            if let Some(v) = self.try_receive()? {
                return Ok(Some(v));
            }
        }
    }

    /// [`receive`](Self::receive), with what travelled with the value: its frame id, its
    /// capture time and when it was published.
    pub fn receive_with_info(&mut self, timeout: Duration) -> Result<Option<(T, FrameInfo)>> {
        Ok(self.receive(timeout)?.map(|v| (v, self.last_info())))
    }

    /// What travelled with the value received last.
    pub fn last_info(&self) -> FrameInfo {
        let clock = &self.registry.clock;
        FrameInfo {
            frame: self.last.frame,
            capture_time: (self.last.capture_ns != crate::session::context::NO_CAPTURE)
                .then(|| clock.instant(self.last.capture_ns)),
            publish_time: clock.instant(self.last.publish_ns),
        }
    }

    /// Attaches a claimed seat: the exporting output pushes into it from now on.
    pub(crate) fn activate(&self) {
        self.state.0.store(seat::ATTACHED, Ordering::SeqCst);
    }

    /// The subscriber's seat, `0..subscribers`.
    pub(crate) fn seat(&self) -> usize {
        self.seat
    }

    /// The stamp of the value received last.
    pub(crate) fn last_stamp(&self) -> Stamp {
        self.last
    }

    /// The seat's state (its remote hook, for a seat served to another process).
    pub(crate) fn seat_state(&self) -> &Arc<SeatState> {
        &self.state
    }

    /// Waits up to `timeout` until the queue holds a value (taking none): spins briefly,
    /// then parks until the producer's push wakes it.
    pub(crate) fn wait_pending(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for _ in 0..64 {
            if self.queue.len() > 0 {
                return;
            }
            std::hint::spin_loop();
        }
        let queue = &self.queue;
        self.endpoint
            .park_client(|| queue.len() > 0, Some(deadline));
    }

    /// Values waiting in this subscriber's queue.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.topic.record.name
    }

    /// The topic's contract.
    pub fn contract(&self) -> &TopicContractRecord {
        &self.topic.record.contract
    }
}

impl ChannelSubscriber<Tensor> {
    /// [`receive`](Self::receive), handing the tensor to the caller's `stream`
    /// ([`Tensor::device_array`]): the stream waits on the producer's readiness event
    /// (enqueued here; the host does not block) and is registered as a release stream of
    /// the tensor's slot; when the returned array drops it records the stream's release
    /// event, so the slot is not reused before the work the caller enqueued on `stream`
    /// has run. Host bytes need no ordering and come as they are.
    ///
    /// The caller keeps `stream` alive until the array has dropped. A stream of another
    /// context is `InvalidArgument`, one past the slot's release-stream cap
    /// `ResourceExhausted`; the tensor is dropped then (its frame is lost).
    pub fn receive_on(
        &mut self,
        stream: impl Into<StreamOrQueue>,
        timeout: Duration,
    ) -> Result<Option<DeviceArray<'static>>> {
        let stream = stream.into();
        let Some(t) = self.receive(timeout)? else {
            return Ok(None);
        };
        t.into_device_array(stream).map(Some)
    }
}

impl<T> Drop for ChannelSubscriber<T> {
    /// Detaches: the seat is free again, and what its queue held is dropped (the slots go
    /// back to their pool).
    fn drop(&mut self) {
        self.state.0.store(seat::DETACHING, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.erased.clear();
        self.state.0.store(seat::FREE, Ordering::Release);
    }
}
