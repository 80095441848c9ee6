//! The device layer: one object-safe trait, [`DeviceBackend`], between the runtime and a
//! GPU API, and its backends.
//!
//! The runtime's stream contract (readiness, release registration, retirement, fusion
//! elision) is written once above this trait. A backend only creates streams and events,
//! records and waits, polls, allocates and enqueues copies and fills; it never inserts an
//! event or a synchronization of its own, because the runtime owns ordering.
//!
//! - [`SoftwareDevice`]: streams are worker threads, events are completion counters. Needs
//!   no GPU; CI runs the device-contract suite on it.
//! - [`Observed`]: wraps another backend and reports each stream-ordered call, query and
//!   host wait (which thread, which stream, how long) to a closure: tracing, tests.
//! - [`FaultInjecting`]: wraps another backend and fails the calls it is told to (the N-th
//!   of a kind, or every one from the N-th), counting what is still alive: tests of what a
//!   device failure does to a session.
//! - [`CudaDevice`] (feature `cuda`): the CUDA driver API through `cudarc`'s `result`/`sys`
//!   layer, loaded at run time; a machine without `libcuda` gets
//!   [`ErrorCode::DeviceUnavailable`], never a panic.
//! - [`OpenClDevice`] (feature `opencl`): OpenCL through `cl3` (the FFI layer of `opencl3`),
//!   `libOpenCL` loaded at run time; command queues are the streams, `cl_mem` buffers the
//!   memory objects (named through windows: see the module's documentation). PoCL runs it
//!   on the CPU in CI.
//!
//! ```
//! use holo_runtime::device::{AllocKind, DeviceBackend, SoftwareDevice};
//!
//! let device = SoftwareDevice::new();
//! let stream = device.create_stream()?;
//! let ready = device.create_event()?;
//! let frame = device.alloc(AllocKind::Device, 256)?;
//! let mut host = [0_u8; 256];
//! // SAFETY: `frame` is a live 256-byte allocation and `host` outlives the stream
//! // synchronization below; nothing else touches either meanwhile.
//! unsafe {
//!     device.memset_async(frame, 0x2A, 256, stream)?;
//!     device.copy_to_host_async(host.as_mut_ptr(), frame, 256, stream)?;
//! }
//! device.record_event(ready, stream)?;
//! device.synchronize_event(ready)?;
//! assert!(host.iter().all(|&b| b == 0x2A));
//! // SAFETY: the stream has finished every operation that used `frame`.
//! unsafe { device.free(AllocKind::Device, frame, 256)? };
//! # Ok::<(), holo_runtime::Error>(())
//! ```

mod caller;
mod counters;
#[cfg(feature = "cuda")]
mod cuda;
mod faults;
mod handle;
mod id;
mod ipc;
mod observed;
#[cfg(feature = "opencl")]
mod opencl;
mod software;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{Error, ErrorCode, MemoryKind, Result};

pub(crate) use caller::Adoptions;
pub use caller::{
    AdoptedStream, CudaStreamPtr, OpenClMemPtr, OpenClQueuePtr, StreamOrQueue, synchronize_stream,
};
pub use counters::{CounterSnapshot, DeviceCounters};
#[cfg(feature = "cuda")]
pub use cuda::{CudaDevice, device_count, driver_present};
pub use faults::{CallKind, FaultInjecting, LiveObjects};
pub use handle::{DevicePtr, EventHandle, MemoryObject, StreamHandle};
pub use id::{DeviceApi, DeviceId};
pub use ipc::DeviceIpc;
pub use observed::{DeviceCall, Observed};
#[cfg(feature = "opencl")]
pub use opencl::{OpenClDevice, library_present as opencl_library_present, opencl_device_count};
pub use software::SoftwareDevice;

/// Which implementation stands behind a [`DeviceBackend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// [`SoftwareDevice`]: worker-thread streams and host memory, no GPU.
    Software,
    /// [`CudaDevice`]: a CUDA device through the driver API.
    Cuda,
    /// `OpenClDevice`: an OpenCL device (command queues, `cl_event`s, `cl_mem` buffers).
    OpenCl,
}

impl BackendKind {
    /// The stable name (`software`, `cuda`, `opencl`), as `HOLO_DEVICE` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Software => "software",
            BackendKind::Cuda => "cuda",
            BackendKind::OpenCl => "opencl",
        }
    }

    /// The API whose plans this backend runs: the software device stands in for CUDA.
    pub const fn api(self) -> DeviceApi {
        match self {
            BackendKind::Software | BackendKind::Cuda => DeviceApi::Cuda,
            BackendKind::OpenCl => DeviceApi::OpenCl,
        }
    }
}

/// What kind of memory [`DeviceBackend::alloc`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocKind {
    /// Device memory (`cuMemAlloc`). Not host-accessible.
    Device,
    /// Page-locked host memory (`cuMemHostAlloc`), host-accessible and addressable by the
    /// device through unified addressing.
    PinnedHost,
    /// Managed (unified) memory (`cuMemAllocManaged`), host- and device-accessible.
    Managed,
}

impl AllocKind {
    /// Every kind.
    pub const ALL: [AllocKind; 3] = [AllocKind::Device, AllocKind::PinnedHost, AllocKind::Managed];

    /// Whether the host may dereference the memory (once no stream operation is pending on it).
    pub const fn host_accessible(self) -> bool {
        matches!(self, AllocKind::PinnedHost | AllocKind::Managed)
    }
}

impl TryFrom<MemoryKind> for AllocKind {
    type Error = Error;

    /// The device allocation that backs a plan's memory kind. Pageable host memory is not
    /// a device allocation and is rejected with `NotSupported`.
    fn try_from(kind: MemoryKind) -> Result<Self> {
        match kind {
            MemoryKind::CudaDevice | MemoryKind::OpenClDevice | MemoryKind::Device => {
                Ok(AllocKind::Device)
            }
            MemoryKind::PinnedHost => Ok(AllocKind::PinnedHost),
            MemoryKind::CudaManaged => Ok(AllocKind::Managed),
            MemoryKind::Host => Err(Error::new(
                ErrorCode::NotSupported,
                "pageable host memory is not allocated by a device backend",
            )),
        }
    }
}

/// The operations the runtime needs from a GPU API. Object-safe: the runtime holds an
/// `Arc<dyn DeviceBackend>`.
///
/// Every method may be called from any thread. Handles are checked: a handle this
/// backend did not create, or already destroyed, gives `InvalidArgument`. Asynchronous
/// methods (`record_event`, `wait_event`, `memset_async`, the copies, `enqueue_delay`)
/// only enqueue work and never block the calling thread on device progress, and they do
/// not allocate on the caller's thread. The blocking ones (`synchronize_event`,
/// `synchronize_stream`) are for the host-access calls only.
///
/// Ordering follows CUDA's stream semantics: operations on one stream run in FIFO order;
/// `record_event` captures everything enqueued on the stream so far, re-recording replaces
/// what the event tracks, and an event never recorded is complete.
pub trait DeviceBackend: Send + Sync + 'static {
    // The calls a frame makes come first. A call through `dyn DeviceBackend` reads its
    // entry in the vtable, laid out in declaration order after the drop, size and alignment
    // entries, and every call through an `Arc<dyn DeviceBackend>` reads the alignment too:
    // declared first, these entries share that line of the vtable instead of adding one
    // to fetch again after each driver call (BENCHMARKS.md, "This VM, thirty-second
    // session").

    /// [`memset_async`](Self::memset_async) without the stream's handle check: for a
    /// stream whose liveness the caller holds proof of, as an operator's runtime-owned
    /// stream during its callback ([`DeviceAccess::memset_async`](crate::DeviceAccess::memset_async)).
    /// The default checks anyway.
    ///
    /// # Safety
    /// As [`memset_async`](Self::memset_async), and `stream` is a live stream of this
    /// backend (or one adopted by it and not yet released) for the whole call.
    unsafe fn memset_async_unchecked(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract includes `memset_async`'s.
        unsafe { self.memset_async(dst, value, bytes, stream) }
    }

    /// [`copy_async`](Self::copy_async) without the stream's handle check (see
    /// [`memset_async_unchecked`](Self::memset_async_unchecked)).
    ///
    /// # Safety
    /// As [`copy_async`](Self::copy_async), and `stream` as for
    /// [`memset_async_unchecked`](Self::memset_async_unchecked).
    unsafe fn copy_async_unchecked(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract includes `copy_async`'s.
        unsafe { self.copy_async(dst, src, bytes, stream) }
    }

    /// [`wait_event`](Self::wait_event) without the handle checks (see
    /// [`record_event_unchecked`](Self::record_event_unchecked)).
    ///
    /// # Safety
    /// As [`record_event_unchecked`](Self::record_event_unchecked).
    unsafe fn wait_event_unchecked(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        self.wait_event(stream, event)
    }

    /// Records `event` on `stream`: it completes once the stream has run everything
    /// enqueued before this call.
    fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()>;

    /// Whether the event has completed (`true` also for an event never recorded). Never blocks.
    fn query_event(&self, event: EventHandle) -> Result<bool>;

    /// [`record_event`](Self::record_event) without the handle checks: for the channel
    /// layer's hand-off path, which records only its pool's own events (live until the
    /// pool drops) on streams it holds an adoption of. The default checks anyway.
    ///
    /// # Safety
    /// `event` is a live event of this backend and `stream` a live stream of it or one
    /// adopted by it ([`adopt_stream`](Self::adopt_stream)) and not yet released.
    unsafe fn record_event_unchecked(
        &self,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        self.record_event(event, stream)
    }

    /// Which implementation this is.
    fn backend_kind(&self) -> BackendKind;

    /// The device ordinal (0 for the software device).
    fn ordinal(&self) -> u32;

    /// The device a deployment binding names to place work here: `cuda:N` for CUDA and
    /// the software device (which stands in for CUDA), `opencl:N` for OpenCL.
    fn device_id(&self) -> DeviceId {
        DeviceId {
            api: self.backend_kind().api(),
            ordinal: self.ordinal(),
        }
    }

    /// The raw context the backend creates its streams, events and memory in (CUDA: the
    /// `CUcontext` as an integer), for interop; `None` for a backend with no such thing.
    fn raw_context(&self) -> Option<u64> {
        None
    }

    /// Makes the backend's context current on the calling thread, so that a caller's own
    /// driver calls there (a kernel launch on one of the session's streams) act in it.
    /// The session calls it on every partition thread before the first `compute`, and
    /// around every `start` and `stop`. A no-op for a backend with no context.
    fn bind_to_thread(&self) -> Result<()> {
        Ok(())
    }

    /// Creates a stream that does not synchronize with any other (CUDA: non-blocking).
    fn create_stream(&self) -> Result<StreamHandle>;

    /// Adopts a caller's stream or queue for the length of a hand-off (the DeviceArray
    /// contract): checks that it belongs to this backend's context and returns the handle
    /// this backend's stream calls accept for it until
    /// [`release_adopted_stream`](Self::release_adopted_stream). One from another context
    /// or of another backend kind is `InvalidArgument`; a backend that cannot adopt
    /// caller streams answers `NotSupported`. Adoptions are counted: each successful call
    /// is ended by one release. A stream this backend created itself is returned as it is
    /// (and its release is a no-op).
    fn adopt_stream(&self, stream: StreamOrQueue) -> Result<StreamHandle> {
        Err(Error::new(
            ErrorCode::NotSupported,
            format!(
                "the {} backend does not adopt caller streams ({stream:?})",
                self.backend_kind().name()
            ),
        ))
    }

    /// Whether `stream` is one this backend created (a runtime stream, or one a caller made
    /// through [`create_stream`](Self::create_stream)) rather than a caller's raw stream it
    /// adopted. A hand-off on such a stream does not mark its release clean when it ends:
    /// other holders of the slot may keep working on the stream, so the slot's last handle
    /// records its release again. The default (`true`) is the safe answer.
    fn is_backend_stream(&self, stream: StreamHandle) -> bool {
        let _ = stream;
        true
    }

    /// Whether this backend's stream calls accept `stream` now: one of its live streams,
    /// or a caller's stream adopted for a hand-off. Anything else is `InvalidArgument`,
    /// as those calls would answer. For a caller that registers a stream for later use
    /// (a release stream) without making a call on it first. The default accepts every
    /// handle: a backend that checks its handles overrides it.
    fn check_stream(&self, stream: StreamHandle) -> Result<()> {
        let _ = stream;
        Ok(())
    }

    /// Ends one adoption made by [`adopt_stream`](Self::adopt_stream): after the last one
    /// the handle is no longer accepted (the caller may destroy its stream).
    fn release_adopted_stream(&self, stream: StreamHandle) {
        let _ = stream;
    }

    /// Destroys a stream. Work already enqueued on it still completes (the software device
    /// drains it before returning; CUDA completes it asynchronously).
    fn destroy_stream(&self, stream: StreamHandle) -> Result<()>;

    /// Creates an event with timing disabled.
    fn create_event(&self) -> Result<EventHandle>;

    /// Destroys an event. Streams already waiting on it are not affected.
    fn destroy_event(&self, event: EventHandle) -> Result<()>;

    /// Makes `stream` wait, on the device, for the event's latest recording at the time of
    /// this call. The calling thread does not wait.
    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()>;

    /// Blocks the calling thread until the event completes. Host-access calls only.
    fn synchronize_event(&self, event: EventHandle) -> Result<()>;

    /// Blocks the calling thread until everything enqueued on `stream` has run.
    /// Host-access calls and teardown only.
    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()>;

    /// Allocates `bytes` (non-zero) of `kind`, aligned to at least 256 bytes. Cold path.
    /// Out of memory gives `ResourceExhausted`; zero bytes gives `InvalidArgument`.
    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr>;

    /// Whether the backend's memory objects are addresses of one unified address space
    /// (CUDA, the software device): then a buffer's address is its object's base plus its
    /// offset ([`BufferRef::unified_address`](crate::channel::BufferRef::unified_address)).
    /// A backend without unified addressing (OpenCL's `cl_mem`) answers `false` and names
    /// buffers only as memory object plus offset.
    fn unified_addressing(&self) -> bool {
        true
    }

    /// Allocates a pool's backing as a memory object (what the slot ledger stores; a slot
    /// is the object plus an offset). The default, for a unified-addressing backend, is
    /// [`alloc`](Self::alloc)'s base address.
    fn alloc_memory_object(&self, kind: AllocKind, bytes: usize) -> Result<MemoryObject> {
        self.alloc(kind, bytes)
            .map(|ptr| MemoryObject::from_raw(ptr.raw()))
    }

    /// Frees a memory object made by [`alloc_memory_object`](Self::alloc_memory_object)
    /// with the same `kind` and `bytes`.
    ///
    /// # Safety
    /// As [`free`](Self::free).
    unsafe fn free_memory_object(
        &self,
        kind: AllocKind,
        memory: MemoryObject,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract; the default object is `alloc`'s address.
        unsafe { self.free(kind, DevicePtr::from_raw(memory.raw()), bytes) }
    }

    /// Wraps a caller's memory object (an OpenCL `cl_mem`: the seed's
    /// `createDeviceArrayView`) as a memory object of this backend, returning it and its
    /// size in bytes. The backend checks that it lives in its own context (one of another
    /// context is `InvalidArgument`) and keeps its own reference until
    /// [`release_adopted_memory_object`](Self::release_adopted_memory_object). A backend
    /// without such objects answers `NotSupported`.
    fn adopt_memory_object(&self, memory: OpenClMemPtr) -> Result<(MemoryObject, usize)> {
        Err(Error::new(
            ErrorCode::NotSupported,
            format!(
                "the {} backend does not wrap OpenCL memory objects ({memory:?})",
                self.backend_kind().name()
            ),
        ))
    }

    /// Ends a wrap made by [`adopt_memory_object`](Self::adopt_memory_object), dropping
    /// the backend's reference to the caller's object.
    ///
    /// # Safety
    /// No pending or later stream operation of this backend uses the object.
    unsafe fn release_adopted_memory_object(&self, memory: MemoryObject) -> Result<()> {
        Err(Error::new(
            ErrorCode::NotSupported,
            format!(
                "the {} backend does not wrap memory objects ({memory:?})",
                self.backend_kind().name()
            ),
        ))
    }

    /// Frees an allocation made by [`alloc`](Self::alloc) with the same `kind` and `bytes`.
    ///
    /// # Safety
    /// No pending stream operation may use the allocation, and no later one may.
    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()>;

    /// Enqueues filling `bytes` bytes at `dst` with `value`.
    ///
    /// # Safety
    /// `dst..dst + bytes` must lie in a live allocation of this backend until the stream
    /// has run the fill, and nothing may access it concurrently without stream ordering.
    unsafe fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Enqueues a copy of `bytes` bytes between two addresses of the unified address
    /// space (device, pinned or managed, in any direction).
    ///
    /// # Safety
    /// Both ranges must lie in live allocations of this backend until the stream has run
    /// the copy; they must not overlap, and nothing may write them concurrently (or read
    /// `dst`) without stream ordering.
    unsafe fn copy_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Enqueues a copy from backend memory to ordinary host memory.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `bytes` bytes, and `src..src + bytes` lie in a
    /// live allocation, until the stream has run the copy; nothing may access `dst`
    /// meanwhile.
    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Enqueues a copy from ordinary host memory to backend memory.
    ///
    /// # Safety
    /// `src` must be valid for reads of `bytes` bytes and not written, and `dst..dst +
    /// bytes` lie in a live allocation, until the stream has run the copy.
    unsafe fn copy_from_host_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Enqueues an operation that occupies `stream` for `duration` (CUDA: a host function
    /// that sleeps). Test and bench support: it makes a pending completion last long
    /// enough that an early reuse would show. A duration whose end the host's monotonic
    /// clock cannot represent (`Duration::MAX`) is `InvalidArgument`, on every backend.
    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()>;

    /// The call counters of this backend.
    fn counters(&self) -> &DeviceCounters;

    /// What the backend can do for topics across processes in device memory (docs/IPC.md):
    /// `None` for a backend that cannot (OpenCL; `SoftwareDevice::without_ipc`).
    fn ipc(&self) -> Option<&dyn DeviceIpc> {
        None
    }
}

/// [`DeviceBackend::enqueue_delay`]'s check: the delay must end at an instant the host's
/// monotonic clock can represent (an OpenCL delay's end is computed in a driver callback,
/// where a panic would abort the process).
pub(crate) fn check_delay(duration: Duration) -> Result<()> {
    if Instant::now().checked_add(duration).is_none() {
        return Err(Error::invalid_argument(format!(
            "a delay of {duration:?} ends past what the host's monotonic clock can represent"
        )));
    }
    Ok(())
}

/// What `HOLO_DEVICE` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Selection {
    /// Unset or `auto`: CUDA device 0 if present, else the software device.
    Auto,
    Software,
    Cuda(u32),
    OpenCl(u32),
}

fn parse_selection(value: Option<&str>) -> Result<Selection> {
    let Some(value) = value.map(str::trim) else {
        return Ok(Selection::Auto);
    };
    match value {
        "" | "auto" => Ok(Selection::Auto),
        "software" => Ok(Selection::Software),
        "cuda" => Ok(Selection::Cuda(0)),
        "opencl" => Ok(Selection::OpenCl(0)),
        _ => value
            .strip_prefix("cuda:")
            .and_then(|ordinal| ordinal.parse().ok())
            .map(Selection::Cuda)
            .or_else(|| {
                value
                    .strip_prefix("opencl:")
                    .and_then(|ordinal| ordinal.parse().ok())
                    .map(Selection::OpenCl)
            })
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "unknown device `{value}`: expected one of `auto`, `software`, `cuda`, `cuda:N`, `opencl`, `opencl:N`"
                ))
                .at("environment variable HOLO_DEVICE")
            }),
    }
}

/// What `HOLO_REQUIRE_DEVICE` asks for: a backend that must open (no software fallback).
fn required_device(value: Option<&str>) -> Result<Option<BackendKind>> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some("cuda") => Ok(Some(BackendKind::Cuda)),
        Some("opencl") => Ok(Some(BackendKind::OpenCl)),
        Some(other) => Err(Error::invalid_argument(format!(
            "unknown required device `{other}`: expected one of `cuda`, `opencl`"
        ))
        .at("environment variable HOLO_REQUIRE_DEVICE")),
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Opens CUDA device `ordinal` as a backend.
#[cfg(feature = "cuda")]
fn open_cuda(ordinal: u32) -> Result<Arc<dyn DeviceBackend>> {
    Ok(CudaDevice::open(ordinal)?)
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_ordinal: u32) -> Result<Arc<dyn DeviceBackend>> {
    Err(Error::new(
        ErrorCode::DeviceUnavailable,
        "this build of holo-runtime has no CUDA backend (feature `cuda` is off)",
    ))
}

/// Opens OpenCL device `ordinal` as a backend.
#[cfg(feature = "opencl")]
fn open_opencl(ordinal: u32) -> Result<Arc<dyn DeviceBackend>> {
    Ok(OpenClDevice::open(ordinal)?)
}

#[cfg(not(feature = "opencl"))]
fn open_opencl(_ordinal: u32) -> Result<Arc<dyn DeviceBackend>> {
    Err(Error::new(
        ErrorCode::DeviceUnavailable,
        "this build of holo-runtime has no OpenCL backend (feature `opencl` is off)",
    ))
}

/// Opens the backend that the environment selects.
///
/// `HOLO_DEVICE` is `software`, `cuda` (device 0), `cuda:N`, `opencl` (OpenCL device 0),
/// `opencl:N` (every device of the first platform, then of the second, …), or unset /
/// `auto` (CUDA device 0 when one opens, else the software device; with
/// `HOLO_REQUIRE_DEVICE=opencl`, OpenCL device 0). With `HOLO_REQUIRE_DEVICE=cuda` or
/// `opencl` that kind of device must open: the software fallback becomes an error, and a
/// selection of another kind contradicts it.
pub fn open_backend_from_env() -> Result<Arc<dyn DeviceBackend>> {
    let selection = parse_selection(env_var("HOLO_DEVICE").as_deref())?;
    let required = required_device(env_var("HOLO_REQUIRE_DEVICE").as_deref())?;
    let contradiction = |selected: &str| {
        Error::invalid_argument(format!(
            "HOLO_DEVICE={selected} contradicts HOLO_REQUIRE_DEVICE={}",
            required.map_or("", BackendKind::name)
        ))
    };
    match selection {
        Selection::Cuda(_) if required == Some(BackendKind::OpenCl) => Err(contradiction("cuda")),
        Selection::OpenCl(_) if required == Some(BackendKind::Cuda) => Err(contradiction("opencl")),
        Selection::Cuda(ordinal) => open_cuda(ordinal),
        Selection::OpenCl(ordinal) => open_opencl(ordinal),
        Selection::Software if required.is_some() => Err(contradiction("software")),
        Selection::Software => Ok(SoftwareDevice::new()),
        Selection::Auto if required == Some(BackendKind::OpenCl) => open_opencl(0),
        Selection::Auto => match open_cuda(0) {
            Ok(device) => Ok(device),
            Err(error) if required.is_some() => Err(error),
            Err(_) => Ok(SoftwareDevice::new()),
        },
    }
}

/// Opens the backend that runs a plan bound to `device`.
///
/// When `HOLO_DEVICE` selects a device (anything but unset or `auto`), that one, as
/// [`open_backend_from_env`] opens it: the session then checks it is `device`. Otherwise
/// `device` itself: CUDA device 0 as `auto` opens it (the software device where no CUDA
/// device opens and `HOLO_REQUIRE_DEVICE` does not forbid it), any other device exactly —
/// `DeviceUnavailable` naming it when this machine has no such device, never another
/// device in its place. A `HOLO_REQUIRE_DEVICE` of the other API opens that API's device 0
/// (which the session then refuses, naming both).
pub fn open_backend_for(device: DeviceId) -> Result<Arc<dyn DeviceBackend>> {
    let selection = parse_selection(env_var("HOLO_DEVICE").as_deref())?;
    let required = required_device(env_var("HOLO_REQUIRE_DEVICE").as_deref())?;
    match device.api {
        _ if selection != Selection::Auto => open_backend_from_env(),
        DeviceApi::Cuda if device.ordinal == 0 || required == Some(BackendKind::OpenCl) => {
            open_backend_from_env()
        }
        DeviceApi::Cuda => open_cuda(device.ordinal),
        DeviceApi::OpenCl if required == Some(BackendKind::Cuda) => open_backend_from_env(),
        DeviceApi::OpenCl => open_opencl(device.ordinal),
    }
}

/// The CUDA device whose UUID is `uuid` (what a topic served across processes in device
/// memory names) — a new software device for the software device's UUID: `DeviceUnavailable`
/// when no CUDA device of this machine has it, or CUDA is absent.
pub(crate) fn open_cuda_by_uuid(uuid: [u8; 16]) -> Result<Arc<dyn DeviceBackend>> {
    // The software device stands in for a GPU: every one of them is the same "device".
    if uuid == software::SOFTWARE_UUID {
        let d: Arc<dyn DeviceBackend> = SoftwareDevice::new();
        return Ok(d);
    }
    #[cfg(feature = "cuda")]
    {
        let count = cuda::device_count()?;
        for ordinal in 0..count {
            let device: Arc<dyn DeviceBackend> = CudaDevice::open(ordinal)?;
            if device.ipc().map(DeviceIpc::device_uuid).transpose()? == Some(uuid) {
                return Ok(device);
            }
        }
        Err(Error::new(
            ErrorCode::DeviceUnavailable,
            format!(
                "none of this machine's {count} CUDA device(s) is the exporter's (UUID {})",
                uuid_text(&uuid)
            ),
        ))
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(Error::new(
            ErrorCode::DeviceUnavailable,
            format!(
                "the exporter's frames are on CUDA device {}; this build has no CUDA backend",
                uuid_text(&uuid)
            ),
        ))
    }
}

/// A UUID as CUDA prints it (`GPU-xxxxxxxx-xxxx-…`).
pub(crate) fn uuid_text(uuid: &[u8; 16]) -> String {
    let h: Vec<String> = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..].concat()
    )
}

/// The OpenCL backends the device-contract suite runs on: the first device of each
/// platform (PoCL in CI; NVIDIA's OpenCL and PoCL on the GPU machine).
#[cfg(feature = "opencl")]
fn opencl_backends_for_tests() -> Result<Vec<Arc<dyn DeviceBackend>>> {
    let mut out: Vec<Arc<dyn DeviceBackend>> = Vec::new();
    for ordinal in opencl::first_device_of_each_platform()? {
        out.push(OpenClDevice::open(ordinal)?);
    }
    if out.is_empty() {
        return Err(Error::new(
            ErrorCode::DeviceUnavailable,
            "an OpenCL library is installed but no OpenCL device is (Debian: apt-get install pocl-opencl-icd)",
        ));
    }
    Ok(out)
}

#[cfg(not(feature = "opencl"))]
fn opencl_backends_for_tests() -> Result<Vec<Arc<dyn DeviceBackend>>> {
    open_opencl(0).map(|device| vec![device])
}

/// The backends the device-contract suite runs on (`__test_support::test_backends`).
pub(crate) fn backends_for_tests() -> Vec<Arc<dyn DeviceBackend>> {
    let required = match required_device(env_var("HOLO_REQUIRE_DEVICE").as_deref()) {
        Ok(required) => required,
        Err(error) => panic!("{error}"),
    };
    let mut backends: Vec<Arc<dyn DeviceBackend>> = vec![SoftwareDevice::new()];
    if cfg!(miri) {
        // Miri runs no foreign library: the drivers' loaders (`dlopen`) are not tried.
        return backends;
    }
    match open_cuda(0) {
        Ok(cuda) => backends.push(cuda),
        Err(error) if required == Some(BackendKind::Cuda) => {
            panic!("HOLO_REQUIRE_DEVICE=cuda but CUDA device 0 did not open: {error}")
        }
        Err(_) => {}
    }
    match opencl_backends_for_tests() {
        Ok(opencl) => backends.extend(opencl),
        Err(error) if required == Some(BackendKind::OpenCl) => {
            panic!("HOLO_REQUIRE_DEVICE=opencl but no OpenCL device opened: {error}")
        }
        Err(_) => {}
    }
    backends
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holo_device_values_parse() {
        assert_eq!(parse_selection(None).unwrap(), Selection::Auto);
        assert_eq!(parse_selection(Some("auto")).unwrap(), Selection::Auto);
        assert_eq!(
            parse_selection(Some(" software ")).unwrap(),
            Selection::Software
        );
        assert_eq!(parse_selection(Some("cuda")).unwrap(), Selection::Cuda(0));
        assert_eq!(parse_selection(Some("cuda:3")).unwrap(), Selection::Cuda(3));
        assert_eq!(
            parse_selection(Some("opencl")).unwrap(),
            Selection::OpenCl(0)
        );
        assert_eq!(
            parse_selection(Some("opencl:2")).unwrap(),
            Selection::OpenCl(2)
        );
        for bad in [
            "gpu", "cuda:", "cuda:x", "cuda:-1", "opencl:", "opencl:x", "cl",
        ] {
            let error = parse_selection(Some(bad)).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgument, "{bad}");
            assert!(error.message().contains("expected one of"), "{error}");
            assert_eq!(error.location(), Some("environment variable HOLO_DEVICE"));
        }
    }

    #[test]
    fn holo_require_device_values_parse() {
        assert_eq!(required_device(None).unwrap(), None);
        assert_eq!(required_device(Some("")).unwrap(), None);
        assert_eq!(
            required_device(Some("cuda")).unwrap(),
            Some(BackendKind::Cuda)
        );
        assert_eq!(
            required_device(Some(" opencl ")).unwrap(),
            Some(BackendKind::OpenCl)
        );
        assert_eq!(
            required_device(Some("gpu")).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
    }

    #[test]
    fn alloc_kinds_map_from_memory_kinds() {
        assert_eq!(
            AllocKind::try_from(MemoryKind::CudaDevice).unwrap(),
            AllocKind::Device
        );
        assert_eq!(
            AllocKind::try_from(MemoryKind::PinnedHost).unwrap(),
            AllocKind::PinnedHost
        );
        assert_eq!(
            AllocKind::try_from(MemoryKind::CudaManaged).unwrap(),
            AllocKind::Managed
        );
        assert_eq!(
            AllocKind::try_from(MemoryKind::Host).unwrap_err().code(),
            ErrorCode::NotSupported
        );
        assert!(!AllocKind::Device.host_accessible());
        assert!(AllocKind::PinnedHost.host_accessible() && AllocKind::Managed.host_accessible());
    }

    #[test]
    fn backends_are_send_sync_and_object_safe() {
        fn assert_send_sync<T: Send + Sync + ?Sized>() {}
        assert_send_sync::<dyn DeviceBackend>();
        assert_send_sync::<SoftwareDevice>();
        #[cfg(feature = "cuda")]
        assert_send_sync::<CudaDevice>();
        #[cfg(feature = "opencl")]
        assert_send_sync::<OpenClDevice>();
        assert_send_sync::<DeviceCounters>();
        let backend: Arc<dyn DeviceBackend> = SoftwareDevice::new();
        assert_eq!(backend.backend_kind().name(), "software");
    }
}
