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
//!   is `false`). Each `cl_mem` gets a never-reused *window* in a backend-local address
//!   space, so the slot ledger's memory object is the window's base and `object + offset`
//!   is a [`DevicePtr`] the backend resolves to `(cl_mem, offset)` (see `memory.rs`): the
//!   trait, the ledger and the CUDA and software backends keep their address-based calls
//!   unchanged, and a caller's kernel gets the `cl_mem` and offset from
//!   [`OpenClDevice::resolve`]. Pinned and managed memory are page-aligned host memory.
//! - **Host work on a queue** (a copy into pinned memory's counterpart between two host
//!   ranges, a fill of host memory, the test delay): a marker callback and a user event
//!   (`host_fn.rs`).
//!
//! Handles: a stream is the raw `cl_command_queue`, an event the address of its slot; the
//! live ones sit in a registry whose read lock is held across each call, as in the CUDA
//! backend, so a stale handle gives `InvalidArgument`.

pub(crate) mod ffi;
mod host_fn;
mod memory;

use std::collections::{HashMap, HashSet};
use std::ptr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard};

use self::ffi::{
    CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS, CL_FALSE, check, cl, cl_command_queue,
    cl_context, cl_device_id, cl_event, cl_int, cl_mem,
};
use self::memory::{Backing, MemoryTable, Place};
use super::{
    AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, MemoryObject,
    OpenClMemPtr, StreamHandle, StreamOrQueue,
};
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
    /// Opens OpenCL device `ordinal` (every device of the first platform, then of the
    /// second, …) in a context of its own.
    ///
    /// `DeviceUnavailable` when no OpenCL library or driver is installed, or the ordinal
    /// names no device. Never panics.
    pub fn open(ordinal: u32) -> Result<Arc<Self>> {
        let lib = ffi::library()?;
        let devices = ffi::devices()?;
        let Some(entry) = devices.get(ordinal as usize) else {
            return Err(unavailable(format!(
                "OpenCL device {ordinal} is not present: this machine has {} OpenCL device(s){}",
                devices.len(),
                if devices.is_empty() {
                    " (an ICD loader with no driver: Debian: apt-get install pocl-opencl-icd)"
                } else {
                    ""
                }
            )));
        };
        let device: cl_device_id = ffi::handle(entry.device);
        let mut status: cl_int = 0;
        let context = cl!(
            lib,
            clCreateContext(
                ptr::null(),
                1,
                &raw const device,
                None,
                ptr::null_mut(),
                &raw mut status
            )
        );
        check("clCreateContext", status)?;
        Ok(Self::with_context(
            lib,
            ordinal,
            entry.device,
            ffi::raw(context),
            false,
            format!("{} ({})", entry.device_name, entry.platform_name),
        ))
    }

    /// A device on a `cl_context` the caller made (option 1 of the seed: *give* holo the
    /// context). holo retains it, creates its queues and buffers in it on the context's
    /// first device, and refuses any queue or `cl_mem` of another context. The caller may
    /// release its own reference at any time; holo releases its one when the device drops.
    ///
    /// `DeviceUnavailable` without an OpenCL library; `InvalidArgument` for a null context
    /// or one with no device.
    ///
    /// # Safety
    /// `context` is null or a live `cl_context` (holo retains it before returning).
    pub unsafe fn from_context(context: u64) -> Result<Arc<Self>> {
        let lib = ffi::library()?;
        if context == 0 {
            return Err(Error::invalid_argument(
                "a null cl_context was given to OpenClDevice::from_context",
            ));
        }
        let raw: cl_context = ffi::handle(context);
        let mut device: cl_device_id = ptr::null_mut();
        // Reads the first device only: CL_INVALID_VALUE would mean a zero-device context.
        let mut size = 0_usize;
        check(
            "clGetContextInfo(CL_CONTEXT_DEVICES)",
            cl!(
                lib,
                clGetContextInfo(
                    raw,
                    ffi::CL_CONTEXT_DEVICES,
                    0,
                    ptr::null_mut(),
                    &raw mut size
                )
            ),
        )
        .map_err(|e| {
            Error::invalid_argument(format!("cl_context {context:#x}: {}", e.message()))
        })?;
        if size < size_of::<cl_device_id>() {
            return Err(Error::invalid_argument(format!(
                "cl_context {context:#x} has no device"
            )));
        }
        let mut ids: Vec<cl_device_id> = vec![ptr::null_mut(); size / size_of::<cl_device_id>()];
        check(
            "clGetContextInfo(CL_CONTEXT_DEVICES)",
            cl!(
                lib,
                clGetContextInfo(
                    raw,
                    ffi::CL_CONTEXT_DEVICES,
                    size,
                    ids.as_mut_ptr().cast(),
                    ptr::null_mut()
                )
            ),
        )?;
        device = ids.first().copied().unwrap_or(device);
        check("clRetainContext", cl!(lib, clRetainContext(raw)))?;
        let entries = ffi::devices().unwrap_or(&[]);
        let position = entries.iter().position(|e| e.device == ffi::raw(device));
        let name = position.map_or_else(
            || "a device of the caller's context".to_owned(),
            |i| format!("{} ({})", entries[i].device_name, entries[i].platform_name),
        );
        Ok(Self::with_context(
            lib,
            position.map_or(0, |i| u32::try_from(i).unwrap_or(u32::MAX)),
            ffi::raw(device),
            context,
            true,
            name,
        ))
    }

    /// Takes ownership of one reference to `context` (released when the device drops).
    fn with_context(
        lib: &'static ffi::Library,
        ordinal: u32,
        device: u64,
        context: u64,
        given: bool,
        name: String,
    ) -> Arc<Self> {
        Arc::new(Self {
            lib,
            ordinal,
            device,
            context,
            given,
            name,
            adopted: super::Adoptions::new(),
            live: ShardedLock::new(Live::default()),
            memory: ShardedLock::new(MemoryTable::default()),
            counters: DeviceCounters::default(),
        })
    }

    /// The raw `cl_context` holo creates its queues and buffers in (option 2 of the seed:
    /// the caller *adopts* it and creates its queues there). Live while this device is; a
    /// caller that keeps it longer retains it.
    pub fn native_context(&self) -> u64 {
        self.context
    }

    /// The raw `cl_device_id` of this device, to create a queue on in
    /// [`native_context`](Self::native_context).
    pub fn native_device(&self) -> u64 {
        self.device
    }

    /// Whether the caller gave the context ([`from_context`](Self::from_context)).
    pub fn context_was_given(&self) -> bool {
        self.given
    }

    /// The device's and platform's names, as the driver reports them.
    pub fn name(&self) -> &str {
        &self.name
    }

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

    /// The context a caller's queue belongs to, checked against this device's.
    fn check_queue_context(&self, raw: u64) -> Result<()> {
        let mut context: cl_context = ptr::null_mut();
        let status = cl!(
            self.lib,
            clGetCommandQueueInfo(
                ffi::handle(raw),
                ffi::CL_QUEUE_CONTEXT,
                size_of::<cl_context>(),
                (&raw mut context).cast(),
                ptr::null_mut()
            )
        );
        check("clGetCommandQueueInfo(CL_QUEUE_CONTEXT)", status).map_err(|e| {
            Error::invalid_argument(format!(
                "cl_command_queue {raw:#x} is not a live OpenCL command queue ({})",
                e.message()
            ))
        })?;
        if ffi::raw(context) != self.context {
            return Err(Error::invalid_argument(format!(
                "cl_command_queue {raw:#x} belongs to cl_context {:#x}, not to this device's context {:#x}: create the queue in the device's context (OpenClDevice::native_context), or give the device the caller's context (OpenClDevice::from_context)",
                ffi::raw(context),
                self.context
            )));
        }
        Ok(())
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
        self.counters.stream_create.bump();
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
        self.counters.stream_destroy.bump();
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
        self.counters.event_create.bump();
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
        self.counters.event_destroy.bump();
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
        self.counters.event_record.bump();
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
        self.counters.stream_wait.bump();
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
        self.counters.event_query.bump();
        Ok(complete)
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<()> {
        let live = self.live();
        let slot = Self::event_slot(&live, event)?;
        let latest = *slot.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if latest != 0 {
            let marker: cl_event = ffi::handle(latest as u64);
            // A reference of its own: a concurrent record may release the slot's.
            check("clRetainEvent", cl!(self.lib, clRetainEvent(marker)))?;
            let waited = check(
                "clWaitForEvents",
                cl!(self.lib, clWaitForEvents(1, &raw const marker)),
            );
            self.release_event(latest);
            waited?;
        }
        self.counters.event_synchronize.bump();
        Ok(())
    }

    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()> {
        self.on_queue(stream, |queue| {
            check("clFinish", cl!(self.lib, clFinish(queue)))
        })?;
        self.counters.stream_synchronize.bump();
        Ok(())
    }

    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(Error::invalid_argument("an allocation of zero bytes"));
        }
        let mut table = self.memory.write().unwrap_or_else(PoisonError::into_inner);
        let ptr = match kind {
            AllocKind::Device => {
                if bytes as u64 > memory::WINDOW_BYTES {
                    return Err(Error::new(
                        ErrorCode::ResourceExhausted,
                        format!(
                            "an OpenCL buffer of {bytes} bytes is larger than holo's 1 TiB window"
                        ),
                    ));
                }
                let mut status: cl_int = 0;
                let mem = cl!(
                    self.lib,
                    clCreateBuffer(
                        ffi::handle(self.context),
                        ffi::CL_MEM_READ_WRITE,
                        bytes,
                        ptr::null_mut(),
                        &raw mut status
                    )
                );
                check("clCreateBuffer", status)?;
                match table.insert_buffer(mem, kind, bytes, false) {
                    Ok(ptr) => ptr,
                    Err(error) => {
                        let _ = self.lib.clReleaseMemObject(mem);
                        return Err(error);
                    }
                }
            }
            AllocKind::PinnedHost | AllocKind::Managed => table.insert_host(kind, bytes)?,
        };
        self.counters.alloc.bump();
        Ok(ptr)
    }

    fn unified_addressing(&self) -> bool {
        false
    }

    fn adopt_memory_object(&self, memory: OpenClMemPtr) -> Result<(MemoryObject, usize)> {
        let raw = memory.raw();
        if raw == 0 {
            return Err(Error::invalid_argument("the cl_mem to wrap is null"));
        }
        let mem: cl_mem = ffi::handle(raw);
        let mut context: cl_context = ptr::null_mut();
        check(
            "clGetMemObjectInfo(CL_MEM_CONTEXT)",
            cl!(
                self.lib,
                clGetMemObjectInfo(
                    mem,
                    ffi::CL_MEM_CONTEXT,
                    size_of::<cl_context>(),
                    (&raw mut context).cast(),
                    ptr::null_mut()
                )
            ),
        )
        .map_err(|e| {
            Error::invalid_argument(format!(
                "cl_mem {raw:#x} is not a live OpenCL memory object ({})",
                e.message()
            ))
        })?;
        if ffi::raw(context) != self.context {
            return Err(Error::invalid_argument(format!(
                "cl_mem {raw:#x} belongs to cl_context {:#x}, not to this device's context {:#x}: create the buffer in the device's context (OpenClDevice::native_context), or give the device the caller's context (OpenClDevice::from_context)",
                ffi::raw(context),
                self.context
            )));
        }
        let mut size = 0_usize;
        check(
            "clGetMemObjectInfo(CL_MEM_SIZE)",
            cl!(
                self.lib,
                clGetMemObjectInfo(
                    mem,
                    ffi::CL_MEM_SIZE,
                    size_of::<usize>(),
                    (&raw mut size).cast(),
                    ptr::null_mut()
                )
            ),
        )?;
        let mut table = self.memory.write().unwrap_or_else(PoisonError::into_inner);
        check("clRetainMemObject", cl!(self.lib, clRetainMemObject(mem)))?;
        match table.insert_buffer(mem, AllocKind::Device, size, true) {
            Ok(base) => Ok((MemoryObject::from_raw(base.raw()), size)),
            Err(error) => {
                let _ = self.lib.clReleaseMemObject(mem);
                Err(error)
            }
        }
    }

    unsafe fn release_adopted_memory_object(&self, memory: MemoryObject) -> Result<()> {
        let mem = self
            .memory
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove_adopted(memory.raw())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{memory:?} is not a wrapped cl_mem of this OpenCL device"
                ))
            })?;
        check(
            "clReleaseMemObject",
            cl!(self.lib, clReleaseMemObject(ffi::handle(mem))),
        )
    }

    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()> {
        let region = self
            .memory
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(ptr, kind, bytes)?;
        match region.backing {
            Backing::Buffer { mem, .. } => check(
                "clReleaseMemObject",
                cl!(self.lib, clReleaseMemObject(ffi::handle(mem))),
            )?,
            // SAFETY: the caller's contract: no pending operation uses the memory; `ptr`
            // is the region's start (checked by `remove`).
            Backing::Host { layout } => unsafe { memory::free_host(ptr, layout) },
        }
        self.counters.free.bump();
        Ok(())
    }

    unsafe fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            let table = self.memory();
            match Self::place(&table, dst, bytes, "memset_async")? {
                Place::Buffer { mem, offset } => check(
                    "clEnqueueFillBuffer",
                    cl!(
                        self.lib,
                        clEnqueueFillBuffer(
                            queue,
                            mem,
                            (&raw const value).cast(),
                            1,
                            offset,
                            bytes,
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                Place::Host(ptr) => self.enqueue_host(
                    queue,
                    host_fn::Action::Fill {
                        dst: ffi::raw(ptr),
                        value,
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.memset.bump();
        Ok(())
    }

    unsafe fn copy_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            let table = self.memory();
            let to = Self::place(&table, dst, bytes, "copy_async destination")?;
            let from = Self::place(&table, src, bytes, "copy_async source")?;
            // SAFETY (each arm): the caller's contract keeps both ranges live and unaliased
            // until the queue has run the copy; the table's read lock keeps the cl_mems.
            match (to, from) {
                (
                    Place::Buffer {
                        mem: d,
                        offset: doff,
                    },
                    Place::Buffer {
                        mem: s,
                        offset: soff,
                    },
                ) => check(
                    "clEnqueueCopyBuffer",
                    cl!(
                        self.lib,
                        clEnqueueCopyBuffer(
                            queue,
                            s,
                            d,
                            soff,
                            doff,
                            bytes,
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                (
                    Place::Host(d),
                    Place::Buffer {
                        mem: s,
                        offset: soff,
                    },
                ) => check(
                    "clEnqueueReadBuffer",
                    cl!(
                        self.lib,
                        clEnqueueReadBuffer(
                            queue,
                            s,
                            CL_FALSE,
                            soff,
                            bytes,
                            d.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                (
                    Place::Buffer {
                        mem: d,
                        offset: doff,
                    },
                    Place::Host(s),
                ) => check(
                    "clEnqueueWriteBuffer",
                    cl!(
                        self.lib,
                        clEnqueueWriteBuffer(
                            queue,
                            d,
                            CL_FALSE,
                            doff,
                            bytes,
                            s.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                (Place::Host(d), Place::Host(s)) => self.enqueue_host(
                    queue,
                    host_fn::Action::Copy {
                        dst: ffi::raw(d),
                        src: ffi::raw(s),
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.copy.bump();
        Ok(())
    }

    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            if dst.is_null() {
                return Err(Error::invalid_argument(
                    "the copy destination host pointer is null",
                ));
            }
            let table = self.memory();
            match Self::place(&table, src, bytes, "copy_to_host_async source")? {
                Place::Buffer { mem, offset } => check(
                    "clEnqueueReadBuffer",
                    cl!(
                        self.lib,
                        clEnqueueReadBuffer(
                            queue,
                            mem,
                            CL_FALSE,
                            offset,
                            bytes,
                            dst.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                Place::Host(s) => self.enqueue_host(
                    queue,
                    host_fn::Action::Copy {
                        dst: ffi::raw(dst),
                        src: ffi::raw(s),
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.copy.bump();
        Ok(())
    }

    unsafe fn copy_from_host_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            if src.is_null() {
                return Err(Error::invalid_argument(
                    "the copy source host pointer is null",
                ));
            }
            let table = self.memory();
            match Self::place(&table, dst, bytes, "copy_from_host_async destination")? {
                Place::Buffer { mem, offset } => check(
                    "clEnqueueWriteBuffer",
                    cl!(
                        self.lib,
                        clEnqueueWriteBuffer(
                            queue,
                            mem,
                            CL_FALSE,
                            offset,
                            bytes,
                            src.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                Place::Host(d) => self.enqueue_host(
                    queue,
                    host_fn::Action::Copy {
                        dst: ffi::raw(d),
                        src: ffi::raw(src.cast_mut()),
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.copy.bump();
        Ok(())
    }

    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()> {
        self.on_queue(stream, |queue| {
            self.enqueue_host(queue, host_fn::Action::Delay(duration))
        })?;
        self.counters.delay.bump();
        Ok(())
    }

    fn counters(&self) -> &DeviceCounters {
        &self.counters
    }
}

impl Drop for OpenClDevice {
    fn drop(&mut self) {
        let live = std::mem::take(self.live.get_mut().unwrap_or_else(PoisonError::into_inner));
        // Teardown errors have no caller to report to; each resource is still released.
        for &queue in &live.queues {
            // Finishing first keeps the queue's work off memory released below.
            let _ = self.lib.clFinish(ffi::handle(queue));
        }
        for (_, slot) in live.events {
            self.release_event(*slot.latest.lock().unwrap_or_else(PoisonError::into_inner));
        }
        for queue in live.queues {
            let _ = self.lib.clReleaseCommandQueue(ffi::handle(queue));
        }
        let regions = self
            .memory
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain();
        for region in regions {
            match region.backing {
                Backing::Buffer { mem, .. } => {
                    let _ = self.lib.clReleaseMemObject(ffi::handle(mem));
                }
                Backing::Host { layout } => {
                    // Host regions are freed by the pools that own them; one still here was
                    // leaked by its owner and is left alone rather than freed under it.
                    let _ = layout;
                }
            }
        }
        let _ = self.lib.clReleaseContext(ffi::handle(self.context));
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
