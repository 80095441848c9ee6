//! [`FaultInjecting`]: a backend that forwards every call to another one and fails the
//! calls it is told to — the N-th allocation, the N-th event record, every query from the
//! N-th on — with an error code of the caller's choosing, and counts the streams, events
//! and allocations still alive through it. For tests of what a device failure does to a
//! session: startup must fail closed with everything made so far freed, a failure on the
//! hot path must stop the session with that error, and nothing may leak.
//!
//! ```
//! use holo_runtime::device::{CallKind, DeviceBackend, FaultInjecting, SoftwareDevice};
//! use holo_runtime::ErrorCode;
//!
//! let device = FaultInjecting::new(SoftwareDevice::new());
//! device.fail_nth(CallKind::CreateEvent, 2, ErrorCode::DeviceUnavailable);
//! let first = device.create_event()?;
//! assert_eq!(device.create_event().unwrap_err().code(), ErrorCode::DeviceUnavailable);
//! assert_eq!(device.injected(CallKind::CreateEvent), 1);
//! device.destroy_event(first)?;
//! assert_eq!(device.live().events, 0);
//! # Ok::<(), holo_runtime::Error>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use super::{
    AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, MemoryObject,
    OpenClMemPtr, StreamHandle, StreamOrQueue,
};
use crate::{Error, ErrorCode, Result};

/// A kind of device call [`FaultInjecting`] counts and can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallKind {
    /// `alloc` and `alloc_memory_object`.
    Alloc,
    /// `free` and `free_memory_object`.
    Free,
    /// `create_stream`.
    CreateStream,
    /// `destroy_stream`.
    DestroyStream,
    /// `create_event`.
    CreateEvent,
    /// `destroy_event`.
    DestroyEvent,
    /// `record_event` (and its unchecked form).
    RecordEvent,
    /// `wait_event` (and its unchecked form).
    WaitEvent,
    /// `query_event`.
    QueryEvent,
    /// `synchronize_event`.
    SynchronizeEvent,
    /// `synchronize_stream`.
    SynchronizeStream,
    /// `memset_async`.
    Memset,
    /// `copy_async`, `copy_to_host_async` and `copy_from_host_async`.
    Copy,
    /// `enqueue_delay`.
    Delay,
}

impl CallKind {
    /// Every kind, in declaration order.
    pub const ALL: [CallKind; 14] = [
        CallKind::Alloc,
        CallKind::Free,
        CallKind::CreateStream,
        CallKind::DestroyStream,
        CallKind::CreateEvent,
        CallKind::DestroyEvent,
        CallKind::RecordEvent,
        CallKind::WaitEvent,
        CallKind::QueryEvent,
        CallKind::SynchronizeEvent,
        CallKind::SynchronizeStream,
        CallKind::Memset,
        CallKind::Copy,
        CallKind::Delay,
    ];

    /// The stable name (`alloc`, `record_event`, …).
    pub const fn name(self) -> &'static str {
        match self {
            CallKind::Alloc => "alloc",
            CallKind::Free => "free",
            CallKind::CreateStream => "create_stream",
            CallKind::DestroyStream => "destroy_stream",
            CallKind::CreateEvent => "create_event",
            CallKind::DestroyEvent => "destroy_event",
            CallKind::RecordEvent => "record_event",
            CallKind::WaitEvent => "wait_event",
            CallKind::QueryEvent => "query_event",
            CallKind::SynchronizeEvent => "synchronize_event",
            CallKind::SynchronizeStream => "synchronize_stream",
            CallKind::Memset => "memset_async",
            CallKind::Copy => "copy_async",
            CallKind::Delay => "enqueue_delay",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The streams, events and allocations made through a [`FaultInjecting`] backend and not
/// destroyed or freed yet (adopted caller streams are not counted: the caller owns them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LiveObjects {
    /// Streams created and not destroyed.
    pub streams: i64,
    /// Events created and not destroyed.
    pub events: i64,
    /// Allocations made and not freed.
    pub allocations: i64,
}

impl LiveObjects {
    /// Whether nothing is alive.
    pub const fn is_empty(&self) -> bool {
        self.streams == 0 && self.events == 0 && self.allocations == 0
    }
}

/// Which call of a kind is slow ([`FaultInjecting::slow_nth`]).
#[derive(Default)]
struct Slow {
    /// The call number (1-based) that sleeps; 0: none.
    at: AtomicU64,
    /// How long it sleeps, in nanoseconds.
    nanos: AtomicU64,
}

/// When a kind's calls fail.
#[derive(Default)]
struct Rule {
    /// The call number (1-based, since the backend was made) from which calls fail; 0:
    /// none.
    from: AtomicU64,
    /// The last failing call number; `u64::MAX`: every call from `from` on.
    until: AtomicU64,
    /// The index in [`ErrorCode::ALL`] of the code the failures carry.
    code: AtomicU8,
}

/// Forwards every call to the backend it wraps and fails the calls its rules name
/// ([`fail_nth`](Self::fail_nth), [`fail_from`](Self::fail_from)) with an error of the
/// given code, without making them. Handles and counters are the wrapped backend's; pass
/// it to [`SessionOptions::on_device`](crate::SessionOptions::on_device) like any backend.
///
/// Calls are numbered per [`CallKind`] from 1, counting every call made through the
/// wrapper (failed ones too). [`live`](Self::live) counts the streams, events and
/// allocations made through it that are still alive.
pub struct FaultInjecting {
    inner: Arc<dyn DeviceBackend>,
    calls: [AtomicU64; 14],
    injected: [AtomicU64; 14],
    rules: [Rule; 14],
    slow: [Slow; 14],
    streams: AtomicI64,
    events: AtomicI64,
    allocations: AtomicI64,
}

impl FaultInjecting {
    /// Wraps `inner`, failing nothing yet.
    pub fn new(inner: Arc<dyn DeviceBackend>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            calls: Default::default(),
            injected: Default::default(),
            rules: Default::default(),
            slow: Default::default(),
            streams: AtomicI64::new(0),
            events: AtomicI64::new(0),
            allocations: AtomicI64::new(0),
        })
    }

    /// The `n`-th call of `kind` from now on (`n` ≥ 1) fails with `code`, once. Replaces
    /// an earlier rule for `kind`.
    pub fn fail_nth(&self, kind: CallKind, n: u64, code: ErrorCode) {
        let at = self.calls(kind) + n.max(1);
        self.set_rule(kind, at, at, code);
    }

    /// Every call of `kind` from the `n`-th from now on (`n` ≥ 1) fails with `code` (a
    /// device that is lost). Replaces an earlier rule for `kind`.
    pub fn fail_from(&self, kind: CallKind, n: u64, code: ErrorCode) {
        let at = self.calls(kind) + n.max(1);
        self.set_rule(kind, at, u64::MAX, code);
    }

    /// The `n`-th call of `kind` from now on (`n` ≥ 1) is slow: it is numbered (so
    /// [`calls`](Self::calls) counts it at once), then the calling thread sleeps for `by`
    /// before the call is made — a driver call that stalls, which lets a test act while
    /// another thread is inside the call. Replaces an earlier slow call for `kind`.
    pub fn slow_nth(&self, kind: CallKind, n: u64, by: Duration) {
        let slow = &self.slow[kind.index()];
        slow.nanos.store(
            u64::try_from(by.as_nanos()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
        slow.at.store(self.calls(kind) + n.max(1), Ordering::SeqCst);
    }

    /// Fails no call of `kind` any more.
    pub fn heal(&self, kind: CallKind) {
        self.rules[kind.index()].from.store(0, Ordering::SeqCst);
    }

    /// The calls of `kind` made through the wrapper so far, failed ones included.
    pub fn calls(&self, kind: CallKind) -> u64 {
        self.calls[kind.index()].load(Ordering::SeqCst)
    }

    /// The calls of `kind` the wrapper failed.
    pub fn injected(&self, kind: CallKind) -> u64 {
        self.injected[kind.index()].load(Ordering::SeqCst)
    }

    /// The streams, events and allocations made through the wrapper and still alive.
    pub fn live(&self) -> LiveObjects {
        LiveObjects {
            streams: self.streams.load(Ordering::SeqCst),
            events: self.events.load(Ordering::SeqCst),
            allocations: self.allocations.load(Ordering::SeqCst),
        }
    }

    fn set_rule(&self, kind: CallKind, from: u64, until: u64, code: ErrorCode) {
        let rule = &self.rules[kind.index()];
        let index = ErrorCode::ALL.iter().position(|&c| c == code).unwrap_or(0);
        #[allow(
            clippy::cast_possible_truncation,
            reason = "ErrorCode::ALL has 12 codes"
        )]
        rule.code.store(index as u8, Ordering::SeqCst);
        rule.until.store(until, Ordering::SeqCst);
        rule.from.store(from, Ordering::SeqCst);
    }

    /// Numbers the call and says whether it fails.
    fn enter(&self, kind: CallKind) -> Result<()> {
        let i = kind.index();
        let n = self.calls[i].fetch_add(1, Ordering::SeqCst) + 1;
        let slow = &self.slow[i];
        if slow.at.load(Ordering::SeqCst) == n {
            std::thread::sleep(Duration::from_nanos(slow.nanos.load(Ordering::SeqCst)));
        }
        let rule = &self.rules[i];
        let from = rule.from.load(Ordering::SeqCst);
        if from == 0 || n < from || n > rule.until.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.injected[i].fetch_add(1, Ordering::SeqCst);
        let code = ErrorCode::ALL
            .get(usize::from(rule.code.load(Ordering::SeqCst)))
            .copied()
            .unwrap_or(ErrorCode::Internal);
        Err(Error::new(
            code,
            format!("injected fault: {kind} call {n} failed"),
        ))
    }

    /// Runs `call` unless the rules fail it; on success adds `delta` to `live`.
    fn forward<T>(
        &self,
        kind: CallKind,
        live: Option<(&AtomicI64, i64)>,
        call: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        self.enter(kind)?;
        let result = call();
        if let (Ok(_), Some((count, delta))) = (&result, live) {
            count.fetch_add(delta, Ordering::SeqCst);
        }
        result
    }
}

impl fmt::Debug for FaultInjecting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultInjecting")
            .field("inner", &self.inner.backend_kind())
            .field("live", &self.live())
            .finish_non_exhaustive()
    }
}

impl DeviceBackend for FaultInjecting {
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
        self.forward(CallKind::CreateStream, Some((&self.streams, 1)), || {
            self.inner.create_stream()
        })
    }

    fn adopt_stream(&self, stream: StreamOrQueue) -> Result<StreamHandle> {
        self.inner.adopt_stream(stream)
    }

    fn is_backend_stream(&self, stream: StreamHandle) -> bool {
        self.inner.is_backend_stream(stream)
    }

    fn check_stream(&self, stream: StreamHandle) -> Result<()> {
        self.inner.check_stream(stream)
    }

    fn release_adopted_stream(&self, stream: StreamHandle) {
        self.inner.release_adopted_stream(stream);
    }

    fn destroy_stream(&self, stream: StreamHandle) -> Result<()> {
        self.forward(CallKind::DestroyStream, Some((&self.streams, -1)), || {
            self.inner.destroy_stream(stream)
        })
    }

    fn create_event(&self) -> Result<EventHandle> {
        self.forward(CallKind::CreateEvent, Some((&self.events, 1)), || {
            self.inner.create_event()
        })
    }

    fn destroy_event(&self, event: EventHandle) -> Result<()> {
        self.forward(CallKind::DestroyEvent, Some((&self.events, -1)), || {
            self.inner.destroy_event(event)
        })
    }

    fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()> {
        self.forward(CallKind::RecordEvent, None, || {
            self.inner.record_event(event, stream)
        })
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        self.forward(CallKind::WaitEvent, None, || {
            self.inner.wait_event(stream, event)
        })
    }

    fn query_event(&self, event: EventHandle) -> Result<bool> {
        self.forward(CallKind::QueryEvent, None, || self.inner.query_event(event))
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<()> {
        self.forward(CallKind::SynchronizeEvent, None, || {
            self.inner.synchronize_event(event)
        })
    }

    fn synchronize_stream(&self, stream: StreamHandle) -> Result<()> {
        self.forward(CallKind::SynchronizeStream, None, || {
            self.inner.synchronize_stream(stream)
        })
    }

    fn alloc(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        self.forward(CallKind::Alloc, Some((&self.allocations, 1)), || {
            self.inner.alloc(kind, bytes)
        })
    }

    fn unified_addressing(&self) -> bool {
        self.inner.unified_addressing()
    }

    fn alloc_memory_object(&self, kind: AllocKind, bytes: usize) -> Result<MemoryObject> {
        self.forward(CallKind::Alloc, Some((&self.allocations, 1)), || {
            self.inner.alloc_memory_object(kind, bytes)
        })
    }

    fn adopt_memory_object(&self, memory: OpenClMemPtr) -> Result<(MemoryObject, usize)> {
        self.inner.adopt_memory_object(memory)
    }

    unsafe fn release_adopted_memory_object(&self, memory: MemoryObject) -> Result<()> {
        // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
        unsafe { self.inner.release_adopted_memory_object(memory) }
    }

    unsafe fn free_memory_object(
        &self,
        kind: AllocKind,
        memory: MemoryObject,
        bytes: usize,
    ) -> Result<()> {
        self.forward(CallKind::Free, Some((&self.allocations, -1)), || {
            // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
            unsafe { self.inner.free_memory_object(kind, memory, bytes) }
        })
    }

    unsafe fn free(&self, kind: AllocKind, ptr: DevicePtr, bytes: usize) -> Result<()> {
        self.forward(CallKind::Free, Some((&self.allocations, -1)), || {
            // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
            unsafe { self.inner.free(kind, ptr, bytes) }
        })
    }

    unsafe fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.forward(CallKind::Memset, None, || {
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
        self.forward(CallKind::Copy, None, || {
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
        self.forward(CallKind::Copy, None, || {
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
        self.forward(CallKind::Copy, None, || {
            // SAFETY: forwarded unchanged; the caller's guarantees are the wrapped call's.
            unsafe { self.inner.copy_from_host_async(dst, src, bytes, stream) }
        })
    }

    fn enqueue_delay(&self, stream: StreamHandle, duration: Duration) -> Result<()> {
        self.forward(CallKind::Delay, None, || {
            self.inner.enqueue_delay(stream, duration)
        })
    }

    fn counters(&self) -> &DeviceCounters {
        self.inner.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::SoftwareDevice;

    #[test]
    fn the_nth_call_fails_once_and_from_fails_every_later_one() {
        let device = FaultInjecting::new(SoftwareDevice::new());
        let stream = device.create_stream().unwrap();
        let event = device.create_event().unwrap();
        device.fail_nth(CallKind::RecordEvent, 2, ErrorCode::Internal);
        assert!(device.record_event(event, stream).is_ok());
        assert_eq!(
            device.record_event(event, stream).unwrap_err().code(),
            ErrorCode::Internal
        );
        assert!(device.record_event(event, stream).is_ok());
        device.fail_from(CallKind::QueryEvent, 1, ErrorCode::DeviceUnavailable);
        for _ in 0..3 {
            assert_eq!(
                device.query_event(event).unwrap_err().code(),
                ErrorCode::DeviceUnavailable
            );
        }
        device.heal(CallKind::QueryEvent);
        device.synchronize_event(event).unwrap();
        assert!(device.query_event(event).unwrap());
        assert_eq!(
            (
                device.injected(CallKind::RecordEvent),
                device.calls(CallKind::RecordEvent)
            ),
            (1, 3)
        );
        assert_eq!(device.injected(CallKind::QueryEvent), 3);
        device.destroy_event(event).unwrap();
        device.destroy_stream(stream).unwrap();
        assert!(device.live().is_empty());
    }

    #[test]
    fn a_failed_creation_is_not_alive_and_a_failed_destruction_still_is() {
        let device = FaultInjecting::new(SoftwareDevice::new());
        device.fail_nth(CallKind::Alloc, 1, ErrorCode::ResourceExhausted);
        assert_eq!(
            device.alloc(AllocKind::Device, 64).unwrap_err().code(),
            ErrorCode::ResourceExhausted
        );
        assert_eq!(device.live().allocations, 0);
        let ptr = device.alloc(AllocKind::Device, 64).unwrap();
        device.fail_nth(CallKind::Free, 1, ErrorCode::Internal);
        // SAFETY: a live 64-byte allocation, unused.
        assert!(unsafe { device.free(AllocKind::Device, ptr, 64) }.is_err());
        assert_eq!(device.live().allocations, 1);
        // SAFETY: as above; the failed free did not free it.
        unsafe { device.free(AllocKind::Device, ptr, 64) }.unwrap();
        assert!(device.live().is_empty());
    }
}
