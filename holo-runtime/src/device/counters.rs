//! Per-backend call counters: how tests prove that fusion elided exactly N event records,
//! and benches that a hot path made no device call it should not have.
//!
//! Every device call of every backend bumps one, so a bump must cost next to nothing on
//! the submitting thread: no locked instruction, and no cache line shared with another
//! submitting thread. Each thread that bumps claims a **shard** of its own (one of
//! [`SHARDS`], a cache-line-aligned block of every counter) for as long as it lives, and
//! adds to it with a plain load and store: it is the shard's only writer. A thread that
//! finds no free shard, or bumps while its thread-locals are being destroyed, adds to a
//! shared block with an atomic add. A snapshot sums the shards.
//!
//! Before (one `AtomicU64` per counter, `fetch_add` from every thread), each device call
//! paid a `lock xadd`, and the fork's sinks and source passed the `event_record`, `copy`
//! and `stream_wait` lines between their cores on every frame.

use std::cell::Cell;
use std::ops::Sub;
use std::sync::atomic::{AtomicU64, Ordering};

/// Shards a process hands out: the threads that may bump without a locked instruction at
/// once (the rest share one block).
pub(crate) const SHARDS: usize = 64;
const _: () = assert!(SHARDS.is_power_of_two() && SHARDS <= 64);

/// Which shards a live thread owns (bit `i`: shard `i`).
static CLAIMED: AtomicU64 = AtomicU64::new(0);

/// The thread's shard index, or one of these two: no `Drop`, so reading it is one load
/// (a thread-local with a destructor checks its state on every access) and it can be read
/// while the thread's other thread-locals are destroyed.
const UNCLAIMED: u8 = u8::MAX;
/// The shared block: no shard was free at the thread's first bump, or its claim was
/// given back (the thread is ending).
const SHARED: u8 = u8::MAX - 1;

thread_local! {
    /// The shard this thread bumps, [`UNCLAIMED`] or [`SHARED`].
    static SHARD: Cell<u8> = const { Cell::new(UNCLAIMED) };
    /// Gives the thread's shard back when the thread ends; touched only at the claim.
    static CLAIM: Claim = const { Claim(Cell::new(None)) };
}

/// A thread's claim on a shard, given back when the thread ends.
struct Claim(Cell<Option<u8>>);

impl Claim {
    /// A free shard, or `None` when every shard is owned.
    fn take() -> Option<u8> {
        let mut claimed = CLAIMED.load(Ordering::Acquire);
        loop {
            if claimed == u64::MAX {
                return None;
            }
            let i = (!claimed).trailing_zeros();
            match CLAIMED.compare_exchange_weak(
                claimed,
                claimed | (1 << i),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                #[allow(clippy::cast_possible_truncation, reason = "i < 64")]
                Ok(_) => return Some(i as u8),
                Err(now) => claimed = now,
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(i) = self.0.get() {
            // Later bumps of this thread (from other thread-locals' destructors) go to the
            // shared block before the shard can be another thread's.
            SHARD.set(SHARED);
            CLAIMED.fetch_and(!(1 << i), Ordering::Release);
        }
    }
}

/// The calling thread's shard, or `None` for the shared block.
#[inline]
fn my_shard() -> Option<usize> {
    match SHARD.get() {
        UNCLAIMED => claim(),
        SHARED => None,
        i => Some(usize::from(i)),
    }
}

/// The thread's first bump: claims a shard, registering its release at thread exit.
#[cold]
#[inline(never)]
fn claim() -> Option<usize> {
    // A thread whose thread-locals are being destroyed cannot register a release.
    let taken = CLAIM
        .try_with(|c| {
            let taken = Claim::take();
            c.0.set(taken);
            taken
        })
        .ok()
        .flatten();
    SHARD.set(taken.unwrap_or(SHARED));
    taken.map(usize::from)
}

macro_rules! counters {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        /// A kind of call a backend counts ([`DeviceCounters::bump`]).
        #[allow(non_camel_case_types, reason = "named as the snapshot's fields")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Count {
            $($field,)*
        }

        /// Every counter, once: a shard, or the shared block.
        #[derive(Default)]
        #[repr(align(64))]
        struct Block {
            $($field: AtomicU64,)*
        }

        impl Block {
            #[inline]
            fn get(&self, c: Count) -> &AtomicU64 {
                match c {
                    $(Count::$field => &self.$field,)*
                }
            }
        }

        /// Live counts of the successful calls made on one backend, one per call kind.
        ///
        /// A call is counted once it succeeded (a rejected handle counts nothing). Read
        /// them with [`snapshot`](Self::snapshot) and subtract two snapshots to count what
        /// one piece of code did.
        pub struct DeviceCounters {
            shards: Box<[Block; SHARDS]>,
            shared: Block,
        }

        impl Default for DeviceCounters {
            fn default() -> Self {
                Self {
                    // Built on the heap: the array is too large for a small thread
                    // stack (loom's, for one).
                    shards: (0..SHARDS)
                        .map(|_| Block::default())
                        .collect::<Box<[Block]>>()
                        .try_into()
                        .unwrap_or_else(|_| unreachable!("SHARDS blocks")),
                    shared: Block::default(),
                }
            }
        }

        /// A point-in-time copy of [`DeviceCounters`]. Subtract an earlier snapshot from a
        /// later one to get the calls made in between.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct CounterSnapshot {
            $($(#[$doc])* pub $field: u64,)*
        }

        impl DeviceCounters {
            /// Counts one call of kind `c`, on the calling thread's shard.
            #[inline]
            pub(crate) fn bump(&self, c: Count) {
                match my_shard() {
                    Some(i) => {
                        // The shard's only writer is this thread: a plain load and store,
                        // no locked instruction.
                        // (`i` < SHARDS: the mask only spares the bounds check.)
                        let n = self.shards[i & (SHARDS - 1)].get(c);
                        n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    }
                    None => {
                        self.shared.get(c).fetch_add(1, Ordering::Relaxed);
                    }
                }
            }

            /// Reads every counter. Counters bumped concurrently may or may not be included;
            /// a call that happened before the snapshot (a joined thread's, or one ordered
            /// before it by a channel or lock) is.
            pub fn snapshot(&self) -> CounterSnapshot {
                let sum = |c: Count| {
                    self.shards
                        .iter()
                        .chain(std::iter::once(&self.shared))
                        .map(|b| b.get(c).load(Ordering::Relaxed))
                        .sum()
                };
                CounterSnapshot { $($field: sum(Count::$field),)* }
            }
        }

        impl Sub for CounterSnapshot {
            type Output = CounterSnapshot;

            /// The calls made between `rhs` (earlier) and `self` (later). Saturates at zero
            /// if the operands are the wrong way round.
            fn sub(self, rhs: CounterSnapshot) -> CounterSnapshot {
                CounterSnapshot { $($field: self.$field.saturating_sub(rhs.$field),)* }
            }
        }

        impl CounterSnapshot {
            /// The sum of every count.
            pub fn total(&self) -> u64 {
                0 $(+ self.$field)*
            }
        }
    };
}

counters! {
    /// `create_stream` calls.
    stream_create,
    /// `destroy_stream` calls.
    stream_destroy,
    /// `create_event` calls.
    event_create,
    /// `destroy_event` calls.
    event_destroy,
    /// `record_event` calls.
    event_record,
    /// `wait_event` calls (a stream waiting on an event).
    stream_wait,
    /// `query_event` calls.
    event_query,
    /// `synchronize_event` calls (host blocking).
    event_synchronize,
    /// `synchronize_stream` calls (host blocking).
    stream_synchronize,
    /// `alloc` calls.
    alloc,
    /// `free` calls.
    free,
    /// `memset_async` calls.
    memset,
    /// `copy_async`, `copy_to_host_async` and `copy_from_host_async` calls.
    copy,
    /// `enqueue_delay` calls.
    delay,
    /// `DeviceIpc::import_fd` calls (another process's allocation mapped here).
    ipc_import,
    /// `DeviceIpc::release_import` calls.
    ipc_release,
    /// `DeviceIpc::register_host` and `register_host_read_only` calls.
    host_register,
    /// `DeviceIpc::unregister_host` calls.
    host_unregister,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_subtract_per_counter() {
        let counters = DeviceCounters::default();
        let before = counters.snapshot();
        counters.bump(Count::event_record);
        counters.bump(Count::event_record);
        counters.bump(Count::copy);
        let delta = counters.snapshot() - before;
        assert_eq!(
            delta,
            CounterSnapshot {
                event_record: 2,
                copy: 1,
                ..CounterSnapshot::default()
            }
        );
        assert_eq!(delta.total(), 3);
        assert_eq!((before - counters.snapshot()).total(), 0);
    }

    /// The two tests that claim many shards, one at a time (the unit tests share the
    /// process's shards).
    static MANY_SHARDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A thread gives its shard back when it ends: twice as many threads as there are
    /// shards, one after another, nearly all bump a shard of their own. Fails (at most
    /// `SHARDS` of them could) when an ended thread keeps its shard.
    #[test]
    fn an_ended_threads_shard_is_claimed_again() {
        let _one = MANY_SHARDS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let counters = DeviceCounters::default();
        let mut own = 0;
        for _ in 0..2 * SHARDS {
            let shard = std::thread::scope(|s| {
                s.spawn(|| {
                    counters.bump(Count::copy);
                    my_shard()
                })
                .join()
                .unwrap()
            });
            own += usize::from(shard.is_some());
        }
        assert_eq!(counters.snapshot().copy, 2 * SHARDS as u64);
        assert!(
            own > SHARDS + SHARDS / 2,
            "{own} of {} threads had a shard of their own",
            2 * SHARDS
        );
    }

    /// More threads bump at once than there are shards, so some own a shard (plain
    /// stores) and the rest share the atomic block: not one call is lost. Fails with the
    /// shared block bumped by a load and a store, or with two threads given one shard.
    #[test]
    fn concurrent_bumps_past_the_shard_count_are_all_counted() {
        const THREADS: usize = SHARDS + 16;
        // Fewer under Miri, which interprets every bump (the interleavings are what it checks).
        const PER: u64 = if cfg!(miri) { 50 } else { 100_000 };
        let _one = MANY_SHARDS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let counters = DeviceCounters::default();
        let start = std::sync::Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    // Every thread is alive, and has claimed its shard or none, before any
                    // bumps the counters under test.
                    my_shard();
                    start.wait();
                    for _ in 0..PER {
                        counters.bump(Count::copy);
                    }
                    counters.bump(Count::event_record);
                });
            }
        });
        let n = counters.snapshot();
        assert_eq!(n.copy, THREADS as u64 * PER);
        assert_eq!(n.event_record, THREADS as u64);
        assert!(
            counters.shared.copy.load(Ordering::Relaxed) > 0,
            "with {THREADS} threads alive, some bumped the shared block"
        );
    }
}
