//! [`ChannelPublisher`]: a standalone client that publishes into an imported topic.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{ImportSide, Side, TopicRegistry, TopicState, client_stamp, meets};
use crate::channel::queue::EdgeQueue;
use crate::device::{DeviceBackend, DevicePtr, StreamHandle, StreamOrQueue};
use crate::graph::QueuePolicy;
use crate::plan::{TopicContractRecord, TopicDirection};
use crate::session::{EmitOptions, Refused};
use crate::spec::TensorInputSpec;
use crate::tensor::{
    CommittedTensor, DeviceWriteGuard, HostWriteGuard, Tensor, TensorLoanRequest, TensorOutputLoan,
};
use crate::{Error, ErrorCode, Result, RunSession};

/// Options of one publisher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublisherOptions {
    /// The tensor contract the publisher will publish: every field it states must be one
    /// the topic declares, with the same value, or the attach is refused
    /// (`ProtocolError`). `None`: checked per tensor on publish only.
    pub expected: Option<TensorInputSpec>,
}

impl PublisherOptions {
    /// No stated contract.
    pub const DEFAULT: Self = Self { expected: None };

    /// These options stating `contract`.
    #[must_use]
    pub const fn with_expected(mut self, contract: TensorInputSpec) -> Self {
        self.expected = Some(contract);
        self
    }
}

/// A standalone client outside any graph that publishes into an imported topic of a
/// running session: what it publishes is queued for the importing operator's input, in
/// publish order, as a flow's producer would queue it.
///
/// Tensors come from the topic's own pool, which the plan sized for the declared
/// publishers' loans: [`allocate_tensor`](Self::allocate_tensor) borrows a slot or fails
/// with `ResourceExhausted` at once; write it on the host
/// ([`PublisherLoan::write_host`]) or on the publisher's own stream
/// ([`PublisherLoan::write`]: commit records the readiness event there, and the importing
/// operator's stream waits on it in `receive`), then [`publish`](Self::publish). A
/// tensor of another pool is refused (`ProtocolError`: that pool is not sized for the
/// topic's queue), and so is one that does not meet the topic's contract.
///
/// A full queue under `QueuePolicy::Block` refuses the value with `Backpressured`
/// ([`try_publish`](Self::try_publish) hands it back); under `DropOldest` the oldest
/// queued value is dropped. Nothing waits.
///
/// A standalone client keeps the seed's duty for the stream it writes on: it stays alive
/// until the importer has received what was written on it.
pub struct ChannelPublisher<T = Tensor> {
    topic: Arc<TopicState>,
    registry: Arc<TopicRegistry>,
    queue: Arc<EdgeQueue<T>>,
    next_frame: u64,
}

impl<T> fmt::Debug for ChannelPublisher<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelPublisher")
            .field("topic", &self.topic.record.name)
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

fn import_side(topic: &TopicState) -> Result<&ImportSide> {
    match &topic.side {
        Side::Import(i) => Ok(i),
        Side::Export(_) => Err(Error::new(
            ErrorCode::Internal,
            "an import without its queue",
        )),
    }
}

impl<T: Clone + Send + 'static> ChannelPublisher<T> {
    /// Attaches to the imported topic `topic` of `session`, as one of its declared
    /// publishers. Refused, with nothing attached and nothing of the topic changed:
    /// `NotFound` for a topic the session does not have; `InvalidArgument` for an
    /// exported topic or a payload other than the port's; `ProtocolError` when
    /// `options.expected` states a contract the topic does not declare;
    /// `ResourceExhausted` when every declared publisher is attached; `Cancelled` once
    /// the session stops.
    pub fn attach(session: &RunSession, topic: &str, options: PublisherOptions) -> Result<Self> {
        Self::attach_to(session.topic_registry(), topic, options)
    }

    /// [`attach`](Self::attach) through the session's topic registry (a seat of a
    /// publisher in another process).
    pub(crate) fn attach_to(
        registry: &Arc<TopicRegistry>,
        topic: &str,
        options: PublisherOptions,
    ) -> Result<Self> {
        let state = registry.find(topic)?;
        state.expect_direction(TopicDirection::Import)?;
        let side = import_side(state)?;
        let queue = state.typed::<T>(&side.typed)?;
        state.check_expected(options.expected.as_ref())?;
        let declared = state.record.publishers;
        side.attached
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < declared).then_some(n + 1)
            })
            .map_err(|_| {
                Error::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "every one of the topic's {declared} declared publishers is attached; declare more with `TopicOptions::with_publishers`"
                    ),
                )
                .at(state.location)
            })?;
        Ok(Self {
            topic: Arc::clone(state),
            registry: Arc::clone(registry),
            queue,
            next_frame: 0,
        })
    }

    /// Publishes `value` into the importing input's queue (see
    /// [`try_publish`](Self::try_publish)); a refused value is dropped (a tensor's slot
    /// goes back to its pool).
    pub fn publish(&mut self, value: impl Into<T>, options: EmitOptions) -> Result<()> {
        self.try_publish(value, options).map_err(|r| r.error)
    }

    /// Publishes `value`, handing it back when nothing was published: `Backpressured`
    /// (a full `Block` queue), `ProtocolError` (a tensor that misses the topic's contract,
    /// or comes from a pool other than the topic's), `ResourceExhausted` (the importer's
    /// stream past the slot's release-stream cap), `Cancelled` (the session stopped).
    ///
    /// `options.frame` sets the frame id (default: this publisher's own count, 0, 1, 2,
    /// …) and `options.capture_time` the capture time (default: now).
    pub fn try_publish(
        &mut self,
        value: impl Into<T>,
        options: EmitOptions,
    ) -> std::result::Result<(), Refused<T>> {
        let value = value.into();
        let (topic, registry) = (&self.topic, &self.registry);
        let side = match import_side(topic) {
            Ok(s) => s,
            Err(e) => return Err(Refused { value, error: e }),
        };
        let _held = side
            .publish
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if topic.closed.load(Ordering::Acquire) || registry.stopping() {
            return Err(Refused {
                value,
                error: topic.cancelled(),
            });
        }
        if let Some(t) = (&value as &dyn Any).downcast_ref::<Tensor>() {
            if let Some(origin) = t.foreign_pool(side.pool.as_ref()) {
                return Err(Refused {
                    value,
                    error: Error::new(
                        ErrorCode::ProtocolError,
                        format!(
                            "the tensor comes from the runtime pool of {origin}, which is not sized for this topic's queue: allocate it with the publisher's allocate_tensor; nothing was published"
                        ),
                    )
                    .at(topic.location),
                });
            }
            if !meets(t, &topic.record.contract) {
                return Err(Refused {
                    value,
                    error: Error::new(
                        ErrorCode::ProtocolError,
                        "the tensor does not meet the topic's contract (memory kind, dtype, rank or bytes); nothing was published",
                    )
                    .at(topic.location),
                });
            }
        }
        if self.queue.policy == QueuePolicy::Block && self.queue.is_full() {
            crate::channel::queue::bump(&self.queue.counters.backpressured);
            return Err(Refused {
                value,
                error: Error::new(
                    ErrorCode::Backpressured,
                    "the importing input's queue is full; nothing was published",
                )
                .at(topic.location),
            });
        }
        // Before it is queued, the importer's stream is registered as a release stream
        // (no device call); it waits on the readiness event in its own `receive`.
        if let Some(consumer) = side.consumer
            && let Some(t) = (&value as &dyn Any).downcast_ref::<Tensor>()
            && let Err(e) = t.register_release_stream(consumer)
        {
            return Err(Refused { value, error: e });
        }
        let stamp = client_stamp(&registry.clock, options, &mut self.next_frame);
        self.queue.push(value, stamp);
        Ok(())
    }

    /// Whether a publish now would find room (a `DropOldest` queue always has room).
    pub fn has_room(&self) -> bool {
        self.queue.policy != QueuePolicy::Block || !self.queue.is_full()
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

impl ChannelPublisher<Tensor> {
    /// Borrows a slot of the topic's pool, or fails at once: `ResourceExhausted` when
    /// every slot is queued, held, loaned or retiring (there is no waiting variant),
    /// `InvalidArgument` when the request exceeds the topic's bound or differs from its
    /// dtype or rank, `Cancelled` once the session stops.
    pub fn allocate_tensor(&mut self, request: TensorLoanRequest<'_>) -> Result<PublisherLoan> {
        let side = import_side(&self.topic)?;
        if self.topic.closed.load(Ordering::Acquire) || self.registry.stopping() {
            return Err(self.topic.cancelled());
        }
        let Some(pool) = &side.pool else {
            return Err(
                Error::new(ErrorCode::Internal, "a tensor topic without its pool")
                    .at(self.topic.location),
            );
        };
        // Publishers' loans are counted exactly: one borrows at a time.
        let _held = side
            .publish
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(PublisherLoan(TensorOutputLoan::new(pool, request)?))
    }
}

impl<T> Drop for ChannelPublisher<T> {
    /// Detaches: another publisher may attach. What was published stays queued.
    fn drop(&mut self) {
        if let Side::Import(i) = &self.topic.side {
            i.attached.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A slot of an imported topic's pool, borrowed by a [`ChannelPublisher`], not yet
/// written. Dropping it returns the slot.
#[must_use = "a loan does nothing until it is written, committed and published"]
#[derive(Debug)]
pub struct PublisherLoan(TensorOutputLoan);

impl PublisherLoan {
    /// Starts the device write phase on `stream`, the publisher's own stream or queue (a
    /// stream of another context is `InvalidArgument`): enqueue the writes there
    /// ([`PublisherWriteGuard::stream`] is its handle for the device backend's calls),
    /// then commit, which records the readiness event on it (the importing operator's
    /// stream waits on it). A pageable host pool is `NotSupported` (use
    /// [`write_host`](Self::write_host)).
    pub fn write(self, stream: impl Into<StreamOrQueue>) -> Result<PublisherWriteGuard> {
        let guard = self.0.write_on_caller_stream(stream.into())?;
        Ok(PublisherWriteGuard {
            backend: guard.backend(),
            guard: Some(guard),
        })
    }

    /// Writes the slot on `stream` with `fill` (which enqueues work on the stream's
    /// handle) and commits, recording the readiness event.
    pub fn write_and_commit(
        self,
        stream: impl Into<StreamOrQueue>,
        fill: impl FnOnce(&dyn DeviceBackend, DevicePtr, usize, StreamHandle) -> Result<()>,
    ) -> Result<CommittedTensor> {
        let guard = self.write(stream)?;
        fill(
            guard.backend.as_ref(),
            guard.device_ptr(),
            guard.byte_size(),
            guard.stream(),
        )?;
        guard.commit()
    }

    /// Starts the host write phase (host-accessible memory only).
    pub fn write_host(self) -> Result<HostWriteGuard> {
        self.0.write_host()
    }

    /// Writes the slot on the host with `fill` and commits: the bytes are complete when
    /// this returns, so no readiness fence is recorded.
    pub fn write_host_and_commit(self, fill: impl FnOnce(&mut [u8])) -> Result<CommittedTensor> {
        self.0.write_host_and_commit(fill)
    }

    /// The requested shape.
    pub fn shape(&self) -> &[u64] {
        self.0.shape()
    }

    /// The requested byte size.
    pub fn byte_size(&self) -> usize {
        self.0.byte_size()
    }
}

/// The device write phase of a [`PublisherLoan`], on the publisher's own stream, which
/// the pool's backend adopted for the length of the write. Enqueue the writes on
/// [`stream`](Self::stream), then [`commit`](Self::commit). Dropped uncommitted, the
/// writes are abandoned and the slot returns to its pool.
#[must_use = "uncommitted writes are abandoned when the guard drops"]
pub struct PublisherWriteGuard {
    guard: Option<DeviceWriteGuard>,
    backend: Arc<dyn DeviceBackend>,
}

impl PublisherWriteGuard {
    fn inner(&self) -> &DeviceWriteGuard {
        match &self.guard {
            Some(g) => g,
            None => unreachable!("the guard is taken only by commit, which consumes self"),
        }
    }

    /// The slot's address.
    pub fn device_ptr(&self) -> DevicePtr {
        self.inner().device_ptr()
    }

    /// The requested byte size.
    pub fn byte_size(&self) -> usize {
        self.inner().byte_size()
    }

    /// The publisher's stream, as the device backend's calls take it.
    pub fn stream(&self) -> StreamHandle {
        self.inner().stream()
    }

    /// The pool's device backend, to enqueue fills and copies.
    pub fn backend(&self) -> Arc<dyn DeviceBackend> {
        Arc::clone(&self.backend)
    }

    /// Ends the write phase: records the readiness event on the publisher's stream — one
    /// event record, no host wait — and ends the stream's adoption.
    pub fn commit(mut self) -> Result<CommittedTensor> {
        match self.guard.take() {
            Some(g) => {
                let stream = g.stream();
                let committed = g.commit();
                self.backend.release_adopted_stream(stream);
                committed
            }
            None => Err(Error::new(
                ErrorCode::Internal,
                "a write guard committed twice",
            )),
        }
    }
}

impl Drop for PublisherWriteGuard {
    fn drop(&mut self) {
        if let Some(g) = self.guard.take() {
            let stream = g.stream();
            drop(g);
            self.backend.release_adopted_stream(stream);
        }
    }
}

impl fmt::Debug for PublisherWriteGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublisherWriteGuard")
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}
