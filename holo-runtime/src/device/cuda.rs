//! The CUDA backend: the driver API through `cudarc`'s `result`/`sys` layer.
//!
//! `cudarc`'s safe layer is not used: it records a hidden event per buffer, and the runtime
//! owns ordering. `libcuda` is loaded at run time; before any driver call the library and
//! every symbol this backend calls are looked up, so a machine without CUDA (or with a
//! driver too old) gets `DeviceUnavailable` instead of `cudarc`'s panic on first use.
//!
//! Threading: the device retains the primary context and makes it current on a calling
//! thread the first time that thread needs it (a thread-local records which device is
//! bound, so the hot path does not call `cuCtxSetCurrent`). Calls that create or free
//! resources always set the context, because they act on whatever context is current; a
//! stream call that finds another context current (`CUDA_ERROR_INVALID_CONTEXT`) rebinds
//! and retries once.
//!
//! Handles are the raw driver values. The live streams and events sit in a registry (a
//! lock sharded per thread) whose read lock is held across each driver call, so a stale
//! handle gives `InvalidArgument` and a concurrent destroy cannot free a handle mid-call.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void};
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;

use super::handle::addr_usize;
use super::{
    AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, StreamHandle,
    StreamOrQueue,
};
use crate::device::counters::Count;
use crate::{Error, ErrorCode, Result};

#[path = "cuda_ipc.rs"]
mod ipc;

/// Every driver symbol this backend calls (directly or through `cudarc::driver::result`).
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuMemAlloc_v2",
    "cuMemAllocManaged",
    "cuMemHostAlloc",
    "cuMemFree_v2",
    "cuMemFreeHost",
    "cuMemsetD8Async",
    "cuMemcpyAsync",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuLaunchHostFunc",
    "cuStreamGetCtx",
    "cuCtxGetDevice",
];

/// Whether a CUDA driver library (`libcuda.so`) can be loaded on this machine.
pub fn driver_present() -> bool {
    // SAFETY: `is_culib_present` only opens and closes the candidate library names.
    unsafe { sys::is_culib_present() }
}

/// The number of CUDA devices. `DeviceUnavailable` when no usable driver is installed;
/// `Ok(0)` when the driver reports no device.
pub fn device_count() -> Result<u32> {
    static DRIVER: OnceLock<Result<u32>> = OnceLock::new();
    DRIVER.get_or_init(init_driver).clone()
}

fn init_driver() -> Result<u32> {
    if !driver_present() {
        return Err(unavailable(
            "the CUDA driver library (libcuda) was not found on this machine",
        ));
    }
    // SAFETY: the library is present, so `culib` loads it rather than panicking.
    let library = unsafe { sys::culib() };
    for name in REQUIRED_SYMBOLS {
        // SAFETY: the symbol is only looked up here, never called through this pointer.
        if unsafe { library.get::<*const c_void>(*name) }.is_err() {
            return Err(unavailable(format!(
                "the CUDA driver lacks `{name}`: it is older than this build needs (CUDA 13)"
            )));
        }
    }
    match cu::init() {
        Ok(()) => {}
        Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => return Ok(0),
        Err(error) => return Err(driver_error("cuInit", error)),
    }
    let count = cu::device::get_count().map_err(|e| driver_error("cuDeviceGetCount", e))?;
    Ok(u32::try_from(count).unwrap_or(0))
}

fn unavailable(message: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    Error::new(ErrorCode::DeviceUnavailable, message)
}

/// Maps a driver error to holo's codes, naming the call that failed.
fn driver_error(call: &'static str, error: DriverError) -> Error {
    use sys::CUresult as R;
    let code = match error.0 {
        R::CUDA_ERROR_OUT_OF_MEMORY => ErrorCode::ResourceExhausted,
        R::CUDA_ERROR_INVALID_VALUE | R::CUDA_ERROR_INVALID_HANDLE => ErrorCode::InvalidArgument,
        R::CUDA_ERROR_NO_DEVICE
        | R::CUDA_ERROR_INVALID_DEVICE
        | R::CUDA_ERROR_NOT_INITIALIZED
        | R::CUDA_ERROR_DEINITIALIZED
        | R::CUDA_ERROR_STUB_LIBRARY
        | R::CUDA_ERROR_DEVICE_UNAVAILABLE
        | R::CUDA_ERROR_SYSTEM_NOT_READY
        | R::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | R::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => ErrorCode::DeviceUnavailable,
        R::CUDA_ERROR_NOT_SUPPORTED => ErrorCode::NotSupported,
        _ => ErrorCode::Internal,
    };
    Error::new(code, format!("{call} failed: {:?}", error.0))
}

/// A hand-off's driver call ([`CudaDevice::event_call`]): the call on raw handles (event,
/// stream), its name for an error, and its counter.
struct EventCall {
    raw: unsafe fn(u64, u64) -> sys::CUresult,
    name: &'static str,
    count: Count,
}

impl EventCall {
    const RECORD: EventCall = EventCall {
        raw: record_raw,
        name: "cuEventRecord",
        count: Count::event_record,
    };
    const WAIT: EventCall = EventCall {
        raw: wait_raw,
        name: "cuStreamWaitEvent",
        count: Count::stream_wait,
    };
}

/// `cuEventRecord(event, stream)` on raw handles.
///
/// # Safety
/// Both are live handles of one context (the unchecked calls' contract).
#[inline]
unsafe fn record_raw(event: u64, stream: u64) -> sys::CUresult {
    // SAFETY: the caller's contract.
    unsafe { sys::cuEventRecord(event_ptr(event), stream_ptr(stream)) }
}

/// `cuStreamWaitEvent(stream, event, CU_EVENT_WAIT_DEFAULT)` on raw handles.
///
/// # Safety
/// As [`record_raw`].
#[inline]
unsafe fn wait_raw(event: u64, stream: u64) -> sys::CUresult {
    // SAFETY: the caller's contract.
    unsafe { sys::cuStreamWaitEvent(stream_ptr(stream), event_ptr(event), 0) }
}

fn check(call: &'static str, result: sys::CUresult) -> Result<()> {
    result.result().map_err(|error| driver_error(call, error))
}

/// A hasher for driver handles (pointers): one multiply, high bits folded down so that
/// aligned addresses still spread over buckets.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

type HandleSet = HashSet<u64, BuildHasherDefault<AddressHasher>>;

#[derive(Default)]
struct Live {
    streams: HandleSet,
    events: HandleSet,
}

/// The context: the device's retained primary context, or a caller's.
struct Context(sys::CUcontext);

// SAFETY: a CUDA context is a process-wide driver object; the driver API may use it from
// any thread, and this backend only passes the handle to the driver.
unsafe impl Send for Context {}
// SAFETY: as above; the handle is never mutated after `open`.
unsafe impl Sync for Context {}

thread_local! {
    /// Which `CudaDevice` instance last made its context current on this thread (0: none).
    static BOUND_INSTANCE: Cell<u64> = const { Cell::new(0) };
}

/// Instance ids are never reused, so a thread's record cannot name a later device.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

fn stream_ptr(raw: u64) -> sys::CUstream {
    ptr::with_exposed_provenance_mut(addr_usize(raw))
}

fn event_ptr(raw: u64) -> sys::CUevent {
    ptr::with_exposed_provenance_mut(addr_usize(raw))
}

/// A host function that occupies its stream: sleeps for the nanoseconds in its argument.
extern "C" fn sleep_host_fn(nanos: *mut c_void) {
    std::thread::sleep(Duration::from_nanos(nanos.addr() as u64));
}

/// A CUDA device through the driver API, on its primary context ([`CudaDevice::open`]) or
/// on a context the caller made ([`CudaDevice::from_context`]).
pub struct CudaDevice {
    ordinal: u32,
    device: sys::CUdevice,
    context: Context,
    /// Whether `context` is the primary context this device retained (released on drop);
    /// a caller's context is the caller's to destroy.
    primary: bool,
    instance: u64,
    /// Caller streams adopted for hand-offs ([`DeviceBackend::adopt_stream`]). Looked up
    /// only when a stream is not one of this device's own.
    adopted: super::Adoptions,
    /// Sharded: a read locks only the calling thread's shard, so the partition threads and
    /// the retirement worker checking handles at once do not bounce one lock word between
    /// their cores (a create or destroy, cold, locks every shard).
    live: ShardedLock<Live>,
    /// Live allocations: address → (kind, bytes).
    allocations: Mutex<HashMap<u64, (AllocKind, usize)>>,
    /// Virtual-memory mappings (exportable allocations, also in `allocations`, and
    /// imports of other processes' allocations): base → handle and size.
    vmm: Mutex<HashMap<u64, ipc::Vmm>>,
    /// Host ranges registered for cross-process fences (their host addresses).
    registered: Mutex<HashSet<u64>>,
    /// Whether this device can serve device memory across processes (checked once).
    ipc_checked: OnceLock<Result<()>>,
    counters: DeviceCounters,
}

impl CudaDevice {
    /// Opens CUDA device `ordinal`, retaining its primary context (shared with any other
    /// user of the runtime API in this process).
    ///
    /// `DeviceUnavailable` when no driver is installed, the driver is too old, or the
    /// ordinal names no device. Never panics.
    pub fn open(ordinal: u32) -> Result<Arc<Self>> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(unavailable(format!(
                "CUDA device {ordinal} is not present: this machine has {count} CUDA device(s)"
            )));
        }
        let index = c_int::try_from(ordinal)
            .map_err(|_| Error::invalid_argument(format!("CUDA ordinal {ordinal} is too large")))?;
        let device = cu::device::get(index).map_err(|e| driver_error("cuDeviceGet", e))?;
        // SAFETY: `device` was returned by `cuDeviceGet`.
        let context = unsafe { cu::primary_ctx::retain(device) }
            .map_err(|e| driver_error("cuDevicePrimaryCtxRetain", e))?;
        let this = Self::with_context(ordinal, device, Context(context), true);
        // On failure `this` drops here and releases the primary context.
        this.make_current()?;
        Ok(Arc::new(this))
    }

    /// A device on a `CUcontext` the caller made (with `cuCtxCreate`, or another
    /// framework's): holo creates its streams, events and pools in it, makes it current on
    /// its threads, and checks that every caller stream handed to it lives in it. The
    /// device is the context's own (`cuCtxGetDevice`).
    ///
    /// `DeviceUnavailable` without a usable driver; `InvalidArgument` for a null or
    /// destroyed context.
    ///
    /// # Safety
    /// `context` is a live `CUcontext`, and the caller destroys it only after the returned
    /// device and everything made on it (sessions, tensors) have dropped.
    pub unsafe fn from_context(context: u64) -> Result<Arc<Self>> {
        device_count()?;
        if context == 0 {
            return Err(Error::invalid_argument(
                "a null CUcontext was given to CudaDevice::from_context",
            ));
        }
        let raw: sys::CUcontext = ptr::with_exposed_provenance_mut(addr_usize(context));
        // SAFETY: the caller's contract: a live context.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(raw) }).map_err(|e| {
            Error::invalid_argument(format!("CUcontext {context:#x}: {}", e.message()))
        })?;
        let mut device: sys::CUdevice = 0;
        // SAFETY: `device` is a valid out-pointer; the context is current.
        check("cuCtxGetDevice", unsafe {
            sys::cuCtxGetDevice(&raw mut device)
        })?;
        let ordinal = u32::try_from(device).map_err(|_| {
            Error::new(
                ErrorCode::Internal,
                format!("cuCtxGetDevice gave a negative device {device}"),
            )
        })?;
        let this = Self::with_context(ordinal, device, Context(raw), false);
        this.make_current()?;
        Ok(Arc::new(this))
    }

    fn with_context(ordinal: u32, device: sys::CUdevice, context: Context, primary: bool) -> Self {
        Self {
            ordinal,
            device,
            context,
            primary,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            adopted: super::Adoptions::new(),
            live: ShardedLock::new(Live::default()),
            allocations: Mutex::new(HashMap::new()),
            vmm: Mutex::new(HashMap::new()),
            registered: Mutex::new(HashSet::new()),
            ipc_checked: OnceLock::new(),
            counters: DeviceCounters::default(),
        }
    }

    /// The raw `CUcontext` (the device's primary context, or the caller's context given to
    /// [`from_context`](Self::from_context)), for interop: a caller creates its streams in
    /// it to hand them to [`Tensor::device_array`](crate::Tensor::device_array).
    pub fn raw_context(&self) -> u64 {
        self.context.0.expose_provenance() as u64
    }

    /// Makes this device's context current on the calling thread (for a caller that makes
    /// its own driver calls, such as a kernel launch on one of this device's streams).
    pub fn make_current(&self) -> Result<()> {
        // SAFETY: the primary context is retained until `self` drops.
        check("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.context.0)
        })?;
        // A thread being torn down has no binding to remember; that is harmless.
        let _ = BOUND_INSTANCE.try_with(|bound| bound.set(self.instance));
        Ok(())
    }

    /// Whether this thread bound this device's context last (`make_current`).
    #[inline]
    fn is_bound(&self) -> bool {
        BOUND_INSTANCE.try_with(Cell::get).unwrap_or(0) == self.instance
    }

    /// Binds the context unless this thread already did; the hot path's only check.
    #[inline]
    fn bind(&self) -> Result<()> {
        if self.is_bound() {
            return Ok(());
        }
        self.make_current()
    }

    /// One of a hand-off's two driver calls on raw handles: the success path is the
    /// binding check, the call, its result and the count; binding the context, the retry
    /// and the error are out of line ([`event_call_slow`](Self::event_call_slow)).
    ///
    /// # Safety
    /// The unchecked calls' contract for `event` and `stream`.
    #[allow(
        clippy::inline_always,
        reason = "inlined into each of the two calls, with `call` a constant: a direct driver call and no frame (with #[inline] it stayed a call, and `call.raw` an indirect one)"
    )]
    #[inline(always)]
    unsafe fn event_call(&self, call: &'static EventCall, event: u64, stream: u64) -> Result<()> {
        let first = self.is_bound().then(|| {
            // SAFETY: the caller's contract.
            unsafe { (call.raw)(event, stream) }
        });
        if first == Some(sys::CUresult::CUDA_SUCCESS) {
            self.counters.bump(call.count);
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { self.event_call_slow(first, call, event, stream) }
    }

    /// The rest of [`event_call`](Self::event_call), out of line
    /// ([`counted_call_slow`](Self::counted_call_slow) with the event call).
    ///
    /// # Safety
    /// As [`event_call`](Self::event_call).
    #[cold]
    #[inline(never)]
    unsafe fn event_call_slow(
        &self,
        first: Option<sys::CUresult>,
        call: &'static EventCall,
        event: u64,
        stream: u64,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        let again = || unsafe { (call.raw)(event, stream) };
        self.counted_call_slow(first, call.name, call.count, &again)
    }

    /// A fill's or a copy's driver call on a stream its caller proved live
    /// ([`DeviceBackend::memset_async_unchecked`]): as [`event_call`](Self::event_call),
    /// the binding check, the call, its result and the count inline; binding the context,
    /// the retry and the error out of line ([`counted_call_slow`](Self::counted_call_slow)).
    #[allow(
        clippy::inline_always,
        reason = "inlined into each of the two calls, with `call` a closure over the driver function: a direct driver call, no registry lock or lookup"
    )]
    #[inline(always)]
    fn stream_call(
        &self,
        name: &'static str,
        count: Count,
        bytes: usize,
        call: impl Fn() -> sys::CUresult,
    ) -> Result<()> {
        // An empty fill or copy is no driver call; it is counted as the checked call
        // counts it.
        if bytes == 0 {
            self.counters.bump(count);
            return Ok(());
        }
        let first = self.is_bound().then(&call);
        if first == Some(sys::CUresult::CUDA_SUCCESS) {
            self.counters.bump(count);
            return Ok(());
        }
        self.counted_call_slow(first, name, count, &call)
    }

    /// The rest of a counted driver call ([`event_call`](Self::event_call),
    /// [`stream_call`](Self::stream_call)), out of line: `first` is the result of the call
    /// made with the context bound (`None`: it was not bound, no call made). Binds the
    /// context and calls as [`driver_call`](Self::driver_call) does (again only if the
    /// first call found another context current), then checks and counts.
    #[cold]
    #[inline(never)]
    fn counted_call_slow(
        &self,
        first: Option<sys::CUresult>,
        name: &'static str,
        count: Count,
        call: &dyn Fn() -> sys::CUresult,
    ) -> Result<()> {
        let result = match first {
            Some(result) => self.retried(result, call)?,
            None => self.driver_call(call)?,
        };
        check(name, result)?;
        self.counters.bump(count);
        Ok(())
    }

    /// Runs a driver call with the context bound; if someone else's context was current
    /// (`CUDA_ERROR_INVALID_CONTEXT`), binds ours and retries once.
    #[inline]
    fn driver_call(&self, call: impl Fn() -> sys::CUresult) -> Result<sys::CUresult> {
        self.bind()?;
        self.retried(call(), call)
    }

    /// `result` of a call made with this context bound, or, if someone else's context was
    /// current (`CUDA_ERROR_INVALID_CONTEXT`), the call made again with ours bound.
    #[inline]
    fn retried(
        &self,
        result: sys::CUresult,
        call: impl Fn() -> sys::CUresult,
    ) -> Result<sys::CUresult> {
        if result == sys::CUresult::CUDA_ERROR_INVALID_CONTEXT {
            self.make_current()?;
            return Ok(call());
        }
        Ok(result)
    }

    fn live(&self) -> ShardedLockReadGuard<'_, Live> {
        self.live.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stream this device may use: one of its own, or a caller's adopted one (looked up
    /// only when it is not its own, so the runtime's streams pay one set lookup).
    fn stream(&self, live: &Live, stream: StreamHandle) -> Result<sys::CUstream> {
        if live.streams.contains(&stream.raw()) || self.is_adopted(stream.raw()) {
            Ok(stream_ptr(stream.raw()))
        } else {
            Err(Error::invalid_argument(format!(
                "{stream:?} is not a live stream of this CUDA device, nor a caller stream adopted for a hand-off"
            )))
        }
    }

    #[inline]
    fn is_adopted(&self, raw: u64) -> bool {
        self.adopted.contains(raw)
    }

    fn event(live: &Live, event: EventHandle) -> Result<sys::CUevent> {
        if live.events.contains(&event.raw()) {
            Ok(event_ptr(event.raw()))
        } else {
            Err(Error::invalid_argument(format!(
                "{event:?} is not a live event of this CUDA device"
            )))
        }
    }

    /// Runs a stream-ordered call on a checked stream, the registry read lock held.
    fn on_stream(
        &self,
        name: &'static str,
        stream: StreamHandle,
        call: impl Fn(sys::CUstream) -> sys::CUresult,
    ) -> Result<()> {
        let live = self.live();
        let stream = self.stream(&live, stream)?;
        check(name, self.driver_call(|| call(stream))?)
    }
}

impl DeviceBackend for CudaDevice {
    fn backend_kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn raw_context(&self) -> Option<u64> {
        Some(CudaDevice::raw_context(self))
    }

    fn bind_to_thread(&self) -> Result<()> {
        self.make_current()
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        self.make_current()?;
        let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(|e| driver_error("cuStreamCreate", e))?;
        let raw = stream.expose_provenance() as u64;
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .streams
            .insert(raw);
        self.counters.bump(Count::stream_create);
        Ok(StreamHandle::from_raw(raw))
    }

    fn adopt_stream(&self, stream: StreamOrQueue) -> Result<StreamHandle> {
        let raw = match stream {
            StreamOrQueue::Backend(handle) => {
                if self.live().streams.contains(&handle.raw()) {
                    return Ok(handle);
                }
                return Err(Error::invalid_argument(format!(
                    "{handle:?} is not a live stream of this CUDA device: a stream of another device or context, or destroyed"
                )));
            }
            StreamOrQueue::OpenCl(queue) => {
                return Err(Error::invalid_argument(format!(
                    "{queue:?} is an OpenCL command queue; a CUDA device takes a CUDA stream (StreamOrQueue::Cuda)"
                )));
            }
            StreamOrQueue::Cuda(ptr) => ptr.raw(),
        };
        if self.live().streams.contains(&raw) {
            return Ok(StreamHandle::from_raw(raw));
        }
        // CUDA's default streams (null, legacy, per-thread) belong to whichever context is
        // current when they are used: this device binds its own before every call.
        if raw > 2 {
            let context = std::cell::Cell::new(ptr::null_mut());
            // SAFETY: the caller's contract (`CudaStreamPtr::from_raw`): a live stream;
            // the out-pointer is valid for the call.
            let result = self.driver_call(|| unsafe {
                sys::cuStreamGetCtx(stream_ptr(raw), context.as_ptr())
            })?;
            let context: sys::CUcontext = context.get();
            check("cuStreamGetCtx", result).map_err(|e| {
                Error::invalid_argument(format!(
                    "CUstream {raw:#x} is not a live CUDA stream ({})",
                    e.message()
                ))
            })?;
            if context != self.context.0 {
                return Err(Error::invalid_argument(format!(
                    "CUstream {raw:#x} belongs to CUDA context {context:p}, not to this device's context {:p}: create the stream in the device's context (CudaDevice::raw_context), or give the device the caller's context (CudaDevice::from_context)",
                    self.context.0
                )));
            }
        }
        self.adopted.adopt(raw);
        Ok(StreamHandle::from_raw(raw))
    }

    fn release_adopted_stream(&self, stream: StreamHandle) {
        let _ = self.adopted.release(stream.raw());
    }

    fn is_backend_stream(&self, stream: StreamHandle) -> bool {
        self.live().streams.contains(&stream.raw())
    }

    fn check_stream(&self, stream: StreamHandle) -> Result<()> {
        self.stream(&self.live(), stream).map(|_| ())
    }

    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        let raw = self.stream(&live, stream)?;
        live.streams.remove(&stream.raw());
        self.make_current()?;
        // SAFETY: `raw` was created by this device and was live until removed just above;
        // the write lock keeps any other call from using it concurrently. Pending work
        // still completes (the driver releases the stream afterwards).
        check("cuStreamDestroy", unsafe { sys::cuStreamDestroy_v2(raw) })?;
        self.counters.bump(Count::stream_destroy);
        Ok(())
    }

    fn create_event(&self) -> Result<EventHandle> {
        self.make_current()?;
        let event = cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| driver_error("cuEventCreate", e))?;
        let raw = event.expose_provenance() as u64;
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .events
            .insert(raw);
        self.counters.bump(Count::event_create);
        Ok(EventHandle::from_raw(raw))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        let raw = Self::event(&live, event)?;
        live.events.remove(&event.raw());
        self.make_current()?;
        // SAFETY: `raw` was created by this device and was live until removed just above;
        // the write lock excludes concurrent use. Streams already waiting are unaffected.
        check("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(raw) })?;
        self.counters.bump(Count::event_destroy);
        Ok(())
    }

    fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()> {
        let live = self.live();
        Self::event(&live, event)?;
        self.stream(&live, stream)?;
        // SAFETY: both handles are live (checked under the read lock, held until return).
        unsafe { self.record_event_unchecked(event, stream) }
    }

    // The two calls of a steady-state hand-off (`Tensor::device_array_on` and its array's
    // drop), through `event_call`.
    #[inline]
    unsafe fn record_event_unchecked(
        &self,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract: both handles are live (a stream of this device's
        // context, or an adopted caller stream checked to be in it).
        unsafe { self.event_call(&EventCall::RECORD, event.raw(), stream.raw()) }
    }

    #[inline]
    unsafe fn wait_event_unchecked(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        // SAFETY: as `record_event_unchecked`.
        unsafe { self.event_call(&EventCall::WAIT, event.raw(), stream.raw()) }
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let live = self.live();
        Self::event(&live, event)?;
        self.stream(&live, stream)?;
        // SAFETY: both handles are live (checked under the read lock, held until return).
        unsafe { self.wait_event_unchecked(stream, event) }
    }

    fn query_event(&self, event: EventHandle) -> Result<bool> {
        let live = self.live();
        let event = Self::event(&live, event)?;
        // SAFETY: the event is live (checked under the read lock, held until return).
        let complete = match self.driver_call(|| unsafe { sys::cuEventQuery(event) })? {
            sys::CUresult::CUDA_SUCCESS => true,
            sys::CUresult::CUDA_ERROR_NOT_READY => false,
            other => return Err(driver_error("cuEventQuery", DriverError(other))),
        };
        self.counters.bump(Count::event_query);
        Ok(complete)
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<()> {
        let live = self.live();
        let event = Self::event(&live, event)?;
        // SAFETY: the event is live (checked under the read lock, held until return).
        let result = self.driver_call(|| unsafe { sys::cuEventSynchronize(event) })?;
        check("cuEventSynchronize", result)?;
        self.counters.bump(Count::event_synchronize);
        Ok(())
    }

    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: `on_stream` passes a stream checked live under the held read lock.
        self.on_stream("cuStreamSynchronize", stream, |s| unsafe {
            sys::cuStreamSynchronize(s)
        })?;
        self.counters.bump(Count::stream_synchronize);
        Ok(())
    }

    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(Error::invalid_argument("an allocation of zero bytes"));
        }
        self.make_current()?;
        // SAFETY: plain allocations on the current (our primary) context; the memory is
        // only handed out as an address.
        let raw = unsafe {
            match kind {
                AllocKind::Device => {
                    cu::malloc_sync(bytes).map_err(|e| driver_error("cuMemAlloc", e))?
                }
                AllocKind::Managed => {
                    cu::malloc_managed(bytes, sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL)
                        .map_err(|e| driver_error("cuMemAllocManaged", e))?
                }
                AllocKind::PinnedHost => cu::malloc_host(
                    bytes,
                    sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
                )
                .map_err(|e| driver_error("cuMemHostAlloc", e))?
                .expose_provenance() as u64,
            }
        };
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(raw, (kind, bytes));
        self.counters.bump(Count::alloc);
        Ok(DevicePtr::from_raw(raw))
    }

    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()> {
        let mut allocations = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match allocations.get(&ptr.raw()) {
            None => {
                return Err(Error::invalid_argument(format!(
                    "{ptr:?} is not a live allocation of this CUDA device"
                )));
            }
            Some(&(live_kind, live_bytes)) if live_kind != kind || live_bytes != bytes => {
                return Err(Error::invalid_argument(format!(
                    "{ptr:?} is {live_bytes} bytes of {live_kind:?} memory, not {bytes} bytes of {kind:?}"
                )));
            }
            Some(_) => {}
        }
        self.make_current()?;
        let vmm = self
            .vmm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&ptr.raw());
        // SAFETY: `ptr` is a live allocation of `kind` made by `alloc` or
        // `alloc_exportable` (checked above, under the lock, so no racing free); the
        // caller guarantees no pending work uses it.
        let result = unsafe {
            match vmm {
                Some(v) => ipc::vmm_free(ptr.raw(), v),
                None => free_raw(kind, ptr.raw()),
            }
        };
        allocations.remove(&ptr.raw());
        check("cuMemFree", result)?;
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
        let live = self.live();
        self.stream(&live, stream)?;
        // SAFETY: the stream is live (checked under the read lock, held until return); the
        // caller guarantees the range stays allocated and unaliased until the stream runs
        // the fill.
        unsafe { self.memset_async_unchecked(dst, value, bytes, stream) }
    }

    unsafe fn copy_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let live = self.live();
        self.stream(&live, stream)?;
        // SAFETY: as `memset_async`; both ranges stay allocated until the stream runs the
        // copy.
        unsafe { self.copy_async_unchecked(dst, src, bytes, stream) }
    }

    #[inline]
    unsafe fn memset_async_unchecked(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let s = stream_ptr(stream.raw());
        self.stream_call("cuMemsetD8Async", Count::memset, bytes, || {
            // SAFETY: the caller's contract: the stream is live and the range stays
            // allocated and unaliased until the stream runs the fill.
            unsafe { sys::cuMemsetD8Async(dst.raw(), value, bytes, s) }
        })
    }

    #[inline]
    unsafe fn copy_async_unchecked(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let s = stream_ptr(stream.raw());
        self.stream_call("cuMemcpyAsync", Count::copy, bytes, || {
            // SAFETY: the caller's contract: the stream is live and both ranges stay
            // allocated until the stream runs the copy.
            unsafe { sys::cuMemcpyAsync(dst.raw(), src.raw(), bytes, s) }
        })
    }

    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        if bytes > 0 {
            if dst.is_null() {
                return Err(Error::invalid_argument(
                    "the copy destination host pointer is null",
                ));
            }
            // SAFETY: the stream is live (checked by `on_stream`); the caller guarantees `dst`
            // is writable for `bytes` bytes until the stream runs the copy.
            self.on_stream("cuMemcpyDtoHAsync", stream, |s| unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst.cast(), src.raw(), bytes, s)
            })?;
        } else {
            self.stream(&self.live(), stream)?;
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
        if bytes > 0 {
            if src.is_null() {
                return Err(Error::invalid_argument(
                    "the copy source host pointer is null",
                ));
            }
            // SAFETY: the stream is live (checked by `on_stream`); the caller guarantees `src`
            // is readable for `bytes` bytes until the stream runs the copy.
            self.on_stream("cuMemcpyHtoDAsync", stream, |s| unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst.raw(), src.cast(), bytes, s)
            })?;
        } else {
            self.stream(&self.live(), stream)?;
        }
        self.counters.bump(Count::copy);
        Ok(())
    }

    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()> {
        super::check_delay(duration)?;
        // The duration travels in the argument pointer itself: nothing to allocate or free.
        let nanos = usize::try_from(duration.as_nanos()).unwrap_or(usize::MAX);
        let argument = ptr::without_provenance_mut::<c_void>(nanos);
        // SAFETY: the stream is live (checked by `on_stream`); the host function makes no
        // CUDA call and only reads its argument as an integer.
        self.on_stream("cuLaunchHostFunc", stream, |s| unsafe {
            sys::cuLaunchHostFunc(s, Some(sleep_host_fn), argument)
        })?;
        self.counters.bump(Count::delay);
        Ok(())
    }

    fn counters(&self) -> &DeviceCounters {
        &self.counters
    }

    fn ipc(&self) -> Option<&dyn super::DeviceIpc> {
        Some(self)
    }
}

/// Frees an allocation made by `CudaDevice::alloc`.
///
/// # Safety
/// `raw` must be a live allocation of `kind`, unused by any pending operation.
unsafe fn free_raw(kind: AllocKind, raw: u64) -> sys::CUresult {
    // SAFETY: forwarded from the caller.
    unsafe {
        match kind {
            AllocKind::Device | AllocKind::Managed => sys::cuMemFree_v2(raw),
            AllocKind::PinnedHost => {
                sys::cuMemFreeHost(ptr::with_exposed_provenance_mut(addr_usize(raw)))
            }
        }
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let live = std::mem::take(self.live.get_mut().unwrap_or_else(PoisonError::into_inner));
        let allocations = std::mem::take(
            self.allocations
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let vmm = std::mem::take(self.vmm.get_mut().unwrap_or_else(PoisonError::into_inner));
        let registered = std::mem::take(
            self.registered
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if self.make_current().is_ok() {
            // Teardown errors have no caller to report to; each resource is still released.
            for raw in live.streams {
                // SAFETY: a live stream of this device; nothing else can use it now that the
                // device is being dropped. Synchronizing first keeps its work off freed memory.
                unsafe {
                    let _ = sys::cuStreamSynchronize(stream_ptr(raw));
                    let _ = sys::cuStreamDestroy_v2(stream_ptr(raw));
                }
            }
            for raw in live.events {
                // SAFETY: a live event of this device, unused from now on.
                let _ = unsafe { sys::cuEventDestroy_v2(event_ptr(raw)) };
            }
            for (raw, (kind, _)) in allocations {
                if vmm.contains_key(&raw) {
                    continue;
                }
                // SAFETY: a live allocation of this device; every stream has synchronized.
                let _ = unsafe { free_raw(kind, raw) };
            }
            for (raw, v) in vmm {
                // SAFETY: a live mapping of this device; every stream has synchronized.
                let _ = unsafe { ipc::vmm_free(raw, v) };
            }
            for raw in registered {
                // SAFETY: a range registered by this device, unused from now on.
                let _ = unsafe {
                    sys::cuMemHostUnregister(ptr::with_exposed_provenance_mut(addr_usize(raw)))
                };
            }
        }
        if self.primary {
            // SAFETY: `device` is the device whose primary context `open` retained once.
            let _ = unsafe { cu::primary_ctx::release(self.device) };
        }
        let _ = BOUND_INSTANCE.try_with(|bound| {
            if bound.get() == self.instance {
                bound.set(0);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_cuda_is_unavailable_not_a_panic() {
        if driver_present() {
            // A GPU machine: opening may succeed; it must not panic either way, and a bad
            // ordinal is DeviceUnavailable.
            let count = device_count().expect("a present driver initializes");
            let error = CudaDevice::open(count)
                .err()
                .expect("ordinal past the last device");
            assert_eq!(error.code(), ErrorCode::DeviceUnavailable, "{error}");
            return;
        }
        let error = device_count().unwrap_err();
        assert_eq!(error.code(), ErrorCode::DeviceUnavailable);
        assert!(error.message().contains("libcuda"), "{error}");
        for ordinal in [0, 1, 7] {
            let error = CudaDevice::open(ordinal).err().expect("no driver");
            assert_eq!(error.code(), ErrorCode::DeviceUnavailable, "{error}");
        }
    }

    #[test]
    fn driver_errors_map_to_holo_codes() {
        let code = |r| driver_error("cuTest", DriverError(r)).code();
        assert_eq!(
            code(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
            ErrorCode::ResourceExhausted
        );
        assert_eq!(
            code(sys::CUresult::CUDA_ERROR_NO_DEVICE),
            ErrorCode::DeviceUnavailable
        );
        assert_eq!(
            code(sys::CUresult::CUDA_ERROR_INVALID_HANDLE),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            code(sys::CUresult::CUDA_ERROR_NOT_SUPPORTED),
            ErrorCode::NotSupported
        );
        assert_eq!(
            code(sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
            ErrorCode::Internal
        );
        let error = driver_error(
            "cuMemAlloc",
            DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        );
        assert_eq!(
            error.message(),
            "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY"
        );
    }

    #[test]
    fn address_hasher_spreads_aligned_addresses() {
        let hash = |value: u64| {
            let mut hasher = AddressHasher::default();
            hasher.write_u64(value);
            hasher.finish()
        };
        let low_bits: HashSet<u64> = (0..64_u64)
            .map(|i| hash(0x7f00_0000_0000 + i * 256) & 63)
            .collect();
        assert!(
            low_bits.len() > 32,
            "aligned addresses collide: {}",
            low_bits.len()
        );
    }
}
