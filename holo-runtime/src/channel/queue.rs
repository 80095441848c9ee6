//! Edge queues: one bounded, preallocated queue per flow — the channel layer's queues,
//! used by a session's partitions through [`Endpoint`]s and knowing nothing of sessions.

use std::any::Any;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;

use super::sync::thread::{self, Thread};
use super::sync::{self, ArrayQueue, AtomicBool, AtomicUsize, Mutex, Ordering};
use crate::cold::{self, ColdAllocError};
use crate::graph::QueuePolicy;

/// One end of a queue: the thread that runs it, to wake it when the other end pushes or
/// pops. Padded to its own cache line.
///
/// A partition's end names its thread once ([`register`](Self::register)). A standalone
/// client's end (a topic's subscriber or publisher, which may move between threads) names
/// none: the thread waiting in a client's receive puts itself in `waiter` for the length
/// of the wait ([`park_client`](Self::park_client)), and a push wakes it.
#[derive(Default)]
pub(crate) struct Endpoint {
    thread: OnceLock<Thread>,
    /// A client thread parked in a receive, if any (see `park_client`).
    waiter: Mutex<Option<Thread>>,
    waiting: AtomicBool,
}

impl Endpoint {
    /// The calling thread runs this end from now on.
    pub(crate) fn register(&self) {
        let _ = self.thread.set(thread::current());
    }

    #[inline]
    pub(crate) fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        } else {
            self.wake_client();
        }
    }

    /// Wakes a client thread parked in [`park_client`](Self::park_client). The fence
    /// pairs with the one there: either this sees `waiting`, or the client's check of its
    /// queue sees the entry pushed before this call.
    #[cold]
    #[inline(never)]
    fn wake_client(&self) {
        sync::fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::Relaxed)
            && let Ok(waiter) = self.waiter.lock()
            && let Some(t) = waiter.as_ref()
        {
            t.unpark();
        }
    }

    /// Parks the calling client thread until the other end wakes it or `deadline` passes
    /// (`None`: no deadline), unless `ready()` says there is something to do once the
    /// thread is visible to the other end's wake. May return early (a spurious or stale
    /// wake): the caller checks again.
    pub(crate) fn park_client(
        &self,
        ready: impl Fn() -> bool,
        deadline: Option<std::time::Instant>,
    ) {
        if let Ok(mut waiter) = self.waiter.lock() {
            *waiter = Some(thread::current());
        }
        self.waiting.store(true, Ordering::SeqCst);
        sync::fence(Ordering::SeqCst);
        if !ready() {
            match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if !left.is_zero() {
                        thread::park_timeout(left);
                    }
                }
                None => thread::park(),
            }
        }
        self.waiting.store(false, Ordering::Relaxed);
    }
}

/// Adds one to a counter only one thread writes (an edge has one producer and one
/// consumer): a load and a store, no read-modify-write on the hot path.
#[inline]
pub(crate) fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// What travels with every queued value: its frame id, its capture time and the time
/// the activation that published it ran (nanoseconds since the session's epoch; capture
/// `u64::MAX` when unknown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) capture_ns: u64,
    pub(crate) frame: u64,
    pub(crate) publish_ns: u64,
}

/// One queued entry: the value and its stamp.
pub(crate) struct Sample<T> {
    pub(crate) value: T,
    pub(crate) stamp: Stamp,
}

/// The counters of one edge.
#[derive(Default, Debug)]
pub(crate) struct EdgeCounters {
    /// Entries evicted by `DropOldest`.
    pub(crate) evicted: AtomicU64,
    /// Emits refused with `Backpressured`.
    pub(crate) backpressured: AtomicU64,
    /// Entries delivered.
    pub(crate) delivered: AtomicU64,
    /// Entries pushed (including ones later evicted).
    pub(crate) pushed: AtomicU64,
    /// On an edge between partitions: entries delivered whose consumer's activation has
    /// returned (`delivered` as the consumer's scheduler read it after the activation;
    /// see [`EdgeQueue::in_flight`]).
    pub(crate) finished: AtomicU64,
}

/// The storage of one edge's entries.
#[allow(
    clippy::large_enum_variant,
    reason = "one per edge, inside its Arc: boxing the shared queue would add a pointer chase to every cross-partition push and pop"
)]
enum Ring<T> {
    /// Producer and consumer on different threads: a lock-free MPMC queue.
    Shared(ArrayQueue<Sample<T>>),
    /// Producer and consumer in one partition: never used by two threads at once, so a
    /// ring with plain index updates (no compare-and-swap) suffices.
    Local(LocalRing<T>),
}

impl<T> Ring<T> {
    #[inline]
    fn push(&self, s: Sample<T>) -> Result<(), Sample<T>> {
        match self {
            Ring::Shared(q) => q.push(s),
            Ring::Local(r) => r.push(s),
        }
    }

    #[inline]
    fn force_push(&self, s: Sample<T>) -> Option<Sample<T>> {
        match self {
            Ring::Shared(q) => q.force_push(s),
            Ring::Local(r) => {
                let old = if r.is_full() { r.pop() } else { None };
                // Room was just made: this cannot be refused.
                let _ = r.push(s);
                old
            }
        }
    }

    #[inline]
    fn pop(&self) -> Option<Sample<T>> {
        match self {
            Ring::Shared(q) => q.pop(),
            Ring::Local(r) => r.pop(),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        match self {
            Ring::Shared(q) => q.len(),
            Ring::Local(r) => r.len(),
        }
    }

    #[inline]
    fn is_full(&self) -> bool {
        match self {
            Ring::Shared(q) => q.is_full(),
            Ring::Local(r) => r.is_full(),
        }
    }
}

/// A bounded ring for an edge whose producer and consumer share a partition thread.
///
/// `head` counts pops and `tail` pushes; at most `cap` entries are queued, and entry `i`
/// lives in `buf[i & mask]` (the buffer is `cap` rounded up to a power of two, so the
/// index is a mask, not a division). Pushes, pops
/// and the final drop happen on one thread at a time: the partition thread while it runs,
/// and before it starts (an operator's `start`) or after it is joined (`stop`, teardown),
/// with thread spawn and join ordering those phases. The ports enforce it: an `Input` or
/// `Output` used on any other thread (moved out of its operator) is refused before it
/// touches the ring (`ActivationState::on_operator_thread`). Other threads only read the
/// two counters (`len`, e.g. `RunSession::wait_idle`), which are atomics, stored with
/// release and loaded with acquire.
struct LocalRing<T> {
    /// Values and stamps in separate arrays: a value the size of two registers
    /// (a `Tensor`) is stored and loaded as itself, never through a stack copy of a
    /// three-word `Sample` (whose wide reload stalled store forwarding).
    buf: Box<[UnsafeCell<MaybeUninit<T>>]>,
    stamps: Box<[UnsafeCell<Stamp>]>,
    mask: usize,
    index: RingIndex,
}

/// A same-partition ring's counters: `head` counts pops and `tail` pushes; at most `cap`
/// entries are queued. The scheduler reads them directly through an [`EdgeProbe`].
pub(crate) struct RingIndex {
    cap: usize,
    head: AtomicUsize,
    tail: AtomicUsize,
}

impl RingIndex {
    #[inline]
    fn len(&self) -> usize {
        // Acquire: an observer on another thread (`RunSession::wait_idle`) that sees an
        // entry pushed or popped sees what the pushing or popping activation wrote
        // before it. Read from another thread, `head` may be newer than `tail`: never
        // negative.
        let tail = self.tail.load(Ordering::Acquire);
        tail.saturating_sub(self.head.load(Ordering::Acquire))
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.len() >= self.cap
    }
}

// SAFETY: the slots are touched only by push/pop, which never run on two threads at once
// (see the type's documentation: one partition thread, phases ordered by spawn/join);
// concurrent readers see only the atomic counters. Entries move between threads only as
// `T: Send` values.
unsafe impl<T: Send> Sync for LocalRing<T> {}
// SAFETY: as above; the ring owns its entries, which are `Send`.
unsafe impl<T: Send> Send for LocalRing<T> {}

impl<T> LocalRing<T> {
    fn new(cap: usize) -> Result<Self, ColdAllocError> {
        let size = cap.checked_next_power_of_two().ok_or(ColdAllocError {
            count: cap,
            elem_bytes: size_of::<T>() + size_of::<Stamp>(),
            bytes: None,
        })?;
        Ok(Self {
            buf: cold::uninit_slice(size)?,
            stamps: cold::boxed_slice(size, |_| UnsafeCell::new(Stamp::default()))?,
            mask: size - 1,
            index: RingIndex {
                cap,
                head: AtomicUsize::new(0),
                tail: AtomicUsize::new(0),
            },
        })
    }

    #[inline]
    fn len(&self) -> usize {
        self.index.len()
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.index.is_full()
    }

    #[inline]
    fn push(&self, s: Sample<T>) -> Result<(), Sample<T>> {
        self.push_parts(s.value, s.stamp).map_err(|value| Sample {
            value,
            stamp: s.stamp,
        })
    }

    #[inline]
    fn push_parts(&self, value: T, stamp: Stamp) -> Result<(), T> {
        let tail = self.index.tail.load(Ordering::Relaxed);
        if tail - self.index.head.load(Ordering::Relaxed) >= self.index.cap {
            std::hint::cold_path();
            return Err(value);
        }
        let i = tail & self.mask;
        // SAFETY: `i <= mask < buf.len() == stamps.len()`; the slot at `tail` is vacant
        // (fewer than `cap` <= `buf.len()` entries are queued, in distinct slots) and no
        // other thread touches the slots now (the type's single-thread contract).
        unsafe {
            (*self.buf.get_unchecked(i).get()).write(value);
            *self.stamps.get_unchecked(i).get() = stamp;
        }
        self.index.tail.store(tail + 1, Ordering::Release);
        Ok(())
    }

    #[inline]
    fn pop(&self) -> Option<Sample<T>> {
        let mut stamp = Stamp::default();
        let value = self.pop_parts(&mut stamp)?;
        Some(Sample { value, stamp })
    }

    /// Pops the oldest value and stores its stamp in `stamp`.
    #[inline]
    fn pop_parts(&self, stamp: &mut Stamp) -> Option<T> {
        let head = self.index.head.load(Ordering::Relaxed);
        if head == self.index.tail.load(Ordering::Relaxed) {
            return None;
        }
        let i = head & self.mask;
        // SAFETY: `i < buf.len() == stamps.len()`; the slot at `head` holds an initialized
        // entry (head < tail), moved out exactly once as `head` advances past it;
        // single-thread contract as in `push`.
        let value = unsafe {
            *stamp = *self.stamps.get_unchecked(i).get();
            (*self.buf.get_unchecked(i).get()).assume_init_read()
        };
        self.index.head.store(head + 1, Ordering::Release);
        Some(value)
    }

    /// The oldest value where it lies in its slot, and its stamp, without popping it.
    /// The reference stays valid until the next pop of this ring (`drop_front`, `pop`,
    /// `pop_parts`): the slot at `head` is not written by a push while the ring is not
    /// full, and a full ring refuses one.
    #[inline]
    fn front(&self) -> Option<(&T, Stamp)> {
        let head = self.index.head.load(Ordering::Relaxed);
        if head == self.index.tail.load(Ordering::Relaxed) {
            return None;
        }
        let i = head & self.mask;
        // SAFETY: `i <= mask < buf.len() == stamps.len()`; the slot at `head` holds an
        // initialized entry (head < tail), and no other thread touches the slots (the
        // type's single-thread contract).
        unsafe {
            let stamp = *self.stamps.get_unchecked(i).get();
            Some(((*self.buf.get_unchecked(i).get()).assume_init_ref(), stamp))
        }
    }

    /// Pops the oldest value and drops it.
    ///
    /// # Safety
    ///
    /// The ring holds a value, and no reference from [`front`](Self::front) is used
    /// after this call.
    #[inline]
    unsafe fn drop_front(&self) {
        let head = self.index.head.load(Ordering::Relaxed);
        let i = head & self.mask;
        // SAFETY: `i < buf.len()`; the slot at `head` holds an initialized entry (the
        // caller's contract), moved out exactly once as `head` advances past it — moved
        // out before it is dropped, so a drop that unwinds leaves the ring consistent. A
        // type without drop glue makes this read dead code: no copy.
        let value = unsafe { (*self.buf.get_unchecked(i).get()).assume_init_read() };
        self.index.head.store(head + 1, Ordering::Release);
        drop(value);
    }
}

impl<T> Drop for LocalRing<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

pub(crate) struct EdgeQueue<T> {
    queue: Ring<T>,
    pub(crate) policy: QueuePolicy,
    pub(crate) counters: EdgeCounters,
    consumer: Arc<CachePadded<Endpoint>>,
    producer: Arc<CachePadded<Endpoint>>,
    /// Producer and consumer run on different threads: pushes and pops wake the other.
    cross_partition: bool,
}

impl<T> EdgeQueue<T> {
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.queue.is_full()
    }

    /// Pushes an entry. The caller (the edge's only producer) checked for room under
    /// `Block`; under `DropOldest` the oldest entry is evicted and dropped.
    #[allow(
        clippy::inline_always,
        reason = "on the in-partition hop; left to the heuristic it stayed out of line (measured in benches/host_hop.rs)"
    )]
    #[inline(always)]
    pub(crate) fn push(&self, value: T, stamp: Stamp) {
        bump(&self.counters.pushed);
        if let (QueuePolicy::Block, Ring::Local(r)) = (self.policy, &self.queue) {
            // The in-partition fast path: the caller checked for room, nobody to wake.
            if let Err(refused) = r.push_parts(value, stamp) {
                std::hint::cold_path();
                bump(&self.counters.backpressured);
                drop(refused);
            }
            return;
        }
        self.push_slow(Sample { value, stamp });
    }

    /// `push` for cross-partition and drop-oldest edges.
    #[inline(never)]
    fn push_slow(&self, sample: Sample<T>) {
        match self.policy {
            QueuePolicy::Block => {
                if self.queue.push(sample).is_err() {
                    bump(&self.counters.backpressured);
                }
            }
            QueuePolicy::DropOldest => {
                if let Some(old) = self.queue.force_push(sample) {
                    bump(&self.counters.evicted);
                    drop(old);
                }
            }
        }
        if self.cross_partition {
            self.consumer.wake();
        }
    }

    #[allow(
        clippy::inline_always,
        reason = "on the in-partition hop; left to the heuristic it stayed out of line (measured in benches/host_hop.rs)"
    )]
    #[inline(always)]
    pub(crate) fn pop(&self) -> Option<Sample<T>> {
        let s = self.queue.pop();
        if s.is_some() {
            bump(&self.counters.delivered);
            if self.cross_partition {
                self.producer.wake();
            }
        }
        s
    }

    /// Pops the oldest value, storing its stamp in `stamp`: `pop` without building a
    /// `Sample` on the in-partition path.
    #[allow(
        clippy::inline_always,
        reason = "on the in-partition hop; left to the heuristic it stayed out of line (measured in benches/host_hop.rs)"
    )]
    #[inline(always)]
    pub(crate) fn pop_value(&self, stamp: &mut Stamp) -> Option<T> {
        let value = match &self.queue {
            Ring::Local(r) => r.pop_parts(stamp)?,
            Ring::Shared(_) => {
                let s = self.pop()?;
                *stamp = s.stamp;
                return Some(s.value);
            }
        };
        bump(&self.counters.delivered);
        Some(value)
    }

    /// The oldest value where it lies in a same-partition ring, and its stamp, without
    /// popping it; `None` when the ring is empty or the edge crosses partitions (its
    /// lock-free slots cannot lend a value). Valid until the next pop of this edge; pop
    /// it with [`drop_front`](Self::drop_front).
    #[allow(
        clippy::inline_always,
        reason = "on the in-partition hop, as `pop_value`"
    )]
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<(&T, Stamp)> {
        match &self.queue {
            Ring::Local(r) => r.front(),
            Ring::Shared(_) => None,
        }
    }

    /// Whether the edge is a same-partition ring (one that can lend its values in place).
    #[inline]
    pub(crate) fn is_local(&self) -> bool {
        matches!(self.queue, Ring::Local(_))
    }

    /// Pops and drops the value [`front`](Self::front) lent.
    ///
    /// # Safety
    ///
    /// `front` returned a value since the last pop of this edge, and no reference it
    /// returned is used after this call.
    #[allow(
        clippy::inline_always,
        reason = "on the in-partition hop, as `pop_value`"
    )]
    #[inline(always)]
    pub(crate) unsafe fn drop_front(&self) {
        if let Ring::Local(r) = &self.queue {
            // SAFETY: `front` lent a value, so the ring holds one (the caller's
            // contract), and the caller no longer uses it.
            unsafe { r.drop_front() };
            bump(&self.counters.delivered);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Entries not finished with: queued, or (on an edge between partitions) delivered
    /// to a consumer activation that has not returned yet. Within one partition the
    /// producer never runs during its consumer's activation, so that is the queue's
    /// length.
    ///
    /// Between partitions it is counted from the producer's side, which never
    /// undercounts: entries pushed (less those refused or evicted, which the producer
    /// counts itself), less those finished. A pop and its `delivered` count are two
    /// steps, so the queue's length plus the entries taken would miss an entry between
    /// them. Called on the producer's thread (an `Output`'s), where its own counters are
    /// exact; `finished` only lags.
    pub(crate) fn in_flight(&self) -> usize {
        if !self.cross_partition {
            return self.queue.len();
        }
        let c = &self.counters;
        let finished = c.finished.load(Ordering::Acquire);
        let entered = c
            .pushed
            .load(Ordering::Relaxed)
            .saturating_sub(c.backpressured.load(Ordering::Relaxed))
            .saturating_sub(c.evicted.load(Ordering::Relaxed));
        usize::try_from(entered.saturating_sub(finished)).unwrap_or(usize::MAX)
    }
}

/// What the scheduler needs of an edge, with its payload type erased.
pub(crate) trait ErasedEdge: Send + Sync {
    fn len(&self) -> usize;
    fn is_full(&self) -> bool;
    fn policy(&self) -> QueuePolicy;
    fn counters(&self) -> &EdgeCounters;
    /// Drops every queued entry (teardown).
    fn clear(&self);
    /// Drops the oldest queued entry (an activation skipped by `missing = skip`).
    fn drop_one(&self);
    /// A same-partition ring's counters, for the scheduler to read directly.
    fn ring_index(&self) -> Option<&RingIndex>;
    /// Whether producer and consumer run on different threads.
    fn is_cross_partition(&self) -> bool;
    /// The consumer's activation returned: everything delivered so far is finished with
    /// ([`EdgeQueue::in_flight`]). Called by the consumer's scheduler, on its thread.
    fn finish(&self) {
        let c = self.counters();
        // Only this thread writes either: no store (and no cache line taken from the
        // producer) when the activation took nothing from this edge.
        let delivered = c.delivered.load(Ordering::Relaxed);
        if c.finished.load(Ordering::Relaxed) != delivered {
            c.finished.store(delivered, Ordering::Release);
        }
    }
}

/// The scheduler's handle on an edge: a same-partition ring's occupancy is two plain
/// loads (no virtual call); other edges ask through [`ErasedEdge`].
#[derive(Clone)]
pub(crate) struct EdgeProbe {
    edge: Arc<dyn ErasedEdge>,
    /// Points into `edge` (kept alive by it) when it is a same-partition ring.
    local: Option<std::ptr::NonNull<RingIndex>>,
}

// SAFETY: `local` points into the edge `edge` keeps alive, and `RingIndex` is atomics
// and a constant: reading it from any thread is sound.
unsafe impl Send for EdgeProbe {}
// SAFETY: as above.
unsafe impl Sync for EdgeProbe {}

impl EdgeProbe {
    pub(crate) fn new(edge: Arc<dyn ErasedEdge>) -> Self {
        let local = edge.ring_index().map(std::ptr::NonNull::from);
        Self { edge, local }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self.local {
            // SAFETY: see the type's `Send` impl.
            Some(index) => unsafe { index.as_ref() }.len(),
            None => self.edge.len(),
        }
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        match self.local {
            // SAFETY: see the type's `Send` impl.
            Some(index) => unsafe { index.as_ref() }.is_full(),
            None => self.edge.is_full(),
        }
    }

    pub(crate) fn edge(&self) -> &dyn ErasedEdge {
        &*self.edge
    }
}

impl<T: Send + 'static> ErasedEdge for EdgeQueue<T> {
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn is_full(&self) -> bool {
        self.queue.is_full()
    }
    fn policy(&self) -> QueuePolicy {
        self.policy
    }
    fn drop_one(&self) {
        drop(self.pop());
    }
    fn counters(&self) -> &EdgeCounters {
        &self.counters
    }
    fn clear(&self) {
        while self.queue.pop().is_some() {}
    }
    fn ring_index(&self) -> Option<&RingIndex> {
        match &self.queue {
            Ring::Local(r) => Some(&r.index),
            Ring::Shared(_) => None,
        }
    }
    fn is_cross_partition(&self) -> bool {
        self.cross_partition
    }
}

/// Both views of a new edge: typed (for port binding) and erased (for scheduling).
pub(crate) struct NewEdge {
    pub(crate) typed: Arc<dyn Any + Send + Sync>,
    pub(crate) erased: Arc<dyn ErasedEdge>,
}

/// Makes the queue of an edge whose payload type `add_flow` knew, or says how many bytes
/// it could not reserve.
pub(crate) type EdgeFactory = fn(
    depth: usize,
    QueuePolicy,
    Arc<CachePadded<Endpoint>>,
    Arc<CachePadded<Endpoint>>,
) -> Result<NewEdge, ColdAllocError>;

fn make_edge<T: Send + 'static>(
    depth: usize,
    policy: QueuePolicy,
    consumer: Arc<CachePadded<Endpoint>>,
    producer: Arc<CachePadded<Endpoint>>,
) -> Result<NewEdge, ColdAllocError> {
    let cross_partition = !Arc::ptr_eq(&consumer, &producer);
    let depth = depth.max(1);
    let q = Arc::new(EdgeQueue::<T> {
        queue: if cross_partition {
            // An ArrayQueue slot: a stamp and the entry.
            cold::probe(depth, size_of::<(AtomicUsize, Sample<T>)>())?;
            Ring::Shared(ArrayQueue::new(depth))
        } else {
            Ring::Local(LocalRing::new(depth)?)
        },
        policy,
        counters: EdgeCounters::default(),
        cross_partition,
        consumer,
        producer,
    });
    Ok(NewEdge {
        typed: Arc::clone(&q) as Arc<dyn Any + Send + Sync>,
        erased: q,
    })
}

pub(crate) fn edge_factory<T: Send + 'static>() -> EdgeFactory {
    make_edge::<T>
}

#[cfg(all(test, not(holo_loom)))]
mod tests {
    use super::*;

    fn s(v: Arc<u32>) -> Sample<Arc<u32>> {
        Sample {
            value: v,
            stamp: Stamp::default(),
        }
    }

    #[test]
    fn local_ring_is_bounded_fifo_evicts_oldest_and_drops_what_it_holds() {
        let live = Arc::new(0u32);
        // Depth 3 rounds the buffer up to 4 slots; the bound stays 3.
        let r = Ring::Local(LocalRing::new(3).unwrap());
        for i in 0..3 {
            assert!(r.push(s(Arc::new(i))).is_ok());
        }
        assert!(r.is_full());
        assert!(
            r.push(s(Arc::new(9))).is_err(),
            "a full ring refuses a push"
        );
        assert_eq!(r.pop().map(|x| *x.value), Some(0));
        assert!(r.push(s(Arc::new(3))).is_ok());
        let old = r.force_push(s(Arc::new(4)));
        assert_eq!(
            old.map(|x| *x.value),
            Some(1),
            "drop-oldest evicts the oldest"
        );
        assert_eq!(r.len(), 3);
        let got: Vec<u32> = std::iter::from_fn(|| r.pop().map(|x| *x.value)).collect();
        assert_eq!(got, [2, 3, 4]);
        assert!(r.pop().is_none());
        for _ in 0..10 {
            assert!(r.push(s(Arc::clone(&live))).is_ok());
            assert!(r.pop().is_some());
        }
        assert!(r.push(s(Arc::clone(&live))).is_ok());
        assert!(r.push(s(Arc::clone(&live))).is_ok());
        drop(r);
        assert_eq!(
            Arc::strong_count(&live),
            1,
            "dropping the ring drops its entries"
        );
    }

    #[test]
    fn front_lends_the_oldest_in_place_and_drop_front_drops_it_once() {
        let live = Arc::new(0u32);
        // One endpoint at both ends: a same-partition ring.
        let end: Arc<CachePadded<Endpoint>> = Arc::default();
        let edge = make_edge::<Arc<u32>>(2, QueuePolicy::Block, Arc::clone(&end), end).unwrap();
        let q = Arc::clone(&edge.typed)
            .downcast::<EdgeQueue<Arc<u32>>>()
            .unwrap();
        assert!(q.is_local() && q.front().is_none());
        let stamp = |frame| Stamp {
            frame,
            ..Stamp::default()
        };
        q.push(Arc::clone(&live), stamp(1));
        q.push(Arc::new(5), stamp(2));
        let (v, s) = q.front().unwrap();
        assert!(Arc::ptr_eq(v, &live) && s.frame == 1);
        // Lent, not popped: still queued, not dropped.
        assert_eq!((q.len(), Arc::strong_count(&live)), (2, 2));
        // SAFETY: `front` lent a value and `v` is not used after this.
        unsafe { q.drop_front() };
        assert_eq!((q.len(), Arc::strong_count(&live)), (1, 1));
        assert_eq!(q.counters.delivered.load(Ordering::Relaxed), 1);
        assert_eq!(q.front().map(|(v, s)| (**v, s.frame)), Some((5, 2)));
    }
}

/// loom models of the edge queues: every interleaving (up to the preemption bound) of a
/// producer, a consumer and an observer on the real `EdgeQueue`s. A cross-partition edge's
/// lock-free queue is, under loom, the shim's locked model of crossbeam's `ArrayQueue`
/// (its own correctness is crossbeam's): those models check the edge's protocol around
/// it — the producer's room check, eviction, the counters, each entry delivered or
/// dropped exactly once, in order. RELIABILITY.md lists the interleavings each explored
/// and the mutation that made it fail.
///
/// ```text
/// RUSTFLAGS="--cfg holo_loom" CARGO_TARGET_DIR=target/loom cargo test -p holo-runtime --lib loom
/// ```
#[cfg(all(test, holo_loom))]
mod loom_models {
    use std::sync::Arc;

    use super::*;
    use crate::channel::sync::model::{self, Interleave};

    /// What travels: a clone of one `Arc`, so the model can count the entries alive.
    type Token = Arc<()>;

    fn stamp(frame: u64) -> Stamp {
        Stamp {
            frame,
            ..Stamp::default()
        }
    }

    fn edge(
        depth: usize,
        policy: QueuePolicy,
        cross_partition: bool,
    ) -> (Arc<EdgeQueue<Token>>, EdgeProbe) {
        let consumer: Arc<CachePadded<Endpoint>> = Arc::default();
        let producer = if cross_partition {
            Arc::default()
        } else {
            Arc::clone(&consumer)
        };
        let edge = make_edge::<Token>(depth, policy, consumer, producer).unwrap();
        let typed = Arc::clone(&edge.typed)
            .downcast::<EdgeQueue<Token>>()
            .unwrap();
        (typed, EdgeProbe::new(edge.erased))
    }

    /// The counters balance: every pushed entry was delivered, evicted or is still
    /// queued; every entry alive is a queued one.
    fn assert_conserved(q: &EdgeQueue<Token>, token: &Token) {
        let c = &q.counters;
        let get =
            |a: &AtomicU64| usize::try_from(a.load(std::sync::atomic::Ordering::Relaxed)).unwrap();
        assert_eq!(
            get(&c.pushed),
            get(&c.delivered) + get(&c.evicted) + q.len(),
            "an entry lost or counted twice"
        );
        assert_eq!(
            Arc::strong_count(token),
            1 + q.len(),
            "an entry dropped twice, or never"
        );
    }

    /// The invariant: another thread reading a same-partition ring's occupancy (the
    /// scheduler's `EdgeProbe`, `RunSession::wait_idle`) while the partition thread pushes
    /// (drop-oldest: the third push evicts) and pops never sees more than the depth —
    /// `head` read after `tail` may be newer — and, seeing an entry, sees what the
    /// activation wrote before pushing it; every entry is delivered or evicted once.
    ///
    /// Mutations that fail it: `RingIndex::len` subtracting with `wrapping_sub` (a
    /// length near `usize::MAX`); `push_parts` storing `tail` relaxed (the observer sees
    /// an entry but not the write before it).
    #[test]
    fn loom_a_same_partition_ring_is_read_consistently_from_another_thread() {
        model::run(
            "a_same_partition_ring_is_read_consistently_from_another_thread",
            None,
            || {
                let (q, probe) = edge(2, QueuePolicy::DropOldest, false);
                assert!(q.is_local());
                let token = Token::default();
                // What the activation writes before it pushes.
                let written = Arc::new(AtomicUsize::new(0));
                // The observer may read between any two of the partition's operations.
                let turns = Arc::new(Interleave::default());
                let partition = {
                    let (q, token, written, turns) = (
                        Arc::clone(&q),
                        Arc::clone(&token),
                        Arc::clone(&written),
                        Arc::clone(&turns),
                    );
                    loom::thread::spawn(move || {
                        written.store(1, Ordering::Relaxed);
                        for frame in 1..=3 {
                            turns.point();
                            q.push(Arc::clone(&token), stamp(frame));
                        }
                        turns.point();
                        let mut s = Stamp::default();
                        assert!(q.pop_value(&mut s).is_some());
                        assert_eq!(s.frame, 2, "drop-oldest evicted the wrong entry");
                    })
                };
                turns.point();
                let n = probe.len();
                assert!(n <= 2, "an occupancy of {n} in a ring of depth 2");
                if n > 0 {
                    assert_eq!(
                        written.load(Ordering::Relaxed),
                        1,
                        "an entry seen before what was written before it"
                    );
                }
                partition.join().unwrap();
                assert_eq!(
                    q.counters
                        .evicted
                        .load(std::sync::atomic::Ordering::Relaxed),
                    1
                );
                assert_conserved(&q, &token);
                drop((q, probe));
                assert_eq!(Arc::strong_count(&token), 1, "the ring kept an entry");
            },
        );
    }

    /// A producer emitting frames 1..=3 to a cross-partition edge the way a port does
    /// (`Block`: checks for room first and refuses, counting it, when full), and a
    /// consumer popping three times meanwhile; the frames it got, in order.
    fn produce_and_consume(policy: QueuePolicy, depth: usize) -> (Arc<EdgeQueue<Token>>, Token) {
        let (q, _probe) = edge(depth, policy, true);
        assert!(!q.is_local());
        let token = Token::default();
        let producer = {
            let (q, token) = (Arc::clone(&q), Arc::clone(&token));
            loom::thread::spawn(move || {
                for frame in 1..=3 {
                    if policy == QueuePolicy::Block && q.is_full() {
                        bump(&q.counters.backpressured);
                        continue;
                    }
                    q.push(Arc::clone(&token), stamp(frame));
                }
            })
        };
        let mut last = 0;
        for _ in 0..3 {
            if let Some(s) = q.pop() {
                assert!(s.stamp.frame > last, "delivered out of order");
                last = s.stamp.frame;
            }
        }
        producer.join().unwrap();
        let refused = q
            .counters
            .backpressured
            .load(std::sync::atomic::Ordering::Relaxed);
        let pushed = q.counters.pushed.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            pushed + refused,
            3,
            "an emit both pushed and refused, or neither"
        );
        assert_conserved(&q, &token);
        (q, token)
    }

    /// The invariant: a blocking cross-partition edge never holds more than its depth
    /// (the producer's room check suffices: only the consumer changes the queue meanwhile,
    /// and it only makes room, so a push after the check is never refused), and every
    /// frame is delivered once, in order, refused (counted) or still queued.
    ///
    /// Mutation that fails it: the room check not seeing a full cross-partition queue
    /// (`Ring::is_full` answering `false` for it): a push refused after the check, the
    /// frame counted both pushed and refused.
    #[test]
    fn loom_a_blocking_cross_partition_queue_delivers_each_frame_once_in_order() {
        model::run(
            "a_blocking_cross_partition_queue_delivers_each_frame_once_in_order",
            None,
            || {
                let (q, token) = produce_and_consume(QueuePolicy::Block, 1);
                assert_eq!(
                    q.counters
                        .evicted
                        .load(std::sync::atomic::Ordering::Relaxed),
                    0
                );
                drop(q);
                assert_eq!(Arc::strong_count(&token), 1, "the queue kept an entry");
            },
        );
    }

    /// The invariant: a drop-oldest cross-partition edge evicts instead of refusing, and
    /// every frame is delivered once, in order, evicted once (counted, and dropped) or
    /// still queued.
    ///
    /// Mutation that fails it: `push_slow` forgetting the evicted entry instead of
    /// dropping it (`std::mem::forget(old)`: an entry never dropped).
    #[test]
    fn loom_a_drop_oldest_cross_partition_queue_evicts_each_frame_once() {
        model::run(
            "a_drop_oldest_cross_partition_queue_evicts_each_frame_once",
            None,
            || {
                let (q, token) = produce_and_consume(QueuePolicy::DropOldest, 1);
                assert_eq!(
                    q.counters
                        .backpressured
                        .load(std::sync::atomic::Ordering::Relaxed),
                    0
                );
                drop(q);
                assert_eq!(Arc::strong_count(&token), 1, "the queue kept an entry");
            },
        );
    }

    /// The invariant: a client thread waiting in a receive (`Endpoint::park_client`, a
    /// topic subscriber's end, which names no thread) is never left parked with an entry
    /// queued: the producer's wake after its push either sees the client waiting and
    /// unparks it, or the client's last check before parking sees the entry (the two
    /// `SeqCst` fences). The entry is a relaxed flag here, weaker than the queue's own
    /// ordering, so the fences alone must carry it; the client parks with no deadline, so
    /// a lost wake-up is a deadlock loom reports.
    ///
    /// Mutations that fail it: either fence removed (`wake_client`'s or
    /// `park_client`'s): loom finds the client parked for ever.
    #[test]
    fn loom_a_client_waiting_for_an_entry_is_always_woken() {
        model::run(
            "a_client_waiting_for_an_entry_is_always_woken",
            None,
            || {
                let end: Arc<CachePadded<Endpoint>> = Arc::default();
                let queued = Arc::new(AtomicUsize::new(0));
                // The client's receive loop: check, then park until woken, and check again. On
                // a spawned thread: loom 0.7's `park` on the model's main thread trips an
                // assertion inside loom (`state.notified`) in an interleaving where the
                // unpark came first.
                let client = {
                    let (end, queued) = (Arc::clone(&end), Arc::clone(&queued));
                    loom::thread::spawn(move || {
                        while queued.load(Ordering::Relaxed) == 0 {
                            end.park_client(|| queued.load(Ordering::Relaxed) != 0, None);
                        }
                    })
                };
                // The producer: pushes (the flag), then wakes the consumer's end.
                queued.store(1, Ordering::Relaxed);
                end.wake();
                client.join().unwrap();
            },
        );
    }
}
