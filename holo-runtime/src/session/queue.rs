//! Edge queues: one bounded, preallocated queue per flow.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;

use crate::graph::QueuePolicy;

/// One partition's shared state: its thread (to wake it), whether it is scanning its
/// operators, and how many activations it ran. Padded to its own cache line: the hot path
/// touches only its own partition's line.
#[derive(Default)]
pub(crate) struct PartitionSignal {
    thread: OnceLock<Thread>,
    pub(crate) scanning: AtomicBool,
    pub(crate) progress: AtomicU64,
}

impl PartitionSignal {
    pub(crate) fn register(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    pub(crate) fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// Adds one to a counter only one thread writes (an edge has one producer and one
/// consumer): a load and a store, no read-modify-write on the hot path.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// One queued entry: the value and its capture time (nanoseconds since the session's
/// epoch; `u64::MAX` when unknown).
pub(crate) struct Sample<T> {
    pub(crate) value: T,
    pub(crate) capture_ns: u64,
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
}

pub(crate) struct EdgeQueue<T> {
    queue: ArrayQueue<Sample<T>>,
    pub(crate) policy: QueuePolicy,
    pub(crate) counters: EdgeCounters,
    consumer: Arc<CachePadded<PartitionSignal>>,
    producer: Arc<CachePadded<PartitionSignal>>,
    /// Producer and consumer run on different threads: pushes and pops wake the other.
    cross_partition: bool,
}

impl<T> EdgeQueue<T> {
    pub(crate) fn is_full(&self) -> bool {
        self.queue.is_full()
    }

    /// Pushes an entry. The caller (the edge's only producer) checked for room under
    /// `Block`; under `DropOldest` the oldest entry is evicted and dropped.
    pub(crate) fn push(&self, sample: Sample<T>) {
        bump(&self.counters.pushed);
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

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
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
}

/// Both views of a new edge: typed (for port binding) and erased (for scheduling).
pub(crate) struct NewEdge {
    pub(crate) typed: Arc<dyn Any + Send + Sync>,
    pub(crate) erased: Arc<dyn ErasedEdge>,
}

/// Makes the queue of an edge whose payload type `add_flow` knew.
pub(crate) type EdgeFactory = fn(
    depth: usize,
    QueuePolicy,
    Arc<CachePadded<PartitionSignal>>,
    Arc<CachePadded<PartitionSignal>>,
) -> NewEdge;

fn make_edge<T: Send + 'static>(
    depth: usize,
    policy: QueuePolicy,
    consumer: Arc<CachePadded<PartitionSignal>>,
    producer: Arc<CachePadded<PartitionSignal>>,
) -> NewEdge {
    let q = Arc::new(EdgeQueue::<T> {
        queue: ArrayQueue::new(depth.max(1)),
        policy,
        counters: EdgeCounters::default(),
        cross_partition: !Arc::ptr_eq(&consumer, &producer),
        consumer,
        producer,
    });
    NewEdge {
        typed: Arc::clone(&q) as Arc<dyn Any + Send + Sync>,
        erased: q,
    }
}

pub(crate) fn edge_factory<T: Send + 'static>() -> EdgeFactory {
    make_edge::<T>
}
