//! The retirement worker: returns device-pool slots to their free lists once every release
//! event recorded for them has completed. It polls (`query_event`), never waits on the
//! host for the device, and its queue and pending list are preallocated, so handing it a
//! slot allocates nothing.
//!
//! One worker per session whose plan has device pools. Its thread is spawned at session
//! start and parks until the first slot arrives (so the hot path never spawns anything).

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use super::pool::{BusyStreams, Pool};
use super::sync::{self, ArrayQueue, AtomicBool, AtomicU64, Ordering};
use crate::{Error, ErrorCode, Result};

/// The pause between two polls of the same pending release events (H200: polling back
/// to back made 7–8 event calls per fenced frame instead of about 4, and the hop slower).
const POLL_GAP: Duration = Duration::from_micros(2);

/// Who runs a pass over the pending slots.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Poller {
    /// The worker: a slot whose poll failed is settled (waited for on the host).
    Worker,
    /// A producer whose pool is empty ([`Retirer::assist`]): it never waits, so a slot
    /// whose poll failed stays pending for the worker to settle.
    Producer,
}

/// A slot the worker was handed and has not returned yet.
pub(crate) struct Pending {
    pool: Arc<Pool>,
    slot: u32,
    /// How many of the slot's first release events were found complete.
    done: u32,
}

/// Slots the worker can hold at once (every slot of every device pool of a session).
pub(crate) struct Retirer {
    queue: OnceLock<ArrayQueue<(Arc<Pool>, u32)>>,
    /// The slots taken from `queue` and not returned yet, in hand-over order: the worker
    /// locks it for each pass, and a producer whose pool is empty runs a pass of its own
    /// when the worker is not in one ([`Self::assist`]). Room for every slot, reserved at
    /// [`start`](Self::start).
    pending: sync::Mutex<Vec<Pending>>,
    thread: OnceLock<Thread>,
    stop: AtomicBool,
    /// Set by the session's teardown before it synchronizes its streams: from then on a
    /// slot released late (a tensor kept past its session) is returned by the releasing
    /// thread itself, recording nothing on the session's streams (see [`Self::enter`]).
    closed: AtomicBool,
    /// Set by the teardown once its streams were synchronized: every write enqueued on
    /// them has run, and they are about to be destroyed. A tensor kept past the session
    /// whose readiness was elided (a fused edge) is complete then, and nothing may be
    /// recorded on its writer's stream any more.
    quiesced: AtomicBool,
    /// Slots announced ([`Self::enter`]) or handed to the worker, and not yet returned.
    outstanding: AtomicU64,
    error: Mutex<Option<Error>>,
    /// Called once an error is noted: the session's stop request (a device call that
    /// failed on the release path stops the session with that error).
    on_error: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Retirer {
    pub(crate) fn new() -> Arc<Retirer> {
        Arc::new(Retirer {
            queue: OnceLock::new(),
            pending: sync::Mutex::new(Vec::new()),
            thread: OnceLock::new(),
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            quiesced: AtomicBool::new(false),
            outstanding: AtomicU64::new(0),
            error: Mutex::new(None),
            on_error: OnceLock::new(),
        })
    }

    /// Sizes the queue for `capacity` slots and spawns the (parked) worker thread. Returns
    /// once the thread runs and has allocated everything it will ever need (its start-up
    /// allocations must not land in the middle of a steady-state run).
    /// `idle_spin`: how long the worker keeps polling (yielding) after its last slot
    /// before it parks (`SessionOptions::idle_spin`).
    pub(crate) fn start(
        self: &Arc<Self>,
        capacity: usize,
        idle_spin: Duration,
    ) -> Result<JoinHandle<()>> {
        let capacity = capacity.max(1);
        // The queue and the worker's pending list, each with room for every slot.
        crate::cold::probe(capacity, size_of::<(usize, Arc<Pool>, u32)>() * 2).map_err(|e| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("the retirement worker's queue for {capacity} device slots: {e}"),
            )
        })?;
        let _ = self.queue.set(ArrayQueue::new(capacity));
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .reserve_exact(capacity);
        let me = Arc::clone(self);
        let ready = Arc::new(std::sync::Barrier::new(2));
        let worker_ready = Arc::clone(&ready);
        let handle = std::thread::Builder::new()
            .name("holo-retire".to_owned())
            .spawn(move || me.run(idle_spin, &worker_ready))
            .map_err(|e| {
                Error::new(
                    ErrorCode::ResourceExhausted,
                    format!("cannot spawn the retirement worker: {e}"),
                )
            })?;
        let _ = self.thread.set(handle.thread().clone());
        ready.wait();
        Ok(handle)
    }

    /// Announces a slot about to be handed over (its release events are recorded next,
    /// then [`retire`](Self::retire) is called): counted as outstanding from now on, so the
    /// teardown, which [`close`](Self::close)s and then waits for no slot to be
    /// outstanding, never destroys a stream this thread is about to record on. Returns
    /// `false`, counting nothing, once the retirer is closed: the caller returns the slot
    /// itself.
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        // With `close`'s fence: either this sees `closed`, or the teardown's next load of
        // `outstanding` sees this slot.
        sync::sc_handshake();
        if self.closed.load(Ordering::SeqCst) {
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Refuses every later [`enter`](Self::enter). Slots entered before are still handed
    /// over and retired: wait for [`outstanding`](Self::outstanding) to reach zero.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        // The teardown's wait loads `outstanding` with acquire ordering only, and a
        // `SeqCst` store followed by a weaker load is no store-load barrier: without this
        // fence the load may read a count from before an `enter` that then reads `closed`
        // false (store buffering; allowed by the memory model, and by POWER's and RCpc
        // ARM's hardware), and the teardown would destroy the streams that `enter`'s
        // thread is about to record on (found by the loom model
        // `loom_teardown_waits_for_every_entered_slot`). Once per session.
        sync::fence(Ordering::SeqCst);
    }

    /// The teardown synchronized the session's streams (see the field).
    pub(crate) fn mark_quiesced(&self) {
        self.quiesced.store(true, Ordering::Release);
    }

    /// Whether the session's streams were synchronized by its teardown.
    pub(crate) fn is_quiesced(&self) -> bool {
        self.quiesced.load(Ordering::Acquire)
    }

    /// Hands a slot whose release events were just recorded to the worker. The caller
    /// [`enter`](Self::enter)ed first. Without a worker (a pool used outside a session),
    /// nothing is pending on a stream a session owns any more: the slot is counted off and
    /// handed back (`Some`), for the caller to return with
    /// [`Pool::return_retired`](crate::channel::pool::Pool::return_retired). Returning it
    /// here could drop the pool's last count, and with the pool its count of this retirer,
    /// freeing `self` while this call borrows it (undefined; found by Miri).
    #[must_use = "a slot handed back is returned by the caller"]
    pub(crate) fn retire(&self, pool: Arc<Pool>, slot: u32) -> Option<Arc<Pool>> {
        let Some(q) = self.queue.get() else {
            self.outstanding.fetch_sub(1, Ordering::AcqRel);
            return Some(pool);
        };
        // Room for every slot of every device pool: a slot is queued at most once.
        if let Err((pool, slot)) = q.push((pool, slot)) {
            self.note_error(
                Error::new(
                    ErrorCode::Internal,
                    "the retirement queue is full (it has room for every device slot)",
                ),
                pool.location,
            );
            self.settle(pool, slot);
        }
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
        None
    }

    /// Returns a slot the worker was handed (with the pool count it carries).
    fn give_back(&self, pool: Arc<Pool>, slot: u32) {
        Pool::return_retired(pool, slot);
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
    }

    /// Slots handed to the worker and not yet back in their pools.
    pub(crate) fn outstanding(&self) -> u64 {
        self.outstanding.load(Ordering::Acquire)
    }

    /// Sets what [`note_error`](Self::note_error) calls (once): the session's stop.
    pub(crate) fn set_on_error(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_error.set(hook);
    }

    /// A device call on the release path failed: keeps the first such error (its code and
    /// message, at `location`) for the session's `join`, and stops the session.
    pub(crate) fn note_error(&self, error: Error, location: &'static str) {
        crate::trace::event!(
            warn,
            pool = location,
            error = %error,
            "a device call on the release path failed"
        );
        {
            let mut e = self
                .error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if e.is_none() {
                *e = Some(error.at(location));
            }
        }
        if let Some(hook) = self.on_error.get() {
            hook();
        }
    }

    /// A slot whose release could not be confirmed by polling: waits on the host for its
    /// release events instead, and returns it only if that succeeds. A slot whose release
    /// cannot be confirmed at all is withheld — lost to its pool, which is then never
    /// freed — rather than reused under work still running on the device.
    fn settle(&self, pool: Arc<Pool>, slot: u32) {
        match pool.wait_release(slot) {
            Ok(()) => self.give_back(pool, slot),
            Err(e) => {
                self.note_error(e, pool.location);
                self.withhold(pool);
            }
        }
    }

    /// Withholds an entered slot whose release cannot be confirmed: the count `pool`
    /// carries is never given back (the pool is never freed), and the slot is no longer
    /// outstanding.
    pub(crate) fn withhold(&self, pool: Arc<Pool>) {
        std::mem::forget(pool);
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn take_error(&self) -> Option<Error> {
        self.error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// One pass of the worker: takes the slots handed over since the last pass into
    /// `pending`, polls every pending slot's release events (those an earlier pass found
    /// complete are not queried again), and returns each slot whose events all completed
    /// (with the pool count it carries). Returns how many slots were pending before the
    /// polls.
    #[inline]
    fn poll_pending(
        &self,
        queue: &ArrayQueue<(Arc<Pool>, u32)>,
        pending: &mut Vec<Pending>,
        poller: Poller,
    ) -> usize {
        while let Some((pool, slot)) = queue.pop() {
            pending.push(Pending {
                pool,
                slot,
                done: 0,
            });
        }
        let before = pending.len();
        // Pending slots stay in the order they were handed over, which is the order
        // their release events were recorded in on each stream: the first incomplete
        // event found on a stream marks it busy for the rest of the pass, and the later
        // slots' events there are not queried (`Pool::release_complete`).
        let mut busy = BusyStreams::default();
        let mut i = 0;
        while i < pending.len() {
            let p = &mut pending[i];
            match p.pool.release_complete(p.slot, &mut p.done, &mut busy) {
                Ok(false) => i += 1,
                Ok(true) => {
                    // The slot and the pool count it carries go back together.
                    let p = pending.remove(i);
                    self.give_back(p.pool, p.slot);
                }
                // A producer never waits: the worker's next pass meets the error.
                Err(_) if poller == Poller::Producer => i += 1,
                Err(e) => {
                    self.note_error(e, p.pool.location);
                    let p = pending.remove(i);
                    self.settle(p.pool, p.slot);
                }
            }
        }
        before
    }

    /// A producer found its pool empty: unless the worker is in a pass now, runs one pass
    /// on this thread, so that slots whose release events have completed go back at once
    /// rather than when the worker comes round to them (a worker off its CPU, or behind
    /// the driver's lock, holds slots that are free on the device). Polls without waiting,
    /// as the worker does; returns whether it polled.
    #[cold]
    #[inline(never)]
    pub(crate) fn assist(&self) -> bool {
        let Some(queue) = self.queue.get() else {
            return false;
        };
        let Ok(mut pending) = self.pending.try_lock() else {
            return false;
        };
        self.poll_pending(queue, &mut pending, Poller::Producer);
        true
    }

    /// The models' stand-in for [`start`](Self::start): the worker's queue, without its
    /// thread (a model's own thread runs the worker's passes, [`Self::model_pass`]).
    #[cfg(test)]
    pub(crate) fn install_queue(&self, capacity: usize) {
        let _ = self.queue.set(ArrayQueue::new(capacity));
    }

    /// One pass of the worker's loop ([`poll_pending`](Self::poll_pending)) on the queue
    /// [`install_queue`](Self::install_queue) made; whether the worker would exit now
    /// (stopped, nothing queued or pending).
    #[cfg(all(test, holo_loom))]
    pub(crate) fn model_pass(&self) -> bool {
        let queue = self.queue.get().expect("install_queue first");
        let mut pending = self.pending.lock().unwrap();
        self.poll_pending(queue, &mut pending, Poller::Worker);
        pending.is_empty() && self.stop.load(Ordering::Acquire) && queue.is_empty()
    }

    /// Slots the worker holds (taken from its queue, not returned yet).
    #[cfg(test)]
    pub(crate) fn pending_len(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    fn run(&self, idle_spin: Duration, ready: &std::sync::Barrier) {
        // Not on the CPU pin of the thread that started it (`crate::cpus`).
        crate::cpus::place_worker_thread("holo-retire");
        ready.wait();
        let Some(queue) = self.queue.get() else {
            return;
        };
        let mut idle_polls = 0u32;
        // When the worker last had a slot pending.
        let mut busy_at = std::time::Instant::now();
        loop {
            let (before, left) = {
                let mut pending = self
                    .pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let before = self.poll_pending(queue, &mut pending, Poller::Worker);
                (before, pending.len())
            };
            if left == 0 {
                if self.stop.load(Ordering::Acquire) && queue.is_empty() {
                    return;
                }
                if before > 0 {
                    busy_at = std::time::Instant::now();
                }
                // Poll for the next slot for a while (no futex wake for its sender), then
                // park until one is handed over.
                if busy_at.elapsed() < idle_spin {
                    std::thread::yield_now();
                } else {
                    std::thread::park_timeout(Duration::from_millis(50));
                }
                idle_polls = 0;
            } else if left == before {
                // Nothing completed: poll again after `POLL_GAP` (busy, without querying:
                // every query takes the driver's lock the submitting threads need), then
                // after short sleeps. A returned slot is what a producer waits for, so the
                // worker stays eager for a while: a device op completes in microseconds.
                idle_polls += 1;
                if idle_polls <= 256 {
                    let t = std::time::Instant::now();
                    while t.elapsed() < POLL_GAP {
                        std::hint::spin_loop();
                    }
                } else {
                    std::thread::sleep(Duration::from_micros(10));
                }
            } else {
                idle_polls = 0;
            }
        }
    }
}

/// loom model of the retirement hand-off: a releasing thread, the worker and the
/// session's teardown, every interleaving up to the preemption bound, on the real pool
/// and retirer with a fake device (`FakeDevice`) that refuses a record on a destroyed
/// stream. RELIABILITY.md lists the interleavings explored and the mutation that made it
/// fail.
///
/// ```text
/// RUSTFLAGS="--cfg holo_loom" CARGO_TARGET_DIR=target/loom cargo test -p holo-runtime --lib loom
/// ```
#[cfg(all(test, holo_loom))]
mod loom_models {
    use std::sync::Arc;

    use crate::channel::OrderingDomain;
    use crate::channel::pool::loom_models::{Witness, device_pool, device_tensor};
    use crate::channel::sync::model;
    use crate::device::DeviceBackend;

    /// The invariant: the teardown — [`close`](super::Retirer::close), wait until no
    /// slot is [`outstanding`](super::Retirer::outstanding), destroy the session's
    /// streams — never destroys a stream a releasing thread is about to record a release
    /// event on; and the slot comes back exactly once with its count, through the worker
    /// when its `enter` came before the close, or from the releasing thread itself after
    /// it (a tensor kept past its session).
    ///
    /// `enter` against `close` is a store-buffering handshake of `SeqCst` accesses, which
    /// loom models as acquire/release only: `sync::sc_handshake` stands for them (without
    /// it loom reports this model failing although the real accesses are correct).
    ///
    /// Mutation that fails it: `close` without its `SeqCst` fence (the teardown's acquire
    /// load of `outstanding` may read a count from before an `enter` that reads `closed`
    /// false: a release event recorded on a destroyed stream). That was the code before
    /// this model: the fence is the fix.
    #[test]
    fn loom_teardown_waits_for_every_entered_slot() {
        model::run("teardown_waits_for_every_entered_slot", None, || {
            let (device, retirer, pool, producer) = device_pool(1);
            let witness = Witness::new(&pool);
            let stream = device.create_stream().unwrap();
            let mut tensor = device_tensor(&pool, producer);
            tensor
                .register_release_stream(OrderingDomain::partition(stream))
                .unwrap();
            // A consumer's tensor, released while the session tears down.
            let consumer = {
                let device = Arc::clone(&device);
                loom::thread::spawn(move || {
                    tensor
                        .deliver_to(OrderingDomain::partition(stream))
                        .unwrap();
                    device.work(stream);
                    drop(tensor);
                })
            };
            // The worker's loop (`run`), one pass at a time, until stopped and idle.
            let worker = {
                let retirer = Arc::clone(&retirer);
                loom::thread::spawn(move || {
                    while !retirer.model_pass() {
                        loom::thread::yield_now();
                    }
                })
            };
            // The session's teardown (`RunSession`'s): close, wait, destroy, stop.
            retirer.close();
            while retirer.outstanding() != 0 {
                loom::thread::yield_now();
            }
            device.destroy(stream);
            device.destroy(producer);
            retirer.shutdown();
            consumer.join().unwrap();
            worker.join().unwrap();
            assert_eq!(retirer.outstanding(), 0);
            assert_eq!(pool.free_slots(), 1, "the slot was lost or listed twice");
            witness.assert_balanced(1);
            drop(pool);
            witness.assert_last();
        });
    }
}
