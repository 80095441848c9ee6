//! Tensors, loans and write guards.
//!
//! The producer lifecycle is `allocate_tensor` → [`TensorOutputLoan`] →
//! [`write_host`](TensorOutputLoan::write_host) → [`HostWriteGuard`] →
//! [`commit`](HostWriteGuard::commit) → [`CommittedTensor`] → `emit`. Every step consumes
//! the previous object, so a step cannot be repeated or skipped; dropping a loan or guard
//! before commit abandons it and returns the slot to its pool.
//!
//! A [`Tensor`] is what consumers receive: a read-only handle to a committed slot. Its
//! clones and [`TensorReadLease`]s keep the slot out of the pool; the last one dropped
//! returns it.

mod caller_write;
mod cl_view;
pub mod dlpack;
mod handoff;

pub use handoff::{DeviceArray, HostCopy};

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use crate::channel::pool::{Holder, Pool, TensorMeta, readiness};
use crate::channel::{BufferRef, OrderingDomain};
use crate::device::{DeviceBackend, DevicePtr, StreamHandle};
use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::{Error, ErrorCode, MemoryKind, Result};

/// An operator's runtime-owned compute stream, borrowed from
/// [`ExecutionContext::cuda_stream`](crate::ExecutionContext::cuda_stream) for one
/// activation. Submit work on it only inside the callback; never keep it (the borrow ties
/// it to the context, and the raw handle must not outlive the session either).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaStream<'a> {
    pub(crate) handle: StreamHandle,
    pub(crate) _activation: PhantomData<&'a ()>,
}

impl CudaStream<'_> {
    /// The stream handle, for the device backend's calls.
    pub fn handle(&self) -> StreamHandle {
        self.handle
    }

    /// The raw `CUstream` value (for a kernel launch or another library), valid during
    /// this activation only.
    pub fn raw(&self) -> u64 {
        self.handle.raw()
    }
}

impl From<CudaStream<'_>> for StreamHandle {
    fn from(s: CudaStream<'_>) -> StreamHandle {
        s.handle
    }
}

/// What one loan asks for: a shape and an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorLoanRequest<'a> {
    /// The extents, outermost first. Its length is the rank.
    pub shape: &'a [u64],
    /// The element type.
    pub dtype: DType,
}

#[inline]
fn meta_for(shape: &[u64], dtype: DType) -> Option<TensorMeta> {
    if shape.len() > MAX_TENSOR_RANK as usize {
        return None;
    }
    let bytes = crate::channel::pool::checked_byte_size(shape, dtype)?;
    let mut meta = TensorMeta {
        rank: u8::try_from(shape.len()).ok()?,
        dtype,
        byte_size: usize::try_from(bytes).ok()?,
        ..TensorMeta::EMPTY
    };
    meta.shape[..shape.len()].copy_from_slice(shape);
    Some(meta)
}

/// A borrowed pool slot with write authority, not yet written.
///
/// Made by `Output<Tensor>::allocate_tensor`. Dropping it returns the slot.
#[must_use = "a loan does nothing until it is written, committed and emitted"]
pub struct TensorOutputLoan {
    /// Carries the slot's parked pool count (see `pool`'s module documentation): never
    /// dropped as an `Arc`, handed on to the tensor or back with the slot.
    pool: ManuallyDrop<Arc<Pool>>,
    slot: u32,
}

impl TensorOutputLoan {
    #[inline]
    pub(crate) fn new(pool: &Arc<Pool>, request: TensorLoanRequest<'_>) -> Result<Self> {
        let slot = pool.loan(request.shape, request.dtype)?;
        Ok(Self {
            // SAFETY: the borrowed slot parked one strong count of `pool`; it moves into
            // this loan (no increment).
            pool: ManuallyDrop::new(unsafe { Arc::from_raw(Arc::as_ptr(pool)) }),
            slot,
        })
    }

    /// A loan of a free slot of `pool` whose shape and dtype are given later
    /// ([`reshape`](Self::reshape)): a slot granted to a publisher in another process.
    pub(crate) fn unshaped(pool: &Arc<Pool>) -> Result<Self> {
        let slot = pool.borrow_slot()?;
        Ok(Self {
            // SAFETY: as in `new`: the borrowed slot's parked count moves into the loan.
            pool: ManuallyDrop::new(unsafe { Arc::from_raw(Arc::as_ptr(pool)) }),
            slot,
        })
    }

    /// Gives the loan the shape and dtype it was written with (refused as a loan of them
    /// would be).
    pub(crate) fn reshape(&mut self, shape: &[u64], dtype: DType) -> Result<()> {
        // SAFETY: this loan holds the slot, uncommitted.
        unsafe { self.pool.shape_loan(self.slot, shape, dtype) }
    }

    /// Commits a slot written by another process whose writes `stream` waits for (a
    /// publisher's fence, enqueued already): the readiness is recorded on `stream`, the
    /// writer of the slot's use.
    pub(crate) fn commit_after(self, stream: StreamHandle) -> Result<CommittedTensor> {
        let domain = OrderingDomain::partition(stream);
        self.pool.set_writer(self.slot, domain);
        self.pool.commit(self.slot, domain, false)?;
        Ok(CommittedTensor(self.into_tensor()))
    }

    /// The loaned slot and its generation.
    pub(crate) fn slot_ref(&self) -> crate::channel::SlotRef {
        self.pool.slot_ref(self.slot)
    }

    /// Starts the device write phase on the operator's runtime stream. Any other stream
    /// (or an operator with no planned stream) gives `NotSupported`; a host pool gives
    /// `NotSupported` too (use [`write_host`](Self::write_host)).
    #[inline]
    pub fn write(self, stream: impl Into<StreamHandle>) -> Result<DeviceWriteGuard> {
        let stream = stream.into();
        if self.pool.loan_streams().planned != Some(stream) || self.pool.device().is_none() {
            return Err(self.write_refused(stream));
        }
        // The operator's planned stream: the readiness is recorded there.
        self.pool
            .set_writer(self.slot, OrderingDomain::partition(stream));
        Ok(DeviceWriteGuard {
            loan: std::mem::ManuallyDrop::new(self),
            stream,
        })
    }

    /// Why [`write`](Self::write) refused `stream` (out of line: the accepted write is a
    /// few instructions inlined into the operator).
    #[cold]
    #[inline(never)]
    fn write_refused(&self, stream: StreamHandle) -> Error {
        if self.pool.loan_streams().planned != Some(stream) {
            return Error::new(
                ErrorCode::NotSupported,
                "a device write must use the operator's runtime-assigned compute stream (ctx.cuda_stream())",
            )
            .at(self.pool.location);
        }
        Error::new(
            ErrorCode::NotSupported,
            "this pool is pageable host memory: write it with write_host",
        )
        .at(self.pool.location)
    }

    /// Writes the slot on `stream` with `fill` (which enqueues work on the stream) and
    /// commits, recording the readiness event: the CUDA-stream writer of pinned memory.
    pub fn write_and_commit(
        self,
        stream: impl Into<StreamHandle>,
        fill: impl FnOnce(&dyn DeviceBackend, DevicePtr, usize, StreamHandle) -> Result<()>,
    ) -> Result<CommittedTensor> {
        let guard = self.write(stream)?;
        let backend = guard.backend();
        fill(
            backend.as_ref(),
            guard.device_ptr(),
            guard.byte_size(),
            guard.stream,
        )?;
        guard.commit()
    }

    /// The requested shape.
    pub fn shape(&self) -> &[u64] {
        self.pool.meta(self.slot).shape()
    }

    /// The requested byte size (`product(shape) × dtype size`).
    #[inline]
    pub fn byte_size(&self) -> usize {
        self.pool.meta(self.slot).byte_size
    }

    /// Starts the host write phase. Needs host-accessible memory (`host`, `pinned`,
    /// `cuda_managed`); a `cuda_device` slot is written on the compute stream instead.
    #[inline]
    pub fn write_host(self) -> Result<HostWriteGuard> {
        if !self.pool.kind.is_host_accessible() {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "host writes need host-accessible memory; this pool is cuda_device",
            )
            .at(self.pool.location));
        }
        Ok(HostWriteGuard { loan: self })
    }

    /// Writes the slot on the host with `fill` and commits. The bytes are complete when
    /// this returns, so no readiness fence is recorded.
    #[inline]
    pub fn write_host_and_commit(self, fill: impl FnOnce(&mut [u8])) -> Result<CommittedTensor> {
        let mut guard = self.write_host()?;
        fill(guard.as_mut_slice());
        guard.commit()
    }
}

impl Drop for TensorOutputLoan {
    #[inline]
    fn drop(&mut self) {
        Pool::release(&self.pool, self.slot, Holder::NONE);
    }
}

impl TensorOutputLoan {
    /// Turns the loan into a committed tensor without running its Drop.
    #[inline]
    fn into_tensor(self) -> Tensor {
        let loan = std::mem::ManuallyDrop::new(self);
        // SAFETY: the loan is not used again and its Drop is suppressed; its reference
        // moves into the Tensor.
        let pool = unsafe { std::ptr::read(&raw const loan.pool) };
        Tensor {
            pool,
            slot: loan.slot,
            holder: Holder::NONE,
        }
    }
}

/// The device write phase of a loan, on the operator's runtime stream. Enqueue the
/// writes on [`stream`](Self::stream), then [`commit`](Self::commit).
#[must_use = "uncommitted writes are abandoned when the guard drops"]
#[derive(Debug)]
pub struct DeviceWriteGuard {
    /// Dropped by the guard's Drop, unless abandoned writes withhold the slot.
    loan: std::mem::ManuallyDrop<TensorOutputLoan>,
    stream: StreamHandle,
}

impl DeviceWriteGuard {
    /// The slot's address (a `CUdeviceptr` for CUDA).
    pub fn device_ptr(&self) -> DevicePtr {
        self.loan.pool.slot_addr(self.loan.slot)
    }

    /// The requested byte size.
    pub fn byte_size(&self) -> usize {
        self.loan.byte_size()
    }

    /// The stream the writes go on.
    pub fn stream(&self) -> StreamHandle {
        self.stream
    }

    /// The pool's device backend, to enqueue fills and copies.
    pub fn backend(&self) -> Arc<dyn DeviceBackend> {
        match self.loan.pool.device() {
            Some(d) => Arc::clone(&d.backend),
            None => unreachable!("write() admits device pools only"),
        }
    }

    /// Ends the write phase: records the readiness event on the stream — one event
    /// record, no flush, no host wait — or, on an edge the plan proved fused onto this
    /// same stream, records nothing.
    pub fn commit(self) -> Result<CommittedTensor> {
        let mut this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is not used again and its Drop is suppressed: the loan moves out
        // once.
        let loan = unsafe { std::mem::ManuallyDrop::take(&mut this.loan) };
        let stream = this.stream;
        let elide = loan.pool.loan_streams().fused == Some(stream);
        if let Err(e) = loan
            .pool
            .commit(loan.slot, OrderingDomain::partition(stream), elide)
        {
            if !abandon_writes(&loan, stream) {
                std::mem::forget(loan);
            }
            return Err(e);
        }
        Ok(CommittedTensor(loan.into_tensor()))
    }
}

impl Drop for DeviceWriteGuard {
    /// Uncommitted: the writes enqueued on the stream are abandoned, and the slot goes
    /// back to its pool.
    fn drop(&mut self) {
        if abandon_writes(&self.loan, self.stream) {
            // SAFETY: dropped once, here; not used afterwards.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.loan) };
        }
    }
}

/// A device write of `loan` on `stream` ends uncommitted (the guard dropped, a fill or
/// the commit failed): the slot goes back to its pool with the writes maybe still
/// pending. Its next write on the same planned stream is ordered after them in a device
/// pool. Anything else could overtake them — a host write of a pinned or managed slot,
/// a publisher's write on another stream — so the stream is waited for first (a cold
/// path). Returns whether the slot may go back: a stream that cannot be waited on
/// withholds it (the caller leaks the loan) rather than return it under the writes.
#[cold]
fn abandon_writes(loan: &TensorOutputLoan, stream: StreamHandle) -> bool {
    let pool = &loan.pool;
    if pool.loan_streams().planned == Some(stream) && !pool.kind.is_host_accessible() {
        return true;
    }
    match pool.device() {
        Some(d) if d.backend.synchronize_stream(stream).is_err() => {
            crate::trace::event!(
                warn,
                pool = pool.location,
                "abandoned writes on a stream that cannot be waited on: the slot is withheld"
            );
            false
        }
        _ => true,
    }
}

impl fmt::Debug for TensorOutputLoan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorOutputLoan")
            .field("pool", &self.pool.name)
            .field("slot", &self.slot)
            .field("shape", &self.shape())
            .finish_non_exhaustive()
    }
}

/// The host write phase of a loan. Commit it to make the tensor emittable.
#[must_use = "uncommitted writes are abandoned when the guard drops"]
#[derive(Debug)]
pub struct HostWriteGuard {
    loan: TensorOutputLoan,
}

impl HostWriteGuard {
    /// The slot's address (for a pinned or managed pool also valid on the device).
    pub fn device_ptr(&self) -> DevicePtr {
        self.loan.pool.slot_addr(self.loan.slot)
    }

    /// The slot's bytes, exactly `byte_size()` long.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let ptr = self.loan.pool.slot_ptr(self.loan.slot);
        // SAFETY: the guard owns the slot's loan, so nobody else reads or writes these
        // bytes until commit publishes them; `byte_size <= per_slot_bytes`.
        unsafe { std::slice::from_raw_parts_mut(ptr, self.loan.byte_size()) }
    }

    /// The requested byte size.
    pub fn byte_size(&self) -> usize {
        self.loan.byte_size()
    }

    /// Ends the write phase. For a host write this records nothing: the bytes are
    /// complete now.
    #[inline]
    pub fn commit(self) -> Result<CommittedTensor> {
        Ok(CommittedTensor(self.loan.into_tensor()))
    }
}

/// A tensor whose writes are committed, ready for `emit`.
#[must_use = "a committed tensor does nothing until it is emitted"]
#[derive(Debug)]
pub struct CommittedTensor(Tensor);

impl CommittedTensor {
    /// The tensor, for forwarding through a pass-through output or inspection.
    pub fn into_tensor(self) -> Tensor {
        self.0
    }
}

impl From<CommittedTensor> for Tensor {
    #[inline]
    fn from(c: CommittedTensor) -> Self {
        c.0
    }
}

/// A committed tensor as consumers see it: read-only.
///
/// Clones are cheap (a reference count) and share the slot; the slot returns to its pool
/// when the last clone and the last [`TensorReadLease`] are dropped.
///
/// A tensor is a pool and a slot index: two words, so an `Option<Tensor>` comes back from
/// `receive` in registers. A pass-through tensor made by [`Tensor::from_host_vec`] owns a
/// one-slot pool around its bytes.
///
/// A tensor kept past its session's end stays valid: its slot keeps the pool's memory
/// alive (the session reports the slot as still held), and the pool is freed when the
/// last such handle drops.
pub struct Tensor {
    /// Shares the slot's parked pool count with the slot's other handles; the last
    /// handle hands it back with the slot (never dropped as an `Arc`).
    pool: ManuallyDrop<Arc<Pool>>,
    slot: u32,
    /// The release position of the stream this handle was received into, when the
    /// receiving partition owns that stream alone; passed to the pool on release.
    holder: Holder,
}

impl Tensor {
    /// A pass-through host tensor over caller-supplied bytes (for a
    /// `storage = pass_through` output). `bytes.len()` must equal the shape's byte size.
    pub fn from_host_vec(shape: &[u64], dtype: DType, bytes: Vec<u8>) -> Result<Tensor> {
        let meta = meta_for(shape, dtype).ok_or_else(|| {
            if shape.len() > MAX_TENSOR_RANK as usize {
                Error::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "the shape {shape:?} has {} extents; a tensor has at most {MAX_TENSOR_RANK}",
                        shape.len()
                    ),
                )
            } else {
                Error::new(
                    ErrorCode::ArithmeticOverflow,
                    format!("the shape {shape:?} of {dtype} overflows a byte count"),
                )
            }
        })?;
        if meta.byte_size != bytes.len() {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "the shape {shape:?} of {dtype} needs {} bytes, the buffer has {}",
                    meta.byte_size,
                    bytes.len()
                ),
            ));
        }
        Ok(Tensor {
            pool: ManuallyDrop::new(Pool::wrap_host_bytes(bytes.into_boxed_slice(), meta)),
            slot: 0,
            holder: Holder::NONE,
        })
    }

    #[inline]
    fn meta(&self) -> &TensorMeta {
        self.pool.meta(self.slot)
    }

    /// The use of the pool slot this tensor holds: its index and generation. A
    /// descriptor or capsule that names the tensor outside this process's handles
    /// carries it; the pool refuses it once the slot is loaned again.
    pub fn slot_ref(&self) -> crate::channel::SlotRef {
        self.pool.slot_ref(self.slot)
    }

    /// The extents.
    pub fn shape(&self) -> &[u64] {
        self.meta().shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.meta().dtype
    }

    /// The rank.
    pub fn rank(&self) -> u32 {
        u32::from(self.meta().rank)
    }

    /// The byte size.
    pub fn byte_size(&self) -> usize {
        self.meta().byte_size
    }

    /// Where the bytes live.
    pub fn memory_kind(&self) -> MemoryKind {
        self.pool.kind
    }

    /// The pool the tensor was borrowed from (`<operator>.<port>`), or `None` for a
    /// pass-through tensor.
    pub fn pool_name(&self) -> Option<&str> {
        (!self.pool.pass_through).then_some(self.pool.name.as_str())
    }

    /// The bytes, for host-accessible memory (`NotSupported` for `cuda_device`; a
    /// `ProtocolError` while stream writes may still be pending).
    #[inline]
    pub fn data(&self) -> Result<&[u8]> {
        let pool = &*self.pool;
        if pool.device().is_some() {
            self.check_host_readable()?;
        }
        // SAFETY: the slot is committed, its writes are complete (a host pool's at commit,
        // a device-backed pool's checked above), and this handle keeps it out of the pool;
        // nobody writes it until the last handle drops.
        Ok(unsafe {
            std::slice::from_raw_parts(pool.slot_ptr(self.slot), pool.meta(self.slot).byte_size)
        })
    }

    /// Whether a device-backed slot may be read on the host now (off the host-pool path).
    #[cold]
    fn check_host_readable(&self) -> Result<()> {
        let pool = &*self.pool;
        if !pool.kind.is_host_accessible() {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "the tensor lives in cuda_device memory: copy it to the host first",
            )
            .at(pool.location));
        }
        if let Some((event, backend)) = pool.readiness_event(self.slot)?
            && !backend.query_event(event)?
        {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the tensor's stream writes may still be pending: call synchronize_for_host() before reading it on the host",
            )
            .at(pool.location));
        }
        Ok(())
    }

    /// Always `PermissionDenied`: write authority stayed with the producer's guard and
    /// was spent at commit. Copy into a slot you allocate to change the bytes.
    pub fn mutable_data(&mut self) -> Result<&mut [u8]> {
        Err(Error::new(
            ErrorCode::PermissionDenied,
            "a received tensor is read-only: write authority was spent at the producer's commit",
        )
        .at(self.pool.location))
    }

    /// A read lease: keeps the slot out of the pool until it is dropped, like a clone,
    /// but grants only reads.
    pub fn read_lease(&self) -> TensorReadLease {
        TensorReadLease(self.clone())
    }

    /// The tensor's address: a `CUdeviceptr` for device memory, the host address
    /// otherwise. A plain accessor: it synchronizes nothing.
    pub fn device_ptr(&self) -> DevicePtr {
        self.pool.slot_addr(self.slot)
    }

    /// Where the tensor's bytes are: its pool's memory object and the slot's offset in
    /// it, with the slot's length (the pool's per-slot bound; the tensor uses the first
    /// [`byte_size`](Self::byte_size) bytes). On a backend with unified addressing,
    /// [`BufferRef::unified_address`] equals [`device_ptr`](Self::device_ptr); on one
    /// without, this pair is the bytes' only name. A plain accessor.
    pub fn buffer(&self) -> BufferRef {
        self.pool.buffer(self.slot)
    }

    /// How the producer's writes are ordered: complete on the host, a recorded
    /// readiness event, elided by fusion (recorded lazily when something else needs it),
    /// or not known (a device-memory DLPack import before `set_readiness_stream`).
    pub fn readiness(&self) -> TensorReadiness {
        match self.pool.readiness_state(self.slot) {
            readiness::HOST => TensorReadiness::Host,
            readiness::ELIDED => TensorReadiness::Elided,
            readiness::UNCONTRACTED => TensorReadiness::Uncontracted,
            _ => TensorReadiness::Recorded,
        }
    }

    /// Whether this tensor crossed from another process behind a generation fence whose
    /// writer died before writing it: its bytes are **not the frame's**. This is the
    /// frame `RunSession::ipc_abandoned_frames` and `ProcessSubscriber::abandoned_frames`
    /// count, which reaches its reader all the same (its wait was ended so that no stream
    /// wedges on a dead process: docs/IPC.md, "When a process dies").
    ///
    /// Read it once the stream work that used the tensor has run (after
    /// `copy_to_host`, or a synchronization of the stream that read it): the fence is
    /// abandoned only once the writer's process exited, so an earlier read may still say
    /// `false` for a frame that will turn out abandoned. A tensor received from another
    /// process in device or pinned memory written on a stream can be abandoned (a
    /// `ProcessSubscriber`'s, an import fed by another process's export, a
    /// `ProcessPublisher`'s frame in the importing session); every other tensor says
    /// `false`.
    pub fn fence_abandoned(&self) -> bool {
        self.pool.fence_abandoned(self.slot)
    }

    /// Release streams registered on the tensor's slot (deduplicated).
    pub fn release_stream_count(&self) -> u32 {
        self.pool.release_stream_count(self.slot)
    }

    /// Blocks the calling thread until the producer's writes are complete; returns at
    /// once for host-written bytes. One of the three blocking calls of the data path.
    pub fn synchronize_for_host(&self) -> Result<()> {
        if let Some((event, backend)) = self.pool.readiness_event(self.slot)? {
            backend.synchronize_event(event)?;
        }
        Ok(())
    }

    /// Orders `stream` after the producer's writes (a stream wait, no host block) and
    /// registers it as a release stream, so the slot is not reused before the work then
    /// enqueued on `stream` completes: the hook for a stream the plan did not assign.
    pub fn synchronize_for_consumer_stream(&self, stream: impl Into<StreamHandle>) -> Result<()> {
        let stream = stream.into();
        // The wait first: a tensor that cannot be ordered, or a stream the backend
        // refuses, leaves no release registration behind. Bytes written on the host need
        // no wait, but the stream is checked all the same: a release is recorded on it
        // later, and a bad handle found only then failed the session at the pool.
        match self.pool.readiness_event(self.slot)? {
            Some((event, backend)) => backend.wait_event(stream, event)?,
            None => {
                if let Some(d) = self.pool.device() {
                    d.backend.check_stream(stream)?;
                }
            }
        }
        self.pool
            .register_release(self.slot, OrderingDomain::caller(stream))
    }

    /// Copies the tensor's first `dst.len()` bytes — all of it, a prefix, or one element
    /// — into `dst` on `stream`, then blocks until the stream has run the copy. A `dst`
    /// longer than the tensor is `InvalidArgument`. The stream is not retained for
    /// retirement afterwards.
    pub fn copy_to_host(&self, dst: &mut [u8], stream: impl Into<StreamHandle>) -> Result<()> {
        let n = dst.len();
        self.check_copy_len(n, "copy_to_host")?;
        let stream = stream.into();
        let Some(d) = self.pool.device() else {
            dst.copy_from_slice(&self.data()?[..n]);
            return Ok(());
        };
        if n == 0 {
            return Ok(());
        }
        // On the writer's own stream the copy is ordered already (no self-wait, and an
        // elided readiness stays elided).
        if self.pool.writer_stream(self.slot) != Some(stream)
            && let Some((event, _)) = self.pool.readiness_event(self.slot)?
        {
            d.backend.wait_event(stream, event)?;
        }
        // SAFETY: `dst` is a live exclusive borrow of exactly `n` bytes and the stream is
        // synchronized below before the borrow ends; this handle keeps the source slot
        // allocated and unwritten meanwhile.
        unsafe {
            d.backend
                .copy_to_host_async(dst.as_mut_ptr(), self.device_ptr(), n, stream)?;
        }
        d.backend.synchronize_stream(stream)
    }

    /// This tensor, copied once into a slot of `pool` — the boundary pool of a topic
    /// exported across processes from a pass-through output (`TopicBoundary`) — with its
    /// shape and dtype; `stream` is the emitting operator's planned stream.
    ///
    /// A host pool (host contract): a host tensor is copied on the host; a device tensor
    /// with one blocking copy to the host on `stream`, after its readiness. A pinned or
    /// device pool (device contract): a device tensor is copied on `stream` after its
    /// readiness (`stream` is registered as its release stream, so its slot outlives the
    /// copy) and the copy is committed there — no host wait; a host tensor's bytes are
    /// copied to the device and `stream` synchronized (the host buffer may be reused once
    /// this returns). Refused: a tensor too large for the slot, or of another dtype or
    /// rank than the pool's (`InvalidArgument`); the pool full (`ResourceExhausted`); a
    /// device tensor of another device (`InvalidArgument`: no cross-device copy); a
    /// foreign device tensor with no readiness contract (`ProtocolError`); a device tensor
    /// and no stream (`NotSupported`).
    pub(crate) fn copy_across_boundary(
        &self,
        pool: &Arc<Pool>,
        stream: Option<StreamHandle>,
    ) -> Result<Tensor> {
        let n = self.byte_size();
        let no_stream = || {
            Error::new(
                ErrorCode::NotSupported,
                "a device tensor crosses a topic's boundary on its output's stream, and this operator has none",
            )
            .at(pool.location)
        };
        let loan = TensorOutputLoan::new(
            pool,
            TensorLoanRequest {
                shape: self.shape(),
                dtype: self.dtype(),
            },
        )?;
        let device = pool.device().filter(|_| pool.kind != MemoryKind::Host);
        let Some(device) = device else {
            let mut guard = loan.write_host()?;
            let dst = guard.as_mut_slice();
            match (self.pool.device(), stream) {
                (None, _) => dst.copy_from_slice(&self.data()?[..n]),
                (Some(_), Some(s)) => self.copy_to_host(dst, s)?,
                (Some(_), None) => return Err(no_stream()),
            }
            return Ok(guard.commit()?.into_tensor());
        };
        let stream = stream.ok_or_else(no_stream)?;
        let backend = Arc::clone(&device.backend);
        let guard = loan.write(stream)?;
        match self.pool.device() {
            Some(d) if !Arc::ptr_eq(&d.backend, &backend) => {
                return Err(Error::invalid_argument(
                    "the tensor lives on another device than the topic's boundary pool: holo never copies across devices",
                )
                .at(pool.location));
            }
            Some(_) => {
                self.synchronize_for_consumer_stream(stream)?;
                // SAFETY: the boundary slot is this loan's, written only on `stream` until
                // its commit; the source slot stays allocated until `stream` ran the copy
                // (registered as its release stream just above).
                unsafe { backend.copy_async(guard.device_ptr(), self.device_ptr(), n, stream)? };
            }
            None => {
                let src = self.data()?;
                // SAFETY: as above for the destination; `src` is this handle's bytes, kept
                // until the stream ran the copy (synchronized before this returns).
                unsafe {
                    backend.copy_from_host_async(guard.device_ptr(), src.as_ptr(), n, stream)?;
                }
                backend.synchronize_stream(stream)?;
            }
        }
        Ok(guard.commit()?.into_tensor())
    }

    /// A copy of the tensor's first `n` bytes (all, a prefix, one element) by `call`: a
    /// destination longer than the tensor is `InvalidArgument`.
    fn check_copy_len(&self, n: usize, call: &str) -> Result<()> {
        if n > self.byte_size() {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "{call} was given a destination of {n} bytes, longer than the tensor's {} bytes",
                    self.byte_size()
                ),
            ));
        }
        Ok(())
    }

    /// Enqueues a copy of the bytes into `dst` on `stream` and returns: the caller owns
    /// the completion wait on its stream. The stream is registered as a release stream.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `byte_size()` bytes, and nothing may access it,
    /// until `stream` has run the copy.
    pub unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        stream: impl Into<StreamHandle>,
    ) -> Result<()> {
        let stream = stream.into();
        let n = self.byte_size();
        let Some(d) = self.pool.device() else {
            // SAFETY: the caller's contract; host bytes are complete.
            unsafe { std::ptr::copy_nonoverlapping(self.data()?.as_ptr(), dst, n) };
            return Ok(());
        };
        self.synchronize_for_consumer_stream(stream)?;
        // SAFETY: the caller keeps `dst` valid until the stream ran the copy; the
        // registered release stream keeps the source slot from reuse until then.
        unsafe {
            d.backend
                .copy_to_host_async(dst, self.device_ptr(), n, stream)
        }
    }

    /// The tensor of a one-slot foreign pool ([`Pool::wrap_foreign`]), which holds the
    /// slot's one handle.
    pub(crate) fn from_foreign(pool: Arc<Pool>) -> Tensor {
        Tensor {
            pool: ManuallyDrop::new(pool),
            slot: 0,
            holder: Holder::NONE,
        }
    }

    /// Whether this tensor's slot is one of `pool`'s.
    #[inline]
    pub(crate) fn in_pool(&self, pool: &Arc<Pool>) -> bool {
        Arc::ptr_eq(&self.pool, pool)
    }

    /// Where this tensor's slot comes from, when that is a runtime pool of the plan other
    /// than `own` (the emitting output's pool): the pool's location (`operator "…", port
    /// "…"`). `None` for a slot of `own` and for a pass-through tensor's own bytes.
    #[inline]
    pub(crate) fn foreign_pool(&self, own: Option<&Arc<Pool>>) -> Option<&'static str> {
        let pool: &Arc<Pool> = &self.pool;
        (!pool.pass_through && own.is_none_or(|own| !self.in_pool(own))).then_some(pool.location)
    }

    /// The stream contract's producer half, applied when the runtime publishes this
    /// tensor to a consumer: registers the consumer's stream as a release stream
    /// (deduplicated, capped; no device call; nothing for a host consumer).
    pub(crate) fn register_release_stream(&self, consumer: OrderingDomain) -> Result<()> {
        self.pool.register_release(self.slot, consumer)
    }

    /// The stream contract's consumer half, applied on the consumer's thread when it
    /// receives this tensor into its ordering domain: a stream (registered at
    /// publication) waits on the readiness event, and a consumer whose partition owns the
    /// stream alone keeps the stream's release position in this handle, so dropping it
    /// records that release itself; the host (a consumer with no planned stream) waits on
    /// the host for stream-written bytes. A consumer on the very stream the bytes were
    /// written on waits on nothing: the stream's order covers the writes (a fan-out whose
    /// consumers share their producer's stream — one partition, or one shared stream —
    /// makes no self-wait; an elided readiness stays elided).
    pub(crate) fn deliver_to(&mut self, consumer: OrderingDomain) -> Result<()> {
        match consumer {
            OrderingDomain::Stream { stream, owner } => {
                if self.pool.writer_stream(self.slot) != Some(stream)
                    && let Some((event, backend)) = self.pool.readiness_event(self.slot)?
                {
                    backend.wait_event(stream, event)?;
                }
                let position = self.pool.enter_domain(self.slot, stream);
                if owner == crate::channel::DomainOwner::Partition {
                    self.holder = position;
                }
                Ok(())
            }
            OrderingDomain::Host => self.synchronize_for_host(),
        }
    }
}

/// How a tensor's producer writes are ordered (see [`Tensor::readiness`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorReadiness {
    /// Complete on the host: nothing to wait for.
    Host,
    /// A readiness event was recorded on the writer's stream.
    Recorded,
    /// A proven same-stream edge elided the readiness event.
    Elided,
    /// A device-memory DLPack import whose producer's stream is not known yet: no
    /// consumer can be ordered behind it until
    /// [`set_readiness_stream`](Tensor::set_readiness_stream).
    Uncontracted,
}

impl Clone for Tensor {
    fn clone(&self) -> Self {
        self.pool.retain(self.slot);
        Tensor {
            // SAFETY: another handle of the same slot: it shares the slot's count, which
            // only the slot's last handle hands back (no increment).
            pool: ManuallyDrop::new(unsafe { Arc::from_raw(Arc::as_ptr(&self.pool)) }),
            slot: self.slot,
            holder: self.holder,
        }
    }
}

impl Drop for Tensor {
    #[inline]
    fn drop(&mut self) {
        Pool::release(&self.pool, self.slot, self.holder);
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("pool", &self.pool_name())
            .field("memory_kind", &self.memory_kind())
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .finish()
    }
}

/// A read-only claim on a tensor's slot; the slot stays out of its pool until every
/// lease and every `Tensor` handle is dropped.
#[derive(Debug)]
pub struct TensorReadLease(Tensor);

impl TensorReadLease {
    /// The bytes (see [`Tensor::data`]).
    pub fn data(&self) -> Result<&[u8]> {
        self.0.data()
    }
}

/// Implemented only by [`Tensor`]: tensor port specs apply only to `Tensor` payloads.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `holo_runtime::Tensor`",
    note = "tensor keys (`memory`, `dtype`, `rank`, `storage`, …) apply only to `Input<Tensor>` / `Output<Tensor>` ports"
)]
pub trait IsTensor: sealed::Sealed {}
impl IsTensor for Tensor {}
mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Tensor {}
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::channel::pool::{PoolOwner, PoolSpec};

    fn pool(slots: u32, bytes: u64) -> PoolOwner {
        Pool::materialize(
            PoolSpec {
                name: "p.out".into(),
                location: "p.out",
                kind: MemoryKind::Host,
                dtype: Some(DType::U8),
                rank: None,
                max_rank: 2,
                per_slot_bytes: bytes,
                slot_count: slots,
                release_capacity: 0,
                shared_memory: false,
            },
            None,
        )
        .unwrap()
    }

    #[test]
    fn lifecycle_write_commit_read_and_return() {
        let p = pool(1, 16);
        let loan = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[2, 4],
                dtype: DType::U8,
            },
        )
        .unwrap();
        let t: Tensor = loan.write_host_and_commit(|b| b.fill(7)).unwrap().into();
        assert_eq!(t.data().unwrap(), &[7; 8]);
        assert_eq!(t.shape(), &[2, 4]);
        let lease = t.read_lease();
        drop(t);
        assert_eq!(p.free_slots(), 0, "the lease still holds the slot");
        assert_eq!(lease.data().unwrap(), &[7; 8]);
        drop(lease);
        assert_eq!(p.free_slots(), 1);
    }

    #[test]
    fn abandoned_loans_and_guards_return_their_slot() {
        let p = pool(1, 16);
        let loan = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[4],
                dtype: DType::U8,
            },
        )
        .unwrap();
        drop(loan);
        assert_eq!(p.free_slots(), 1);
        let guard = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[4],
                dtype: DType::U8,
            },
        )
        .unwrap()
        .write_host()
        .unwrap();
        drop(guard);
        assert_eq!(p.free_slots(), 1);
    }

    #[test]
    fn requests_beyond_the_bounds_are_rejected() {
        let p = pool(1, 16);
        let too_big = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[17],
                dtype: DType::U8,
            },
        );
        assert_eq!(too_big.unwrap_err().code(), ErrorCode::InvalidArgument);
        let rank = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[1, 1, 1],
                dtype: DType::U8,
            },
        );
        assert_eq!(rank.unwrap_err().code(), ErrorCode::InvalidArgument);
        let dtype = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[1],
                dtype: DType::F32,
            },
        );
        assert_eq!(dtype.unwrap_err().code(), ErrorCode::InvalidArgument);
        assert_eq!(p.free_slots(), 1);
    }

    fn tensor(p: &Arc<Pool>, fill: u8) -> Tensor {
        TensorOutputLoan::new(
            p,
            TensorLoanRequest {
                shape: &[4],
                dtype: DType::U8,
            },
        )
        .unwrap()
        .write_host_and_commit(|b| b.fill(fill))
        .unwrap()
        .into()
    }

    #[test]
    fn free_slots_park_the_pool_count_and_the_owner_frees_it() {
        let p = pool(3, 16);
        let weak = Arc::downgrade(&p);
        assert_eq!(
            Arc::strong_count(&p),
            1 + 3,
            "the owner's count and one per free slot"
        );
        let t = tensor(&p, 1);
        let c = t.clone();
        assert_eq!(
            Arc::strong_count(&p),
            4,
            "a loan, a tensor and its clones move the slot's count: no increment"
        );
        drop(t);
        drop(c);
        assert_eq!(Arc::strong_count(&p), 4);
        assert_eq!(p.free_slots(), 3);
        drop(p);
        assert!(
            weak.upgrade().is_none(),
            "closed with every slot back: freed"
        );
    }

    #[test]
    fn a_tensor_that_outlives_its_pool_owner_keeps_the_pool_until_it_drops() {
        let p = pool(2, 16);
        let weak = Arc::downgrade(&p);
        let held = tensor(&p, 5);
        let other = tensor(&p, 6);
        drop(other);
        drop(p);
        let live = weak.upgrade().expect("the held slot keeps the pool alive");
        assert_eq!(
            Arc::strong_count(&live),
            2,
            "the held slot's count and this probe"
        );
        drop(live);
        assert_eq!(
            held.data().unwrap(),
            &[5; 4],
            "still readable after the owner closed"
        );
        // Released on another thread after the close: its count is dropped, not parked.
        std::thread::spawn(move || drop(held)).join().unwrap();
        assert!(weak.upgrade().is_none(), "the last slot freed the pool");
    }

    #[test]
    fn a_pass_through_tensor_frees_its_bytes_with_its_last_handle() {
        let t = Tensor::from_host_vec(&[2], DType::U8, vec![1, 2]).unwrap();
        let weak = Arc::downgrade(&t.pool);
        let c = t.clone();
        drop(t);
        assert_eq!(c.data().unwrap(), &[1, 2]);
        assert_eq!(c.pool_name(), None);
        drop(c);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn received_tensors_are_read_only() {
        let mut t = Tensor::from_host_vec(&[2], DType::U8, vec![1, 2]).unwrap();
        assert_eq!(
            t.mutable_data().unwrap_err().code(),
            ErrorCode::PermissionDenied
        );
        let bad = Tensor::from_host_vec(&[3], DType::U8, vec![1, 2]);
        assert_eq!(bad.unwrap_err().code(), ErrorCode::InvalidArgument);
    }

    const _: () = {
        const fn send_sync<T: Send + Sync>() {}
        const fn send<T: Send>() {}
        send_sync::<Tensor>();
        send_sync::<TensorReadLease>();
        send::<TensorOutputLoan>();
        send::<HostWriteGuard>();
        send::<DeviceWriteGuard>();
    };
}
