//! The exporting side: a session serves each topic it exports across processes.
//!
//! A listener thread accepts subscribers on the topic's abstract socket. Each accepted
//! subscriber takes one of the topic's seats — an in-process [`ChannelSubscriber`], so the
//! exporting output's queue, policy and pool accounting are exactly a local subscriber's —
//! and gets the pool's payload segment and the topic's control segment, once (the
//! handshake runs on the subscriber's own thread). The seat's sender then moves the seat's
//! tensors out as iceoryx2 descriptors — from the emitting thread when it can, else from
//! the seat's thread: it fences the use (host memory: the CPU writes the slot's fence
//! word; device memory: the slot's writer stream does, `cuStreamWriteValue64_v2`), sends
//! the descriptor and wakes the subscriber, and keeps the tensor (so the slot stays out of
//! the pool) until the subscriber's release word names that use of the slot — or the
//! subscriber's process has exited (its pidfd).
//! A subscriber that merely closes its socket is detached (its seat is free again), but
//! what it still holds stays held until it releases it or its process exits.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iceoryx2::prelude::*;
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use super::catalog::record_wire;
use super::segment::Segment;
use super::wire::{
    self, ACTIVE, BYE, ControlLayout, Hello, MAGIC, READY, SlotDescriptor, VERSION, Welcome,
    WireContract,
};
use crate::channel::pool::Pool;
use crate::channel::queue::Stamp;
use crate::device::{DeviceBackend, DevicePtr};
use crate::plan::TopicRecord;
use crate::tensor::Tensor;
use crate::topic::{ChannelSubscriber, RemoteSend, SeatState, SubscriberOptions, TopicRegistry};
use crate::{Error, ErrorCode, Result};

/// How long a handshake step may take before the exporter gives the subscriber up.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a subscriber may take between the welcome and its `READY`: it maps what the
/// welcome passed — for device memory it opens the GPU, imports and maps the pool and
/// makes its stream, which a fresh process (or one under `compute-sanitizer`) may take
/// seconds to do. Its seat is only claimed meanwhile: the output sends it nothing.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a seat thread looks at its subscriber's process and socket.
pub(crate) const LIVENESS_PERIOD: Duration = Duration::from_millis(2);

/// What the listener and every seat thread of one served topic share.
struct Served {
    registry: Arc<TopicRegistry>,
    topic: String,
    service: String,
    contract: WireContract,
    pool: Arc<Pool>,
    payload: Arc<Segment>,
    control: Arc<Segment>,
    layout: ControlLayout,
    incarnation: u64,
    pool_id: u64,
    seats: u32,
    holds: usize,
    /// A device pool's memory and fences (`None`: a host pool, its payload a memfd).
    device: Option<ServedDevice>,
    /// Tensors sent to subscribers and not yet released (`RunSession::wait_idle`).
    outstanding: AtomicUsize,
    serving: Serving,
}

/// What a topic served in device memory adds: the pool's exported memory, and the control
/// segment registered with the device, whose fence words the writers' streams write.
pub(crate) struct ServedDevice {
    pub(crate) backend: Arc<dyn DeviceBackend>,
    pub(crate) uuid: [u8; 16],
    /// A `cuda_device` pool: the descriptor of its memory (passed to every subscriber) and
    /// its bytes. `None` for a pinned pool, whose memory is the payload memfd.
    pub(crate) memory: Option<(OwnedFd, usize)>,
    /// The device address of the control segment's first word.
    control: DevicePtr,
    /// The control segment's host address, registered.
    registered: *mut u8,
    /// Per slot: the last fence value whose write was enqueued (one write per use however
    /// many seats send it).
    pub(crate) fenced: Box<[AtomicU64]>,
}

// SAFETY: `registered` is only passed back to the driver at drop; the rest is Send + Sync.
unsafe impl Send for ServedDevice {}
// SAFETY: as above.
unsafe impl Sync for ServedDevice {}

impl ServedDevice {
    pub(crate) fn new(pool: &Pool, control: &Segment) -> Result<Option<ServedDevice>> {
        let Some(d) = pool.device() else {
            return Ok(None);
        };
        let backend = Arc::clone(&d.backend);
        let ipc = backend.ipc().ok_or_else(|| {
            Error::new(
                ErrorCode::NotSupported,
                "the pool's device cannot serve memory across processes",
            )
        })?;
        let uuid = ipc.device_uuid()?;
        let memory = if pool.shared_segment().is_some() {
            None
        } else {
            Some(pool.export_device_memory()?)
        };
        // SAFETY: the segment stays mapped for as long as `Served` holds it, and `Served`
        // (which drops this) holds it; the registration ends in `drop`.
        let control_dev = unsafe { ipc.register_host(control.as_ptr(), control.len())? };
        let fenced = crate::cold::boxed_slice(pool.slot_count as usize, |_| AtomicU64::new(0))
            .map_err(|e| Error::new(ErrorCode::ResourceExhausted, e.to_string()))?;
        Ok(Some(ServedDevice {
            uuid,
            memory,
            control: control_dev,
            registered: control.as_ptr(),
            fenced,
            backend,
        }))
    }

    /// The device address of control word `index`.
    pub(crate) fn word(&self, index: usize) -> DevicePtr {
        DevicePtr::from_raw(self.control.raw() + 8 * index as u64)
    }
}

impl Drop for ServedDevice {
    fn drop(&mut self) {
        if let Some(ipc) = self.backend.ipc() {
            // SAFETY: dropped with `Served`, after the session synchronized every stream
            // that wrote a fence (the session drops its servers after that).
            let _ = unsafe { ipc.unregister_host(self.registered) };
        }
    }
}

/// One topic a session serves to other processes; [`stop`](Self::stop) ends every thread
/// and drops what the seats held.
pub(crate) struct ExportServer {
    served: Arc<Served>,
    listener: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

/// A per-process, per-call unique 64-bit value (the incarnation of a served topic).
fn incarnation() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let pid = u64::from(
        rustix::process::getpid()
            .as_raw_nonzero()
            .get()
            .unsigned_abs(),
    );
    let now = wire::monotonic_ns();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    (pid << 40) ^ now ^ (n << 20) ^ 0x9e37_79b9_7f4a_7c15
}

pub(crate) fn name_hash(s: &str) -> u64 {
    // FNV-1a: a stable id of the pool's name.
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl ExportServer {
    /// Binds the topic's socket in `namespace` and makes its control segment; serves
    /// nothing until [`spawn`](Self::spawn). `InvalidArgument` when another process
    /// already serves the topic in the namespace.
    pub(crate) fn bind(
        registry: &Arc<TopicRegistry>,
        record: &TopicRecord,
        pool: &Arc<Pool>,
        namespace: &str,
    ) -> Result<ExportServer> {
        let at = || format!("topic {:?}", record.name);
        let payload = payload_segment(pool, &record.name)?;
        let layout = ControlLayout {
            slots: pool.slot_count as usize,
            seats: record.subscribers as usize,
        };
        let (control, incarnation) = control_segment(&record.name, &layout)?;
        let device = ServedDevice::new(pool, &control).map_err(|e| e.at(at()))?;
        let socket = bind_socket(namespace, &record.name)?;
        Ok(ExportServer {
            served: Arc::new(Served {
                registry: Arc::clone(registry),
                topic: record.name.clone(),
                service: service_prefix(namespace, &record.name, incarnation),
                contract: record_wire(record)?,
                pool: Arc::clone(pool),
                pool_id: name_hash(&pool.name),
                payload,
                control,
                layout,
                incarnation,
                seats: record.subscribers,
                holds: record.holds_per_subscriber.max(1) as usize,
                device,
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
        let served = Arc::clone(&self.served);
        self.thread = Some(spawn_listener(&self.served.topic, move || {
            listen(&served, &socket);
        })?);
        Ok(())
    }

    /// Stops serving: the listener closes its socket, every seat says `BYE` to its
    /// subscriber and drops the tensors it held (their slots go back to the pool; a
    /// subscriber's mapping keeps its bytes readable). Joins every thread.
    pub(crate) fn stop(&mut self) {
        self.served.serving.stop(self.thread.take());
        self.listener = None;
    }

    /// Tensors sent to subscribers in other processes and not yet released by them.
    pub(crate) fn outstanding(&self) -> usize {
        self.served.outstanding.load(Ordering::Acquire)
    }
}

impl Drop for ExportServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn listen(served: &Arc<Served>, socket: &OwnedFd) {
    // A subscriber the handshake refused has been told why; one that failed it is dropped.
    let s = Arc::clone(served);
    served.serving.listen(&served.topic, socket, move |conn| {
        if let Ok(Some(seat)) = handshake(&s, conn) {
            seat.run(&s);
        }
    });
}

/// The payload segment a served topic's welcome passes: a host or pinned pool's memfd; for
/// a device pool (whose payload is its exported allocation) an empty stand-in.
pub(crate) fn payload_segment(pool: &Pool, topic: &str) -> Result<Arc<Segment>> {
    match pool.shared_segment() {
        Some(s) => Ok(Arc::clone(s)),
        None if pool.device().is_some() => Ok(Arc::new(Segment::create(
            &format!("holo:{topic}:device"),
            1,
        )?)),
        None => Err(Error::new(
            ErrorCode::Internal,
            "a topic served across processes has a pool outside shared memory",
        )
        .at(format!("topic {topic:?}"))),
    }
}

/// A served topic's control segment, laid out as `layout` in whole pages (it may be
/// registered with a device), its header naming a new incarnation; the incarnation. A
/// new server first removes the iceoryx2 resources dead processes left (a killed
/// predecessor, exporter or client, of an earlier run).
pub(crate) fn control_segment(topic: &str, layout: &ControlLayout) -> Result<(Arc<Segment>, u64)> {
    let bytes = layout
        .bytes()
        .and_then(|b| b.checked_next_multiple_of(rustix::param::page_size()))
        .ok_or_else(|| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "the control segment of {} slots and {} seats does not fit the address space",
                    layout.slots, layout.seats
                ),
            )
            .at(format!("topic {topic:?}"))
        })?;
    let control = Arc::new(Segment::create(&format!("holo:{topic}:control"), bytes)?);
    let incarnation = incarnation();
    let _ = node()?.try_cleanup_dead_nodes();
    if let Some(w) = control.word(0) {
        w.store(MAGIC, Ordering::Relaxed);
    }
    if let Some(w) = control.word(1) {
        w.store(incarnation, Ordering::Release);
    }
    Ok((control, incarnation))
}

/// Binds and listens on the abstract socket of `topic` in `namespace` (non-blocking):
/// `InvalidArgument` when another process serves the topic there.
pub(crate) fn bind_socket(namespace: &str, topic: &str) -> Result<OwnedFd> {
    let at = || format!("topic {topic:?}");
    let address = wire::socket_address(namespace, topic)?;
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| {
        Error::new(
            ErrorCode::ResourceExhausted,
            format!(
                "cannot make the topic's socket: {}",
                std::io::Error::from(e)
            ),
        )
        .at(at())
    })?;
    rustix::net::bind(&socket, &address).map_err(|e| {
            if e == rustix::io::Errno::ADDRINUSE {
                Error::invalid_argument(format!(
                    "another process already serves topic {topic:?} in namespace {namespace:?}; give this session another namespace (`SessionOptions::with_ipc_namespace`)"
                ))
            } else {
                Error::new(
                    ErrorCode::ResourceExhausted,
                    format!("cannot bind the topic's socket: {}", std::io::Error::from(e)),
                )
            }
            .at(at())
        })?;
    rustix::net::listen(&socket, 16).map_err(|e| {
        Error::new(
            ErrorCode::ResourceExhausted,
            format!(
                "cannot listen on the topic's socket: {}",
                std::io::Error::from(e)
            ),
        )
        .at(at())
    })?;
    Ok(socket)
}

/// Starts a served topic's listener thread running `listen`.
pub(crate) fn spawn_listener(
    topic: &str,
    listen: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>> {
    crate::cpus::spawn_worker(format!("holo-ipc-{topic}"), "holo-ipc listener", listen).map_err(
        |e| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("cannot start the topic's listener thread: {e}"),
            )
            .at(format!("topic {topic:?}"))
        },
    )
}

/// What a served topic's listener and connection threads share: the stop flag, and the
/// connection threads for `stop` to join.
#[derive(Default)]
pub(crate) struct Serving {
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Serving {
    /// Whether the topic stops being served.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Accepts connections on `socket` until stopped, each on a thread of its own running
    /// `serve` (a slow or silent peer delays no other attach); the threads are kept (finished
    /// ones dropped) for [`stop`](Self::stop) to join.
    pub(crate) fn listen(
        &self,
        topic: &str,
        socket: &OwnedFd,
        serve: impl Fn(OwnedFd) + Clone + Send + 'static,
    ) {
        let period = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        while !self.stopping() {
            let mut fds = [rustix::event::PollFd::new(
                socket,
                rustix::event::PollFlags::IN,
            )];
            if !matches!(rustix::event::poll(&mut fds, Some(&period)), Ok(n) if n > 0) {
                continue;
            }
            let Ok(conn) = rustix::net::accept_with(socket, SocketFlags::CLOEXEC) else {
                continue;
            };
            let serve = serve.clone();
            let spawned = crate::cpus::spawn_worker(
                format!("holo-ipc-{topic}"),
                "holo-ipc connection",
                move || serve(conn),
            );
            if let Ok(t) = spawned {
                let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
                // The threads of peers that came and went are done: not kept for `stop`.
                threads.retain(|t| !t.is_finished());
                threads.push(t);
            }
        }
    }

    /// Stops serving: sets the flag, joins `listener`, then every connection thread.
    pub(crate) fn stop(&self, listener: Option<JoinHandle<()>>) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = listener {
            let _ = t.join();
        }
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Refuses a subscriber with `code` and `message` (best effort: it may be gone).
pub(crate) fn refuse(conn: &OwnedFd, code: ErrorCode, message: &str) {
    let mut w: Welcome = wire::zeroed();
    w.magic = MAGIC;
    w.status = wire::status_of(code);
    let m = message.as_bytes();
    let n = m.len().min(w.message.len());
    w.message[..n].copy_from_slice(&m[..n]);
    w.message_len = u32::try_from(n).unwrap_or(0);
    let _ = wire::send(conn.as_fd(), &w, &[]);
}

/// The server's side of a handshake's first step: the client's hello, checked against
/// this server's `topic` and `contract`. `Ok(Some(pidfd))`: the client's process;
/// `Ok(None)`: refused, and the client told why (`client` and `server` name the roles in
/// the message).
pub(crate) fn greet(
    conn: &OwnedFd,
    topic: &str,
    contract: &WireContract,
    (client, server): (&str, &str),
    serving: &Serving,
) -> Result<Option<OwnedFd>> {
    wire::set_timeouts(conn.as_fd(), HANDSHAKE_TIMEOUT)?;
    let (hello, _) = wire::recv_by::<Hello>(
        conn.as_fd(),
        std::time::Instant::now() + HANDSHAKE_TIMEOUT,
        &|| serving.stopping(),
    )?;
    if hello.magic != MAGIC || hello.version != VERSION {
        refuse(
            conn,
            ErrorCode::ProtocolError,
            &format!(
                "the {client} speaks holo ipc version {}; this {server} speaks {VERSION}",
                hello.version
            ),
        );
        return Ok(None);
    }
    let name = hello
        .topic
        .get(..hello.topic_len as usize)
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("");
    if name != topic {
        refuse(
            conn,
            ErrorCode::NotFound,
            &format!("this socket serves topic {topic:?}, not {name:?}"),
        );
        return Ok(None);
    }
    if hello.contract != *contract {
        refuse(
            conn,
            ErrorCode::ProtocolError,
            &format!(
                "the {client}'s catalog gives topic {topic:?} another contract than the running {server}'s ({:?} where the {server} has {contract:?}): read the catalog the {server}'s session wrote",
                hello.contract
            ),
        );
        return Ok(None);
    }
    let peer = rustix::net::sockopt::socket_peercred(conn)
        .map_err(|e| Error::new(ErrorCode::PeerLost, std::io::Error::from(e).to_string()))?;
    let pidfd = rustix::process::pidfd_open(peer.pid, rustix::process::PidfdFlags::empty())
        .map_err(|e| Error::new(ErrorCode::PeerLost, std::io::Error::from(e).to_string()))?;
    Ok(Some(pidfd))
}

/// The handshake: the subscriber's hello, its checks, a seat, the welcome with both
/// segments. `Ok(None)`: refused (and told why).
fn handshake(served: &Arc<Served>, conn: OwnedFd) -> Result<Option<SeatWorker>> {
    static WORKERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let Some(pidfd) = greet(
        &conn,
        &served.topic,
        &served.contract,
        ("subscriber", "exporter"),
        &served.serving,
    )?
    else {
        return Ok(None);
    };
    // Claimed, not attached: the output sends the seat nothing before the subscriber is
    // ready (its READY), so a Block seat does not hold the producer back meanwhile.
    let sub = match ChannelSubscriber::<Tensor>::claim(
        &served.registry,
        &served.topic,
        SubscriberOptions::DEFAULT,
    ) {
        Ok(s) => s,
        Err(e) => {
            refuse(&conn, e.code(), e.message());
            return Ok(None);
        }
    };
    let mut w: Welcome = wire::zeroed();
    w.magic = MAGIC;
    w.seat = u32::try_from(sub.seat()).unwrap_or(u32::MAX);
    w.incarnation = served.incarnation;
    w.pool = served.pool_id;
    w.slot_count = served.pool.slot_count;
    w.seats = served.seats;
    w.per_slot_bytes = served.pool.per_slot_bytes() as u64;
    w.control_len = served.control.len() as u64;
    w.memory_kind = wire::kind_index(served.pool.kind);
    let payload = welcome_payload(&mut w, served.device.as_ref(), &served.payload);
    wire::send(conn.as_fd(), &w, &[payload, served.control.fd()])?;
    Ok(Some(SeatWorker {
        id: WORKERS.fetch_add(1, Ordering::Relaxed),
        seat: sub.seat(),
        sub: Some(sub),
        conn,
        pidfd,
    }))
}

/// What a welcome passes as the payload — a `cuda_device` pool's exported memory, else the
/// payload memfd — with its length and the device's UUID written into `w`.
pub(crate) fn welcome_payload<'a>(
    w: &mut Welcome,
    device: Option<&'a ServedDevice>,
    payload: &'a Segment,
) -> std::os::fd::BorrowedFd<'a> {
    if let Some(d) = device {
        w.device_uuid = d.uuid;
    }
    if let Some((fd, bytes)) = device.and_then(|d| d.memory.as_ref()) {
        w.payload_len = *bytes as u64;
        fd.as_fd()
    } else {
        w.payload_len = payload.len() as u64;
        payload.fd()
    }
}

/// One attached subscriber's seat.
struct SeatWorker {
    /// This worker's id (`SeatSender::worker`).
    id: u64,
    seat: usize,
    /// The seat's in-process subscriber; `None` once the remote subscriber detached.
    sub: Option<ChannelSubscriber<Tensor>>,
    conn: OwnedFd,
    pidfd: OwnedFd,
}

pub(crate) type Node = iceoryx2::node::Node<super::service::Service>;

/// The iceoryx2 node and service name of a seat (`<service>/<seat>`).
pub(crate) fn seat_service(prefix: &str, seat: usize) -> Result<ServiceName> {
    ServiceName::new(&format!("{prefix}/{seat}")).map_err(|e| {
        Error::invalid_argument(format!(
            "{prefix}/{seat} is no iceoryx2 service name: {e:?}"
        ))
    })
}

/// A node of this process with no signal handling of its own (the application owns
/// SIGINT and SIGTERM).
pub(crate) fn node() -> Result<Node> {
    super::quiet_logs();
    NodeBuilder::new()
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<super::service::Service>()
        .map_err(|e| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("cannot create an iceoryx2 node: {e:?}"),
            )
        })
}

pub(crate) fn iox_error(what: &str, name: &ServiceName, e: impl std::fmt::Debug) -> Error {
    Error::new(
        ErrorCode::ResourceExhausted,
        format!("iceoryx2 {what} {name}: {e:?}"),
    )
}

/// The prefix of a served topic's iceoryx2 services, per incarnation; a seat's are
/// `<prefix>/<seat>` ([`seat_service`]). Both ends name them so.
pub(crate) fn service_prefix(namespace: &str, topic: &str, incarnation: u64) -> String {
    format!("holo/{namespace}/{topic}/{incarnation:016x}")
}

pub(crate) type SeatPubSub = iceoryx2::service::port_factory::publish_subscribe::PortFactory<
    super::service::Service,
    SlotDescriptor,
    (),
>;
pub(crate) type SeatEvents =
    iceoryx2::service::port_factory::event::PortFactory<super::service::Service>;

/// A seat's descriptor and wake-up services, opened or created with the settings both
/// ends must agree on: one publisher, one subscriber, room for `holds` descriptors, no
/// history, no overflow (the exporter never sends more than `holds` unreleased).
pub(crate) fn seat_services(
    node: &Node,
    name: &ServiceName,
    holds: usize,
) -> Result<(SeatPubSub, SeatEvents)> {
    let pubsub = node
        .service_builder(name)
        .publish_subscribe::<SlotDescriptor>()
        .subscriber_max_buffer_size(holds)
        .history_size(0)
        .enable_safe_overflow(false)
        .max_publishers(1)
        .max_subscribers(1)
        .open_or_create()
        .map_err(|e| iox_error("service", name, e))?;
    let events = node
        .service_builder(name)
        .event()
        .open_or_create()
        .map_err(|e| iox_error("event service", name, e))?;
    Ok((pubsub, events))
}

/// How a seat ended.
enum End {
    /// The session stops serving: the subscriber was told `BYE`.
    Stopped,
    /// The subscriber's process exited: what it held is dropped.
    Exited,
    /// The subscriber detached and released everything it held.
    Detached,
}

/// The sending half of a seat: its iceoryx2 ports and the tensors sent and not yet
/// released. Behind the seat's hook (`RemoteHook`): the exporting output sends through it
/// from the emitting thread, the seat's thread when the output queued.
struct SeatSender {
    served: Arc<Served>,
    seat: usize,
    /// The seat worker that installed it (a detached worker's successor on the seat
    /// installs its own).
    worker: u64,
    /// The iceoryx2 ports and their node (in drop order); `None` once the subscriber
    /// detached (a new subscriber of the seat opens the service again).
    ports: Option<(Publisher, Notifier, Node)>,
    /// The tensors sent and not yet released: slot, fence value, the handle.
    parked: Vec<(u32, u64, Tensor)>,
}

pub(crate) type Publisher =
    iceoryx2::port::publisher::Publisher<super::service::Service, SlotDescriptor, ()>;
pub(crate) type Notifier = iceoryx2::port::notifier::Notifier<super::service::Service>;

impl Drop for SeatSender {
    /// What it still holds goes back to the pool, then is no longer outstanding.
    fn drop(&mut self) {
        let n = self.parked.len();
        self.parked.clear();
        self.served.outstanding.fetch_sub(n, Ordering::AcqRel);
    }
}

impl SeatSender {
    /// Drops every parked tensor whose release word names its use.
    fn reap(&mut self) {
        let mut i = 0;
        while i < self.parked.len() {
            let (slot, value, _) = self.parked[i];
            let released = self
                .served
                .control
                .word(self.served.layout.release(self.seat, slot as usize))
                .is_some_and(|w| w.load(Ordering::Acquire) == value);
            if released {
                drop(self.parked.swap_remove(i));
                self.served.outstanding.fetch_sub(1, Ordering::AcqRel);
            } else {
                i += 1;
            }
        }
    }

    fn has_room(&self) -> bool {
        self.parked.len() < self.served.holds
    }

    /// Writes the slot's fence word, sends the descriptor, wakes the subscriber, and keeps
    /// the tensor until its release.
    fn send(&mut self, t: Tensor, stamp: Stamp) -> Result<()> {
        let Some((publisher, notifier, _)) = &self.ports else {
            return Err(Error::new(ErrorCode::Cancelled, "the subscriber detached"));
        };
        if !t.in_pool(&self.served.pool) {
            // The output's emit refuses such a tensor; a descriptor names a slot of the
            // served pool, so nothing else may be described.
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "a tensor outside the served pool cannot cross to another process",
            ));
        }
        let mut desc = describe(&self.served, &t, stamp);
        fence(&self.served, &mut desc)?;
        self.parked.push((desc.slot, desc.fence_value, t));
        self.served.outstanding.fetch_add(1, Ordering::AcqRel);
        publisher
            .send_copy(desc)
            .map_err(|e| Error::new(ErrorCode::PeerLost, format!("iceoryx2 send: {e:?}")))?;
        let _ = notifier.notify();
        Ok(())
    }
}

impl RemoteSend for SeatSender {
    fn try_send(&mut self, t: &Tensor, stamp: Stamp) -> bool {
        self.reap();
        self.has_room() && self.send(t.clone(), stamp).is_ok()
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl SeatWorker {
    fn run(mut self, served: &Arc<Served>) {
        let hook = self.sub.as_ref().map(|s| Arc::clone(s.seat_state()));
        let end = self.serve(served);
        // Whatever happened, the tensors go back to the pool now: the session stops
        // (nothing reuses them), the process that read them exited, or it released them.
        if let Some(state) = hook {
            // Its own sender only: after a detach the seat may be another worker's.
            let mut g = state
                .1
                .sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let mine = g
                .as_mut()
                .and_then(|d| d.as_any().downcast_mut::<SeatSender>())
                .is_some_and(|s| s.worker == self.id);
            if mine {
                state.1.active.store(false, Ordering::Release);
                drop(g.take());
            }
        }
        if matches!(end, Ok(End::Stopped)) {
            let _ = wire::send(self.conn.as_fd(), &BYE, &[]);
        }
        if matches!(end, Ok(End::Exited)) {
            // The dead subscriber's iceoryx2 node leaves stale resources behind.
            if let Ok(n) = node() {
                let _ = n.try_cleanup_dead_nodes();
            }
        }
    }

    /// The seat's sender, installed in its hook, as `SeatSender`.
    fn with_sender<R>(state: &SeatState, f: impl FnOnce(&mut SeatSender) -> R) -> Option<R> {
        let mut g = state
            .1
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        g.as_mut()
            .and_then(|s| s.as_any().downcast_mut::<SeatSender>())
            .map(f)
    }

    fn serve(&mut self, served: &Arc<Served>) -> Result<End> {
        let seat = self.seat;
        let state = match &self.sub {
            Some(s) => Arc::clone(s.seat_state()),
            None => return Ok(End::Detached),
        };
        // The subscriber says READY once its mappings and its iceoryx2 subscriber exist.
        let (ready, _) = wire::recv_by::<u8>(
            self.conn.as_fd(),
            std::time::Instant::now() + READY_TIMEOUT,
            &|| served.serving.stopping(),
        )?;
        if ready != READY {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "no READY from the subscriber",
            ));
        }
        let node = node()?;
        let name = seat_service(&served.service, seat)?;
        let (pubsub, events) = seat_services(&node, &name, served.holds)?;
        let publisher = pubsub
            .publisher_builder()
            .create()
            .map_err(|e| iox_error("publisher", &name, e))?;
        let notifier = events
            .notifier_builder()
            .create()
            .map_err(|e| iox_error("notifier", &name, e))?;
        *state
            .1
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(SeatSender {
            served: Arc::clone(served),
            seat,
            worker: self.id,
            ports: Some((publisher, notifier, node)),
            parked: Vec::with_capacity(served.holds),
        }));
        state.1.active.store(true, Ordering::Release);
        if let Some(sub) = &self.sub {
            sub.activate();
        }
        // The subscriber's attach returns once its seat receives.
        wire::send(self.conn.as_fd(), &ACTIVE, &[])?;
        let mut checked = Instant::now();
        // A detached subscriber's sender, out of the seat's hook (a new subscriber of the
        // seat installs its own), reaped until what it holds is released.
        let mut detached: Option<Box<dyn RemoteSend>> = None;
        loop {
            if served.serving.stopping() {
                return Ok(End::Stopped);
            }
            let (parked, queued) = if let Some(old) = detached
                .as_mut()
                .and_then(|d| d.as_any().downcast_mut::<SeatSender>())
            {
                old.reap();
                (old.parked.len(), Ok(0))
            } else {
                // Reap, then send what the output queued while the subscriber had no room
                // (popped and sent under the sender's lock: nothing overtakes it).
                let sub = self.sub.as_mut();
                Self::with_sender(&state, |sender| {
                    sender.reap();
                    let Some(sub) = sub else {
                        return (sender.parked.len(), Ok(0));
                    };
                    while sender.has_room() {
                        match sub.try_receive() {
                            Ok(Some(t)) => {
                                if let Err(e) = sender.send(t, sub.last_stamp()) {
                                    return (sender.parked.len(), Err(e));
                                }
                            }
                            Ok(None) => break,
                            Err(e) => return (sender.parked.len(), Err(e)),
                        }
                    }
                    (sender.parked.len(), Ok(sub.pending()))
                })
                .unwrap_or((0, Ok(0)))
            };
            let Ok(queued) = queued else {
                // The session is stopping (`Cancelled`) or iceoryx2 failed.
                return Ok(End::Stopped);
            };
            if checked.elapsed() >= LIVENESS_PERIOD {
                checked = Instant::now();
                if wire::readable(self.pidfd.as_fd()) {
                    return Ok(End::Exited);
                }
                if self.sub.is_some() && wire::readable(self.conn.as_fd()) {
                    // The subscriber closed its socket (it sends nothing else): the output
                    // sends it nothing more, its seat is free again, and its ports close;
                    // what it holds stays held until released or its process exits.
                    state.1.active.store(false, Ordering::Release);
                    let mut old = state
                        .1
                        .sender
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take();
                    if let Some(s) = old
                        .as_mut()
                        .and_then(|d| d.as_any().downcast_mut::<SeatSender>())
                    {
                        s.ports = None;
                    }
                    detached = old;
                    self.sub = None;
                }
            }
            match &self.sub {
                None if parked == 0 => return Ok(End::Detached),
                None => std::thread::sleep(Duration::from_micros(200)),
                // Frames wait for the subscriber's room: poll its release words.
                Some(_) if queued > 0 => std::thread::sleep(Duration::from_micros(20)),
                // Nothing queued: the output sends on its own; wake for a queued frame, a
                // release to reap while the output is idle, or the liveness check.
                Some(sub) => sub.wait_pending(if parked > 0 {
                    Duration::from_micros(200)
                } else {
                    LIVENESS_PERIOD
                }),
            }
        }
    }
}

/// Fences the use `desc` describes: host memory, the CPU writes the slot's fence word
/// now (the bytes are complete); device memory, the first seat to send the use enqueues
/// the fence write on the stream that wrote the slot (the CPU writes it when the host
/// wrote it), and every seat's descriptor names the value.
fn fence(served: &Served, desc: &mut SlotDescriptor) -> Result<()> {
    let slot = desc.slot as usize;
    let index = ControlLayout::fence(slot);
    let Some(device) = &served.device else {
        desc.fence_value = wire::use_word(desc.generation);
        if let Some(f) = served.control.word(index) {
            f.store(desc.fence_value, Ordering::Release);
        }
        return Ok(());
    };
    // The stream that wrote the slot fences it; bytes written on the host (a pinned
    // pool's `write_host_and_commit`) are complete: the CPU writes the fence.
    let writer = served.pool.writer_stream(desc.slot);
    desc.fence = if writer.is_some() {
        wire::fence::STREAM
    } else {
        wire::fence::HOST
    };
    desc.device_uuid = device.uuid;
    let last = &device.fenced[slot];
    let mut seen = last.load(Ordering::Acquire);
    loop {
        let value = wire::next_fence_value(seen, desc.generation);
        desc.fence_value = value;
        if value == seen && writer.is_some() {
            // Another seat enqueued this use's write.
            return Ok(());
        }
        if value == seen {
            break;
        }
        match last.compare_exchange(seen, value, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) => seen = now,
        }
    }
    if let Some(stream) = writer {
        let ipc = device.backend.ipc().ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                "a device server's backend lost its ipc",
            )
        })?;
        // SAFETY: the fence word is in the control segment, registered until `Served`
        // drops, which the session does after synchronizing every stream.
        unsafe { ipc.write_value(stream, device.word(index), desc.fence_value) }
    } else {
        // Written on the host: the bytes are complete. Every seat stores the value (the
        // same one): none sends its descriptor before the word names the use.
        if let Some(f) = served.control.word(index) {
            f.store(desc.fence_value, Ordering::Release);
        }
        Ok(())
    }
}

/// The descriptor of `t` (a tensor of the served pool), stamped `stamp` (the session
/// clock's nanoseconds, made `CLOCK_MONOTONIC`'s).
fn describe(served: &Served, t: &Tensor, stamp: Stamp) -> SlotDescriptor {
    let r = t.slot_ref();
    let mut shape = [0u64; crate::spec::MAX_TENSOR_RANK as usize];
    let s = t.shape();
    shape[..s.len()].copy_from_slice(s);
    // Bracketed by the session clock (a TSC read) rather than `CLOCK_MONOTONIC`: one
    // `clock_gettime` a frame, not two.
    let (now_mono, now_session) = crate::session::context::read_as_one_moment(
        || served.registry.clock.now_ns(),
        wire::monotonic_ns,
    );
    let mono = |ns: u64| now_mono.saturating_sub(now_session.saturating_sub(ns));
    SlotDescriptor {
        incarnation: served.incarnation,
        pool: served.pool_id,
        slot: r.slot,
        generation: r.generation,
        offset: u64::from(r.slot) * served.pool.per_slot_bytes() as u64,
        byte_size: t.byte_size() as u64,
        shape,
        rank: u8::try_from(s.len()).unwrap_or(u8::MAX),
        dtype: wire::dtype_index(t.dtype()),
        memory_kind: wire::kind_index(t.memory_kind()),
        fence: wire::fence::HOST,
        _pad: [0; 4],
        device_uuid: [0; 16],
        fence_value: 0,
        frame: stamp.frame,
        capture_ns: if stamp.capture_ns == crate::session::context::NO_CAPTURE {
            0
        } else {
            mono(stamp.capture_ns)
        },
        publish_ns: mono(stamp.publish_ns),
    }
}
