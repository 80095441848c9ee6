//! The importing side: [`ProcessSubscriber`], a standalone client in another process.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dlpark::AllocationDeleter;
use iceoryx2::port::listener::Listener;
use iceoryx2::port::subscriber::Subscriber;

use super::catalog::{CatalogTopic, EndpointCatalog};
use super::export::{node, seat_service, seat_services, service_prefix};
use super::segment::Segment;
use super::wire::{self, BYE, ControlLayout, MAGIC, READY, SlotDescriptor, Welcome};
use crate::channel::pool::{ForeignBytes, Pool, TensorMeta};
use crate::device::{DeviceBackend, DevicePtr, StreamHandle, StreamOrQueue};
use crate::spec::{DType, MAX_TENSOR_RANK, TensorInputSpec};
use crate::tensor::Tensor;
use crate::{Error, ErrorCode, MemoryKind, Result};

type Service = super::service::Service;

/// Options of a [`ProcessSubscriber`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessSubscriberOptions {
    /// How long an attach waits for the exporting session to serve the topic (its socket
    /// to exist): `None` fails at once with `NotFound` when it does not.
    pub wait_for_exporter: Option<Duration>,
    /// The tensor contract the subscriber relies on: every field it states must be the
    /// catalog's, or the attach is refused (`ProtocolError`).
    pub expected: Option<TensorInputSpec>,
    /// How long each handshake step may take (default 2 s).
    pub handshake_timeout: Duration,
}

impl Default for ProcessSubscriberOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl ProcessSubscriberOptions {
    /// No waiting for the exporter, any contract, 2 s per handshake step.
    pub const DEFAULT: Self = Self {
        wait_for_exporter: None,
        expected: None,
        handshake_timeout: Duration::from_secs(2),
    };

    /// These options with `timeout` for each handshake step (above zero).
    #[must_use]
    pub const fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// These options waiting up to `wait` for the exporter.
    #[must_use]
    pub const fn with_wait_for_exporter(mut self, wait: Duration) -> Self {
        self.wait_for_exporter = Some(wait);
        self
    }

    /// These options expecting `contract`.
    #[must_use]
    pub const fn with_expected(mut self, contract: TensorInputSpec) -> Self {
        self.expected = Some(contract);
        self
    }
}

/// What travelled with a tensor received from another process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteFrameInfo {
    /// The frame id the exporting session gave it.
    pub frame: u64,
    /// When it was captured (`CLOCK_MONOTONIC` nanoseconds, the clock every process of
    /// the machine shares); `None` when the exporter's frame had no capture time.
    pub capture_ns: Option<u64>,
    /// When the exporter sent its descriptor (`CLOCK_MONOTONIC` nanoseconds).
    pub publish_ns: u64,
    /// The slot and generation it came in (`SlotRef` of the exporter's pool).
    pub slot: crate::channel::SlotRef,
}

/// Why a subscriber no longer receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Up,
    /// The exporter said `BYE`.
    Stopped,
    /// The exporter's process exited (or closed the socket without `BYE`).
    Lost,
}

/// A standalone subscriber of a topic that a session in another process exports
/// (`TopicOptions::across_processes`), attached by name through the exporter's
/// [`EndpointCatalog`] (docs/IPC.md).
///
/// It takes one of the topic's subscriber seats. Each received tensor is a read-only view
/// of the exporter's shared pool slot (no copy): the exporter does not reuse the slot until
/// the tensor — and every handle cloned from it — has dropped, or this process has exited.
/// A tensor may outlive the subscriber and the exporter: the mapping stays valid.
///
/// A topic in CUDA device or pinned memory is mapped on the exporter's GPU (found by its
/// UUID, or the device given to [`attach_with_device`](Self::attach_with_device)), and the
/// subscriber has its own [`stream`](Self::stream): each received tensor is ordered behind
/// its frame's fence on that stream (no host wait), and its release is written there when
/// it drops. A pinned frame the exporter wrote on the host is complete on arrival.
///
/// `receive` returns `Cancelled` once the exporting session stopped serving the topic
/// (after what was already sent), and `PeerLost` once the exporter's process died — never
/// blocks past its timeout.
pub struct ProcessSubscriber {
    topic: CatalogTopic,
    seat: usize,
    incarnation: u64,
    welcome: Welcome,
    layout: ControlLayout,
    /// The mapped segments and the release tickets, shared with every tensor received.
    mirror: Arc<Mirror>,
    conn: OwnedFd,
    exporter: OwnedFd,
    exporter_pid: i32,
    link: Link,
    last: RemoteFrameInfo,
    // Ports before their node (drop order).
    subscriber: Subscriber<Service, SlotDescriptor, ()>,
    listener: Listener<Service>,
    _node: iceoryx2::node::Node<Service>,
}

impl std::fmt::Debug for ProcessSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessSubscriber")
            .field("topic", &self.topic.name)
            .field("seat", &self.seat)
            .field("incarnation", &format_args!("{:016x}", self.incarnation))
            .field("exporter_pid", &self.exporter_pid)
            .finish_non_exhaustive()
    }
}

fn exhausted(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::new(ErrorCode::ResourceExhausted, format!("{what}: {e:?}"))
}

impl ProcessSubscriber {
    /// Attaches to `topic` of `catalog`'s exporter. Refused, with nothing attached:
    /// `NotFound` for a topic the catalog lacks or an exporter that does not serve it (after
    /// `wait_for_exporter`); `ProtocolError` when `expected` differs from the catalog, or
    /// the running exporter's contract from the catalog's; `ResourceExhausted` when every
    /// declared subscriber is attached; `PeerLost` when the exporter dies mid-handshake.
    pub fn attach(
        catalog: &EndpointCatalog,
        topic: &str,
        options: ProcessSubscriberOptions,
    ) -> Result<ProcessSubscriber> {
        Self::attach_inner(catalog, topic, options, None)
    }

    /// [`attach`](Self::attach) to a topic in CUDA device memory on `device` (a
    /// [`CudaDevice`](crate::device::CudaDevice) the caller opened, e.g. on its own
    /// context): the exporter's pool is mapped on it and the subscriber's stream made in
    /// it. `InvalidArgument` when `device` is not the exporter's GPU (its UUID differs) or
    /// cannot map another process's memory. [`attach`](Self::attach) finds the exporter's
    /// device itself.
    pub fn attach_with_device(
        catalog: &EndpointCatalog,
        topic: &str,
        options: ProcessSubscriberOptions,
        device: Arc<dyn DeviceBackend>,
    ) -> Result<ProcessSubscriber> {
        Self::attach_inner(catalog, topic, options, Some(device))
    }

    fn attach_inner(
        catalog: &EndpointCatalog,
        topic: &str,
        options: ProcessSubscriberOptions,
        device: Option<Arc<dyn DeviceBackend>>,
    ) -> Result<ProcessSubscriber> {
        let entry = catalog.topic(topic)?.clone();
        let at = format!("topic {topic:?}");
        if entry.direction != "export" {
            return Err(Error::invalid_argument(format!(
                "the session imports topic {topic:?}: a ProcessPublisher publishes into it; a ProcessSubscriber receives a topic the session exports"
            ))
            .at(at));
        }
        entry.check_expected(options.expected.as_ref())?;
        let contract = entry.wire()?;
        let wire::Greeted {
            conn,
            server: exporter,
            server_pid: exporter_pid,
            welcome,
            payload: payload_fd,
            control: control_fd,
        } = wire::connect_and_greet(
            &catalog.namespace,
            topic,
            contract,
            options.wait_for_exporter,
            options.handshake_timeout,
            "exporter",
            "start the exporter first, or attach with `wait_for_exporter`",
        )?;
        let Some(layout) = welcome.checked_layout(true) else {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the exporter's welcome describes segments that do not hold its slots",
            )
            .at(at));
        };
        let seat = welcome.seat as usize;
        let sized = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let kind = wire::KINDS.get(usize::from(welcome.memory_kind)).copied();
        if kind.map(MemoryKind::wire_name) != Some(entry.memory_kind.as_str()) {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                format!(
                    "the exporter serves the topic in {} memory; the catalog says {}",
                    kind.map_or("unknown", MemoryKind::wire_name),
                    entry.memory_kind
                ),
            )
            .at(at));
        }
        let control = Segment::import(control_fd, sized(welcome.control_len), true)?;
        let payload = match kind {
            Some(MemoryKind::PinnedHost) => {
                let pinned = Segment::import(payload_fd, sized(welcome.payload_len), false)?;
                let mapped = MirrorDevice::map(device, &welcome, Mapped::Pinned(&pinned), &control)
                    .map_err(|e| e.at(at.clone()))?;
                Payload::Pinned(mapped, pinned)
            }
            Some(MemoryKind::CudaDevice) => Payload::Device(
                MirrorDevice::map(device, &welcome, Mapped::Device(&payload_fd), &control)
                    .map_err(|e| e.at(at.clone()))?,
            ),
            Some(MemoryKind::Host) => Payload::Host(Segment::import(
                payload_fd,
                sized(welcome.payload_len),
                false,
            )?),
            _ => {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    "the exporter serves a memory kind that does not cross processes",
                )
                .at(at));
            }
        };
        let header = |i| control.word(i).map_or(0, |w| w.load(Ordering::Acquire));
        if header(0) != MAGIC || header(1) != welcome.incarnation {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the exporter's control segment names another incarnation than its welcome",
            )
            .at(at));
        }
        let node = node()?;
        let service = seat_service(
            &service_prefix(&catalog.namespace, topic, welcome.incarnation),
            seat,
        )?;
        let holds = entry.holds_per_subscriber.max(1) as usize;
        let (pubsub, events) = seat_services(&node, &service, holds)?;
        let subscriber = pubsub
            .subscriber_builder()
            .buffer_size(holds)
            .create()
            .map_err(|e| exhausted("iceoryx2 subscriber", e))?;
        let listener = events
            .listener_builder()
            .create()
            .map_err(|e| exhausted("iceoryx2 listener", e))?;
        wire::send(conn.as_fd(), &READY, &[])?;
        // Attached once the exporter says so: from then on every frame is sent here.
        let (active, _) = wire::recv::<u8>(conn.as_fd()).map_err(|e| e.at(at.clone()))?;
        if active != wire::ACTIVE {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the exporter did not attach the seat",
            )
            .at(at));
        }
        let watched = exporter
            .try_clone()
            .map_err(|e| exhausted("cannot keep the exporter's pidfd", e))?;
        let mirror = Mirror::new(payload, control, layout.slots, watched)?;
        if mirror.device().is_some() {
            Watchdog::start(&mirror)?;
        }
        Ok(ProcessSubscriber {
            topic: entry,
            seat,
            incarnation: welcome.incarnation,
            welcome,
            layout,
            mirror,
            conn,
            exporter,
            exporter_pid,
            link: Link::Up,
            last: RemoteFrameInfo::default(),
            subscriber,
            listener,
            _node: node,
        })
    }

    /// The next tensor, waiting up to `timeout` for one: `None` when none came in time.
    /// `Cancelled` once the exporter stopped serving and everything it sent was received;
    /// `PeerLost` once its process died (likewise after what was sent); `InvalidArgument`
    /// for a descriptor that names no live use of a slot (a stale generation, another
    /// incarnation), which is skipped.
    pub fn receive(&mut self, timeout: Duration) -> Result<Option<Tensor>> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if let Some(d) = self
                .subscriber
                .receive()
                .map_err(|e| Error::new(ErrorCode::PeerLost, format!("iceoryx2 receive: {e:?}")))?
            {
                let desc = *d.payload();
                drop(d);
                return self.accept(&desc).map(Some);
            }
            if self.link != Link::Up {
                return Err(self.ended());
            }
            self.check_link();
            if self.link != Link::Up {
                // Whatever was sent before the end is still received.
                continue;
            }
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => return Ok(None),
                Some(d) => d - now,
                None => Duration::from_millis(20),
            };
            self.listener
                .timed_wait(|_| {}, left.min(Duration::from_millis(20)))
                .map_err(|e| Error::new(ErrorCode::PeerLost, format!("iceoryx2 wait: {e:?}")))?;
        }
    }

    /// [`receive`](Self::receive), with what travelled with the tensor.
    pub fn receive_with_info(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<(Tensor, RemoteFrameInfo)>> {
        Ok(self.receive(timeout)?.map(|t| (t, self.last)))
    }

    /// What travelled with the tensor received last.
    pub fn last_info(&self) -> RemoteFrameInfo {
        self.last
    }

    /// The topic's catalog entry.
    pub fn topic(&self) -> &CatalogTopic {
        &self.topic
    }

    /// The seat this subscriber holds, `0..subscribers`.
    pub fn seat(&self) -> usize {
        self.seat
    }

    /// The exporter's incarnation: a restarted exporter is a new one.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The exporting process's id.
    pub fn exporter_pid(&self) -> i32 {
        self.exporter_pid
    }

    /// A topic in device memory: the device the exporter's pool is mapped on here.
    pub fn device(&self) -> Option<&Arc<dyn DeviceBackend>> {
        self.mirror.device().map(|d| &d.backend)
    }

    /// A topic in device memory: the subscriber's stream. Each received tensor is ready on
    /// it (it waited for the tensor's fence); a consumer on another stream is ordered
    /// behind it by the tensor's readiness, like any device tensor's. When a received
    /// tensor's last handle drops, this stream writes its release.
    pub fn stream(&self) -> Option<StreamHandle> {
        self.mirror.device().map(|d| d.stream)
    }

    /// A topic in device memory: how many received frames' fences never came because the
    /// exporter's process died first (its watchdog ended their waits; their bytes are not
    /// the frame's). 0 while the exporter lives.
    pub fn abandoned_frames(&self) -> u64 {
        self.mirror.abandoned.load(Ordering::Relaxed)
    }

    fn ended(&self) -> Error {
        let at = format!("topic {:?}", self.topic.name);
        match self.link {
            Link::Stopped => Error::new(
                ErrorCode::Cancelled,
                "the exporting session stopped serving the topic",
            )
            .at(at),
            _ => Error::new(
                ErrorCode::PeerLost,
                format!("the exporting process (pid {}) exited", self.exporter_pid),
            )
            .at(at),
        }
    }

    /// Looks at the exporter's socket and process.
    fn check_link(&mut self) {
        if wire::readable(self.conn.as_fd()) {
            let mut b = [0u8; 1];
            self.link =
                match rustix::net::recv(&self.conn, &mut b, rustix::net::RecvFlags::DONTWAIT) {
                    Ok((1, _)) if b[0] == BYE => Link::Stopped,
                    _ => Link::Lost,
                };
        } else if wire::readable(self.exporter.as_fd()) {
            self.link = Link::Lost;
        }
    }

    /// A descriptor, checked, as a read-only tensor over the shared slot; in device memory,
    /// ordered behind the slot's fence on the subscriber's stream.
    fn accept(&mut self, d: &SlotDescriptor) -> Result<Tensor> {
        let at = || format!("topic {:?}", self.topic.name);
        let slot = d.slot as usize;
        let fence = self
            .mirror
            .control
            .word(ControlLayout::fence(slot))
            .map_or(0, |w| w.load(Ordering::Acquire));
        let expected = Expected {
            incarnation: self.incarnation,
            pool: self.welcome.pool,
            slots: self.layout.slots,
            per_slot_bytes: self.welcome.per_slot_bytes,
            payload_len: self.mirror.payload_len(),
            kind: self.mirror.kind(),
            device_uuid: self.welcome.device_uuid,
        };
        let meta = check_descriptor(d, &expected, fence).map_err(|e| e.at(at()))?;
        let stream_fenced = d.fence == wire::fence::STREAM;
        if let Some(dev) = self.mirror.device().filter(|_| stream_fenced) {
            self.mirror.armed[slot].store(d.fence_value, Ordering::Release);
            // SAFETY: the fence word is in the control segment, registered until the
            // mirror drops, which synchronizes this stream first.
            unsafe {
                dev.ipc()?.wait_value_geq(
                    dev.stream,
                    dev.word(ControlLayout::fence(slot)),
                    d.fence_value,
                )
            }
            .map_err(|e| e.at(at()))?;
        }
        let owner = self
            .mirror
            .ticket(slot, self.layout.release(self.seat, slot), d.fence_value);
        let addr = self.mirror.payload_addr() + d.offset;
        let kind = self.mirror.kind();
        let dev = self.mirror.device();
        let pool = Pool::wrap_foreign(ForeignBytes {
            kind,
            addr,
            meta,
            backend: dev.map(|d| &d.backend),
            owner,
        })?;
        if let Some(dev) = dev {
            if stream_fenced {
                // Consumers are ordered behind the subscriber's stream, which waits for
                // the fence.
                pool.record_foreign_readiness(0, StreamOrQueue::Backend(dev.stream))
                    .map_err(|e| e.at(at()))?;
                // The slot's fence word tells the holder whether the watchdog abandoned
                // it (`Tensor::fence_abandoned`); the ticket keeps the mirror, and so the
                // word, mapped while the tensor lives.
                if let Some(word) = self.mirror.control.word(ControlLayout::fence(slot)) {
                    pool.set_fence_words(crate::channel::pool::FenceWords {
                        first: std::ptr::NonNull::from(word),
                        abandoned: wire::fence::ABANDONED,
                        keep: None,
                    })
                    .map_err(|e| e.at(at()))?;
                }
            } else {
                // Pinned bytes the exporter wrote on the host: complete, no stream to
                // wait for (`synchronize_for_host` returns at once).
                pool.mark_foreign_host_ready(0);
            }
        }
        self.last = RemoteFrameInfo {
            frame: d.frame,
            capture_ns: (d.capture_ns != 0).then_some(d.capture_ns),
            publish_ns: d.publish_ns,
            slot: crate::channel::SlotRef {
                slot: d.slot,
                generation: d.generation,
            },
        };
        Ok(Tensor::from_foreign(pool))
    }
}

/// What a descriptor must agree with: the subscriber's exporter and its pool.
struct Expected {
    incarnation: u64,
    pool: u64,
    slots: usize,
    per_slot_bytes: u64,
    payload_len: u64,
    /// The pool's memory kind, and its device's UUID (zero for host memory).
    kind: MemoryKind,
    device_uuid: [u8; 16],
}

/// Checks a descriptor against its exporter (`expected`) and its slot's fence word
/// (`fence`), and gives its tensor's metadata: `InvalidArgument` for one of another
/// incarnation or pool, a slot out of range, a generation the fence does not name (stale),
/// bytes that are not the slot's, an unknown dtype, a rank or shape that does not make its
/// bytes, a memory kind other than host.
fn check_descriptor(d: &SlotDescriptor, expected: &Expected, fence: u64) -> Result<TensorMeta> {
    let refused = |why: String| Err(Error::invalid_argument(why));
    if d.incarnation != expected.incarnation || d.pool != expected.pool {
        return refused(format!(
            "a descriptor of incarnation {:016x} (pool {:016x}) reached a subscriber of incarnation {:016x} (pool {:016x})",
            d.incarnation, d.pool, expected.incarnation, expected.pool
        ));
    }
    let slot = d.slot as usize;
    if slot >= expected.slots {
        return refused(format!(
            "a descriptor names slot {slot} of {}",
            expected.slots
        ));
    }
    // Host memory is fenced on the host; device memory on a stream; pinned memory by its
    // writer, either.
    let host_fenced = match expected.kind {
        MemoryKind::Host => true,
        MemoryKind::PinnedHost => d.fence == wire::fence::HOST,
        _ => false,
    };
    let low_half = d.fence_value & 0xffff_ffff == u64::from(d.generation.wrapping_add(1));
    if expected.kind != MemoryKind::Host && fence == wire::fence::ABANDONED {
        return Err(Error::new(
            ErrorCode::PeerLost,
            format!(
                "the exporter died before its stream fenced slot {slot} generation {}: the frame is lost",
                d.generation
            ),
        ));
    }
    if host_fenced {
        let value_names_use = if expected.kind == MemoryKind::Host {
            d.fence_value == wire::use_word(d.generation)
        } else {
            low_half
        };
        if d.fence != wire::fence::HOST || !value_names_use || fence != d.fence_value {
            return refused(format!(
                "a descriptor of slot {slot} generation {} is stale: the slot's fence names generation {}",
                d.generation,
                fence.wrapping_sub(1)
            ));
        }
    } else {
        // The writer's stream may not have written the fence yet (the subscriber's
        // stream waits for it); a fence past the descriptor's value names a later use.
        if d.fence != wire::fence::STREAM || !low_half || fence > d.fence_value {
            return refused(format!(
                "a descriptor of slot {slot} generation {} (fence value {}) is stale: the slot's fence names value {fence}",
                d.generation, d.fence_value
            ));
        }
        if d.device_uuid != expected.device_uuid {
            return refused(format!(
                "a descriptor names device {}, not the exporter's {}",
                crate::device::uuid_text(&d.device_uuid),
                crate::device::uuid_text(&expected.device_uuid)
            ));
        }
    }
    let end = d.offset.checked_add(d.byte_size);
    if d.offset != u64::from(d.slot) * expected.per_slot_bytes
        || d.byte_size > expected.per_slot_bytes
        || end.is_none_or(|e| e > expected.payload_len)
    {
        return refused(format!(
            "a descriptor's bytes {}..+{} are not slot {slot}'s",
            d.offset, d.byte_size
        ));
    }
    let Some(&dtype) = DType::ALL.get(usize::from(d.dtype)) else {
        return refused(format!("a descriptor's dtype {} is unknown", d.dtype));
    };
    if u32::from(d.rank) > MAX_TENSOR_RANK {
        return refused(format!("a descriptor's rank {} is too large", d.rank));
    }
    if wire::KINDS.get(usize::from(d.memory_kind)) != Some(&expected.kind) {
        return refused(format!(
            "a descriptor of a memory kind other than the pool's {}",
            expected.kind
        ));
    }
    let mut meta = TensorMeta::EMPTY;
    meta.shape = d.shape;
    meta.rank = d.rank;
    meta.dtype = dtype;
    if crate::channel::pool::checked_byte_size(meta.shape(), dtype) != Some(d.byte_size) {
        return refused(format!(
            "a descriptor's shape {:?} of {dtype} does not make its {} bytes",
            meta.shape(),
            d.byte_size
        ));
    }
    meta.byte_size = usize::try_from(d.byte_size).unwrap_or(usize::MAX);
    Ok(meta)
}

/// Where the exporter's slots are mapped here.
enum Payload {
    /// Host memory: the exporter's memfd, mapped read-only.
    Host(Segment),
    /// CUDA device memory: the exporter's allocation, imported and mapped on this device.
    Device(MirrorDevice),
    /// Pinned host memory: the exporter's memfd, mapped read-only and registered (read-only)
    /// with this device (unregistered, with the mirror, before the segment unmaps).
    Pinned(MirrorDevice, Segment),
}

/// What a device mirror maps of the payload.
#[derive(Clone, Copy)]
pub(crate) enum Mapped<'a> {
    /// The server's virtual-memory allocation (its descriptor).
    Device(&'a OwnedFd),
    /// The server's pinned memfd, mapped here already: registered read-only (a
    /// subscriber's).
    Pinned(&'a Segment),
    /// The same, registered read-write (a publisher's, whose stream may write it).
    PinnedWritable(&'a Segment),
}

/// A device or pinned pool's mapping here, the control segment's registration, and this
/// side's stream (a subscriber's waits for the fences and writes the release words; a
/// publisher's writes the slots and their fences). Dropped, it synchronizes the stream,
/// then unmaps and unregisters what it mapped and destroys the stream.
pub(crate) struct MirrorDevice {
    pub(crate) backend: Arc<dyn DeviceBackend>,
    pub(crate) stream: StreamHandle,
    /// The device address of the payload: the imported allocation, or the registered
    /// pinned segment.
    pub(crate) payload: DevicePtr,
    /// Pinned: the segment's host address, registered (else the payload is an import).
    pinned: Option<*mut u8>,
    /// The device address of the control segment's first word.
    control: DevicePtr,
    /// The control segment's host address, registered.
    registered: *mut u8,
}

impl MirrorDevice {
    /// Maps the exporter's allocation (`fd`) and registers `control` on `device`, or on the
    /// CUDA device the welcome names; makes this side's stream. Undoes what it did on
    /// failure.
    pub(crate) fn map(
        device: Option<Arc<dyn DeviceBackend>>,
        welcome: &Welcome,
        what: Mapped<'_>,
        control: &Segment,
    ) -> Result<MirrorDevice> {
        let uuid = welcome.device_uuid;
        let backend = match device {
            Some(d) => d,
            None => crate::device::open_cuda_by_uuid(uuid)?,
        };
        let ipc = backend.ipc().ok_or_else(|| {
            Error::invalid_argument(format!(
                "the {} device cannot map another process's memory; the topic is in CUDA device memory",
                backend.backend_kind().name()
            ))
        })?;
        let mine = ipc.device_uuid()?;
        if mine != uuid {
            return Err(Error::invalid_argument(format!(
                "the subscriber's device {} is not the exporter's {}: attach on the exporter's GPU",
                crate::device::uuid_text(&mine),
                crate::device::uuid_text(&uuid)
            )));
        }
        let bytes = usize::try_from(welcome.payload_len).unwrap_or(usize::MAX);
        let (payload, pinned) = match what {
            Mapped::Device(fd) => (ipc.import_fd(fd.as_fd(), bytes)?, None),
            // SAFETY: the segment is kept by the mirror, which unregisters it first.
            Mapped::Pinned(s) => (
                unsafe { ipc.register_host_read_only(s.as_ptr(), s.len())? },
                Some(s.as_ptr()),
            ),
            // SAFETY: as above.
            Mapped::PinnedWritable(s) => (
                unsafe { ipc.register_host(s.as_ptr(), s.len())? },
                Some(s.as_ptr()),
            ),
        };
        let undo_payload = |ipc: &dyn crate::device::DeviceIpc| {
            // SAFETY: mapped or registered just above, used by nothing.
            unsafe {
                let _ = match pinned {
                    Some(p) => ipc.unregister_host(p),
                    None => ipc.release_import(payload),
                };
            }
        };
        // SAFETY: the segment is kept by the mirror, which unregisters it before it drops.
        let registered = unsafe { ipc.register_host(control.as_ptr(), control.len()) };
        let control_dev = match registered {
            Ok(c) => c,
            Err(e) => {
                undo_payload(ipc);
                return Err(e);
            }
        };
        let stream = match backend.create_stream() {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: as above.
                unsafe {
                    let _ = ipc.unregister_host(control.as_ptr());
                }
                undo_payload(ipc);
                return Err(e);
            }
        };
        Ok(MirrorDevice {
            backend,
            stream,
            payload,
            pinned,
            control: control_dev,
            registered: control.as_ptr(),
        })
    }

    pub(crate) fn ipc(&self) -> Result<&dyn crate::device::DeviceIpc> {
        self.backend
            .ipc()
            .ok_or_else(|| Error::new(ErrorCode::Internal, "a device mirror lost its ipc"))
    }

    /// The device address of control word `index`.
    pub(crate) fn word(&self, index: usize) -> DevicePtr {
        DevicePtr::from_raw(self.control.raw() + 8 * index as u64)
    }
}

impl Drop for MirrorDevice {
    /// The stream's pending work runs first (waits, release or fence writes, a
    /// publisher's writes into the slots), then the mapping, the registrations and the
    /// stream go.
    fn drop(&mut self) {
        let _ = self.backend.synchronize_stream(self.stream);
        if let Ok(ipc) = self.ipc() {
            // SAFETY: the stream ran everything that used the mapping and the words; the
            // segments are unmapped only after this (their owners drop after it).
            unsafe {
                let _ = ipc.unregister_host(self.registered);
                let _ = match self.pinned {
                    Some(p) => ipc.unregister_host(p),
                    None => ipc.release_import(self.payload),
                };
            }
        }
        let _ = self.backend.destroy_stream(self.stream);
    }
}

// SAFETY: the raw pointers are host addresses only passed back to the driver (at drop); the
// rest is Send + Sync.
unsafe impl Send for MirrorDevice {}
// SAFETY: as above.
unsafe impl Sync for MirrorDevice {}

/// The importer's mappings of one exporter, and one release ticket per slot: a received
/// tensor's owner is its slot's ticket (no allocation per frame), which writes the use
/// into the subscriber's release word when the tensor's last handle drops.
struct Mirror {
    payload: Payload,
    control: Segment,
    tickets: Box<[Ticket]>,
    /// Device memory: per slot, the fence value the subscriber's stream last waited for.
    armed: Box<[AtomicU64]>,
    /// The exporter's process (a pidfd).
    exporter: OwnedFd,
    /// How many fence waits the watchdog ended because the exporter died first.
    abandoned: AtomicU64,
}

/// What the owner of a received tensor writes, and where.
struct Ticket {
    /// The mirror the ticket is in (each live ticket owns one strong count of it).
    mirror: *const Mirror,
    /// The release word's index in the control segment.
    release: AtomicUsize,
    /// The use to write there.
    word: AtomicU64,
}

impl Mirror {
    fn new(
        payload: Payload,
        control: Segment,
        slots: usize,
        exporter: OwnedFd,
    ) -> Result<Arc<Mirror>> {
        let tickets = crate::cold::boxed_slice(slots, |_| Ticket {
            mirror: std::ptr::null(),
            release: AtomicUsize::new(0),
            word: AtomicU64::new(0),
        })
        .map_err(|e| exhausted("the subscriber's release tickets", e))?;
        let armed = crate::cold::boxed_slice(slots, |_| AtomicU64::new(0))
            .map_err(|e| exhausted("the subscriber's fence records", e))?;
        let mirror = Arc::new_cyclic(|weak: &std::sync::Weak<Mirror>| {
            let at = weak.as_ptr();
            let mut tickets = tickets;
            for t in &mut tickets {
                t.mirror = at;
            }
            Mirror {
                payload,
                control,
                tickets,
                armed,
                exporter,
                abandoned: AtomicU64::new(0),
            }
        });
        Ok(mirror)
    }

    fn device(&self) -> Option<&MirrorDevice> {
        match &self.payload {
            Payload::Device(d) | Payload::Pinned(d, _) => Some(d),
            Payload::Host(_) => None,
        }
    }

    fn kind(&self) -> MemoryKind {
        match self.payload {
            Payload::Device(_) => MemoryKind::CudaDevice,
            Payload::Pinned(..) => MemoryKind::PinnedHost,
            Payload::Host(_) => MemoryKind::Host,
        }
    }

    /// The address of the payload's first byte (host or device).
    fn payload_addr(&self) -> u64 {
        match &self.payload {
            Payload::Device(d) => d.payload.raw(),
            Payload::Host(s) | Payload::Pinned(_, s) => s.as_ptr() as u64,
        }
    }

    fn payload_len(&self) -> u64 {
        match &self.payload {
            Payload::Device(_) => u64::MAX,
            Payload::Host(s) | Payload::Pinned(_, s) => s.len() as u64,
        }
    }

    /// If the exporter's process exited, ends every fence wait: writes
    /// [`ABANDONED`](wire::fence::ABANDONED) into each slot's fence word (no stream waits
    /// for a write that will not come) and counts the waits that had not been met. `true`
    /// when it did.
    fn abandon_if_exporter_died(&self) -> bool {
        if !wire::readable(self.exporter.as_fd()) {
            return false;
        }
        for (slot, armed) in self.armed.iter().enumerate() {
            if let Some(f) = self.control.word(ControlLayout::fence(slot)) {
                let before = f.swap(wire::fence::ABANDONED, Ordering::AcqRel);
                let armed = armed.load(Ordering::Acquire);
                if armed != 0 && before < armed {
                    self.abandoned.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        true
    }

    /// The owner of a received tensor of `slot`: writes `word` into release word `release`
    /// when dropped. The exporter sends a slot again only after that write, so a slot's
    /// ticket is never armed twice at once.
    fn ticket(self: &Arc<Mirror>, slot: usize, release: usize, word: u64) -> AllocationDeleter {
        let t = &self.tickets[slot];
        t.release.store(release, Ordering::Relaxed);
        t.word.store(word, Ordering::Relaxed);
        // The ticket's strong count: the mirror outlives the tensor.
        // SAFETY: `self` is a live Arc.
        unsafe { Arc::increment_strong_count(Arc::as_ptr(self)) };
        // SAFETY: the context is the ticket, valid until the callback gives the mirror's
        // count back; the callback runs once (the deleter's drop), from any thread, and
        // does not unwind.
        unsafe {
            AllocationDeleter::from_raw_parts(
                std::ptr::from_ref(t).cast_mut().cast(),
                release_ticket,
            )
        }
    }
}

/// Writes the ticket's use — host memory: now, on the CPU; device memory: on the
/// subscriber's stream, after everything it ordered (the fence wait, the readiness every
/// consumer waited on) — then gives its count of the mirror back.
unsafe fn release_ticket(context: *mut std::ffi::c_void) {
    // SAFETY: `context` is a ticket of a mirror this ticket holds a count of.
    let t = unsafe { &*context.cast::<Ticket>() };
    let mirror = t.mirror;
    // SAFETY: as above: the mirror is alive while the ticket holds its count.
    let m = unsafe { &*mirror };
    let release = t.release.load(Ordering::Relaxed);
    let word = t.word.load(Ordering::Relaxed);
    let written = m.device().is_some_and(|d| {
        d.ipc().is_ok_and(|ipc| {
            // SAFETY: the release word is in the registered control segment; the mirror
            // synchronizes the stream before it unregisters it.
            unsafe { ipc.write_value(d.stream, d.word(release), word) }.is_ok()
        })
    });
    if !written {
        if let Some(d) = m.device() {
            // The stream refused the write: the CPU writes it once the stream ran
            // everything before.
            let _ = d.backend.synchronize_stream(d.stream);
        }
        if let Some(w) = m.control.word(release) {
            w.store(word, Ordering::Release);
        }
    }
    // SAFETY: the count taken in `ticket`, given back once; nothing of the
    // mirror is touched afterwards.
    unsafe { Arc::decrement_strong_count(mirror) };
}

impl Drop for Mirror {
    /// Device memory: a dead exporter's fences are abandoned so that no wait of the
    /// stream lasts forever; the device mirror (dropped first of the fields) then runs the
    /// stream's pending waits and release writes and unmaps.
    fn drop(&mut self) {
        if self.device().is_some() {
            self.abandon_if_exporter_died();
        }
    }
}

// SAFETY: a ticket's pointer is to its own mirror, read only through shared references;
// its fields are atomics; a device mirror's registered pointer is only passed back to the
// driver.
unsafe impl Send for Mirror {}
// SAFETY: as above.
unsafe impl Sync for Mirror {}

/// The thread that watches a device subscriber's exporter: when its process exits, it
/// abandons the fences at once, so that the subscriber's stream — and every consumer
/// ordered behind it — never waits for a fence that will not come. It watches for as long
/// as the mirror lives — the subscriber, or any tensor received and kept after the
/// subscriber dropped (a kept tensor's readiness waits on a fence too) — and ends within
/// one poll period after the mirror dropped.
struct Watchdog;

impl Watchdog {
    fn start(mirror: &Arc<Mirror>) -> Result<()> {
        let watched = Arc::downgrade(mirror);
        std::thread::Builder::new()
            .name("holo-ipc-watchdog".to_owned())
            .spawn(move || {
                let period = rustix::time::Timespec {
                    tv_sec: 0,
                    tv_nsec: 20_000_000,
                };
                // A strong count only for one poll: the mirror drops (here, then) once
                // nothing else holds it.
                while let Some(m) = watched.upgrade() {
                    let mut fds = [rustix::event::PollFd::new(
                        &m.exporter,
                        rustix::event::PollFlags::IN,
                    )];
                    let _ = rustix::event::poll(&mut fds, Some(&period));
                    if m.abandon_if_exporter_died() {
                        return;
                    }
                }
            })
            .map(drop)
            .map_err(|e| exhausted("cannot start the subscriber's watchdog thread", e))
    }
}

impl Drop for ProcessSubscriber {
    /// Detaches: the descriptors sent and not received are released at once (their slots
    /// were never read here), then the socket closes and the exporter frees the seat. The
    /// tensors received and still held keep their slots until they drop.
    fn drop(&mut self) {
        while let Ok(Some(d)) = self.subscriber.receive() {
            let d = *d.payload();
            if d.incarnation == self.incarnation && (d.slot as usize) < self.layout.slots {
                let release = self.layout.release(self.seat, d.slot as usize);
                if let Some(w) = self.mirror.control.word(release) {
                    w.store(d.fence_value, Ordering::Release);
                }
            }
        }
    }
}

#[cfg(all(test, not(holo_loom)))]
mod tests {
    use super::*;

    const EXPECTED: Expected = Expected {
        incarnation: 0xabc,
        pool: 0x123,
        slots: 4,
        per_slot_bytes: 64,
        payload_len: 256,
        kind: MemoryKind::Host,
        device_uuid: [0; 16],
    };

    /// Slot 2, generation 5, 16 × u32 = 64 bytes: a descriptor the subscriber accepts.
    fn good() -> SlotDescriptor {
        let mut shape = [0; MAX_TENSOR_RANK as usize];
        shape[0] = 16;
        SlotDescriptor {
            incarnation: 0xabc,
            pool: 0x123,
            slot: 2,
            generation: 5,
            offset: 128,
            byte_size: 64,
            shape,
            rank: 1,
            dtype: wire::dtype_index(DType::U32),
            memory_kind: wire::kind_index(MemoryKind::Host),
            fence: wire::fence::HOST,
            _pad: [0; 4],
            device_uuid: [0; 16],
            fence_value: wire::use_word(5),
            frame: 0,
            capture_ns: 0,
            publish_ns: 0,
        }
    }

    fn refusal(d: &SlotDescriptor, fence: u64) -> String {
        let e = check_descriptor(d, &EXPECTED, fence).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument, "{e}");
        e.message().to_owned()
    }

    #[test]
    fn a_descriptor_of_the_live_use_is_accepted() {
        let meta = check_descriptor(&good(), &EXPECTED, wire::use_word(5)).unwrap();
        assert_eq!(
            (meta.shape(), meta.dtype, meta.byte_size),
            (&[16][..], DType::U32, 64)
        );
    }

    #[test]
    fn a_stale_generation_or_another_incarnation_is_refused_never_aliased() {
        // The slot was loaned again (generation 6): the descriptor of use 5 is stale.
        assert!(refusal(&good(), wire::use_word(6)).contains("generation 5 is stale"));
        // A fence never written (zero) names no use.
        assert!(refusal(&good(), 0).contains("stale"));
        let mut d = good();
        d.incarnation = 0xdef;
        assert!(refusal(&d, wire::use_word(5)).contains("incarnation"));
        let mut d = good();
        d.pool = 0x999;
        assert!(refusal(&d, wire::use_word(5)).contains("pool"));
    }

    #[test]
    fn bytes_shape_and_kind_must_be_the_slots() {
        let fence = wire::use_word(5);
        let mut d = good();
        d.slot = 4;
        assert!(refusal(&d, fence).contains("slot 4 of 4"));
        let mut d = good();
        d.offset = 64;
        assert!(refusal(&d, fence).contains("not slot 2's"));
        let mut d = good();
        d.byte_size = 65;
        assert!(refusal(&d, fence).contains("not slot 2's"));
        let mut d = good();
        d.shape[0] = 8;
        assert!(refusal(&d, fence).contains("does not make its 64 bytes"));
        let mut d = good();
        d.dtype = 200;
        assert!(refusal(&d, fence).contains("dtype 200"));
        let mut d = good();
        d.rank = 9;
        assert!(refusal(&d, fence).contains("rank 9"));
        let mut d = good();
        d.memory_kind = wire::kind_index(MemoryKind::CudaDevice);
        assert!(refusal(&d, fence).contains("other than the pool's host"));
    }

    const DEVICE: Expected = Expected {
        kind: MemoryKind::CudaDevice,
        device_uuid: [7; 16],
        payload_len: u64::MAX,
        ..EXPECTED
    };

    /// `good()` as a device descriptor of fence value `(1 << 32) | 6` (generation 5, one
    /// wrap of the slot's generation behind it).
    fn device_good() -> SlotDescriptor {
        let mut d = good();
        d.memory_kind = wire::kind_index(MemoryKind::CudaDevice);
        d.fence = wire::fence::STREAM;
        d.device_uuid = [7; 16];
        d.fence_value = (1 << 32) | 6;
        d
    }

    #[test]
    fn a_device_descriptor_waits_for_its_fence_and_a_later_or_abandoned_one_is_refused() {
        let d = device_good();
        // The writer's stream has not written the fence yet: accepted (the subscriber's
        // stream waits for it), and so when it has.
        for fence in [0, (1 << 32) | 2, d.fence_value] {
            check_descriptor(&d, &DEVICE, fence).unwrap();
        }
        // A fence past the value names a later use of the slot: stale.
        let e = check_descriptor(&d, &DEVICE, d.fence_value + 1).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
        assert!(e.message().contains("is stale"), "{e}");
        // The watchdog abandoned the fence: the frame is lost, PeerLost.
        let e = check_descriptor(&d, &DEVICE, wire::fence::ABANDONED).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::PeerLost, "{e}");
        // A value whose low half is not the generation's, a host fence kind, another GPU.
        let mut bad = device_good();
        bad.fence_value = (1 << 32) | 7;
        assert!(check_descriptor(&bad, &DEVICE, 0).is_err());
        let mut bad = device_good();
        bad.fence = wire::fence::HOST;
        assert!(check_descriptor(&bad, &DEVICE, 0).is_err());
        let mut bad = device_good();
        bad.device_uuid = [8; 16];
        let e = check_descriptor(&bad, &DEVICE, 0).unwrap_err();
        assert!(e.message().contains("not the exporter's"), "{e}");
    }

    /// `cuStreamWaitValue64`'s `GEQ`, as the driver documents it: wrap-aware.
    fn geq_holds(word: u64, value: u64) -> bool {
        word.wrapping_sub(value).cast_signed() >= 0
    }

    #[test]
    fn the_abandoned_value_ends_every_wait_in_the_drivers_wrap_aware_comparison() {
        // Fence values of a slot after up to 2²⁹ wraps of its generation (2⁶¹ uses).
        for value in [
            1,
            2,
            u64::from(u32::MAX),
            (1 << 32) | 1,
            (1 << 29 << 32) | 7,
        ] {
            assert!(geq_holds(wire::fence::ABANDONED, value), "{value:#x}");
            // A word still below the value (a fence not yet written) holds the wait.
            assert!(!geq_holds(value - 1, value));
        }
        // The all-ones word would not end the wait of a small value: (int64)(max - 1) < 0.
        assert!(!geq_holds(u64::MAX, 1));
    }

    #[test]
    fn a_pinned_descriptor_is_fenced_by_its_writer_host_or_stream() {
        let pinned = Expected {
            kind: MemoryKind::PinnedHost,
            device_uuid: [7; 16],
            ..EXPECTED
        };
        let mut d = device_good();
        d.memory_kind = wire::kind_index(MemoryKind::PinnedHost);
        // Written on a stream: the subscriber's stream waits for the fence.
        check_descriptor(&d, &pinned, 0).unwrap();
        // Written on the host: the fence names the use before the descriptor was sent.
        d.fence = wire::fence::HOST;
        check_descriptor(&d, &pinned, d.fence_value).unwrap();
        let e = check_descriptor(&d, &pinned, 0).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument, "{e}");
        assert!(e.message().contains("is stale"), "{e}");
        // A dead exporter's abandoned fence: PeerLost, for either writer.
        let e = check_descriptor(&d, &pinned, wire::fence::ABANDONED).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::PeerLost, "{e}");
    }

    #[test]
    fn fence_values_only_grow_across_a_wrap_of_the_generation() {
        assert_eq!(wire::next_fence_value(0, 0), 1);
        assert_eq!(
            wire::next_fence_value(1, 0),
            1,
            "the same use: the same value"
        );
        assert_eq!(wire::next_fence_value(1, 1), 2);
        // The generation wraps: its low half restarts, the high half counts the wrap.
        let last = wire::next_fence_value(0, u32::MAX - 1);
        assert_eq!(last, u64::from(u32::MAX));
        let wrapped = wire::next_fence_value(last, u32::MAX);
        assert_eq!(wrapped, 1 << 32);
        let after = wire::next_fence_value(wrapped, 0);
        assert_eq!(after, (1 << 32) | 1);
        assert!(last < wrapped && wrapped < after);
    }
}
