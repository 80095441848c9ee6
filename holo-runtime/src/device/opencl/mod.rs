//! The OpenCL backend: command queues are ordering domains, `cl_event`s carry readiness
//! and release, pools are `cl_mem` buffers — the command-queue half of the DeviceArray
//! seed (docs/OPENCL.md).
//!
//! - **Library.** `libOpenCL.so.1` is loaded at run time through `cl3` (the FFI layer of
//!   `opencl3`, default `dynamic` feature): holo builds and runs without it, and
//!   [`OpenClDevice::open`] answers `DeviceUnavailable` naming what is missing. holo keeps
//!   its own RAII over the raw handles instead of `opencl3`'s wrappers, which release on
//!   drop: every handle holo did not create (a caller's context, queue or `cl_mem`) is
//!   retained when adopted and released exactly once when the adoption ends.
//! - **Contexts both ways.** [`OpenClDevice::open`] creates a context of its own; a caller
//!   can instead *give* holo its context ([`OpenClDevice::from_context`]: holo creates its
//!   queues and buffers there), or *adopt* holo's ([`OpenClDevice::native_context`] and
//!   [`native_device`](OpenClDevice::native_device): the caller creates its queues there).
//!   A queue or `cl_mem` of another context is refused with `InvalidArgument` when it is
//!   handed over (`clGetCommandQueueInfo(CL_QUEUE_CONTEXT)`,
//!   `clGetMemObjectInfo(CL_MEM_CONTEXT)`), never found out inside a kernel.
//! - **Events.** A holo [`EventHandle`] is a slot holding the latest `cl_event` recorded
//!   into it. `record_event` is `clEnqueueMarkerWithWaitList` plus `clFlush` (a marker
//!   another queue waits on, or the retirement worker polls, must have been submitted);
//!   `wait_event` is `clEnqueueBarrierWithWaitList` on the marker with no event out;
//!   `query_event` polls `CL_EVENT_COMMAND_EXECUTION_STATUS` and drops a completed marker,
//!   so an event never recorded and one completed cost the same. `clFinish` and
//!   `clWaitForEvents` serve only the blocking host-access calls.
//! - **Memory.** OpenCL has no unified addressing ([`DeviceBackend::unified_addressing`]
//!   is `false`). Each `cl_mem` gets a never-reused *window* in an address space that
//!   every OpenCL backend of the process numbers together (one backend's buffer is never
//!   a live window of another's), so the slot ledger's memory object is the window's base
//!   and `object + offset` is a [`DevicePtr`] the backend resolves to `(cl_mem, offset)`
//!   (see `memory.rs`): the trait, the ledger and the CUDA and software backends keep
//!   their address-based calls unchanged, and a caller's kernel gets the `cl_mem` and
//!   offset from [`OpenClDevice::resolve`]. Pinned and managed memory are page-aligned host memory.
//! - **Host work on a queue** (a copy into pinned memory's counterpart between two host
//!   ranges, a fill of host memory, the test delay): a marker callback and a user event
//!   (`host_fn.rs`).
//!
//! Handles: a stream is the raw `cl_command_queue`, an event the address of its slot; the
//! live ones sit in a registry whose read lock is held across each call, as in the CUDA
//! backend, so a stale handle gives `InvalidArgument`.

mod context;
pub(crate) mod ffi;
mod host_fn;
mod memory;
mod transfer;

use std::collections::{HashMap, HashSet};
use std::ptr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard};

use self::ffi::{
    CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS, check, cl, cl_command_queue, cl_context,
    cl_device_id, cl_event, cl_int,
};
use self::memory::{MemoryTable, Place};
use super::{
    AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, MemoryObject,
    OpenClMemPtr, StreamHandle, StreamOrQueue,
};
use crate::device::counters::Count;
use crate::{Error, ErrorCode, Result};

pub use ffi::library_present;

/// The number of OpenCL devices over every platform (`opencl:N` numbers them in this
/// order). `DeviceUnavailable` without an OpenCL library; `Ok(0)` with a loader and no
/// driver.
pub fn opencl_device_count() -> Result<u32> {
    Ok(u32::try_from(ffi::devices()?.len()).unwrap_or(u32::MAX))
}

/// The ordinal (`opencl:N`) of the first device of each platform: what the device-contract
/// suite runs on (PoCL in CI; NVIDIA's OpenCL and PoCL on the GPU machine).
pub(crate) fn first_device_of_each_platform() -> Result<Vec<u32>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, entry) in ffi::devices()?.iter().enumerate() {
        if seen.insert(entry.platform) {
            out.push(u32::try_from(i).unwrap_or(u32::MAX));
        }
    }
    Ok(out)
}

/// The latest marker recorded into a holo event (null: never recorded, or completed and
/// dropped).
struct EventSlot {
    latest: Mutex<usize>,
}

#[derive(Default)]
struct Live {
    /// Raw `cl_command_queue`s this device created.
    queues: HashSet<u64>,
    /// Event slots by handle (the slot's address).
    events: HashMap<u64, Box<EventSlot>>,
}

/// An OpenCL device: one `cl_device_id` in one `cl_context` — holo's own
/// ([`open`](Self::open)) or the caller's ([`from_context`](Self::from_context)).
pub struct OpenClDevice {
    lib: &'static ffi::Library,
    ordinal: u32,
    device: u64,
    /// Retained by this device (created by it, or the caller's, retained when given).
    context: u64,
    /// Whether the caller gave the context.
    given: bool,
    name: String,
    adopted: super::Adoptions,
    live: ShardedLock<Live>,
    memory: ShardedLock<MemoryTable>,
    counters: DeviceCounters,
}

impl std::fmt::Debug for OpenClDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClDevice")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("context", &format_args!("{:#x}", self.context))
            .field("given_context", &self.given)
            .finish_non_exhaustive()
    }
}

fn unavailable(message: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    Error::new(ErrorCode::DeviceUnavailable, message)
}

impl OpenClDevice {
    /// Resolves a [`DevicePtr`] of this device (a tensor's
    /// [`device_ptr`](crate::Tensor::device_ptr), or a slot's
    /// [`BufferRef::unified_address`](crate::channel::BufferRef::unified_address)) to the
    /// raw `cl_mem` and the offset in it, for a caller's kernel argument. `None` for host
    /// memory (pinned, managed), and `InvalidArgument` for a value that names no live
    /// buffer of this device. The `cl_mem` stays live while the tensor does.
    pub fn resolve(&self, ptr: DevicePtr) -> Result<Option<(u64, usize)>> {
        match self.memory().resolve(ptr, 0) {
            Some(Place::Buffer { mem, offset }) => Ok(Some((ffi::raw(mem), offset))),
            Some(Place::Host(_)) => Ok(None),
            None => Err(Error::invalid_argument(format!(
                "{ptr:?} names no live buffer of this OpenCL device"
            ))),
        }
    }

    fn live(&self) -> ShardedLockReadGuard<'_, Live> {
        self.live.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn memory(&self) -> ShardedLockReadGuard<'_, MemoryTable> {
        self.memory.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A queue this device may use: one of its own, or a caller's adopted one.
    fn queue(&self, live: &Live, stream: StreamHandle) -> Result<cl_command_queue> {
        if live.queues.contains(&stream.raw()) || self.adopted.contains(stream.raw()) {
            Ok(ffi::handle(stream.raw()))
        } else {
            Err(Error::invalid_argument(format!(
                "{stream:?} is not a live command queue of this OpenCL device, nor a caller queue adopted for a hand-off"
            )))
        }
    }

    fn event_slot(live: &Live, event: EventHandle) -> Result<&EventSlot> {
        live.events.get(&event.raw()).map(|b| &**b).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{event:?} is not a live event of this OpenCL device"
            ))
        })
    }

    /// Runs `f` on a checked queue with the registry read lock held.
    fn on_queue<T>(
        &self,
        stream: StreamHandle,
        f: impl FnOnce(cl_command_queue) -> Result<T>,
    ) -> Result<T> {
        let live = self.live();
        let queue = self.queue(&live, stream)?;
        f(queue)
    }

    /// Resolves a range, or says which call it was for.
    fn place(table: &MemoryTable, ptr: DevicePtr, len: usize, what: &str) -> Result<Place> {
        table.resolve(ptr, len).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{what}: {ptr:?}..+{len} does not lie inside one live buffer of this OpenCL device"
            ))
        })
    }

    fn enqueue_host(&self, queue: cl_command_queue, action: host_fn::Action) -> Result<()> {
        // SAFETY: `queue` is live (checked by the caller under the registry lock) and in
        // this device's context; the ranges are the copy or fill caller's contract.
        unsafe { host_fn::enqueue(queue, ffi::handle(self.context), action) }
    }

    /// Releases a `cl_event` this device holds one reference to.
    fn release_event(&self, event: usize) {
        if event != 0 {
            let _ = self.lib.clReleaseEvent(ffi::handle(event as u64));
        }
    }

    fn create_queue(&self) -> Result<cl_command_queue> {
        let context: cl_context = ffi::handle(self.context);
        let device: cl_device_id = ffi::handle(self.device);
        let mut status: cl_int = 0;
        // In order, no profiling: the FIFO a stream is.
        let queue = match self.lib.clCreateCommandQueueWithProperties(
            context,
            device,
            ptr::null(),
            &raw mut status,
        ) {
            Some(queue) => queue,
            None => cl!(
                self.lib,
                clCreateCommandQueue(context, device, 0, &raw mut status)
            ),
        };
        check("clCreateCommandQueue", status)?;
        Ok(queue)
    }
}

impl DeviceBackend for OpenClDevice {
    fn backend_kind(&self) -> BackendKind {
        BackendKind::OpenCl
    }

    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn raw_context(&self) -> Option<u64> {
        Some(self.context)
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        let queue = self.create_queue()?;
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .queues
            .insert(ffi::raw(queue));
        self.counters.bump(Count::stream_create);
        Ok(StreamHandle::from_raw(ffi::raw(queue)))
    }

    fn adopt_stream(&self, stream: StreamOrQueue) -> Result<StreamHandle> {
        let raw = match stream {
            StreamOrQueue::Backend(handle) => {
                if self.live().queues.contains(&handle.raw()) {
                    return Ok(handle);
                }
                return Err(Error::invalid_argument(format!(
                    "{handle:?} is not a live command queue of this OpenCL device: a queue of another device or context, or destroyed"
                )));
            }
            StreamOrQueue::Cuda(cuda) => {
                return Err(Error::invalid_argument(format!(
                    "{cuda:?} is a CUDA stream; an OpenCL device takes an OpenCL command queue (StreamOrQueue::OpenCl)"
                )));
            }
            StreamOrQueue::OpenCl(queue) => queue.raw(),
        };
        if raw == 0 {
            return Err(Error::invalid_argument(
                "the OpenCL command queue is null: an OpenCL hand-off needs a non-null queue",
            ));
        }
        if self.live().queues.contains(&raw) {
            return Ok(StreamHandle::from_raw(raw));
        }
        self.check_queue_context(raw)?;
        // One reference per adoption, released by its `release_adopted_stream`: the
        // caller may release its own queue while a hand-off still uses it.
        check(
            "clRetainCommandQueue",
            cl!(self.lib, clRetainCommandQueue(ffi::handle(raw))),
        )?;
        self.adopted.adopt(raw);
        Ok(StreamHandle::from_raw(raw))
    }

    fn release_adopted_stream(&self, stream: StreamHandle) {
        if self.adopted.release(stream.raw()) {
            let _ = self
                .lib
                .clReleaseCommandQueue(ffi::handle::<std::ffi::c_void>(stream.raw()).cast());
        }
    }

    fn is_backend_stream(&self, stream: StreamHandle) -> bool {
        self.live().queues.contains(&stream.raw())
    }

    fn check_stream(&self, stream: StreamHandle) -> Result<()> {
        self.queue(&self.live(), stream).map(|_| ())
    }

    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        if !live.queues.remove(&stream.raw()) {
            return Err(Error::invalid_argument(format!(
                "{stream:?} is not a live command queue of this OpenCL device"
            )));
        }
        // Releasing flushes the queue; its pending work still completes.
        check(
            "clReleaseCommandQueue",
            cl!(self.lib, clReleaseCommandQueue(ffi::handle(stream.raw()))),
        )?;
        self.counters.bump(Count::stream_destroy);
        Ok(())
    }

    fn create_event(&self) -> Result<EventHandle> {
        let slot = Box::new(EventSlot {
            latest: Mutex::new(0),
        });
        let raw = ptr::from_ref::<EventSlot>(&slot).expose_provenance() as u64;
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .insert(raw, slot);
        self.counters.bump(Count::event_create);
        Ok(EventHandle::from_raw(raw))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        let slot = self
            .live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .remove(&event.raw())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{event:?} is not a live event of this OpenCL device"
                ))
            })?;
        // Queues already waiting hold their own references to the marker.
        self.release_event(*slot.latest.lock().unwrap_or_else(PoisonError::into_inner));
        self.counters.bump(Count::event_destroy);
        Ok(())
    }

    fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()> {
        let live = self.live();
        Self::event_slot(&live, event)?;
        self.queue(&live, stream)?;
        // SAFETY: both handles are live (checked under the read lock, held until return).
        unsafe { self.record_event_unchecked(event, stream) }
    }

    unsafe fn record_event_unchecked(
        &self,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract: `event` names a live slot of this device (its
        // address), and `stream` a live queue of its context.
        let slot = unsafe {
            &*ptr::with_exposed_provenance::<EventSlot>(super::handle::addr_usize(event.raw()))
        };
        let queue: cl_command_queue = ffi::handle(stream.raw());
        let mut marker: cl_event = ptr::null_mut();
        check(
            "clEnqueueMarkerWithWaitList",
            cl!(
                self.lib,
                clEnqueueMarkerWithWaitList(queue, 0, ptr::null(), &raw mut marker)
            ),
        )?;
        // Submitted now: another queue's barrier or the retirement worker's poll waits on it.
        let flushed = check("clFlush", cl!(self.lib, clFlush(queue)));
        let old = std::mem::replace(
            &mut *slot.latest.lock().unwrap_or_else(PoisonError::into_inner),
            marker.expose_provenance(),
        );
        self.release_event(old);
        flushed?;
        self.counters.bump(Count::event_record);
        Ok(())
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let live = self.live();
        Self::event_slot(&live, event)?;
        self.queue(&live, stream)?;
        // SAFETY: both handles are live (checked under the read lock, held until return).
        unsafe { self.wait_event_unchecked(stream, event) }
    }

    unsafe fn wait_event_unchecked(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        // SAFETY: as `record_event_unchecked`.
        let slot = unsafe {
            &*ptr::with_exposed_provenance::<EventSlot>(super::handle::addr_usize(event.raw()))
        };
        let latest = slot.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if *latest != 0 {
            let marker: cl_event = ffi::handle(*latest as u64);
            // The slot's lock keeps the marker referenced for the call; the barrier takes
            // its own reference. No event out: nothing to release afterwards.
            check(
                "clEnqueueBarrierWithWaitList",
                cl!(
                    self.lib,
                    clEnqueueBarrierWithWaitList(
                        ffi::handle(stream.raw()),
                        1,
                        &raw const marker,
                        ptr::null_mut()
                    )
                ),
            )?;
        }
        drop(latest);
        self.counters.bump(Count::stream_wait);
        Ok(())
    }

    fn query_event(&self, event: EventHandle) -> Result<bool> {
        let live = self.live();
        let slot = Self::event_slot(&live, event)?;
        let mut latest = slot.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let complete = if *latest == 0 {
            true
        } else {
            let mut status: cl_int = 1;
            check(
                "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)",
                cl!(
                    self.lib,
                    clGetEventInfo(
                        ffi::handle(*latest as u64),
                        CL_EVENT_COMMAND_EXECUTION_STATUS,
                        size_of::<cl_int>(),
                        (&raw mut status).cast(),
                        ptr::null_mut()
                    )
                ),
            )?;
            if status < 0 {
                return Err(ffi::cl_error("a command before the OpenCL marker", status));
            }
            if status == CL_COMPLETE {
                // Completed is as good as never recorded: drop the marker now.
                self.release_event(std::mem::take(&mut *latest));
                true
            } else {
                false
            }
        };
        drop(latest);
        self.counters.bump(Count::event_query);
        Ok(complete)
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<()> {
        let live = self.live();
        let slot = Self::event_slot(&live, event)?;
        let latest = {
            let guard = slot.latest.lock().unwrap_or_else(PoisonError::into_inner);
            let latest = *guard;
            if latest != 0 {
                // A reference of its own, taken while the slot still holds its: a
                // concurrent record releases the slot's reference under this lock, so
                // retained after the lock the marker could be freed already.
                let marker: cl_event = ffi::handle(latest as u64);
                check("clRetainEvent", cl!(self.lib, clRetainEvent(marker)))?;
            }
            latest
        };
        if latest != 0 {
            let marker: cl_event = ffi::handle(latest as u64);
            let waited = check(
                "clWaitForEvents",
                cl!(self.lib, clWaitForEvents(1, &raw const marker)),
            );
            self.release_event(latest);
            waited?;
        }
        self.counters.bump(Count::event_synchronize);
        Ok(())
    }

    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()> {
        self.on_queue(stream, |queue| {
            check("clFinish", cl!(self.lib, clFinish(queue)))
        })?;
        self.counters.bump(Count::stream_synchronize);
        Ok(())
    }

    fn unified_addressing(&self) -> bool {
        false
    }

    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        self.allocate(kind, bytes)
    }

    fn adopt_memory_object(&self, memory: OpenClMemPtr) -> Result<(MemoryObject, usize)> {
        self.wrap_cl_mem(memory)
    }

    unsafe fn release_adopted_memory_object(&self, memory: MemoryObject) -> Result<()> {
        self.unwrap_cl_mem(memory)
    }

    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.release(kind, ptr, bytes) }
    }

    unsafe fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.fill(dst, value, bytes, stream) }
    }

    unsafe fn copy_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.copy(dst, src, bytes, stream) }
    }

    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.read_to_host(dst, src, bytes, stream) }
    }

    unsafe fn copy_from_host_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.write_from_host(dst, src, bytes, stream) }
    }

    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()> {
        super::check_delay(duration)?;
        self.on_queue(stream, |queue| {
            self.enqueue_host(queue, host_fn::Action::Delay(duration))
        })?;
        self.counters.bump(Count::delay);
        Ok(())
    }

    fn counters(&self) -> &DeviceCounters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_library_or_device_opencl_is_unavailable_not_a_panic() {
        match opencl_device_count() {
            Ok(count) => {
                let error = OpenClDevice::open(count).expect_err("ordinal past the last device");
                assert_eq!(error.code(), ErrorCode::DeviceUnavailable, "{error}");
            }
            Err(error) => {
                assert_eq!(error.code(), ErrorCode::DeviceUnavailable, "{error}");
                assert!(error.message().contains("libOpenCL"), "{error}");
                assert_eq!(
                    OpenClDevice::open(0).unwrap_err().code(),
                    ErrorCode::DeviceUnavailable
                );
            }
        }
    }
}
