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

use std::fmt;

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
