//! The DeviceArray hand-off: a tensor given to a caller's own stream or queue without a
//! host wait (docs/HANDOFF.md).
//!
//! [`Tensor::device_array`] makes the caller's stream wait on the tensor's readiness and
//! registers it as a release stream of the tensor's slot, then returns: the host never
//! waits. [`DeviceArray::data_ptr`] is a plain accessor. Work the caller enqueues on its
//! stream afterwards sees the finished bytes; when the array drops it records the
//! stream's release event, so the slot goes back to its pool only after that work.
//! [`DeviceArray::copy_to_host_async`] enqueues a copy and returns;
//! [`HostCopy::synchronize_stream`] is the one wait. Passing the stream the tensor was
//! written on ([`Tensor::sdk_stream`]) records and waits nothing at all.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::thread::ThreadId;

use super::Tensor;
use crate::channel::pool::{HandOffEnd, Holder};
use crate::device::{
    AdoptedStream, BackendKind, CudaStreamPtr, DeviceBackend, DevicePtr, EventHandle, StreamHandle,
    StreamOrQueue,
};
use crate::spec::DType;
use crate::{Error, ErrorCode, Result};

/// What a hand-off must undo when it ends: the adopted caller stream and the slot's
/// release position in it.
#[derive(Debug)]
struct Adoption {
    stream: StreamHandle,
    position: Holder,
    /// For CUDA's per-thread default stream: the thread whose stream it is.
    per_thread: Option<ThreadId>,
    /// Who ends the stream's adoption.
    ends: AdoptionEnd,
    /// Whether the release recorded at drop is marked clean: only on a caller's raw stream
    /// (which the caller may destroy once the array dropped, and which nothing of the
    /// runtime uses). On a stream the backend runs itself, other holders of the slot may
    /// keep working, so the slot's last handle records the release again.
    mark_clean: bool,
}

/// Who ends the adoption of a hand-off's stream.
#[derive(Debug)]
enum AdoptionEnd {
    /// The array adopted the stream itself ([`Tensor::device_array`]) and ends that
    /// adoption when it drops.
    PerCall,
    /// An [`AdoptedStream`] the array borrows ([`Tensor::device_array_on`]): its owner
    /// ends it, after the array (the borrow sees to that).
    Borrowed,
    /// A clone of an [`AdoptedStream`] the array holds
    /// ([`Tensor::into_device_array_on`]): the last clone ends it.
    Shared(
        #[allow(
            dead_code,
            reason = "held for its drop: the last clone ends the adoption"
        )]
        AdoptedStream,
    ),
}

/// The tensor an array hands off: borrowed from the caller (the steady-state form, no
/// handle to clone or drop), or owned.
enum Held<'a> {
    Borrowed(&'a Tensor),
    Owned(ManuallyDrop<Tensor>),
}

impl Held<'_> {
    #[inline]
    fn get(&self) -> &Tensor {
        match self {
            Held::Borrowed(t) => t,
            Held::Owned(t) => t,
        }
    }
}

/// A tensor handed to a caller's stream or queue ([`Tensor::device_array`]): the caller's
/// stream is ordered after the tensor's writes, and the slot stays out of its pool until
/// the work the caller enqueues on that stream before dropping the array has run.
///
/// `'a` is the borrow of the tensor (and of the [`AdoptedStream`] for
/// [`Tensor::device_array_on`]): the hand-off clones no handle. An array that must outlive
/// the tensor's owner — kept in a struct, sent to another thread, held by a DLPack capsule
/// — is made from an owned tensor: [`Tensor::into_device_array`] gives a
/// `DeviceArray<'static>`.
///
/// The caller keeps its stream alive until the array has dropped (the array records the
/// stream's release event when it drops). An array may be dropped on any thread; one
/// made on [`CudaStreamPtr::PER_THREAD`] and dropped on another thread records its
/// release on CUDA's legacy default stream, which is ordered after every per-thread
/// default stream of the context.
pub struct DeviceArray<'a> {
    tensor: Held<'a>,
    stream: StreamOrQueue,
    ordered: Ordered<'a>,
}

/// What a hand-off ordered on the caller's stream, and so what its array's drop records.
enum Ordered<'a> {
    /// Nothing: the tensor's own (SDK) stream, or host bytes.
    Not,
    /// The steady state ([`Tensor::device_array_on`] on a registered stream; the tensor is
    /// always borrowed): its end, found when the hand-off began, which the drop records
    /// and marks with no lookup in the pool's ledger.
    Steady(HandOffEnd<'a>),
    /// Every other hand-off that ordered the stream.
    Adopted(Adoption),
}

impl Ordered<'_> {
    /// The general path's adoption, if the hand-off took that path.
    fn adoption(&self) -> Option<&Adoption> {
        match self {
            Ordered::Adopted(a) => Some(a),
            _ => None,
        }
    }
}

impl From<Option<Adoption>> for Ordered<'_> {
    fn from(adoption: Option<Adoption>) -> Self {
        adoption.map_or(Ordered::Not, Ordered::Adopted)
    }
}

impl fmt::Debug for Ordered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ordered::Not => f.write_str("Not"),
            Ordered::Steady(end) => f
                .debug_struct("Steady")
                .field("stream", &end.stream())
                .finish_non_exhaustive(),
            Ordered::Adopted(a) => f.debug_tuple("Adopted").field(a).finish(),
        }
    }
}

impl Tensor {
    /// The stream the tensor's producer wrote it on — the runtime's own stream, the seed's
    /// "SDK stream" — or `None` for bytes written on the host. Passing it to
    /// [`device_array`](Self::device_array) costs no device call: the caller's work then
    /// shares the producer's stream. `None` too for a tensor kept past its session: the
    /// session's streams are gone then (and its writes complete).
    pub fn sdk_stream(&self) -> Option<StreamOrQueue> {
        self.pool
            .device()
            .filter(|_| !self.pool.session_quiesced())
            .and(self.pool.writer_stream(self.slot))
            .map(StreamOrQueue::Backend)
    }

    /// Hands the tensor to the caller's `stream`: makes the stream wait (on the device) on
    /// the tensor's readiness and registers it as a release stream of the slot, then
    /// returns; the host never waits. Anything enqueued on `stream` after this call sees
    /// the finished bytes through [`DeviceArray::data_ptr`].
    ///
    /// - The tensor's own stream ([`sdk_stream`](Self::sdk_stream)) records and waits
    ///   nothing.
    /// - A stream of another context (CUDA: checked with `cuStreamGetCtx`), or of another
    ///   device, is `InvalidArgument`; an OpenCL queue on a CUDA device too.
    /// - Bytes in host memory written on the host are complete: nothing is ordered.
    /// - Past the slot's cap of distinct release streams (`max_fanout_release_streams`):
    ///   `ResourceExhausted`, and nothing is registered.
    ///
    /// The array borrows the tensor; [`into_device_array`](Self::into_device_array) is
    /// the owning form. Each call adopts the stream (checking its context) and the array
    /// ends that adoption when it drops; a caller that hands every frame to the same
    /// stream adopts it once and uses [`device_array_on`](Self::device_array_on).
    pub fn device_array(&self, stream: impl Into<StreamOrQueue>) -> Result<DeviceArray<'_>> {
        let (stream, adoption) = self.hand_off(Via::PerCall(stream.into()))?;
        Ok(self.borrowed_array(stream, adoption))
    }

    /// [`device_array`](Self::device_array) on a stream adopted once
    /// ([`AdoptedStream::new`]): no context check per call, and no handle cloned — the
    /// steady-state hand-off. A stream adopted by another device than the tensor's is
    /// `InvalidArgument`.
    #[inline]
    pub fn device_array_on<'a>(&'a self, stream: &'a AdoptedStream) -> Result<DeviceArray<'a>> {
        // The steady state, in one pass over the slot: a caller's raw stream adopted by
        // the tensor's device, already registered on the slot, the readiness recorded.
        // Every other case (the first hand-off on the stream, the writer's own stream, a
        // readiness not recorded yet or without its contract, another device, CUDA's
        // per-thread default stream) takes the general path, out of line.
        if stream.is_steady()
            && let Some(steady) =
                self.pool
                    .registered_hand_off(self.slot, stream.handle(), stream.stream().raw())
            && stream.is_adopted_by(&steady.backing.backend)
        {
            // SAFETY: the readiness event is the pool's, live while this handle keeps the
            // pool; the stream is adopted by the tensor's device until `stream` drops,
            // which the array's borrow keeps from happening before the array drops.
            if let Err(error) = unsafe {
                steady
                    .backing
                    .backend
                    .wait_event_unchecked(stream.handle(), steady.ready)
            } {
                return Err(self.hand_off_not_ordered(steady.end.position(), error));
            }
            return Ok(DeviceArray {
                tensor: Held::Borrowed(self),
                stream: stream.stream(),
                ordered: Ordered::Steady(steady.end),
            });
        }
        self.device_array_on_general(stream)
    }

    /// [`device_array_on`](Self::device_array_on) in every case but the steady state.
    #[inline(never)]
    fn device_array_on_general<'a>(&'a self, stream: &'a AdoptedStream) -> Result<DeviceArray<'a>> {
        let (stream, adoption) = self.hand_off(Via::Adopted {
            stream,
            owned: false,
        })?;
        Ok(self.borrowed_array(stream, adoption))
    }

    /// The steady-state hand-off's wait could not be enqueued: nothing of the caller's
    /// was ordered yet, so the release position is recorded at once (as `order_on` does)
    /// and the error returned.
    #[cold]
    #[inline(never)]
    fn hand_off_not_ordered(&self, position: Holder, error: Error) -> Error {
        let _ = self.pool.record_release_at(self.slot, position, None, true);
        error
    }

    /// [`device_array`](Self::device_array) taking the tensor: the array owns it and lives
    /// as long as the caller needs (`'static`). On an error the tensor is dropped.
    pub fn into_device_array(
        self,
        stream: impl Into<StreamOrQueue>,
    ) -> Result<DeviceArray<'static>> {
        let (stream, adoption) = self.hand_off(Via::PerCall(stream.into()))?;
        Ok(self.into_array(stream, adoption))
    }

    /// [`device_array_on`](Self::device_array_on) taking the tensor: the array owns it
    /// and a clone of the adoption. On an error the tensor is dropped.
    pub fn into_device_array_on(self, stream: &AdoptedStream) -> Result<DeviceArray<'static>> {
        let (stream, adoption) = self.hand_off(Via::Adopted {
            stream,
            owned: true,
        })?;
        Ok(self.into_array(stream, adoption))
    }

    /// The two events a hand-off of this tensor on `stream` waits on and records: the
    /// slot's readiness event and the stream's release event. `None` until a hand-off on
    /// `stream` has registered it (or for host bytes, or an unrecorded readiness). For the
    /// hand-off bench's raw pair on holo's own events.
    pub(crate) fn hand_off_events(
        &self,
        stream: &AdoptedStream,
    ) -> Option<(EventHandle, EventHandle)> {
        let (ready, _) = self.pool.readiness_event(self.slot).ok()??;
        let release = self.pool.release_event(self.slot, stream.handle())?;
        Some((ready, release))
    }

    /// The borrowing array.
    fn borrowed_array(&self, stream: StreamOrQueue, adoption: Option<Adoption>) -> DeviceArray<'_> {
        DeviceArray {
            tensor: Held::Borrowed(self),
            stream,
            ordered: Ordered::from(adoption),
        }
    }

    /// The owning array: the handle keeps no partition's release position (the array
    /// records its own release when it drops, the slot's last handle the rest).
    fn into_array(
        mut self,
        stream: StreamOrQueue,
        adoption: Option<Adoption>,
    ) -> DeviceArray<'static> {
        self.holder = Holder::NONE;
        DeviceArray {
            tensor: Held::Owned(ManuallyDrop::new(self)),
            stream,
            ordered: Ordered::from(adoption),
        }
    }

    /// The hand-off, with the caller stream adopted `via` a per-call adoption or an
    /// [`AdoptedStream`]: orders the stream and returns what the array must undo when it
    /// ends (`None`: nothing was ordered).
    #[allow(
        clippy::inline_always,
        reason = "specialized per entry point: `device_array_on`'s constant `Via` folds away (callgrind: 166 → 155 instructions of holo's own per steady-state hand-off)"
    )]
    #[inline(always)]
    fn hand_off(&self, via: Via<'_>) -> Result<(StreamOrQueue, Option<Adoption>)> {
        let stream = via.stream();
        let Some(d) = self.pool.device() else {
            return Ok((stream, None));
        };
        // The producer's own stream: the caller's work is ordered after the writes by the
        // stream itself. In device memory nothing else can touch the slot after it is
        // reloaned but that same stream's next writer, so nothing is recorded at all; in
        // host-accessible memory a later host write could, so the release is still
        // registered (no wait).
        let sdk_stream = self.pool.writer_stream(self.slot).map(StreamHandle::raw)
            == Some(stream.raw())
            && matches!(
                (stream, d.backend.backend_kind()),
                (StreamOrQueue::Backend(_), _)
                    | (StreamOrQueue::OpenCl(_), BackendKind::OpenCl)
                    | (
                        StreamOrQueue::Cuda(_),
                        BackendKind::Cuda | BackendKind::Software
                    )
            );
        if sdk_stream && !self.pool.kind.is_host_accessible() {
            return Ok((stream, None));
        }
        let backend: &dyn DeviceBackend = &*d.backend;
        let (handle, ends, backend_stream) = via.adopt(backend)?;
        // A caller's raw stream, not one the backend runs itself.
        let mark_clean = !backend_stream;
        match self.order_on(handle, !sdk_stream, mark_clean) {
            Ok(position) => Ok((
                stream,
                Some(Adoption {
                    stream: handle,
                    position,
                    per_thread: (stream == StreamOrQueue::Cuda(CudaStreamPtr::PER_THREAD))
                        .then(|| std::thread::current().id()),
                    ends,
                    mark_clean,
                }),
            )),
            Err(error) => {
                if matches!(ends, AdoptionEnd::PerCall) {
                    backend.release_adopted_stream(handle);
                }
                Err(error)
            }
        }
    }

    /// Registers the adopted `stream` as a release stream of the slot, makes it wait on
    /// the readiness (unless `wait` is false: the writer's own stream), and returns its
    /// release position. If the wait cannot be enqueued, the release is recorded at once
    /// (nothing of the caller's was ordered yet).
    #[inline]
    fn order_on(&self, stream: StreamHandle, wait: bool, mark_clean: bool) -> Result<Holder> {
        // The readiness first: a tensor that cannot be ordered (a foreign one without its
        // readiness contract) is refused before its slot registers the stream, which
        // would take one of the slot's few release positions for good.
        let ready = if wait {
            self.pool.readiness_event(self.slot)?
        } else {
            None
        };
        // A stream whose releases are marked clean is a caller's raw stream: only
        // hand-offs use its position.
        let position = self.pool.enter_borrowed(self.slot, stream, mark_clean)?;
        let waited = match ready {
            // SAFETY: the readiness event is the pool's, live while this handle keeps the
            // pool; `stream` is adopted by the caller of `order_on` until the array drops.
            Some((event, backend)) => unsafe { backend.wait_event_unchecked(stream, event) },
            None => Ok(()),
        };
        if let Err(error) = waited {
            // A failed record leaves the position unclean; the last handle then records it.
            let _ = self
                .pool
                .record_release_at(self.slot, position, None, mark_clean);
            return Err(error);
        }
        if position == Holder::NONE {
            return Err(Error::new(
                ErrorCode::Internal,
                "a registered release stream has no release position",
            ));
        }
        Ok(position)
    }
}

/// How a hand-off gets its stream's adoption.
enum Via<'s> {
    /// Adopts the stream for the length of the hand-off (its context checked).
    PerCall(StreamOrQueue),
    /// An [`AdoptedStream`], which the array borrows, or (`owned`) holds a clone of.
    Adopted {
        stream: &'s AdoptedStream,
        owned: bool,
    },
}

impl Via<'_> {
    #[allow(clippy::inline_always, reason = "part of `hand_off`'s specialization")]
    #[inline(always)]
    fn stream(&self) -> StreamOrQueue {
        match self {
            Via::PerCall(stream) => *stream,
            Via::Adopted { stream, .. } => stream.stream(),
        }
    }

    /// The stream's handle on `backend`, who ends its adoption, and whether it is a
    /// stream the backend runs itself. An [`AdoptedStream`] of another device than
    /// `backend` is `InvalidArgument`.
    #[allow(clippy::inline_always, reason = "part of `hand_off`'s specialization")]
    #[inline(always)]
    fn adopt(self, backend: &dyn DeviceBackend) -> Result<(StreamHandle, AdoptionEnd, bool)> {
        match self {
            Via::PerCall(stream) => {
                let handle = backend.adopt_stream(stream)?;
                Ok((
                    handle,
                    AdoptionEnd::PerCall,
                    backend.is_backend_stream(handle),
                ))
            }
            Via::Adopted { stream, owned } => {
                if !std::ptr::addr_eq(std::ptr::from_ref(backend), Arc::as_ptr(stream.device())) {
                    return Err(Error::invalid_argument(format!(
                        "{:?} was adopted by another device than the one the tensor lives on",
                        stream.stream()
                    )));
                }
                let ends = if owned {
                    AdoptionEnd::Shared(stream.clone())
                } else {
                    AdoptionEnd::Borrowed
                };
                Ok((stream.handle(), ends, stream.is_backend_stream()))
            }
        }
    }
}

impl DeviceArray<'_> {
    /// The tensor's address on the device (a `CUdeviceptr`; the host address for host
    /// memory). A plain accessor: it synchronizes nothing.
    pub fn data_ptr(&self) -> DevicePtr {
        self.tensor.get().device_ptr()
    }

    /// The tensor handed off.
    pub fn tensor(&self) -> &Tensor {
        self.tensor.get()
    }

    /// The caller's stream or queue the array is ordered on.
    pub fn stream(&self) -> StreamOrQueue {
        self.stream
    }

    /// Whether the hand-off ordered anything on the device (`false` for the tensor's own
    /// stream and for host bytes: nothing was recorded, nothing waited).
    pub fn is_ordered(&self) -> bool {
        !matches!(self.ordered, Ordered::Not)
    }

    /// The extents.
    pub fn shape(&self) -> &[u64] {
        self.tensor.get().shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.tensor.get().dtype()
    }

    /// The byte size.
    pub fn byte_size(&self) -> usize {
        self.tensor.get().byte_size()
    }

    /// Enqueues a copy of the array's first `dst.len()` bytes (all of it, a prefix, or
    /// one element) into `dst` on the array's stream and returns at once; the copy owns
    /// `dst` until [`HostCopy::synchronize_stream`] hands it back. A `dst` longer than the
    /// tensor is `InvalidArgument`. For host bytes the copy is done on return.
    ///
    /// `dst` is ordinary (pageable) memory: CUDA may stage such a copy, so for a copy that
    /// overlaps the host use pinned memory and [`Tensor::copy_to_host_async`].
    pub fn copy_to_host_async(&self, mut dst: Vec<u8>) -> Result<HostCopy<'_>> {
        self.check_thread("copy_to_host_async")?;
        let n = dst.len();
        self.tensor.get().check_copy_len(n, "copy_to_host_async")?;
        let Some(d) = self.tensor.get().pool.device() else {
            dst.copy_from_slice(&self.tensor.get().data()?[..n]);
            return Ok(HostCopy {
                array: self,
                dst,
                pending: false,
            });
        };
        let stream = self.device_stream();
        if n > 0 {
            // SAFETY: `dst` is owned by the returned `HostCopy` until the stream has run
            // the copy (its synchronize, or its drop, waits for that); the array keeps the
            // slot out of its pool, and `stream` is ordered after the tensor's writes.
            unsafe {
                d.backend
                    .copy_to_host_async(dst.as_mut_ptr(), self.data_ptr(), n, stream)?;
            }
        }
        Ok(HostCopy {
            array: self,
            dst,
            pending: n > 0,
        })
    }

    /// Blocks the calling thread until everything enqueued on the array's stream has run
    /// (the one wait of the hand-off). Returns at once for host bytes.
    pub fn synchronize_stream(&self) -> Result<()> {
        self.check_thread("synchronize_stream")?;
        match self.tensor.get().pool.device() {
            Some(d) => d.backend.synchronize_stream(self.device_stream()),
            None => Ok(()),
        }
    }

    /// An array on CUDA's per-thread default stream names another stream on every thread:
    /// enqueued or waited on from another thread than the one that made it, a copy would
    /// run unordered after the tensor's writes, or a wait would return before the copy
    /// wrote its destination. `NotSupported` there.
    fn check_thread(&self, call: &str) -> Result<()> {
        match self.ordered.adoption().and_then(|a| a.per_thread) {
            Some(owner) if owner != std::thread::current().id() => Err(Error::new(
                ErrorCode::NotSupported,
                format!(
                    "{call} on a DeviceArray made on CUDA's per-thread default stream of another thread: the stream is that thread's; call it there, or hand off on a stream of your own"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The backend handle of the array's stream: the adopted caller stream, or the
    /// tensor's own stream.
    fn device_stream(&self) -> StreamHandle {
        match &self.ordered {
            Ordered::Steady(end) => end.stream(),
            Ordered::Adopted(a) => a.stream,
            Ordered::Not => StreamHandle::from_raw(self.stream.raw()),
        }
    }
}

impl Drop for DeviceArray<'_> {
    /// The steady state inline (one record of the release, its event and clean mark found
    /// when the hand-off began), the rest out of line.
    #[inline]
    fn drop(&mut self) {
        if let Ordered::Steady(end) = &self.ordered {
            if end.record().is_err() {
                release_not_recorded(self.tensor.get(), end.stream(), end.position(), true);
            }
            return;
        }
        self.drop_general();
    }
}

/// The release of a hand-off on `stream` (at `position`) could not be recorded on the
/// caller's stream: waits for the stream on the host instead, so the slot is not reused
/// under its work.
#[cold]
#[inline(never)]
fn release_not_recorded(tensor: &Tensor, stream: StreamHandle, position: Holder, mark_clean: bool) {
    let Some(d) = tensor.pool.device() else {
        return;
    };
    crate::trace::event!(
        warn,
        pool = tensor.pool.location,
        "a DeviceArray could not record its release on the caller's stream; waiting for the stream on the host"
    );
    // Once the stream has run, its work on the slot is complete: the position is clean,
    // so the slot's last handle does not record on a caller's stream the caller may
    // destroy once the array has dropped.
    if d.backend.synchronize_stream(stream).is_ok() && mark_clean {
        tensor.pool.mark_release_clean(tensor.slot, position);
    }
}

impl DeviceArray<'_> {
    /// `drop` in every case but the steady state.
    #[inline(never)]
    fn drop_general(&mut self) {
        // A borrowed tensor on a stream adopted once or shared, not a per-thread default
        // stream: one record of the release.
        if let (Held::Borrowed(tensor), Ordered::Adopted(a)) = (&self.tensor, &self.ordered)
            && a.per_thread.is_none()
            && !matches!(a.ends, AdoptionEnd::PerCall)
        {
            if tensor
                .pool
                .record_release_at(tensor.slot, a.position, Some(a.stream), a.mark_clean)
                .is_err()
            {
                release_not_recorded(tensor, a.stream, a.position, a.mark_clean);
            }
            return;
        }
        let tensor = self.tensor.get();
        let backend = tensor.pool.device().map(|d| &d.backend);
        if let (Some(a), Some(backend)) = (self.ordered.adoption(), backend) {
            let r = match a.per_thread {
                // A per-thread default stream is recorded on as CUDA's legacy default
                // stream, which is ordered after every per-thread default stream of the
                // context: dropped on another thread, the per-thread stream there is not
                // the one the caller used; and hand-offs of one tensor on two threads'
                // per-thread streams share one release position (the handle is the same
                // value), whose last record must cover both threads' work.
                Some(_) => backend
                    .adopt_stream(StreamOrQueue::Cuda(CudaStreamPtr::LEGACY))
                    .and_then(|legacy| {
                        let r = tensor.pool.record_release_at(
                            tensor.slot,
                            a.position,
                            Some(legacy),
                            a.mark_clean,
                        );
                        backend.release_adopted_stream(legacy);
                        r
                    }),
                _ => tensor.pool.record_release_at(
                    tensor.slot,
                    a.position,
                    Some(a.stream),
                    a.mark_clean,
                ),
            };
            if r.is_err() {
                release_not_recorded(tensor, a.stream, a.position, a.mark_clean);
            }
        }
        // The per-call adoption ends after an owned handle drops: the slot's last handle
        // may still record on the stream (if the record above failed). A shared adoption
        // ends with its last clone (this array's is dropped after this function); a
        // borrowed one with its owner.
        let ends = match (self.ordered.adoption(), backend) {
            (
                Some(Adoption {
                    ends: AdoptionEnd::PerCall,
                    stream,
                    ..
                }),
                Some(backend),
            ) => Some((Arc::clone(backend), *stream)),
            _ => None,
        };
        if let Held::Owned(tensor) = &mut self.tensor {
            // SAFETY: dropped once, here; not used afterwards.
            unsafe { ManuallyDrop::drop(tensor) };
        }
        if let Some((backend, stream)) = ends {
            backend.release_adopted_stream(stream);
        }
    }
}

impl fmt::Debug for DeviceArray<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceArray")
            .field("tensor", self.tensor.get())
            .field("stream", &self.stream)
            .field("ordered", &self.ordered)
            .finish()
    }
}

/// A copy to the host enqueued by [`DeviceArray::copy_to_host_async`]: it owns the
/// destination until [`synchronize_stream`](Self::synchronize_stream) hands it back.
/// Dropped unsynchronized, it waits for the stream before freeing the destination.
#[must_use = "synchronize_stream() hands the destination back once the copy has run"]
pub struct HostCopy<'a> {
    array: &'a DeviceArray<'a>,
    dst: Vec<u8>,
    pending: bool,
}

impl HostCopy<'_> {
    /// Blocks until the array's stream has run the copy (and everything before it), then
    /// hands the destination back.
    pub fn synchronize_stream(mut self) -> Result<Vec<u8>> {
        if self.pending {
            self.array.synchronize_stream()?;
            self.pending = false;
        }
        Ok(std::mem::take(&mut self.dst))
    }
}

impl Drop for HostCopy<'_> {
    fn drop(&mut self) {
        if self.pending && self.array.synchronize_stream().is_err() {
            // The stream cannot be waited on: the copy may still write `dst`, so it is
            // leaked rather than freed under the copy.
            std::mem::forget(std::mem::take(&mut self.dst));
        }
    }
}

impl fmt::Debug for HostCopy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostCopy")
            .field("bytes", &self.dst.len())
            .field("pending", &self.pending)
            .finish()
    }
}

// A hand-off crosses threads: the array may be dropped wherever the caller's work ends.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<DeviceArray<'static>>();
};
