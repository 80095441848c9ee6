//! Publishers in other processes: a session serves each topic it imports across processes
//! ([`ImportServer`]), and a [`ProcessPublisher`] in another process attaches by name.
//!
//! The imported topic's pool is a sealed memfd the publisher maps read-write. Each
//! attached publisher takes one of the topic's publisher seats — an in-process
//! [`ChannelPublisher`], so the importing input's queue, policy and contract checks are a
//! local publisher's — and is **granted** slots: the seat loans `loans_per_publisher`
//! slots of the pool and sends each as an iceoryx2 descriptor. The publisher writes a
//! granted slot and sends it back as a **commit** descriptor (shape, dtype, frame id); the
//! seat gives its loan that shape, commits it (the bytes are complete: the host wrote
//! them) and publishes it into the queue — or keeps it, in order, while a `Block` queue is
//! full — and grants another slot. A publisher that dies or detaches gives back every slot
//! it was granted and did not commit; what it committed is still published.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iceoryx2::port::listener::Listener;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;

use super::catalog::{CatalogTopic, EndpointCatalog, record_wire};
use super::export::{
    HANDSHAKE_TIMEOUT, LIVENESS_PERIOD, Node, Notifier, Publisher, READY_TIMEOUT, Serving,
    bind_socket, control_segment, greet, iox_error, name_hash, node, refuse, seat_services,
    service_prefix, spawn_listener,
};
use super::segment::Segment;
use super::wire::{
    self, ACTIVE, BYE, ControlLayout, MAGIC, READY, SlotDescriptor, Welcome, WireContract,
};
use crate::channel::pool::{Pool, checked_byte_size};
use crate::plan::TopicRecord;
use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::tensor::TensorOutputLoan;
use crate::topic::{ChannelPublisher, PublisherOptions, TopicRegistry};
use crate::{EmitOptions, Error, ErrorCode, Result, Tensor};

type Service = ipc_threadsafe::Service;

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
    payload: Arc<Segment>,
    control: Arc<Segment>,
    incarnation: u64,
    pool_id: u64,
    publishers: u32,
    loans: usize,
    next_seat: AtomicU32,
    serving: Serving,
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
        let payload = pool.shared_segment().cloned().ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                "a topic imported across processes has a pool outside shared memory",
            )
            .at(at())
        })?;
        let layout = ControlLayout { slots: 0, seats: 0 };
        let (control, incarnation) = control_segment(&record.name, &layout)?;
        let socket = bind_socket(namespace, &record.name)?;
        Ok(ImportServer {
            taken: Arc::new(Taken {
                registry: Arc::clone(registry),
                topic: record.name.clone(),
                service: service_prefix(namespace, &record.name, incarnation),
                contract: record_wire(record)?,
                pool: Arc::clone(pool),
                pool_id: name_hash(&pool.name),
                payload,
                control,
                incarnation,
                publishers: record.publishers,
                loans: record.loans_per_publisher.max(1) as usize,
                next_seat: AtomicU32::new(0),
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

    /// Stops serving: every seat says `BYE`, gives back its granted slots and ends.
    pub(crate) fn stop(&mut self) {
        self.taken.serving.stop(self.thread.take());
        self.listener = None;
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
    let Some(pidfd) = greet(&conn, &taken.topic, &taken.contract, "publisher", "session")? else {
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
    w.payload_len = taken.payload.len() as u64;
    w.control_len = taken.control.len() as u64;
    w.memory_kind = wire::kind_index(taken.pool.kind);
    wire::send(conn.as_fd(), &w, &[taken.payload.fd(), taken.control.fd()])?;
    Ok(Some(PublisherSeat {
        seat,
        publisher,
        conn,
        pidfd,
    }))
}

/// One attached publisher's seat.
struct PublisherSeat {
    seat: u32,
    publisher: ChannelPublisher<Tensor>,
    conn: OwnedFd,
    pidfd: OwnedFd,
}

type DescSubscriber = Subscriber<Service, SlotDescriptor, ()>;

impl PublisherSeat {
    fn run(mut self, taken: &Arc<Taken>) {
        let stopped = self.serve(taken).unwrap_or(false);
        if stopped {
            let _ = wire::send(self.conn.as_fd(), &BYE, &[]);
        }
        // The seat is free for another publisher at once (its ports went with `serve`).
        drop(self);
        if let Ok(n) = node() {
            let _ = n.try_cleanup_dead_nodes();
        }
    }

    /// The grant of `loan` to the publisher.
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
        d
    }

    /// Serves the publisher until the session stops (`Ok(true)`) or the publisher's
    /// process exits or it detaches, and every commit it made was published or refused
    /// (`Ok(false)`).
    fn serve(&mut self, taken: &Arc<Taken>) -> Result<bool> {
        wire::set_timeouts(self.conn.as_fd(), READY_TIMEOUT)?;
        let (ready, _) = wire::recv::<u8>(self.conn.as_fd())?;
        wire::set_timeouts(self.conn.as_fd(), HANDSHAKE_TIMEOUT)?;
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
        let mut pending: VecDeque<(Tensor, EmitOptions)> = VecDeque::new();
        let mut live = true;
        let mut checked = Instant::now();
        loop {
            if taken.serving.stopping() {
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
                let rank = usize::from(d.rank).min(MAX_TENSOR_RANK as usize);
                let Some(&dtype) = DType::ALL.get(usize::from(d.dtype)) else {
                    continue;
                };
                if loan.reshape(&d.shape[..rank], dtype).is_err() {
                    // Refused as a loan of that shape would be: the slot goes back.
                    continue;
                }
                let Ok(t) = loan.write_host_and_commit(|_| {}) else {
                    continue;
                };
                pending.push_back((t.into_tensor(), EmitOptions::default().with_frame(d.frame)));
            }
            // In order: what a full `Block` queue refuses waits for room.
            while let Some((t, options)) = pending.pop_front() {
                // Refused for good (the session stops, the contract): dropped.
                if let Err(r) = self.publisher.try_publish(t, options)
                    && r.error.code() == ErrorCode::Backpressured
                {
                    pending.push_front((r.value, options));
                    break;
                }
            }
            if checked.elapsed() >= LIVENESS_PERIOD {
                checked = Instant::now();
                if live && (wire::readable(self.pidfd.as_fd()) || wire::readable(self.conn.as_fd()))
                {
                    // Exited or detached: no new grant; one more pass takes what it
                    // committed before (still published), then its granted, uncommitted
                    // slots go back (with `loans`, when this returns).
                    live = false;
                    continue;
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
}

/// A standalone publisher into a topic that a session in another process imports
/// (`import_topic` with `TopicOptions::across_processes`), attached by name through the
/// session's [`EndpointCatalog`] (docs/IPC.md).
///
/// The session grants it slots of the topic's shared pool; [`loan`](Self::loan) takes
/// one, the caller writes it in place (no copy), and [`RemoteLoan::publish`] hands it to
/// the session, which queues it for the importing input (a full `Block` queue holds it
/// back, in order, and grants no new slot meanwhile). Host memory only.
///
/// `loan` returns `Cancelled` once the session stopped serving the topic and `PeerLost`
/// once its process died — never blocks past its timeout.
pub struct ProcessPublisher {
    topic: CatalogTopic,
    seat: u32,
    incarnation: u64,
    welcome: Welcome,
    payload: Segment,
    conn: OwnedFd,
    session: OwnedFd,
    session_pid: i32,
    link: Option<ErrorCode>,
    /// Grants received and not yet loaned.
    grants: Vec<SlotDescriptor>,
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
    publisher: &'a mut ProcessPublisher,
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
    /// Attaches to `topic` of `catalog`'s importing session. Refused, with nothing
    /// attached: `NotFound` for a topic the catalog lacks or a session that does not
    /// serve it (after `wait_for_session`); `InvalidArgument` for a topic the session
    /// exports (attach a `ProcessSubscriber`) or one not in host memory; `ProtocolError`
    /// when the running session's contract is not the catalog's; `ResourceExhausted` when
    /// every declared publisher is attached; `PeerLost` when the session dies
    /// mid-handshake.
    pub fn attach(
        catalog: &EndpointCatalog,
        topic: &str,
        options: ProcessPublisherOptions,
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
        if welcome
            .per_slot_bytes
            .checked_mul(u64::from(welcome.slot_count))
            .is_none_or(|b| b > welcome.payload_len)
        {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the session's welcome describes a pool that does not hold its slots",
            )
            .at(at));
        }
        let payload = Segment::import(payload_fd, sized(welcome.payload_len), true)?;
        let control = Segment::import(control_fd, sized(welcome.control_len), false)?;
        let header = |i| control.word(i).map_or(0, |w| w.load(Ordering::Acquire));
        if header(0) != MAGIC || header(1) != welcome.incarnation {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the session's control segment names another incarnation than its welcome",
            )
            .at(at));
        }
        drop(control);
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
            payload,
            conn,
            session,
            session_pid,
            link: None,
            grants: Vec::with_capacity(loans),
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
    pub fn loan(&mut self, timeout: Duration) -> Result<Option<RemoteLoan<'_>>> {
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
                    self.grants.push(g);
                }
            }
            self.check_link();
            if let Some(code) = self.link {
                return Err(self.ended(code));
            }
            if let Some(g) = self.grants.pop() {
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

    /// The importing session's process id.
    pub fn session_pid(&self) -> i32 {
        self.session_pid
    }

    /// A grant of this session's pool, for a slot inside it.
    fn valid_grant(&self, g: &SlotDescriptor) -> bool {
        g.incarnation == self.incarnation
            && g.pool == self.welcome.pool
            && g.slot < self.welcome.slot_count
            && g.byte_size == self.welcome.per_slot_bytes
            && g.offset == u64::from(g.slot) * self.welcome.per_slot_bytes
    }

    fn check_link(&mut self) {
        if self.link.is_some() {
            return;
        }
        if wire::readable(self.conn.as_fd()) {
            let mut b = [0u8; 1];
            self.link =
                match rustix::net::recv(&self.conn, &mut b, rustix::net::RecvFlags::DONTWAIT) {
                    Ok((1, _)) if b[0] == BYE => Some(ErrorCode::Cancelled),
                    _ => Some(ErrorCode::PeerLost),
                };
        } else if wire::readable(self.session.as_fd()) {
            self.link = Some(ErrorCode::PeerLost);
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

impl RemoteLoan<'_> {
    /// The slot's bytes (the pool's per-slot bytes), to write in place.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let Some(g) = self.grant else {
            return &mut [];
        };
        let len = usize::try_from(g.byte_size).unwrap_or(0);
        let offset = usize::try_from(g.offset).unwrap_or(0);
        // SAFETY: the grant was checked to lie inside the pool (`valid_grant`), whose
        // segment is mapped read-write; the session granted the slot to this publisher
        // alone and reads it only after the commit, which consumes this loan.
        unsafe { std::slice::from_raw_parts_mut(self.publisher.payload.as_ptr().add(offset), len) }
    }

    /// Hands the slot, written as `shape` of `dtype`, to the session with frame id
    /// `frame`: `InvalidArgument` (nothing sent, the slot stays this publisher's) for a
    /// shape whose bytes exceed the slot; the session refuses one the topic's contract
    /// does not admit (the slot goes back to its pool). `Cancelled` / `PeerLost` once the
    /// session is gone.
    pub fn publish(mut self, shape: &[u64], dtype: DType, frame: u64) -> Result<()> {
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
        let p = &mut *self.publisher;
        p.check_link();
        if let Some(code) = p.link {
            return Err(p.ended(code));
        }
        d.shape = [0; MAX_TENSOR_RANK as usize];
        d.shape[..shape.len()].copy_from_slice(shape);
        d.rank = u8::try_from(shape.len()).unwrap_or(u8::MAX);
        d.dtype = wire::dtype_index(dtype);
        d.frame = frame;
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
            self.publisher.grants.push(g);
        }
    }
}
