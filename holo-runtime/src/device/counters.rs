//! Per-backend call counters: how tests prove that fusion elided exactly N event records,
//! and benches that a hot path made no device call it should not have.

use std::ops::Sub;
use std::sync::atomic::{AtomicU64, Ordering};

/// One counter on its own cache line, so threads bumping different counters do not
/// contend. Relaxed: a count orders nothing, and a relaxed add is a few nanoseconds.
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! counters {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        /// Live counts of the successful calls made on one backend, one per call kind.
        ///
        /// A call is counted once it succeeded (a rejected handle counts nothing). Read
        /// them with [`snapshot`](Self::snapshot) and subtract two snapshots to count what
        /// one piece of code did.
        #[derive(Default)]
        pub struct DeviceCounters {
            $(pub(crate) $field: Counter,)*
        }

        /// A point-in-time copy of [`DeviceCounters`]. Subtract an earlier snapshot from a
        /// later one to get the calls made in between.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct CounterSnapshot {
            $($(#[$doc])* pub $field: u64,)*
        }

        impl DeviceCounters {
            /// Reads every counter. Counters bumped concurrently may or may not be included.
            pub fn snapshot(&self) -> CounterSnapshot {
                CounterSnapshot { $($field: self.$field.get(),)* }
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
        counters.event_record.bump();
        counters.event_record.bump();
        counters.copy.bump();
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
}
