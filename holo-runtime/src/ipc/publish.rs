//! Publishers in other processes: a session serves each topic it imports across processes
//! ([`ImportServer`]), and a [`ProcessPublisher`] in another process attaches by name.
//!
//! The imported topic's pool is a sealed memfd the publisher maps read-write. Each
//! attached publisher takes one of the topic's publisher seats — an in-process
//! [`ChannelPublisher`], so the importing input's queue, policy and contract checks are a
//! local publisher's — and is **granted** slots: the seat loans `loans_per_publisher`
//! slots of the pool and sends each as an iceoryx2 descriptor. The publisher writes a
//! granted slot and sends it back as a **commit** descriptor (shape, dtype, frame id); the
//! seat gives its loan that shape, commits it and publishes it into the queue — or keeps
//! it, in order, while a `Block` queue is full — and grants another slot. A publisher that
//! dies or detaches gives back every slot it was granted and did not commit; what it
//! committed is still published.
//!
//! Host memory: the publisher's bytes are complete when it commits. Pinned and CUDA device
//! memory (the pool is a registered memfd or an exported virtual-memory allocation, mapped
//! once by the publisher, which opens the session's GPU by UUID and makes its own stream):
//! each grant carries the fence value of its use, and the slot's fence word is reset to 0.
//! A publisher that wrote on the host stores the value itself before it commits; one that
//! wrote on its stream enqueues `cuStreamWriteValue64_v2` of the value there. The seat's
//! stream waits for it (`cuStreamWaitValue64_v2`) and records the slot's readiness after
//! the wait, so no host thread waits on either side. A publisher that dies before its
//! stream wrote a fence has that fence **abandoned**: the seat writes
//! [`ABANDONED`](wire::fence::ABANDONED) into the word (no stream waits forever) and counts
//! the frame (`RunSession::ipc_abandoned_frames`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iceoryx2::port::listener::Listener;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;

use super::catalog::{CatalogTopic, EndpointCatalog, record_wire};
use super::export::{
    LIVENESS_PERIOD, Node, Notifier, Publisher, READY_TIMEOUT, ServedDevice, Serving, bind_socket,
    control_segment, greet, iox_error, name_hash, node, payload_segment, refuse, seat_services,
    service_prefix, spawn_listener, welcome_payload,
};
use super::import::{Mapped, MirrorDevice};
use super::segment::Segment;
use super::wire::{
    self, ACTIVE, BYE, ControlLayout, MAGIC, READY, SlotDescriptor, Welcome, WireContract, fence,
};
use crate::channel::pool::{Pool, checked_byte_size};
use crate::device::{DeviceBackend, DevicePtr, StreamHandle};
use crate::plan::TopicRecord;
use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::tensor::{CommittedTensor, TensorOutputLoan};
use crate::topic::{ChannelPublisher, PublisherOptions, TopicRegistry};
use crate::{EmitOptions, Error, ErrorCode, MemoryKind, Result, Tensor};

type Service = super::service::Service;

/// The iceoryx2 service names of publisher seat `seat`: its grants (session → publisher)
/// and its commits (publisher → session).
fn seat_names(prefix: &str, seat: u32) -> Result<(ServiceName, ServiceName)> {
    let name = |what: &str| {
        ServiceName::new(&format!("{prefix}/p{seat}/{what}")).map_err(|e| {
            Error::invalid_argument(format!("{prefix}/p{seat}/{what} is no service name: {e:?}"))
        })
    };
    Ok((name("grant")?, name("commit")?))
}

/// What the listener and every publisher seat of one imported topic share.
struct Taken {
    registry: Arc<TopicRegistry>,
    topic: String,
    service: String,
    contract: WireContract,
    pool: Arc<Pool>,
    /// A pinned or device pool's memory, fences and stream (dropped before the control
    /// segment it registered).
    device: Option<ImportDevice>,
    payload: Arc<Segment>,
    control: Arc<Segment>,
    incarnation: u64,
    pool_id: u64,
    publishers: u32,
    loans: usize,
    next_seat: AtomicU32,
    /// Frames whose publisher died before its stream wrote their fence.
    abandoned: AtomicU64,
    /// Frames committed by publishers and not yet in the importing input's queue (a full
    /// `Block` queue holds them back; `RunSession::wait_idle`).
    outstanding: AtomicUsize,
    serving: Serving,
}

/// What a topic imported in pinned or CUDA device memory adds: the pool's exported memory
/// and the control segment registered with the device (`ServedDevice`), and the stream
/// that waits for each publisher's fence before the slot's readiness is recorded on it.
struct ImportDevice {
    served: ServedDevice,
    stream: StreamHandle,
}

impl Drop for ImportDevice {
    /// After the seats ended (each settled its fences): the stream's waits ran, then it
    /// goes.
    fn drop(&mut self) {
        let _ = self.served.backend.synchronize_stream(self.stream);
        let _ = self.served.backend.destroy_stream(self.stream);
    }
}

/// One topic a session imports from other processes; [`stop`](Self::stop) ends every
/// thread and gives back every granted slot.
pub(crate) struct ImportServer {
    taken: Arc<Taken>,
    listener: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl ImportServer {
    /// Binds the topic's socket in `namespace`; serves nothing until
    /// [`spawn`](Self::spawn). `InvalidArgument` when another process serves the topic
    /// there.
    pub(crate) fn bind(
        registry: &Arc<TopicRegistry>,
        record: &TopicRecord,
        pool: &Arc<Pool>,
        namespace: &str,
    ) -> Result<ImportServer> {
        let at = || format!("topic {:?}", record.name);
        let payload = payload_segment(pool, &record.name)?;
        // One fence word per slot, no release words (the session's own consumers release).
        let layout = ControlLayout {
            slots: pool.slot_count as usize,
            seats: 0,
        };
        let (control, incarnation) = control_segment(&record.name, &layout)?;
        let device = match ServedDevice::new(pool, &control).map_err(|e| e.at(at()))? {
            Some(served) => {
                let stream = served.backend.create_stream().map_err(|e| e.at(at()))?;
                Some(ImportDevice { served, stream })
            }
            None => None,
        };
        // A publisher's stream-written frame whose fence the seat abandoned (the publisher
        // died first) says so to its holder (`Tensor::fence_abandoned`); the pool keeps the
        // control segment mapped for as long as it lives.
        if device.is_some()
            && let Some(first) = control.word(ControlLayout::fence(0))
        {
            let keep: Arc<dyn std::any::Any + Send + Sync> = control.clone();
            pool.set_fence_words(crate::channel::pool::FenceWords {
                first: std::ptr::NonNull::from(first),
                abandoned: fence::ABANDONED,
                keep: Some(keep),
            })
            .map_err(|e| e.at(at()))?;
        }
        let socket = bind_socket(namespace, &record.name)?;
        Ok(ImportServer {
            taken: Arc::new(Taken {
                registry: Arc::clone(registry),
                topic: record.name.clone(),
                service: service_prefix(namespace, &record.name, incarnation),
                contract: record_wire(record)?,
                pool: Arc::clone(pool),
                pool_id: name_hash(&pool.name),
                device,
                payload,
                control,
                incarnation,
                publishers: record.publishers,
                loans: record.loans_per_publisher.max(1) as usize,
                next_seat: AtomicU32::new(0),
                abandoned: AtomicU64::new(0),
                outstanding: AtomicUsize::new(0),
                serving: Serving::default(),
            }),
            listener: Some(socket),
            thread: None,
        })
    }

    /// Starts the listener thread.
    pub(crate) fn spawn(&mut self) -> Result<()> {
        let Some(socket) = self.listener.take() else {
            return Ok(());
        };
        let taken = Arc::clone(&self.taken);
        self.thread = Some(spawn_listener(&self.taken.topic, move || {
            let t = Arc::clone(&taken);
            taken.serving.listen(&taken.topic, &socket, move |conn| {
                if let Ok(Some(seat)) = handshake(&t, conn) {
                    seat.run(&t);
                }
            });
        })?);
        Ok(())
    }

    /// Stops serving: every seat says `BYE`, gives back its granted slots, settles the
    /// fences of what it committed and ends.
    pub(crate) fn stop(&mut self) {
        self.taken.serving.stop(self.thread.take());
        self.listener = None;
    }

    /// Frames whose publisher died before its stream wrote their fence (their bytes may
    /// be incomplete).
    pub(crate) fn abandoned_frames(&self) -> u64 {
        self.taken.abandoned.load(Ordering::Relaxed)
    }

    /// The topic's name.
    pub(crate) fn topic(&self) -> &str {
        &self.taken.topic
    }

    /// Frames committed by publishers in other processes and not yet queued for the
    /// importing input.
    pub(crate) fn outstanding(&self) -> usize {
        self.taken.outstanding.load(Ordering::Acquire)
    }
}

impl Drop for ImportServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The handshake: the publisher's hello, its checks, a publisher seat, the welcome with
/// the pool and control segments. `Ok(None)`: refused (and told why).
fn handshake(taken: &Arc<Taken>, conn: OwnedFd) -> Result<Option<PublisherSeat>> {
    let Some(pidfd) = greet(
        &conn,
        &taken.topic,
        &taken.contract,
        ("publisher", "session"),
        &taken.serving,
    )?
    else {
        return Ok(None);
    };
    let publisher = match ChannelPublisher::<Tensor>::attach_to(
        &taken.registry,
        &taken.topic,
        PublisherOptions::DEFAULT,
    ) {
        Ok(p) => p,
        Err(e) => {
            refuse(&conn, e.code(), e.message());
            return Ok(None);
        }
    };
    let seat = taken.next_seat.fetch_add(1, Ordering::Relaxed);
    let mut w: Welcome = wire::zeroed();
    w.magic = MAGIC;
    w.seat = seat;
    w.incarnation = taken.incarnation;
    w.pool = taken.pool_id;
    w.slot_count = taken.pool.slot_count;
    w.seats = taken.publishers;
    w.per_slot_bytes = taken.pool.per_slot_bytes() as u64;
    w.control_len = taken.control.len() as u64;
    w.memory_kind = wire::kind_index(taken.pool.kind);
    let payload = welcome_payload(
        &mut w,
        taken.device.as_ref().map(|d| &d.served),
        &taken.payload,
    );
    wire::send(conn.as_fd(), &w, &[payload, taken.control.fd()])?;
    Ok(Some(PublisherSeat {
        seat,
        publisher,
        conn,
        pidfd,
        unobserved: Unobserved::with_capacity(taken.pool.slot_count as usize),
    }))
}

/// One attached publisher's seat.
struct PublisherSeat {
    seat: u32,
    publisher: ChannelPublisher<Tensor>,
    conn: OwnedFd,
    pidfd: OwnedFd,
    /// Stream-fenced commits whose fence word did not yet show their value.
    unobserved: Unobserved,
}

/// Stream-fenced commits whose fence word did not yet show their value, `(slot, value)`,
/// in a list sized once to the pool's slot count that never grows (no allocation per
/// frame). At most one entry a slot is live: a slot granted again (here or to another
/// seat) carries a new value, and its earlier entry is stale. Stale entries go at each
/// `retain` — and, when the list is full, before a push: the seat observes once per
/// round of commits, and a round behind (a loaded machine) could otherwise hold a slot's
/// stale entry beside its new one, one more than the slot count (the allocation-free
/// test saw the list grow beside CPU hogs, 1 run in 10).
struct Unobserved(Vec<(u32, u64)>);

impl Unobserved {
    fn with_capacity(slots: usize) -> Self {
        Self(Vec::with_capacity(slots.max(1)))
    }

    /// Adds a commit of `slot` fenced at `value`, the slot's current value. When the list
    /// is full, first drops the entries `pending` no longer holds: every entry left is
    /// then another slot's live one, so the push fits.
    fn push(&mut self, slot: u32, value: u64, pending: impl Fn(u32, u64) -> bool) {
        if self.0.len() == self.0.capacity() {
            self.retain(pending);
        }
        self.0.push((slot, value));
    }

    /// Keeps the entries `pending` holds.
    fn retain(&mut self, pending: impl Fn(u32, u64) -> bool) {
        self.0.retain(|&(slot, value)| pending(slot, value));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.0.iter().copied()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// How long a stopping session waits for a live publisher's pending fences before it
/// abandons them (its streams are synchronized next, and must not wait forever).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

type DescSubscriber = Subscriber<Service, SlotDescriptor, ()>;

impl PublisherSeat {
    fn run(mut self, taken: &Arc<Taken>) {
        let stopped = self.serve(taken).unwrap_or(false);
        if stopped {
            let _ = wire::send(self.conn.as_fd(), &BYE, &[]);
        }
        self.settle(taken);
        // The seat is free for another publisher at once (its ports went with `serve`).
        drop(self);
        if let Ok(n) = node() {
            let _ = n.try_cleanup_dead_nodes();
        }
    }

    /// The grant of `loan` to the publisher. Pinned or device memory: the use's fence
    /// value, and the slot's fence word reset to 0 (nothing waits on it: the slot's last
    /// use retired, its wait included, before the slot came back to the pool).
    fn grant(taken: &Taken, loan: &TensorOutputLoan) -> SlotDescriptor {
        let r = loan.slot_ref();
        let mut d: SlotDescriptor = wire::zeroed();
        d.incarnation = taken.incarnation;
        d.pool = taken.pool_id;
        d.slot = r.slot;
        d.generation = r.generation;
        d.offset = u64::from(r.slot) * taken.pool.per_slot_bytes() as u64;
        d.byte_size = taken.pool.per_slot_bytes() as u64;
        d.memory_kind = wire::kind_index(taken.pool.kind);
        if let Some(dev) = &taken.device {
            let last = &dev.served.fenced[r.slot as usize];
            let value = wire::next_fence_value(last.load(Ordering::Relaxed), r.generation);
            last.store(value, Ordering::Relaxed);
            if let Some(w) = taken.control.word(ControlLayout::fence(r.slot as usize)) {
                w.store(0, Ordering::Release);
            }
            d.fence_value = value;
            d.device_uuid = dev.served.uuid;
        }
        d
    }

    /// Commits a loan the publisher committed as `d`: host memory as written; pinned
    /// memory written on the host when the fence word shows the use; memory written on
    /// the publisher's stream after the seat's stream waits for the fence. Refused (the
    /// slot goes back) when the descriptor's fence is not the grant's.
    fn accept(
        &mut self,
        taken: &Taken,
        d: &SlotDescriptor,
        loan: TensorOutputLoan,
    ) -> Result<CommittedTensor> {
        let Some(dev) = &taken.device else {
            return loan.write_host_and_commit(|_| {});
        };
        let slot = d.slot as usize;
        let value = dev.served.fenced[slot].load(Ordering::Relaxed);
        let word = taken.control.word(ControlLayout::fence(slot));
        if d.fence_value != value || word.is_none() {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "a commit whose fence value is not its grant's",
            ));
        }
        match d.fence {
            fence::HOST if taken.pool.kind.is_host_accessible() => {
                // The publisher's CPU wrote the value before it sent the commit.
                if word.is_some_and(|w| w.load(Ordering::Acquire) == value) {
                    loan.write_host_and_commit(|_| {})
                } else {
                    Err(Error::new(
                        ErrorCode::ProtocolError,
                        "a host-written commit whose fence word does not show its use",
                    ))
                }
            }
            fence::STREAM => {
                let ipc = dev.served.backend.ipc().ok_or_else(|| {
                    Error::new(ErrorCode::Internal, "an import's device lost its ipc")
                })?;
                // SAFETY: the fence word is in the control segment, registered until the
                // server drops, after the seats settled and the stream synchronized.
                unsafe {
                    ipc.wait_value_geq(
                        dev.stream,
                        dev.served.word(ControlLayout::fence(slot)),
                        value,
                    )?;
                }
                self.unobserved
                    .push(d.slot, value, |s, v| Self::pending(taken, s, v).is_some());
                loan.commit_after(dev.stream)
            }
            _ => Err(Error::new(
                ErrorCode::ProtocolError,
                "a commit of device memory fenced on the host",
            )),
        }
    }

    /// Whether the fence of this seat's commit `(slot, value)` is still pending: its word
    /// shows less than the value, and the slot was not granted again since (a grant stores
    /// the next value, then resets the word to 0 — after the slot came back to the pool,
    /// which its use's wait had to pass first). The word as read, when pending.
    fn pending(taken: &Taken, slot: u32, value: u64) -> Option<u64> {
        let word = taken
            .control
            .word(ControlLayout::fence(slot as usize))?
            .load(Ordering::Acquire);
        let current = taken
            .device
            .as_ref()?
            .served
            .fenced
            .get(slot as usize)?
            .load(Ordering::Relaxed);
        (word < value && current == value).then_some(word)
    }

    /// Forgets the stream fences whose words show their values.
    fn observe(&mut self, taken: &Taken) {
        self.unobserved
            .retain(|slot, value| Self::pending(taken, slot, value).is_some());
    }

    /// The seat's end: waits (polling) for the fences still pending — until the
    /// publisher's process exits, or past [`SETTLE_TIMEOUT`] when the session stops — then
    /// abandons what is left, so that the seat's stream waits for nothing that will not
    /// come.
    fn settle(&mut self, taken: &Taken) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            self.observe(taken);
            if self.unobserved.is_empty() {
                return;
            }
            let exited = wire::readable(self.pidfd.as_fd());
            if exited || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.abandon_pending(taken);
    }

    /// Abandons the fences still pending (the publisher's process exited, or the session
    /// stops and waited long enough): their words take the abandoned value, so that every
    /// wait on them ends.
    fn abandon_pending(&mut self, taken: &Taken) {
        for (slot, value) in self.unobserved.iter() {
            // Only a fence still pending, from the word as read: a use the slot went on
            // to (another seat's grant) is never touched.
            let (Some(seen), Some(w)) = (
                Self::pending(taken, slot, value),
                taken.control.word(ControlLayout::fence(slot as usize)),
            ) else {
                continue;
            };
            if w.compare_exchange(
                seen,
                wire::fence::ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
            {
                taken.abandoned.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.unobserved.clear();
    }

    /// Serves the publisher until the session stops (`Ok(true)`) or the publisher's
    /// process exits or it detaches, and every commit it made was published or refused
    /// (`Ok(false)`).
    fn serve(&mut self, taken: &Arc<Taken>) -> Result<bool> {
        let (ready, _) =
            wire::recv_by::<u8>(self.conn.as_fd(), Instant::now() + READY_TIMEOUT, &|| {
                taken.serving.stopping()
            })?;
        if ready != READY {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "no READY from the publisher",
            ));
        }
        let node: Node = node()?;
        let (grant_name, commit_name) = seat_names(&taken.service, self.seat)?;
        let (grants, grant_events) = seat_services(&node, &grant_name, taken.loans)?;
        let (commits, commit_events) = seat_services(&node, &commit_name, taken.loans)?;
        let granter: Publisher = grants
            .publisher_builder()
            .create()
            .map_err(|e| iox_error("publisher", &grant_name, e))?;
        let wake: Notifier = grant_events
            .notifier_builder()
            .create()
            .map_err(|e| iox_error("notifier", &grant_name, e))?;
        let committed: DescSubscriber = commits
            .subscriber_builder()
            .buffer_size(taken.loans)
            .create()
            .map_err(|e| iox_error("subscriber", &commit_name, e))?;
        let listener: Listener<Service> = commit_events
            .listener_builder()
            .create()
            .map_err(|e| iox_error("listener", &commit_name, e))?;
        wire::send(self.conn.as_fd(), &ACTIVE, &[])?;
        let mut loans: Vec<TensorOutputLoan> = Vec::with_capacity(taken.loans);
        // At most every slot of the pool waits for room: sized once, never grown per frame.
        let mut pending: VecDeque<(Tensor, EmitOptions)> =
            VecDeque::with_capacity(taken.pool.slot_count as usize);
        let mut live = true;
        let mut checked = Instant::now();
        loop {
            if taken.serving.stopping() {
                // What waits for room is dropped with the seat.
                taken.outstanding.fetch_sub(pending.len(), Ordering::AcqRel);
                return Ok(true);
            }
            // Grants, up to the publisher's loans (none once it is gone).
            while live && loans.len() < taken.loans {
                let Ok(loan) = TensorOutputLoan::unshaped(&taken.pool) else {
                    break;
                };
                let d = Self::grant(taken, &loan);
                loans.push(loan);
                if granter.send_copy(d).is_err() {
                    live = false;
                }
                let _ = wake.notify();
            }
            // Commits: the loan takes the written shape, is committed and queued.
            while let Ok(Some(c)) = committed.receive() {
                let d = *c.payload();
                drop(c);
                let Some(i) = loans.iter().position(|l| {
                    let r = l.slot_ref();
                    r.slot == d.slot && r.generation == d.generation
                }) else {
                    continue;
                };
                let mut loan = loans.swap_remove(i);
                // A rank past holo's limit is refused, not cut to its first extents.
                let rank = usize::from(d.rank);
                if rank > MAX_TENSOR_RANK as usize {
                    continue;
                }
                let Some(&dtype) = DType::ALL.get(usize::from(d.dtype)) else {
                    continue;
                };
                if loan.reshape(&d.shape[..rank], dtype).is_err() {
                    // Refused as a loan of that shape would be: the slot goes back.
                    continue;
                }
                let Ok(t) = self.accept(taken, &d, loan) else {
                    continue;
                };
                let mut options = EmitOptions::default().with_frame(d.frame);
                if let Some(at) = instant_of(d.capture_ns) {
                    options = options.with_capture_time(at);
                }
                pending.push_back((t.into_tensor(), options));
                taken.outstanding.fetch_add(1, Ordering::AcqRel);
            }
            self.observe(taken);
            // In order: what a full `Block` queue refuses waits for room.
            while let Some((t, options)) = pending.pop_front() {
                // Refused for good (the session stops, the contract): dropped.
                if let Err(r) = self.publisher.try_publish(t, options)
                    && r.error.code() == ErrorCode::Backpressured
                {
                    pending.push_front((r.value, options));
                    break;
                }
                taken.outstanding.fetch_sub(1, Ordering::AcqRel);
            }
            if checked.elapsed() >= LIVENESS_PERIOD {
                checked = Instant::now();
                let exited = wire::readable(self.pidfd.as_fd());
                if live && (exited || wire::readable(self.conn.as_fd())) {
                    // Exited or detached: no new grant; one more pass takes what it
                    // committed before (still published), then its granted, uncommitted
                    // slots go back (with `loans`, when this returns).
                    live = false;
                    continue;
                }
                if exited {
                    // A dead publisher's fences are abandoned now, not when what waits
                    // for room is gone: a consumer waiting on one of them (a host wait)
                    // may be what keeps the room from coming.
                    self.observe(taken);
                    self.abandon_pending(taken);
                }
            }
            if !live && pending.is_empty() {
                return Ok(false);
            }
            if pending.is_empty() {
                let _ = listener.timed_wait(|_| {}, Duration::from_micros(500));
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// The `Instant` of a `CLOCK_MONOTONIC` reading in nanoseconds (the clock `Instant` reads
/// on Linux, one for every process of the machine); `None` for 0 (no capture time) or one
/// in the future.
pub(crate) fn instant_of(monotonic_ns: u64) -> Option<Instant> {
    if monotonic_ns == 0 {
        return None;
    }
    // One clock read twice: bracketed, so that a preemption between the reads does not
    // shift the capture time.
    let (ns, now) = crate::session::context::read_as_one_moment(Instant::now, wire::monotonic_ns);
    now.checked_sub(Duration::from_nanos(ns.checked_sub(monotonic_ns)?))
}

/// Options of a [`ProcessPublisher`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessPublisherOptions {
    /// How long an attach waits for the importing session to serve the topic: `None`
    /// fails at once with `NotFound`.
    pub wait_for_session: Option<Duration>,
    /// How long each handshake step may take (default 2 s).
    pub handshake_timeout: Duration,
}

impl Default for ProcessPublisherOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl ProcessPublisherOptions {
    /// No waiting for the session, 2 s per handshake step.
    pub const DEFAULT: Self = Self {
        wait_for_session: None,
        handshake_timeout: Duration::from_secs(2),
    };

    /// These options waiting up to `wait` for the session.
    #[must_use]
    pub const fn with_wait_for_session(mut self, wait: Duration) -> Self {
        self.wait_for_session = Some(wait);
        self
    }

    /// These options with `timeout` for each handshake step (above zero).
    #[must_use]
    pub const fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }
}

/// A standalone publisher into a topic that a session in another process imports
/// (`import_topic` with `TopicOptions::across_processes`), attached by name through the
/// session's [`EndpointCatalog`] (docs/IPC.md).
///
/// The session grants it slots of the topic's shared pool; [`loan`](Self::loan) takes
/// one, the caller writes it in place (no copy), and [`RemoteLoan::publish`] hands it to
/// the session, which queues it for the importing input (a full `Block` queue holds it
/// back, in order, and grants no new slot meanwhile). Several loans may be held at once
/// (up to the topic's `loans_per_publisher`).
///
/// In host memory the caller writes [`RemoteLoan::bytes_mut`]. In pinned or CUDA device
/// memory the publisher opens the session's GPU (by its UUID) and makes its own
/// [`stream`](Self::stream): write [`RemoteLoan::device_ptr`] with work enqueued on that
/// stream, then publish — the stream writes the slot's fence after the work, and the
/// session's stream waits for it; no host thread waits. Pinned memory may also be written
/// on the host ([`RemoteLoan::bytes_mut`], then
/// [`publish_written_on_host`](RemoteLoan::publish_written_on_host)).
///
/// `loan` returns `Cancelled` once the session stopped serving the topic and `PeerLost`
/// once its process died — never blocks past its timeout. Dropped, the publisher first
/// lets its stream finish (every fence it enqueued is written), then detaches.
pub struct ProcessPublisher {
    topic: CatalogTopic,
    seat: u32,
    incarnation: u64,
    welcome: Welcome,
    kind: MemoryKind,
    /// Pinned or device memory: the pool's mapping here, the control segment's
    /// registration and the publisher's stream — dropped (synchronized) first.
    device: Option<MirrorDevice>,
    /// Host or pinned memory: the pool's memfd, mapped read-write.
    payload: Option<Segment>,
    control: Segment,
    conn: OwnedFd,
    session: OwnedFd,
    session_pid: i32,
    link: Cell<Option<ErrorCode>>,
    /// Grants received and not yet loaned.
    grants: RefCell<Vec<SlotDescriptor>>,
    // Ports before their node (drop order).
    granted: DescSubscriber,
    grant_listener: Listener<Service>,
    committer: Publisher,
    wake: Notifier,
    _node: Node,
}

impl std::fmt::Debug for ProcessPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessPublisher")
            .field("topic", &self.topic.name)
            .field("seat", &self.seat)
            .field("memory_kind", &self.kind)
            .field("session_pid", &self.session_pid)
            .finish_non_exhaustive()
    }
}

fn exhausted(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::new(ErrorCode::ResourceExhausted, format!("{what}: {e:?}"))
}

/// A slot granted to a [`ProcessPublisher`], loaned to its caller: write it, then
/// [`publish`](Self::publish) it. Dropped unpublished, the slot stays the publisher's for
/// its next loan.
pub struct RemoteLoan<'a> {
    publisher: &'a ProcessPublisher,
    grant: Option<SlotDescriptor>,
}

impl std::fmt::Debug for RemoteLoan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLoan")
            .field("slot", &self.grant.map(|g| g.slot))
            .finish_non_exhaustive()
    }
}

impl ProcessPublisher {
    /// Attaches to `topic` of `catalog`'s importing session; pinned or device memory on
    /// the session's GPU, found by its UUID ([`attach_with_device`](Self::attach_with_device)
    /// names one). Refused, with nothing attached: `NotFound` for a topic the catalog
    /// lacks or a session that does not serve it (after `wait_for_session`);
    /// `InvalidArgument` for a topic the session exports (attach a `ProcessSubscriber`);
    /// `ProtocolError` when the running session's contract is not the catalog's;
    /// `ResourceExhausted` when every declared publisher is attached; `PeerLost` when the
    /// session dies mid-handshake; `NotSupported` where this machine cannot map the
    /// session's device memory.
    pub fn attach(
        catalog: &EndpointCatalog,
        topic: &str,
        options: ProcessPublisherOptions,
    ) -> Result<ProcessPublisher> {
        Self::attach_inner(catalog, topic, options, None)
    }

    /// [`attach`](Self::attach) on `device`, which must be the session's GPU
    /// (`InvalidArgument` otherwise); ignored for a topic in host memory.
    pub fn attach_with_device(
        catalog: &EndpointCatalog,
        topic: &str,
        options: ProcessPublisherOptions,
        device: Arc<dyn DeviceBackend>,
    ) -> Result<ProcessPublisher> {
        Self::attach_inner(catalog, topic, options, Some(device))
    }

    fn attach_inner(
        catalog: &EndpointCatalog,
        topic: &str,
        options: ProcessPublisherOptions,
        device: Option<Arc<dyn DeviceBackend>>,
    ) -> Result<ProcessPublisher> {
        let entry = catalog.topic(topic)?.clone();
        let at = format!("topic {topic:?}");
        if entry.direction != "import" {
            return Err(Error::invalid_argument(format!(
                "the session exports topic {topic:?}: a ProcessSubscriber receives it; a ProcessPublisher publishes into a topic the session imports"
            ))
            .at(at));
        }
        let contract = entry.wire()?;
        let wire::Greeted {
            conn,
            server: session,
            server_pid: session_pid,
            welcome,
            payload: payload_fd,
            control: control_fd,
        } = wire::connect_and_greet(
            &catalog.namespace,
            topic,
            contract,
            options.wait_for_session,
            options.handshake_timeout,
            "session",
            "start the session first, or attach with `wait_for_session`",
        )?;
        let sized = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        if welcome.checked_layout(false).is_none() {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the session's welcome describes a pool that does not hold its slots",
            )
            .at(at));
        }
        let kind = wire::KINDS.get(usize::from(welcome.memory_kind)).copied();
        let Some(kind) = kind.filter(|k| k.wire_name() == entry.memory_kind) else {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                format!(
                    "the session imports the topic in {} memory; the catalog says {}",
                    kind.map_or("unknown", MemoryKind::wire_name),
                    entry.memory_kind
                ),
            )
            .at(at));
        };
        let control = Segment::import(control_fd, sized(welcome.control_len), true)?;
        let header = |i| control.word(i).map_or(0, |w| w.load(Ordering::Acquire));
        if header(0) != MAGIC || header(1) != welcome.incarnation {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the session's control segment names another incarnation than its welcome",
            )
            .at(at));
        }
        let (device, payload) = match kind {
            MemoryKind::Host => (
                None,
                Some(Segment::import(
                    payload_fd,
                    sized(welcome.payload_len),
                    true,
                )?),
            ),
            MemoryKind::PinnedHost => {
                let pinned = Segment::import(payload_fd, sized(welcome.payload_len), true)?;
                let mapped =
                    MirrorDevice::map(device, &welcome, Mapped::PinnedWritable(&pinned), &control)
                        .map_err(|e| e.at(at.clone()))?;
                (Some(mapped), Some(pinned))
            }
            MemoryKind::CudaDevice => (
                Some(
                    MirrorDevice::map(device, &welcome, Mapped::Device(&payload_fd), &control)
                        .map_err(|e| e.at(at.clone()))?,
                ),
                None,
            ),
            _ => {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    "the session imports a memory kind that does not cross processes",
                )
                .at(at));
            }
        };
        let node = node()?;
        let prefix = service_prefix(&catalog.namespace, topic, welcome.incarnation);
        let (grant_name, commit_name) = seat_names(&prefix, welcome.seat)?;
        let loans = entry.loans_per_publisher.max(1) as usize;
        let (grants, grant_events) = seat_services(&node, &grant_name, loans)?;
        let (commits, commit_events) = seat_services(&node, &commit_name, loans)?;
        let granted = grants
            .subscriber_builder()
            .buffer_size(loans)
            .create()
            .map_err(|e| exhausted("iceoryx2 subscriber", e))?;
        let grant_listener = grant_events
            .listener_builder()
            .create()
            .map_err(|e| exhausted("iceoryx2 listener", e))?;
        let committer = commits
            .publisher_builder()
            .create()
            .map_err(|e| exhausted("iceoryx2 publisher", e))?;
        let wake = commit_events
            .notifier_builder()
            .create()
            .map_err(|e| exhausted("iceoryx2 notifier", e))?;
        wire::send(conn.as_fd(), &READY, &[])?;
        let (active, _) = wire::recv::<u8>(conn.as_fd()).map_err(|e| e.at(at.clone()))?;
        if active != ACTIVE {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the session did not attach the seat",
            )
            .at(at));
        }
        Ok(ProcessPublisher {
            topic: entry,
            seat: welcome.seat,
            incarnation: welcome.incarnation,
            welcome,
            kind,
            device,
            payload,
            control,
            conn,
            session,
            session_pid,
            link: Cell::new(None),
            grants: RefCell::new(Vec::with_capacity(loans)),
            granted,
            grant_listener,
            committer,
            wake,
            _node: node,
        })
    }

    /// A granted slot to write, waiting up to `timeout` for one (`None`: none in time —
    /// every granted slot is loaned or waits in a full queue). `Cancelled` once the
    /// session stopped serving the topic, `PeerLost` once its process died.
    pub fn loan(&self, timeout: Duration) -> Result<Option<RemoteLoan<'_>>> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            while let Some(d) = self
                .granted
                .receive()
                .map_err(|e| Error::new(ErrorCode::PeerLost, format!("iceoryx2 receive: {e:?}")))?
            {
                let g = *d.payload();
                drop(d);
                if self.valid_grant(&g) {
                    self.grants.borrow_mut().push(g);
                }
            }
            self.check_link();
            if let Some(code) = self.link.get() {
                return Err(self.ended(code));
            }
            if let Some(g) = self.grants.borrow_mut().pop() {
                return Ok(Some(RemoteLoan {
                    publisher: self,
                    grant: Some(g),
                }));
            }
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => return Ok(None),
                Some(d) => d - now,
                None => Duration::from_millis(20),
            };
            self.grant_listener
                .timed_wait(|_| {}, left.min(Duration::from_millis(20)))
                .map_err(|e| Error::new(ErrorCode::PeerLost, format!("iceoryx2 wait: {e:?}")))?;
        }
    }

    /// The topic's catalog entry.
    pub fn topic(&self) -> &CatalogTopic {
        &self.topic
    }

    /// The memory the topic's slots are in.
    pub fn memory_kind(&self) -> MemoryKind {
        self.kind
    }

    /// The importing session's process id.
    pub fn session_pid(&self) -> i32 {
        self.session_pid
    }

    /// Pinned or device memory: the device the pool is mapped on (the session's GPU).
    pub fn device(&self) -> Option<&Arc<dyn DeviceBackend>> {
        self.device.as_ref().map(|d| &d.backend)
    }

    /// Pinned or device memory: the publisher's stream. Enqueue a loan's writes here
    /// before [`RemoteLoan::publish`]; its fence is written after them.
    pub fn stream(&self) -> Option<StreamHandle> {
        self.device.as_ref().map(|d| d.stream)
    }

    /// A grant of this session's pool, for a slot inside it, in its memory.
    fn valid_grant(&self, g: &SlotDescriptor) -> bool {
        g.incarnation == self.incarnation
            && g.pool == self.welcome.pool
            && g.slot < self.welcome.slot_count
            && g.byte_size == self.welcome.per_slot_bytes
            && g.offset == u64::from(g.slot) * self.welcome.per_slot_bytes
            && g.memory_kind == self.welcome.memory_kind
            && (self.device.is_none() || g.fence_value != 0)
    }

    fn check_link(&self) {
        if self.link.get().is_some() {
            return;
        }
        if wire::readable(self.conn.as_fd()) {
            let mut b = [0u8; 1];
            self.link.set(
                match rustix::net::recv(&self.conn, &mut b, rustix::net::RecvFlags::DONTWAIT) {
                    Ok((1, _)) if b[0] == BYE => Some(ErrorCode::Cancelled),
                    _ => Some(ErrorCode::PeerLost),
                },
            );
        } else if wire::readable(self.session.as_fd()) {
            self.link.set(Some(ErrorCode::PeerLost));
        }
    }

    fn ended(&self, code: ErrorCode) -> Error {
        let message = if code == ErrorCode::Cancelled {
            "the importing session stopped serving the topic".to_owned()
        } else {
            format!("the importing process (pid {}) exited", self.session_pid)
        };
        Error::new(code, message).at(format!("topic {:?}", self.topic.name))
    }
}

impl Drop for ProcessPublisher {
    /// The stream's pending writes and fences run before the publisher detaches (the
    /// session waits for each fence it was sent).
    fn drop(&mut self) {
        if let Some(d) = &self.device {
            let _ = d.backend.synchronize_stream(d.stream);
        }
    }
}

/// How a commit's bytes were written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Written {
    /// On the host (host memory, or pinned memory through `bytes_mut`).
    Host,
    /// On the publisher's stream.
    Stream,
}

impl RemoteLoan<'_> {
    /// Host or pinned memory: the slot's bytes (the pool's per-slot bytes), to write in
    /// place on the host. `NotSupported` for CUDA device memory (write
    /// [`device_ptr`](Self::device_ptr) on the publisher's stream).
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        let (Some(g), Some(payload)) = (self.grant, self.publisher.payload.as_ref()) else {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "the topic is in CUDA device memory: write `device_ptr()` on the publisher's stream",
            )
            .at(format!("topic {:?}", self.publisher.topic.name)));
        };
        let len = usize::try_from(g.byte_size).unwrap_or(0);
        let offset = usize::try_from(g.offset).unwrap_or(0);
        // SAFETY: the grant was checked to lie inside the pool (`valid_grant`), whose
        // segment is mapped read-write; the session granted the slot to this publisher
        // alone and reads it only after the commit, which consumes this loan.
        Ok(unsafe { std::slice::from_raw_parts_mut(payload.as_ptr().add(offset), len) })
    }

    /// Pinned or device memory: the slot's device address (its per-slot bytes), to write
    /// with work on the publisher's [`stream`](ProcessPublisher::stream). `None` for host
    /// memory.
    pub fn device_ptr(&self) -> Option<DevicePtr> {
        let (g, d) = (self.grant?, self.publisher.device.as_ref()?);
        Some(DevicePtr::from_raw(d.payload.raw() + g.offset))
    }

    /// The slot's bytes (the pool's per-slot bytes).
    pub fn capacity(&self) -> usize {
        self.grant
            .map_or(0, |g| usize::try_from(g.byte_size).unwrap_or(0))
    }

    /// Hands the slot, written as `shape` of `dtype`, to the session with frame id
    /// `frame`: host memory written on the host; pinned and device memory written on the
    /// publisher's stream (the stream writes the fence after the work enqueued before).
    /// `InvalidArgument` (nothing sent, the slot stays this publisher's) for a shape whose
    /// bytes exceed the slot, or a dtype or rank the topic's contract does not admit.
    /// `Cancelled` / `PeerLost` once the session is gone.
    pub fn publish(self, shape: &[u64], dtype: DType, frame: u64) -> Result<()> {
        // Capture time 0: none (the session stamps the frame).
        self.publish_captured(shape, dtype, frame, 0)
    }

    /// [`publish`](Self::publish) with the capture time `capture_ns` (`CLOCK_MONOTONIC`
    /// nanoseconds; the session's latency figures count from it).
    pub fn publish_captured(
        self,
        shape: &[u64],
        dtype: DType,
        frame: u64,
        capture_ns: u64,
    ) -> Result<()> {
        let written = if self.publisher.device.is_some() {
            Written::Stream
        } else {
            Written::Host
        };
        self.send(shape, dtype, frame, capture_ns, written)
    }

    /// Pinned memory written on the host ([`bytes_mut`](Self::bytes_mut)): the bytes are
    /// complete now, so the CPU writes the fence and the session waits for nothing.
    /// `NotSupported` for device memory; host memory is [`publish`](Self::publish).
    pub fn publish_written_on_host(self, shape: &[u64], dtype: DType, frame: u64) -> Result<()> {
        if self.publisher.payload.is_none() {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "the topic is in CUDA device memory, which the host does not write",
            )
            .at(format!("topic {:?}", self.publisher.topic.name)));
        }
        self.send(shape, dtype, frame, 0, Written::Host)
    }

    fn send(
        mut self,
        shape: &[u64],
        dtype: DType,
        frame: u64,
        capture_ns: u64,
        written: Written,
    ) -> Result<()> {
        let Some(mut d) = self.grant else {
            return Err(Error::new(ErrorCode::Internal, "a loan without its grant"));
        };
        let fits = checked_byte_size(shape, dtype).is_some_and(|b| b <= d.byte_size);
        if !fits || shape.len() > MAX_TENSOR_RANK as usize {
            return Err(Error::invalid_argument(format!(
                "a tensor of shape {shape:?} and {dtype} does not fit the slot's {} bytes",
                d.byte_size
            )));
        }
        // The topic's contract, checked here: the importing session refuses such a commit
        // anyway, and the publisher would never hear of it.
        let topic = &self.publisher.topic;
        let rank = u32::try_from(shape.len()).unwrap_or(u32::MAX);
        if topic
            .dtype
            .as_deref()
            .is_some_and(|want| want != dtype.name())
            || topic.rank.is_some_and(|want| want != rank)
            || rank > topic.max_rank
        {
            return Err(Error::invalid_argument(format!(
                "a tensor of {dtype} and rank {rank} does not meet the topic's contract: {}, rank {}, at most rank {}",
                topic.dtype.as_deref().unwrap_or("any dtype"),
                topic.rank.map_or_else(|| "any".to_owned(), |r| r.to_string()),
                topic.max_rank
            ))
            .at(format!("topic {:?}", topic.name)));
        }
        let p = self.publisher;
        p.check_link();
        if let Some(code) = p.link.get() {
            return Err(p.ended(code));
        }
        // The fence: the stream writes it after the work before it; the CPU writes it now.
        let word = ControlLayout::fence(d.slot as usize);
        d.fence = match (written, &p.device) {
            (Written::Stream, Some(dev)) => {
                let ipc = dev.ipc()?;
                // SAFETY: the fence word is in the control segment, registered until the
                // device mirror drops, which synchronizes the stream first.
                unsafe { ipc.write_value(dev.stream, dev.word(word), d.fence_value)? };
                fence::STREAM
            }
            (Written::Host, Some(_)) => {
                if let Some(w) = p.control.word(word) {
                    w.store(d.fence_value, Ordering::Release);
                }
                fence::HOST
            }
            (_, None) => fence::HOST,
        };
        d.shape = [0; MAX_TENSOR_RANK as usize];
        d.shape[..shape.len()].copy_from_slice(shape);
        d.rank = u8::try_from(shape.len()).unwrap_or(u8::MAX);
        d.dtype = wire::dtype_index(dtype);
        d.frame = frame;
        d.capture_ns = capture_ns;
        d.publish_ns = wire::monotonic_ns();
        p.committer
            .send_copy(d)
            .map_err(|e| Error::new(ErrorCode::PeerLost, format!("iceoryx2 send: {e:?}")))?;
        let _ = p.wake.notify();
        self.grant = None;
        Ok(())
    }
}

impl Drop for RemoteLoan<'_> {
    /// Unpublished: the slot stays the publisher's, for its next loan.
    fn drop(&mut self) {
        if let Some(g) = self.grant.take() {
            self.publisher.grants.borrow_mut().push(g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Unobserved;

    /// A slot granted again before the seat observed: its stale entry makes room for the
    /// new one, and the list never grows past the slot count (no allocation).
    #[test]
    fn a_full_list_of_unobserved_fences_drops_stale_entries_before_it_grows() {
        // The slots' current values (a grant's), and the words all still 0: every fence
        // of a current value is pending.
        let mut current = [1u64, 1, 1, 1];
        let mut u = Unobserved::with_capacity(current.len());
        let capacity = u.0.capacity();
        for slot in 0..4u32 {
            let c = current;
            u.push(slot, 1, |s, v| c[s as usize] == v);
        }
        assert_eq!(u.0.len(), capacity, "the list is full");
        // Slot 2 is granted again (value 2) and committed before any observe.
        current[2] = 2;
        let c = current;
        u.push(2, 2, |s, v| c[s as usize] == v);
        assert_eq!(u.0.capacity(), capacity, "the list grew");
        let mut entries: Vec<_> = u.iter().collect();
        entries.sort_unstable();
        assert_eq!(entries, [(0, 1), (1, 1), (2, 2), (3, 1)]);
    }
}
