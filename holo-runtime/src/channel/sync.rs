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

/// What the loom models share: the runner that counts interleavings.
#[cfg(all(test, holo_loom))]
pub(crate) mod model {
    use std::sync::atomic::{AtomicUsize, Ordering};

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

    fn builder_bound(preemptions: Option<usize>) -> String {
        preemptions
            .or_else(|| std::env::var("LOOM_MAX_PREEMPTIONS").ok()?.parse().ok())
            .map_or_else(|| "unbounded".to_owned(), |n| n.to_string())
    }
}
