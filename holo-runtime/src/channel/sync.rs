//! The channel layer's synchronization primitives, in one place: `std`'s and crossbeam's
//! in a normal build — re-exports and type aliases of exactly the types the code used
//! before, so the hot path is unchanged — or loom's under `--cfg holo_loom`, where the
//! loom models (RELIABILITY.md, "loom models of the lock-free core") explore every
//! interleaving of the free list, the pool's parked counts and release marks, the edge
//! queues and the retirement hand-off.
//!
//! Besides the atomics, the shim carries:
//! - `ArrayQueue`: crossbeam's bounded MPMC queue, or under loom a locked deque (its own
//!   correctness is crossbeam's, checked by crossbeam's loom suite; the models check the
//!   protocols around it);
//! - `SlotCell`: a cell only one thread touches at a time (the free list owner's stack);
//! - `TOKEN`: the thread-local whose address identifies a thread;
//! - `spin_loop`: a spin-wait hint (loom's yields to the other threads);
//! - `Mutex` and `thread`: what an edge's endpoint parks and wakes threads with;
//! - [`sc_handshake`]: nothing in a normal build; a `SeqCst` fence under loom (see there).

#[cfg(not(holo_loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(holo_loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(not(holo_loom))]
pub(crate) use crossbeam_queue::ArrayQueue;
#[cfg(not(holo_loom))]
pub(crate) use std::sync::Mutex;

/// Threads as a queue's endpoint parks and wakes them.
#[cfg(not(holo_loom))]
pub(crate) mod thread {
    pub(crate) use std::thread::{Thread, current, park, park_timeout};
}

#[cfg(holo_loom)]
pub(crate) use loom::sync::Mutex;

/// Threads as a queue's endpoint parks and wakes them: loom's. loom has no
/// `park_timeout`; it is modelled as a timeout that expires at once (it may return
/// before an unpark, as the real one may: its callers check again).
#[cfg(holo_loom)]
pub(crate) mod thread {
    pub(crate) use loom::thread::{Thread, current, park};

    pub(crate) fn park_timeout(_: std::time::Duration) {
        loom::thread::yield_now();
    }
}

#[cfg(holo_loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(holo_loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// Marks the middle of a store-buffering handshake made of `SeqCst` accesses (a thread
/// announces itself with a `SeqCst` read-modify-write or store, then checks the other
/// side's flag with a `SeqCst` load; `Retirer::enter` against `close`, `Pool::park`
/// against `Pool::close`). In a normal build it is nothing: the `SeqCst` accesses
/// themselves forbid both sides missing each other. loom models `SeqCst` accesses as
/// acquire/release only (its README: "`SeqCst` accesses ... are treated as `AcqRel`"; a
/// `SeqCst` fence is modelled exactly), so without this every such handshake is a false
/// positive under loom; with it loom checks the ordering the real accesses give.
#[cfg(not(holo_loom))]
#[allow(
    clippy::inline_always,
    reason = "an empty function: the hot path must not change"
)]
#[inline(always)]
pub(crate) fn sc_handshake() {}

/// See the normal build's `sc_handshake`: under loom, the `SeqCst` fence that stands for
/// the `SeqCst` accesses around it.
#[cfg(holo_loom)]
pub(crate) fn sc_handshake() {
    fence(Ordering::SeqCst);
}

/// One entry of the free list owner's private stack.
#[cfg(not(holo_loom))]
pub(crate) struct SlotCell(std::cell::UnsafeCell<u32>);

#[cfg(not(holo_loom))]
impl SlotCell {
    pub(crate) const fn new(v: u32) -> Self {
        Self(std::cell::UnsafeCell::new(v))
    }

    /// # Safety
    /// Only the free list's owner thread calls it (no concurrent write).
    #[inline]
    pub(crate) unsafe fn get(&self) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { *self.0.get() }
    }

    /// # Safety
    /// Only the free list's owner thread calls it (no concurrent access).
    #[inline]
    pub(crate) unsafe fn set(&self, v: u32) {
        // SAFETY: the caller's contract.
        unsafe { *self.0.get() = v }
    }
}

#[cfg(not(holo_loom))]
std::thread_local! {
    /// Its address identifies the current thread (distinct for every live thread).
    pub(crate) static TOKEN: u8 = const { 0 };
}

/// A model of crossbeam's `ArrayQueue` (bounded, any thread pushes and pops): a locked
/// deque. Its own correctness is crossbeam's (checked by crossbeam's loom suite); the
/// models check the protocols around it. (The lock orders more than crossbeam does: every
/// operation after every earlier one, where crossbeam orders a pop after the push of the
/// entry it takes.)
#[cfg(holo_loom)]
pub(crate) struct ArrayQueue<T> {
    items: loom::sync::Mutex<std::collections::VecDeque<T>>,
    cap: usize,
}

#[cfg(holo_loom)]
impl<T> ArrayQueue<T> {
    pub(crate) fn new(cap: usize) -> Self {
        assert!(cap > 0, "capacity must be non-zero");
        Self {
            items: loom::sync::Mutex::new(std::collections::VecDeque::with_capacity(cap)),
            cap,
        }
    }

    fn items(&self) -> loom::sync::MutexGuard<'_, std::collections::VecDeque<T>> {
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn push(&self, v: T) -> Result<(), T> {
        let mut items = self.items();
        if items.len() >= self.cap {
            return Err(v);
        }
        items.push_back(v);
        Ok(())
    }

    /// Pushes, evicting and returning the oldest entry when full.
    pub(crate) fn force_push(&self, v: T) -> Option<T> {
        let mut items = self.items();
        let old = if items.len() >= self.cap {
            items.pop_front()
        } else {
            None
        };
        items.push_back(v);
        old
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.items().pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.items().len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items().is_empty()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.items().len() >= self.cap
    }
}

/// One entry of the owner's private stack; loom checks that no two threads touch it
/// without ordering.
#[cfg(holo_loom)]
pub(crate) struct SlotCell(loom::cell::UnsafeCell<u32>);

#[cfg(holo_loom)]
impl SlotCell {
    pub(crate) fn new(v: u32) -> Self {
        Self(loom::cell::UnsafeCell::new(v))
    }

    pub(crate) unsafe fn get(&self) -> u32 {
        // SAFETY: the caller's contract (loom checks it).
        self.0.with(|p| unsafe { *p })
    }

    pub(crate) unsafe fn set(&self, v: u32) {
        // SAFETY: the caller's contract (loom checks it).
        self.0.with_mut(|p| unsafe { *p = v });
    }
}

#[cfg(holo_loom)]
loom::thread_local! {
    pub(crate) static TOKEN: u8 = 0;
}

/// What the loom models share: the runner that counts interleavings, and a fake device
/// backend that checks the release-event contract.
#[cfg(all(test, holo_loom))]
pub(crate) mod model {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use crate::device::{
        AllocKind, BackendKind, DeviceBackend, DeviceCounters, DevicePtr, EventHandle, StreamHandle,
    };
    use crate::{Error, ErrorCode, Result};

    /// Runs `f` under loom with at most `preemptions` preemptions per interleaving
    /// (`None`: unbounded, unless `LOOM_MAX_PREEMPTIONS` says otherwise — every model is
    /// small enough to explore exhaustively today), prints and returns how many
    /// interleavings it explored.
    pub(crate) fn run(
        name: &str,
        preemptions: Option<usize>,
        f: impl Fn() + Sync + Send + 'static,
    ) -> usize {
        // Counted per model (a counter shared by models running in parallel test threads
        // would count the others' interleavings too).
        let runs = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&runs);
        // `Builder::new` reads loom's environment (`LOOM_MAX_PREEMPTIONS`, ...): a model
        // without a bound of its own keeps it.
        let mut builder = loom::model::Builder::new();
        if preemptions.is_some() {
            builder.preemption_bound = preemptions;
        }
        builder.check(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            f();
        });
        let explored = runs.load(Ordering::Relaxed);
        let bound = builder_bound(preemptions);
        eprintln!(
            "loom model {name}: {explored} interleavings explored (preemption bound {bound})"
        );
        explored
    }

    /// A point where loom may switch threads, ordering nothing: each call is a relaxed
    /// read-modify-write of one loom atomic, so every two calls on different threads are
    /// conflicting accesses and loom explores both orders of them — and of what the
    /// threads do between them. A model needs it where its threads' accesses would
    /// otherwise hide from loom's exploration: loom compares an access only with the
    /// last one to the same atomic, so a thread that loads an atomic and then stores it
    /// hides another thread's earlier load of it (a store after two loads on two threads
    /// would never be moved before the other thread's load).
    #[derive(Default)]
    pub(crate) struct Interleave(loom::sync::atomic::AtomicUsize);

    impl Interleave {
        pub(crate) fn point(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn builder_bound(preemptions: Option<usize>) -> String {
        preemptions
            .or_else(|| std::env::var("LOOM_MAX_PREEMPTIONS").ok()?.parse().ok())
            .map_or_else(|| "unbounded".to_owned(), |n| n.to_string())
    }

    #[derive(Default)]
    struct Ledger {
        next: u64,
        /// Work enqueued on each stream so far (a model's consumer says so: `work`).
        work: HashMap<u64, u64>,
        /// Each event's latest recording: the stream and the work it covers.
        recorded: HashMap<u64, (u64, u64)>,
        /// Streams the model's teardown destroyed.
        destroyed: Vec<u64>,
    }

    /// A device backend for the models: streams, events and memory are numbers; it keeps
    /// a ledger of the work each stream has and what each event recording covers, and
    /// checks the contract the channel layer relies on:
    /// - an event found complete ([`query_event`](DeviceBackend::query_event), the
    ///   retirement worker's poll) covers all the work of the stream it was recorded on —
    ///   a slot is returned only after every registered stream passed its work on it;
    /// - nothing is recorded on a stream after the teardown destroyed it.
    ///
    /// Its ledger is behind a plain mutex, not a loom one: the device orders nothing for
    /// the host threads (every ordering the channel layer needs comes from its own
    /// atomics), and the checks see the interleaving's actual order of calls. Each call
    /// is also an [`Interleave`] point, ordering nothing either, so that loom explores
    /// the calls' orders (a consumer's work before or after another thread's record).
    #[derive(Default)]
    pub(crate) struct FakeDevice {
        ledger: Mutex<Ledger>,
        clock: Interleave,
        counters: DeviceCounters,
    }

    impl FakeDevice {
        fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
            self.clock.point();
            self.ledger
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        fn fresh(&self) -> u64 {
            let mut l = self.ledger();
            l.next += 1;
            l.next
        }

        /// A consumer enqueues work on `stream` (that reads the slot).
        pub(crate) fn work(&self, stream: StreamHandle) {
            *self.ledger().work.entry(stream.raw()).or_default() += 1;
        }

        /// The teardown destroys `stream`: recording on it from now on is a bug.
        pub(crate) fn destroy(&self, stream: StreamHandle) {
            self.ledger().destroyed.push(stream.raw());
        }

        /// Every stream's work is covered by an event recorded on it after that work —
        /// none lost — and no recording covers less than its stream's work (an event
        /// re-recorded later only covers more).
        pub(crate) fn assert_every_stream_is_covered(&self) {
            let l = self.ledger();
            for (s, work) in &l.work {
                let covered = l
                    .recorded
                    .values()
                    .filter(|(on, _)| on == s)
                    .map(|(_, c)| *c)
                    .max();
                assert_eq!(
                    covered,
                    Some(*work),
                    "stream {s}'s {work} work items are not all covered by a release event"
                );
            }
        }
    }

    impl DeviceBackend for FakeDevice {
        fn backend_kind(&self) -> BackendKind {
            BackendKind::Software
        }
        fn ordinal(&self) -> u32 {
            0
        }
        fn create_stream(&self) -> Result<StreamHandle> {
            Ok(StreamHandle::from_raw(self.fresh()))
        }
        fn destroy_stream(&self, _: StreamHandle) -> Result<()> {
            Ok(())
        }
        fn create_event(&self) -> Result<EventHandle> {
            Ok(EventHandle::from_raw(self.fresh()))
        }
        fn destroy_event(&self, _: EventHandle) -> Result<()> {
            Ok(())
        }
        fn record_event(&self, event: EventHandle, stream: StreamHandle) -> Result<()> {
            let mut l = self.ledger();
            assert!(
                !l.destroyed.contains(&stream.raw()),
                "a release event recorded on stream {} after the teardown destroyed it",
                stream.raw()
            );
            let work = l.work.get(&stream.raw()).copied().unwrap_or(0);
            l.recorded.insert(event.raw(), (stream.raw(), work));
            Ok(())
        }
        fn wait_event(&self, _: StreamHandle, _: EventHandle) -> Result<()> {
            Ok(())
        }
        fn query_event(&self, event: EventHandle) -> Result<bool> {
            let l = self.ledger();
            if let Some((s, covered)) = l.recorded.get(&event.raw()) {
                let work = l.work.get(s).copied().unwrap_or(0);
                assert_eq!(
                    *covered, work,
                    "a slot's release found complete while stream {s} has work on it its event does not cover"
                );
            }
            Ok(true)
        }
        fn synchronize_event(&self, _: EventHandle) -> Result<()> {
            Ok(())
        }
        fn synchronize_stream(&self, _: StreamHandle) -> Result<()> {
            Ok(())
        }
        fn alloc(&self, _: AllocKind, _: usize) -> Result<DevicePtr> {
            Ok(DevicePtr::from_raw(0x1000_0000 * self.fresh()))
        }
        unsafe fn free(&self, _: AllocKind, _: DevicePtr, _: usize) -> Result<()> {
            Ok(())
        }
        unsafe fn memset_async(
            &self,
            _: DevicePtr,
            _: u8,
            _: usize,
            _: StreamHandle,
        ) -> Result<()> {
            Err(Error::new(ErrorCode::NotSupported, "fake device"))
        }
        unsafe fn copy_async(
            &self,
            _: DevicePtr,
            _: DevicePtr,
            _: usize,
            _: StreamHandle,
        ) -> Result<()> {
            Err(Error::new(ErrorCode::NotSupported, "fake device"))
        }
        unsafe fn copy_to_host_async(
            &self,
            _: *mut u8,
            _: DevicePtr,
            _: usize,
            _: StreamHandle,
        ) -> Result<()> {
            Err(Error::new(ErrorCode::NotSupported, "fake device"))
        }
        unsafe fn copy_from_host_async(
            &self,
            _: DevicePtr,
            _: *const u8,
            _: usize,
            _: StreamHandle,
        ) -> Result<()> {
            Err(Error::new(ErrorCode::NotSupported, "fake device"))
        }
        fn enqueue_delay(&self, _: StreamHandle, _: Duration) -> Result<()> {
            Ok(())
        }
        fn counters(&self) -> &DeviceCounters {
            &self.counters
        }
    }
}
