//! The software device: a [`DeviceBackend`] that needs no GPU.
//!
//! Each stream is a worker thread draining a bounded FIFO of operations; an event is a
//! `(stream progress, sequence number)` pair, complete once that stream's worker has run
//! the operation; memory is 256-byte-aligned host heap. A completion delay can slow every
//! operation down on purpose, so a test that reuses a slot too early reads the wrong bytes.

mod ipc;
pub(crate) use ipc::SOFTWARE_UUID;
mod stream;
mod table;

use std::alloc::{self, Layout};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use self::stream::{Op, Progress, SoftStream};
use self::table::HandleTable;
use super::handle::addr_usize;
use super::{
    AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, StreamHandle,
    StreamOrQueue,
};
use crate::device::counters::Count;
use crate::{Error, ErrorCode, Result};

/// Alignment of every allocation, as CUDA guarantees for `cuMemAlloc`.
const ALIGNMENT: usize = 256;
/// Fresh allocations are filled with this byte, so a read before any write shows.
const FRESH_BYTE: u8 = 0xCD;

/// An event: what its latest recording waits for, `None` until first recorded.
struct SoftEvent {
    last: Mutex<Option<(Arc<Progress>, u64)>>,
}

impl SoftEvent {
    fn target(&self) -> Option<(Arc<Progress>, u64)> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

struct Allocation {
    kind: AllocKind,
    layout: Layout,
    /// What the range is: host heap this device allocated (freed by `free`), or shared
    /// memory of the device's `DeviceIpc` — an exportable allocation (freed by `free`), an
    /// import of another process's (`release_import`), a registered host range
    /// (`unregister_host`).
    memory: Memory,
}

/// What an [`Allocation`] is.
enum Memory {
    Heap,
    Exported(crate::ipc::Segment),
    /// The mapping, kept (and unmapped) with the entry.
    Imported(#[allow(dead_code, reason = "held for its drop: the unmap")] crate::ipc::Segment),
    Registered,
}

/// A [`DeviceBackend`] whose streams are worker threads and whose memory is host heap.
///
/// Handles are checked against per-device tables, so a destroyed or foreign handle gives
/// `InvalidArgument`; device addresses passed to fills and copies are checked against the
/// live allocations.
pub struct SoftwareDevice {
    completion_delay: Duration,
    streams: HandleTable<SoftStream>,
    events: HandleTable<SoftEvent>,
    /// Live allocations by start address.
    allocations: Mutex<BTreeMap<u64, Allocation>>,
    next_stream_name: AtomicU64,
    /// The stream CUDA's default-stream handles (null, legacy, per-thread) adopt on this
    /// device, made on first use.
    default_stream: Mutex<Option<StreamHandle>>,
    /// That stream's raw handle once made (0 before): the one stream of this device that
    /// is a caller's, not the backend's ([`DeviceBackend::is_backend_stream`]).
    default_raw: AtomicU64,
    counters: DeviceCounters,
    /// Whether it serves memory across processes ([`DeviceBackend::ipc`]).
    shareable: bool,
}

impl SoftwareDevice {
    /// A software device whose operations complete as fast as the worker threads run.
    pub fn new() -> Arc<Self> {
        Self::with_completion_delay(Duration::ZERO)
    }

    /// A software device that cannot share its memory with another process (its
    /// [`ipc`](DeviceBackend::ipc) is `None`, as OpenCL's is): a topic across processes in
    /// device or pinned memory is refused on it.
    pub fn without_ipc() -> Arc<Self> {
        let mut d = Self::build(Duration::ZERO);
        d.shareable = false;
        Arc::new(d)
    }

    /// A software device whose stream workers wait `delay` before running each operation,
    /// so every completion arrives late.
    pub fn with_completion_delay(delay: Duration) -> Arc<Self> {
        Arc::new(Self::build(delay))
    }

    fn build(delay: Duration) -> Self {
        Self {
            shareable: true,
            completion_delay: delay,
            streams: HandleTable::new(),
            events: HandleTable::new(),
            allocations: Mutex::new(BTreeMap::new()),
            next_stream_name: AtomicU64::new(0),
            default_stream: Mutex::new(None),
            default_raw: AtomicU64::new(0),
            counters: DeviceCounters::default(),
        }
    }

    /// The delay each operation waits before it runs.
    pub fn completion_delay(&self) -> Duration {
        self.completion_delay
    }

    fn stream(&self, stream: StreamHandle) -> Result<Arc<SoftStream>> {
        self.streams.get(stream.raw()).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{stream:?} is not a live stream of this software device"
            ))
        })
    }

    fn event(&self, event: EventHandle) -> Result<Arc<SoftEvent>> {
        self.events.get(event.raw()).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{event:?} is not a live event of this software device"
            ))
        })
    }

    /// Checks that `ptr..ptr + bytes` lies inside one live allocation.
    fn check_range(&self, ptr: DevicePtr, bytes: usize, what: &'static str) -> Result<()> {
        let allocations = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let inside =
            allocations
                .range(..=ptr.raw())
                .next_back()
                .is_some_and(|(&start, allocation)| {
                    ptr.checked_add(bytes)
                        .is_some_and(|end| end.raw() <= start + allocation.layout.size() as u64)
                });
        if inside {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "{what} {ptr:?}..+{bytes} is not inside a live allocation of this software device"
            )))
        }
    }
}

fn null_host_pointer(what: &'static str) -> Error {
    Error::invalid_argument(format!("the {what} host pointer is null"))
}

impl DeviceBackend for SoftwareDevice {
    fn backend_kind(&self) -> BackendKind {
        BackendKind::Software
    }

    fn ordinal(&self) -> u32 {
        0
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        let number = self.next_stream_name.fetch_add(1, Ordering::Relaxed);
        let stream = Arc::new(SoftStream::spawn(
            format!("holo-sw-stream-{number}"),
            self.completion_delay,
        )?);
        let raw = self.streams.insert(stream).ok_or_else(|| {
            Error::new(
                ErrorCode::ResourceExhausted,
                "the software device has no stream slot left",
            )
        })?;
        self.counters.bump(Count::stream_create);
        Ok(StreamHandle::from_raw(raw))
    }

    /// The software device emulates CUDA: each device is its own context, a stream of
    /// another device is refused, a [`CudaStreamPtr`](super::CudaStreamPtr) names one of
    /// this device's streams by its raw handle, and CUDA's default-stream handles (null,
    /// legacy, per-thread) name one default stream made on first use.
    fn adopt_stream(&self, stream: StreamOrQueue) -> Result<StreamHandle> {
        let handle = match stream {
            StreamOrQueue::Backend(handle) => handle,
            StreamOrQueue::Cuda(ptr) if ptr.is_default_stream() => {
                let mut default = self
                    .default_stream
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if let Some(handle) = *default {
                    return Ok(handle);
                }
                let handle = self.create_stream()?;
                *default = Some(handle);
                self.default_raw.store(handle.raw(), Ordering::Relaxed);
                return Ok(handle);
            }
            StreamOrQueue::Cuda(ptr) => StreamHandle::from_raw(ptr.raw()),
            StreamOrQueue::OpenCl(queue) => {
                return Err(Error::invalid_argument(format!(
                    "{queue:?} is an OpenCL command queue; the software device orders work like CUDA and takes a stream"
                )));
            }
        };
        self.stream(handle).map_err(|_| {
            Error::invalid_argument(format!(
                "{stream:?} is not a stream of this software device's context (a stream of another device, or destroyed)"
            ))
        })?;
        Ok(handle)
    }

    /// Every stream but the default stream, which stands for CUDA's default streams: a
    /// caller's stream, which nothing of the runtime submits to.
    fn is_backend_stream(&self, stream: StreamHandle) -> bool {
        stream.raw() != self.default_raw.load(Ordering::Relaxed)
    }

    fn check_stream(&self, stream: StreamHandle) -> Result<()> {
        self.stream(stream).map(|_| ())
    }

    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        let removed = self.streams.remove(stream.raw()).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{stream:?} is not a live stream of this software device"
            ))
        })?;
        // Drains what is queued before returning, even if a racing caller still holds a
        // reference; its later enqueues fail.
        removed.shut_down();
        self.counters.bump(Count::stream_destroy);
        Ok(())
    }

    fn create_event(&self) -> Result<EventHandle> {
        let event = Arc::new(SoftEvent {
            last: Mutex::new(None),
        });
        let raw = self.events.insert(event).ok_or_else(|| {
            Error::new(
                ErrorCode::ResourceExhausted,
                "the software device has no event slot left",
            )
        })?;
        self.counters.bump(Count::event_create);
        Ok(EventHandle::from_raw(raw))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        self.events.remove(event.raw()).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{event:?} is not a live event of this software device"
            ))
        })?;
        self.counters.bump(Count::event_destroy);
        Ok(())
    }

    fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()> {
        let event = self.event(event)?;
        let stream = self.stream(stream)?;
        let seq = stream.enqueue(Op::Marker)?;
        *event.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Arc::clone(stream.progress()), seq));
        self.counters.bump(Count::event_record);
        Ok(())
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let target = self.event(event)?.target();
        let stream = self.stream(stream)?;
        // A wait on a completed (or never recorded) event orders nothing: skip the queue.
        if let Some((progress, seq)) = target
            && !progress.reached(seq)
        {
            stream.enqueue(Op::Wait { progress, seq })?;
        }
        self.counters.bump(Count::stream_wait);
        Ok(())
    }

    fn query_event(&self, event: EventHandle) -> Result<bool> {
        let complete = self
            .event(event)?
            .target()
            .is_none_or(|(progress, seq)| progress.reached(seq));
        self.counters.bump(Count::event_query);
        Ok(complete)
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<()> {
        if let Some((progress, seq)) = self.event(event)?.target() {
            progress.wait_until(seq);
        }
        self.counters.bump(Count::event_synchronize);
        Ok(())
    }

    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()> {
        let stream = self.stream(stream)?;
        stream.progress().wait_until(stream.last_seq());
        self.counters.bump(Count::stream_synchronize);
        Ok(())
    }

    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(Error::invalid_argument("an allocation of zero bytes"));
        }
        let layout = Layout::from_size_align(bytes, ALIGNMENT).map_err(|_| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("{bytes} bytes cannot be allocated"),
            )
        })?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let memory = unsafe { alloc::alloc(layout) };
        if memory.is_null() {
            return Err(Error::new(
                ErrorCode::ResourceExhausted,
                format!("out of host memory allocating {bytes} bytes of {kind:?} memory"),
            ));
        }
        // SAFETY: `memory` was just allocated with room for `bytes` bytes.
        unsafe { memory.write_bytes(FRESH_BYTE, bytes) };
        let ptr = DevicePtr::from_host_ptr(memory);
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                ptr.raw(),
                Allocation {
                    kind,
                    layout,
                    memory: Memory::Heap,
                },
            );
        self.counters.bump(Count::alloc);
        Ok(ptr)
    }

    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()> {
        let mut allocations = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(allocation) = allocations.get(&ptr.raw()) else {
            return Err(Error::invalid_argument(format!(
                "{ptr:?} is not a live allocation of this software device"
            )));
        };
        if allocation.kind != kind
            || allocation.layout.size() != bytes
            || !matches!(allocation.memory, Memory::Heap | Memory::Exported(_))
        {
            return Err(Error::invalid_argument(format!(
                "{ptr:?} is {} bytes of {:?} memory, not {bytes} bytes of {kind:?}",
                allocation.layout.size(),
                allocation.kind
            )));
        }
        let layout = allocation.layout;
        let removed = allocations.remove(&ptr.raw());
        drop(allocations);
        if let Some(Allocation {
            memory: Memory::Heap,
            ..
        }) = removed
        {
            // SAFETY: `ptr` came from `alloc::alloc(layout)` in `alloc` and was live in
            // the table (so not freed yet); the caller guarantees no pending operation
            // uses it.
            unsafe { alloc::dealloc(ptr.as_host_ptr(), layout) };
        }
        // An exported allocation's segment unmapped with `removed`.
        self.counters.bump(Count::free);
        Ok(())
    }

    unsafe fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        if bytes > 0 {
            self.check_range(dst, bytes, "fill destination")?;
            stream.enqueue(Op::Fill {
                dst: dst.raw(),
                value,
                bytes,
            })?;
        }
        self.counters.bump(Count::memset);
        Ok(())
    }

    unsafe fn copy_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        if bytes > 0 {
            self.check_range(dst, bytes, "copy destination")?;
            self.check_range(src, bytes, "copy source")?;
            stream.enqueue(Op::Copy {
                dst: dst.raw(),
                src: src.raw(),
                bytes,
            })?;
        }
        self.counters.bump(Count::copy);
        Ok(())
    }

    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        if bytes > 0 {
            if dst.is_null() {
                return Err(null_host_pointer("copy destination"));
            }
            self.check_range(src, bytes, "copy source")?;
            stream.enqueue(Op::Copy {
                dst: DevicePtr::from_host_ptr(dst).raw(),
                src: src.raw(),
                bytes,
            })?;
        }
        self.counters.bump(Count::copy);
        Ok(())
    }

    unsafe fn copy_from_host_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        if bytes > 0 {
            if src.is_null() {
                return Err(null_host_pointer("copy source"));
            }
            self.check_range(dst, bytes, "copy destination")?;
            stream.enqueue(Op::Copy {
                dst: dst.raw(),
                src: DevicePtr::from_host_ptr(src).raw(),
                bytes,
            })?;
        }
        self.counters.bump(Count::copy);
        Ok(())
    }

    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()> {
        super::check_delay(duration)?;
        self.stream(stream)?.enqueue(Op::Delay(duration))?;
        self.counters.bump(Count::delay);
        Ok(())
    }

    fn counters(&self) -> &DeviceCounters {
        &self.counters
    }

    fn ipc(&self) -> Option<&dyn super::DeviceIpc> {
        self.shareable.then_some(self as &dyn super::DeviceIpc)
    }
}

impl Drop for SoftwareDevice {
    fn drop(&mut self) {
        // Streams first: their workers drain, so no queued operation outlives the memory.
        for stream in self.streams.drain() {
            stream.shut_down();
        }
        let allocations = std::mem::take(
            self.allocations
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for (start, allocation) in allocations {
            if !matches!(allocation.memory, Memory::Heap) {
                // Shared memory: unmapped when the entry drops.
                continue;
            }
            // SAFETY: every heap entry came from `alloc::alloc(layout)` and was not freed
            // (free removes it); every stream has drained, so nothing uses it any more.
            unsafe {
                alloc::dealloc(
                    std::ptr::with_exposed_provenance_mut(addr_usize(start)),
                    allocation.layout,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
