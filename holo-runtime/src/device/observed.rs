//! [`Observed`]: a backend that forwards every call to another one and reports each
//! stream-ordered call, event query and host wait to an observer — which thread made it,
//! on which stream, and how long the call took — for tracing, tests and benchmarks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, MemoryObject,
    OpenClMemPtr, StreamHandle, StreamOrQueue,
};
use crate::Result;

/// One call an [`Observed`] backend forwarded (creation, destruction, allocation and
/// freeing are forwarded unreported: they are cold-path calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceCall {
    /// `record_event(event, stream)`.
    RecordEvent {
        /// The event recorded.
        event: EventHandle,
        /// The stream it was recorded on.
        stream: StreamHandle,
    },
    /// `wait_event(stream, event)`.
    WaitEvent {
        /// The stream made to wait.
        stream: StreamHandle,
        /// The event it waits on.
        event: EventHandle,
    },
    /// `query_event(event)`.
    QueryEvent {
        /// The event polled.
        event: EventHandle,
    },
    /// `synchronize_event(event)` (a host wait).
    SynchronizeEvent {
        /// The event waited on.
        event: EventHandle,
    },
    /// `synchronize_stream(stream)` (a host wait).
    SynchronizeStream {
        /// The stream waited on.
        stream: StreamHandle,
    },
    /// `memset_async` on `stream`.
    Memset {
        /// The stream the fill was enqueued on.
        stream: StreamHandle,
    },
    /// `copy_async`, `copy_to_host_async` or `copy_from_host_async` on `stream`.
    Copy {
        /// The stream the copy was enqueued on.
        stream: StreamHandle,
    },
    /// `enqueue_delay` on `stream`.
    Delay {
        /// The stream delayed.
        stream: StreamHandle,
    },
}

/// Forwards every call to the backend it wraps, and after each reported call (see
/// [`DeviceCall`]) calls `observer(call, how long the call took)` on the calling thread.
/// Pass it to [`SessionOptions::on_device`](crate::SessionOptions::on_device) like any
/// backend; handles and counters are the wrapped backend's.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
/// use holo_runtime::device::{DeviceBackend, DeviceCall, Observed, SoftwareDevice};
///
/// let records = Arc::new(AtomicU64::new(0));
/// let seen = Arc::clone(&records);
/// let device = Observed::new(SoftwareDevice::new(), move |call, _took| {
///     if matches!(call, DeviceCall::RecordEvent { .. }) {
///         seen.fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// let (stream, event) = (device.create_stream()?, device.create_event()?);
/// device.record_event(event, stream)?;
/// assert_eq!(records.load(Ordering::Relaxed), 1);
/// # Ok::<(), holo_runtime::Error>(())
/// ```
pub struct Observed<F> {
    inner: Arc<dyn DeviceBackend>,
    observer: F,
}

impl<F: Fn(DeviceCall, Duration) + Send + Sync + 'static> Observed<F> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn DeviceBackend>, observer: F) -> Arc<Self> {
        Arc::new(Observed { inner, observer })
    }

    fn observe<T>(&self, call: DeviceCall, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let result = f();
        (self.observer)(call, start.elapsed());
        result
    }
}

impl<F: Fn(DeviceCall, Duration) + Send + Sync + 'static> DeviceBackend for Observed<F> {
    fn backend_kind(&self) -> BackendKind {
        self.inner.backend_kind()
    }

    fn ordinal(&self) -> u32 {
        self.inner.ordinal()
    }

    fn raw_context(&self) -> Option<u64> {
        self.inner.raw_context()
    }

    fn bind_to_thread(&self) -> Result<()> {
        self.inner.bind_to_thread()
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        self.inner.create_stream()
    }

    fn adopt_stream(&self, stream: StreamOrQueue) -> Result<StreamHandle> {
        self.inner.adopt_stream(stream)
    }

    fn release_adopted_stream(&self, stream: StreamHandle) {
        self.inner.release_adopted_stream(stream);
    }

    fn is_backend_stream(&self, stream: StreamHandle) -> bool {
        self.inner.is_backend_stream(stream)
    }

    fn check_stream(&self, stream: StreamHandle) -> Result<()> {
        self.inner.check_stream(stream)
    }

    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        self.inner.destroy_stream(stream)
    }

    fn create_event(&self) -> Result<EventHandle> {
        self.inner.create_event()
    }

    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        self.inner.destroy_event(event)
    }

    fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()> {
        self.observe(DeviceCall::RecordEvent { event, stream }, || {
            self.inner.record_event(event, stream)
        })
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        self.observe(DeviceCall::WaitEvent { stream, event }, || {
            self.inner.wait_event(stream, event)
        })
    }

    fn query_event(&self, event: EventHandle) -> Result<bool> {
        self.observe(DeviceCall::QueryEvent { event }, || {
            self.inner.query_event(event)
        })
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<()> {
        self.observe(DeviceCall::SynchronizeEvent { event }, || {
            self.inner.synchronize_event(event)
        })
    }

    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()> {
        self.observe(DeviceCall::SynchronizeStream { stream }, || {
            self.inner.synchronize_stream(stream)
        })
    }

    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        self.inner.alloc(kind, bytes)
    }

    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
        unsafe { self.inner.free(kind, ptr, bytes) }
    }

    fn unified_addressing(&self) -> bool {
        self.inner.unified_addressing()
    }

    fn alloc_memory_object(&self, kind: AllocKind, bytes: usize) -> Result<MemoryObject> {
        self.inner.alloc_memory_object(kind, bytes)
    }

    fn adopt_memory_object(&self, memory: OpenClMemPtr) -> Result<(MemoryObject, usize)> {
        self.inner.adopt_memory_object(memory)
    }

    unsafe fn release_adopted_memory_object(&self, memory: MemoryObject) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.inner.release_adopted_memory_object(memory) }
    }

    unsafe fn free_memory_object(
        &self,
        kind: AllocKind,
        memory: MemoryObject,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
        unsafe { self.inner.free_memory_object(kind, memory, bytes) }
    }

    unsafe fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.observe(DeviceCall::Memset { stream }, || {
            // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
            unsafe { self.inner.memset_async(dst, value, bytes, stream) }
        })
    }

    unsafe fn copy_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.observe(DeviceCall::Copy { stream }, || {
            // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
            unsafe { self.inner.copy_async(dst, src, bytes, stream) }
        })
    }

    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.observe(DeviceCall::Copy { stream }, || {
            // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
            unsafe { self.inner.copy_to_host_async(dst, src, bytes, stream) }
        })
    }

    unsafe fn copy_from_host_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.observe(DeviceCall::Copy { stream }, || {
            // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
            unsafe { self.inner.copy_from_host_async(dst, src, bytes, stream) }
        })
    }

    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()> {
        self.observe(DeviceCall::Delay { stream }, || {
            self.inner.enqueue_delay(stream, duration)
        })
    }

    fn counters(&self) -> &DeviceCounters {
        self.inner.counters()
    }
}
