//! A caller's own stream or queue: what the DeviceArray hand-off orders holo's work
//! against ([`Tensor::device_array`](crate::Tensor::device_array)).
//!
//! [`StreamOrQueue`] is a small tagged wrapper, as in the seed's DeviceArray contract:
//! a CUDA stream for a CUDA device (the null, legacy and per-thread default streams
//! included), an OpenCL command queue for an OpenCL device (non-null), or a stream a holo
//! backend created. A backend adopts it for the length of a hand-off
//! ([`DeviceBackend::adopt_stream`](super::DeviceBackend::adopt_stream)) after checking
//! that it lives in the backend's own context: one from another context is refused with
//! `InvalidArgument`, never silently accepted.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{DeviceBackend, StreamHandle};

/// A raw `CUstream` from another library (cudarc, CuPy, PyTorch, a camera SDK), or one of
/// CUDA's default streams.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CudaStreamPtr(u64);

impl CudaStreamPtr {
    /// The null stream: the legacy default stream of the current context.
    pub const NULL: Self = Self(0);
    /// `CU_STREAM_LEGACY`: the legacy default stream, named explicitly.
    pub const LEGACY: Self = Self(1);
    /// `CU_STREAM_PER_THREAD`: the calling thread's per-thread default stream.
    pub const PER_THREAD: Self = Self(2);

    /// Wraps a raw `CUstream`.
    ///
    /// # Safety
    /// `raw` is [`NULL`](Self::NULL), [`LEGACY`](Self::LEGACY),
    /// [`PER_THREAD`](Self::PER_THREAD) or a live `CUstream`, and it stays live until every
    /// hand-off made with it has ended (each [`DeviceArray`](crate::DeviceArray) and
    /// [`HostCopy`](crate::HostCopy) ordered on it has dropped). holo checks the stream's
    /// context before using it (`cuStreamGetCtx`), which needs a live handle.
    pub const unsafe fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw `CUstream` value.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// Whether this names one of CUDA's default streams rather than a created stream.
    pub const fn is_default_stream(self) -> bool {
        self.0 <= 2
    }
}

impl fmt::Debug for CudaStreamPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("CudaStreamPtr(null)"),
            1 => f.write_str("CudaStreamPtr(legacy)"),
            2 => f.write_str("CudaStreamPtr(per-thread)"),
            raw => write!(f, "CudaStreamPtr({raw:#x})"),
        }
    }
}

/// A raw `cl_command_queue`. The handle must be non-null; an OpenCL device refuses a queue
/// of another `cl_context`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpenClQueuePtr(u64);

impl OpenClQueuePtr {
    /// Wraps a raw `cl_command_queue`.
    ///
    /// # Safety
    /// `raw` is a live command queue (retained by the caller) until every hand-off made
    /// with it has ended.
    pub const unsafe fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw `cl_command_queue` value.
    pub const fn raw(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for OpenClQueuePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenClQueuePtr({:#x})", self.0)
    }
}

/// A raw `cl_mem` of a caller's, to wrap as a read-only tensor
/// ([`Tensor::from_cl_mem`](crate::Tensor::from_cl_mem), the seed's
/// `createDeviceArrayView`). It must live in the OpenCL device's context.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpenClMemPtr(u64);

impl OpenClMemPtr {
    /// Wraps a raw `cl_mem`.
    ///
    /// # Safety
    /// `raw` is null or a live memory object (retained by the caller) while it is handed
    /// over: holo checks its context and size (`clGetMemObjectInfo`), which needs a live
    /// handle, and retains it for as long as the tensor wrapping it lives.
    pub const unsafe fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw `cl_mem` value.
    pub const fn raw(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for OpenClMemPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenClMemPtr({:#x})", self.0)
    }
}

/// The caller's stream or queue for a hand-off: only the member matching the device's
/// backend is accepted.
///
/// - [`Cuda`](Self::Cuda): a raw `CUstream` made by another library, or a CUDA default
///   stream ([`CudaStreamPtr::NULL`] is allowed and means the legacy default stream);
/// - [`OpenCl`](Self::OpenCl): a command queue, for an OpenCL device;
/// - [`Backend`](Self::Backend): a stream a holo backend created
///   ([`DeviceBackend::create_stream`](super::DeviceBackend::create_stream)), including
///   the runtime's own ("SDK") stream a tensor was written on
///   ([`Tensor::sdk_stream`](crate::Tensor::sdk_stream)): passing that one costs no
///   device call at all.
///
/// `From` conversions make each member usable directly at a call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamOrQueue {
    /// A CUDA stream.
    Cuda(CudaStreamPtr),
    /// An OpenCL command queue.
    OpenCl(OpenClQueuePtr),
    /// A stream created by a holo device backend.
    Backend(StreamHandle),
}

impl StreamOrQueue {
    /// The raw handle value (a `CUstream`, a `cl_command_queue`, or a backend's stream).
    pub const fn raw(self) -> u64 {
        match self {
            Self::Cuda(s) => s.raw(),
            Self::OpenCl(q) => q.raw(),
            Self::Backend(s) => s.raw(),
        }
    }

    /// A DLPack / array-API `stream` argument for a CUDA consumer: `None` (the argument
    /// left out) and `1` mean the legacy default stream, `2` the per-thread default
    /// stream, any other positive value a `CUstream`; `-1` means "do not synchronize" and
    /// gives `Ok(None)`. `0` and other negative values are refused (`InvalidArgument`),
    /// as the DLPack specification reserves them.
    ///
    /// # Safety
    /// A positive value other than 1 and 2 is a live `CUstream`, as for
    /// [`CudaStreamPtr::from_raw`].
    pub unsafe fn from_dlpack_stream(stream: Option<i64>) -> crate::Result<Option<Self>> {
        match stream {
            None | Some(1) => Ok(Some(Self::Cuda(CudaStreamPtr::LEGACY))),
            Some(2) => Ok(Some(Self::Cuda(CudaStreamPtr::PER_THREAD))),
            Some(-1) => Ok(None),
            Some(raw) if raw > 2 => Ok(Some(Self::Cuda(CudaStreamPtr(raw.unsigned_abs())))),
            Some(other) => Err(crate::Error::invalid_argument(format!(
                "DLPack stream argument {other} is reserved for CUDA consumers: pass 1 (legacy default), 2 (per-thread default), a CUstream or -1 (no synchronization)"
            ))),
        }
    }
}

impl From<CudaStreamPtr> for StreamOrQueue {
    fn from(stream: CudaStreamPtr) -> Self {
        Self::Cuda(stream)
    }
}

impl From<OpenClQueuePtr> for StreamOrQueue {
    fn from(queue: OpenClQueuePtr) -> Self {
        Self::OpenCl(queue)
    }
}

impl From<StreamHandle> for StreamOrQueue {
    fn from(stream: StreamHandle) -> Self {
        Self::Backend(stream)
    }
}

impl From<crate::tensor::CudaStream<'_>> for StreamOrQueue {
    fn from(stream: crate::tensor::CudaStream<'_>) -> Self {
        Self::Backend(stream.handle())
    }
}

/// Blocks until everything enqueued on the caller's `stream` has run: the one wait after
/// [`Tensor::copy_to_host_async`](crate::Tensor::copy_to_host_async) and kernels the caller enqueued. The stream is checked
/// like a hand-off's (same context).
pub fn synchronize_stream(device: &dyn DeviceBackend, stream: StreamOrQueue) -> crate::Result<()> {
    let handle = device.adopt_stream(stream)?;
    let result = device.synchronize_stream(handle);
    device.release_adopted_stream(handle);
    result
}

/// A caller's stream or queue adopted by a device once: its context is checked when it is
/// adopted ([`AdoptedStream::new`]), and hand-offs on it
/// ([`Tensor::device_array_on`](crate::Tensor::device_array_on)) then check nothing — the
/// steady-state form of the hand-off, for a caller that hands every frame to the same
/// stream. Clones share the adoption; the last one to drop (arrays made on it hold one)
/// ends it. The caller keeps its stream alive until then.
#[derive(Clone)]
pub struct AdoptedStream(Arc<Adoption>);

/// Aligned to a cache line: everything a steady-state hand-off reads of its stream in one
/// line (`handoff cold`, BENCHMARKS.md).
#[repr(align(64))]
struct Adoption {
    device: Arc<dyn DeviceBackend>,
    stream: StreamOrQueue,
    handle: StreamHandle,
    /// [`DeviceBackend::is_backend_stream`], asked once.
    backend_stream: bool,
    /// Whether a hand-off on it can take the steady-state path: a caller's raw stream
    /// (not one the device runs itself), not CUDA's per-thread default stream (whose
    /// release is recorded on the legacy stream by the array's owner thread's rule).
    steady: bool,
}

impl AdoptedStream {
    /// Adopts `stream` on `device`: `InvalidArgument` for a stream of another context
    /// (CUDA: `cuStreamGetCtx`), another device or another backend kind.
    pub fn new(
        device: &Arc<dyn DeviceBackend>,
        stream: impl Into<StreamOrQueue>,
    ) -> crate::Result<Self> {
        let stream = stream.into();
        let handle = device.adopt_stream(stream)?;
        let backend_stream = device.is_backend_stream(handle);
        Ok(Self(Arc::new(Adoption {
            device: Arc::clone(device),
            stream,
            handle,
            backend_stream,
            steady: !backend_stream && stream != StreamOrQueue::Cuda(CudaStreamPtr::PER_THREAD),
        })))
    }

    /// The caller's stream or queue, as given.
    pub fn stream(&self) -> StreamOrQueue {
        self.0.stream
    }

    /// The handle the device's stream calls take for it.
    pub fn handle(&self) -> StreamHandle {
        self.0.handle
    }

    /// Whether it is a stream the device itself created
    /// ([`DeviceBackend::is_backend_stream`]).
    pub(crate) fn is_backend_stream(&self) -> bool {
        self.0.backend_stream
    }

    /// Whether a hand-off on it may take the steady-state path: a caller's raw stream,
    /// not CUDA's per-thread default stream (asked once, at adoption).
    #[inline]
    pub(crate) fn is_steady(&self) -> bool {
        self.0.steady
    }

    /// Whether `device` is the device that adopted it (the same backend instance).
    #[inline]
    pub(crate) fn is_adopted_by(&self, device: &Arc<dyn DeviceBackend>) -> bool {
        Arc::ptr_eq(&self.0.device, device)
    }

    /// The device that adopted it.
    pub fn device(&self) -> &Arc<dyn DeviceBackend> {
        &self.0.device
    }

    /// Blocks until everything enqueued on the stream has run.
    pub fn synchronize(&self) -> crate::Result<()> {
        self.0.device.synchronize_stream(self.0.handle)
    }
}

impl Drop for Adoption {
    fn drop(&mut self) {
        self.device.release_adopted_stream(self.handle);
    }
}

impl fmt::Debug for AdoptedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdoptedStream")
            .field("stream", &self.0.stream)
            .field("device", &self.0.device.backend_kind())
            .finish()
    }
}

/// The caller streams a backend has adopted, counted: a backend's stream calls accept an
/// adopted handle until its last adoption ends. The hot lookup (every wait and record on
/// a caller stream) scans a few atomics; a lock is taken only to adopt, to release, and
/// to look up past the first [`Adoptions::FAST`] streams adopted at once.
pub(crate) struct Adoptions {
    counts: Mutex<HashMap<u64, u32>>,
    /// Raw handles adopted now (`EMPTY`: a free entry).
    fast: [AtomicU64; Self::FAST],
    /// Adopted handles that found no free fast entry.
    overflow: AtomicU32,
}

impl Adoptions {
    const FAST: usize = 16;
    /// Not a handle: raw 0 is CUDA's null stream.
    const EMPTY: u64 = u64::MAX;

    pub(crate) fn new() -> Self {
        Self {
            counts: Mutex::new(HashMap::new()),
            fast: std::array::from_fn(|_| AtomicU64::new(Self::EMPTY)),
            overflow: AtomicU32::new(0),
        }
    }

    /// Counts one adoption of `raw`.
    pub(crate) fn adopt(&self, raw: u64) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(raw).or_insert(0);
        *count += 1;
        if *count == 1 {
            match self
                .fast
                .iter()
                .find(|e| e.load(Ordering::Relaxed) == Self::EMPTY)
            {
                Some(entry) => entry.store(raw, Ordering::Release),
                None => {
                    self.overflow.fetch_add(1, Ordering::Release);
                }
            }
        }
    }

    /// Ends one adoption of `raw` (nothing if it is not adopted); whether one was ended.
    pub(crate) fn release(&self, raw: u64) -> bool {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(count) = counts.get_mut(&raw) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            counts.remove(&raw);
            match self.fast.iter().find(|e| e.load(Ordering::Relaxed) == raw) {
                Some(entry) => entry.store(Self::EMPTY, Ordering::Release),
                None => {
                    self.overflow.fetch_sub(1, Ordering::Release);
                }
            }
        }
        true
    }

    /// Whether `raw` is adopted now.
    #[inline]
    pub(crate) fn contains(&self, raw: u64) -> bool {
        raw != Self::EMPTY && self.fast.iter().any(|e| e.load(Ordering::Acquire) == raw)
            || (self.overflow.load(Ordering::Acquire) > 0 && self.contains_slow(raw))
    }

    #[cold]
    fn contains_slow(&self, raw: u64) -> bool {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dlpack_stream_arguments_map_as_the_specification_says() {
        // SAFETY: no value above 2 is passed.
        let map = |s| unsafe { StreamOrQueue::from_dlpack_stream(s) };
        assert_eq!(
            map(None).unwrap(),
            Some(StreamOrQueue::Cuda(CudaStreamPtr::LEGACY))
        );
        assert_eq!(
            map(Some(1)).unwrap(),
            Some(StreamOrQueue::Cuda(CudaStreamPtr::LEGACY))
        );
        assert_eq!(
            map(Some(2)).unwrap(),
            Some(StreamOrQueue::Cuda(CudaStreamPtr::PER_THREAD))
        );
        assert_eq!(map(Some(-1)).unwrap(), None);
        for reserved in [0, -2, i64::MIN] {
            assert_eq!(
                map(Some(reserved)).unwrap_err().code(),
                crate::ErrorCode::InvalidArgument
            );
        }
    }

    #[test]
    fn adoptions_are_counted_and_overflow_past_the_fast_entries() {
        let a = Adoptions::new();
        assert!(!a.contains(0));
        a.adopt(0); // the null stream is a handle like any other
        a.adopt(0);
        assert!(a.contains(0));
        a.release(0);
        assert!(a.contains(0), "one adoption is left");
        a.release(0);
        assert!(!a.contains(0));
        let many: Vec<u64> = (100..100 + Adoptions::FAST as u64 + 3).collect();
        for &raw in &many {
            a.adopt(raw);
        }
        assert!(many.iter().all(|&raw| a.contains(raw)));
        for &raw in &many {
            a.release(raw);
        }
        assert!(many.iter().all(|&raw| !a.contains(raw)));
        a.release(7); // never adopted: nothing happens
        assert!(!a.contains(7) && !a.contains(Adoptions::EMPTY));
    }

    #[test]
    fn default_streams_are_named() {
        assert!(CudaStreamPtr::NULL.is_default_stream());
        assert!(CudaStreamPtr::PER_THREAD.is_default_stream());
        // SAFETY: only formatted, never used.
        let created = unsafe { CudaStreamPtr::from_raw(0x7f00_1000) };
        assert!(!created.is_default_stream());
        assert_eq!(format!("{:?}", CudaStreamPtr::NULL), "CudaStreamPtr(null)");
        assert_eq!(format!("{created:?}"), "CudaStreamPtr(0x7f001000)");
    }
}
