//! A device whose asynchronous calls do nothing and whose events are always complete
//! (`#[path = "common/null_device.rs"] mod null_device;`): what is left of a path through
//! it is holo's own cost (`device_hop diag-null`, `handoff cold`), for a profiler on a
//! machine without a GPU.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holo_runtime::Result;
use holo_runtime::device::{
    AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, StreamHandle,
    StreamOrQueue,
};

/// A device that does nothing (the module's doc).
#[derive(Default)]
pub(crate) struct NullDevice {
    next: AtomicU64,
    counters: DeviceCounters,
    /// Bytes each event record, stream wait, fill and copy writes first (0: none), in a buffer of
    /// the calling thread's: as a GPU driver's calls evict what the caller touched
    /// before them.
    evict: usize,
}

thread_local! {
    /// The buffer [`NullDevice::evict`] writes through.
    static EVICTION: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `HOLO_BENCH_EVICT_KIB`: the KiB each call of an evicting null device writes first, if
/// set ([`NullDevice::evicting`]).
pub(crate) fn evict_kib_from_env() -> Option<usize> {
    std::env::var("HOLO_BENCH_EVICT_KIB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
}

impl NullDevice {
    /// A null device whose event records, stream waits, fills and copies each write
    /// `bytes` first.
    pub(crate) fn evicting(bytes: usize) -> Self {
        Self {
            evict: bytes,
            ..Self::default()
        }
    }

    fn handle(&self) -> u64 {
        (self.next.fetch_add(1, Ordering::Relaxed) + 1) << 16
    }

    /// Writes one byte of every cache line of `evict` bytes (out of line, so that a
    /// profile can subtract its own cache misses).
    #[inline(never)]
    fn pollute(&self) {
        if self.evict == 0 {
            return;
        }
        EVICTION.with_borrow_mut(|buffer| {
            buffer.resize(self.evict, 0);
            for i in (0..self.evict).step_by(64) {
                buffer[i] = buffer[i].wrapping_add(1);
            }
            std::hint::black_box(&*buffer);
        });
    }
}

impl DeviceBackend for NullDevice {
    fn backend_kind(&self) -> holo_runtime::device::BackendKind {
        BackendKind::Software
    }
    fn ordinal(&self) -> u32 {
        0
    }
    /// A caller's CUDA stream is adopted under its own raw value (whose low 16 bits are
    /// not all zero, unlike every handle `create_stream` makes): the hand-off's steady
    /// path, on a device that does nothing.
    fn adopt_stream(&self, stream: StreamOrQueue) -> Result<StreamHandle> {
        match stream {
            StreamOrQueue::Cuda(ptr) if ptr.raw() & 0xffff != 0 => {
                Ok(StreamHandle::from_raw(ptr.raw()))
            }
            StreamOrQueue::Backend(handle) => Ok(handle),
            other => Err(holo_runtime::Error::invalid_argument(format!(
                "the null device adopts a CUDA stream whose low 16 bits are not zero, not {other:?}"
            ))),
        }
    }
    fn is_backend_stream(&self, stream: StreamHandle) -> bool {
        stream.raw().trailing_zeros() >= 16
    }
    fn create_stream(&self) -> Result<StreamHandle> {
        Ok(StreamHandle::from_raw(self.handle()))
    }
    fn destroy_stream(&self, _: StreamHandle) -> Result<()> {
        Ok(())
    }
    fn create_event(&self) -> Result<EventHandle> {
        Ok(EventHandle::from_raw(self.handle()))
    }
    fn destroy_event(&self, _: EventHandle) -> Result<()> {
        Ok(())
    }
    fn record_event(&self, _: EventHandle, _: StreamHandle) -> Result<()> {
        self.pollute();
        Ok(())
    }
    fn wait_event(&self, _: StreamHandle, _: EventHandle) -> Result<()> {
        self.pollute();
        Ok(())
    }
    fn query_event(&self, _: EventHandle) -> Result<bool> {
        Ok(true)
    }
    fn synchronize_event(&self, _: EventHandle) -> Result<()> {
        Ok(())
    }
    fn synchronize_stream(&self, _: StreamHandle) -> Result<()> {
        Ok(())
    }
    fn alloc(&self, _: AllocKind, bytes: usize) -> Result<DevicePtr> {
        // Never dereferenced: only the null device's own (no-op) calls see it.
        Ok(DevicePtr::from_raw(
            self.next
                .fetch_add(bytes as u64 / 256 + 1, Ordering::Relaxed)
                << 16,
        ))
    }
    unsafe fn free(&self, _: AllocKind, _: DevicePtr, _: usize) -> Result<()> {
        Ok(())
    }
    unsafe fn memset_async(&self, _: DevicePtr, _: u8, _: usize, _: StreamHandle) -> Result<()> {
        self.pollute();
        Ok(())
    }
    unsafe fn copy_async(
        &self,
        _: DevicePtr,
        _: DevicePtr,
        _: usize,
        _: StreamHandle,
    ) -> Result<()> {
        self.pollute();
        Ok(())
    }
    /// Its own (not the trait's default), so that a profile names it as the null
    /// device's: an operator's `ctx.cuda()?.memset_async` comes here.
    unsafe fn memset_async_unchecked(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the null device touches no memory.
        unsafe { self.memset_async(dst, value, bytes, stream) }
    }
    /// As [`memset_async_unchecked`](Self::memset_async_unchecked).
    unsafe fn copy_async_unchecked(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the null device touches no memory.
        unsafe { self.copy_async(dst, src, bytes, stream) }
    }
    unsafe fn copy_to_host_async(
        &self,
        _: *mut u8,
        _: DevicePtr,
        _: usize,
        _: StreamHandle,
    ) -> Result<()> {
        Ok(())
    }
    unsafe fn copy_from_host_async(
        &self,
        _: DevicePtr,
        _: *const u8,
        _: usize,
        _: StreamHandle,
    ) -> Result<()> {
        Ok(())
    }
    fn enqueue_delay(&self, _: StreamHandle, _: Duration) -> Result<()> {
        Ok(())
    }
    fn counters(&self) -> &DeviceCounters {
        &self.counters
    }
}
