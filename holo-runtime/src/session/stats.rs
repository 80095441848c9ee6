//! Allocation-free latency recording: a fixed log-linear histogram of atomics, one per
//! partition (each written only by its partition's thread), merged when the summary is
//! read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two: the relative resolution is 1/16 (about 6 %).
const SUB: usize = 16;
const SUB_BITS: u32 = 4;
const BUCKETS: usize = 64 * SUB;

pub(crate) struct LatencyHistogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
}

impl LatencyHistogram {
    pub(crate) fn new() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
        }
    }

    #[allow(
        clippy::manual_ilog2,
        reason = "the bucket math reads as the bit position"
    )]
    fn index(ns: u64) -> usize {
        if ns < SUB as u64 {
            return usize::try_from(ns).unwrap_or(0);
        }
        let log = ns.ilog2();
        let sub = (ns >> (log - SUB_BITS)) & (SUB as u64 - 1);
        (log - SUB_BITS + 1) as usize * SUB + usize::try_from(sub).unwrap_or(0)
    }

    /// The smallest value of bucket `i` (its lower edge).
    #[allow(
        clippy::cast_possible_truncation,
        reason = "i < BUCKETS, so i / SUB fits u32"
    )]
    fn lower(i: usize) -> u64 {
        if i < SUB {
            return i as u64;
        }
        let log = u32::try_from(i / SUB).unwrap_or(u32::MAX) + SUB_BITS - 1;
        let sub = (i % SUB) as u64;
        (1u64 << log) | (sub << (log - SUB_BITS))
    }

    /// Records one latency. Only the owning partition's thread records into a histogram,
    /// so each counter is a load and a store (no read-modify-write on the hot path).
    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        crate::channel::queue::bump(&self.buckets[Self::index(ns).min(BUCKETS - 1)]);
        crate::channel::queue::bump(&self.count);
    }

    /// The sum of several histograms (each partition's), for the run summary.
    pub(crate) fn merged<'a>(parts: impl IntoIterator<Item = &'a LatencyHistogram>) -> Self {
        let out = Self::new();
        for p in parts {
            for (o, b) in out.buckets.iter().zip(p.buckets.iter()) {
                o.fetch_add(b.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            out.count.fetch_add(p.count(), Ordering::Relaxed);
        }
        out
    }

    /// This histogram less an earlier snapshot of the same ones (`RunSession::reset_latency`).
    pub(crate) fn minus(&self, earlier: &LatencyHistogram) -> Self {
        let out = Self::new();
        for ((o, a), b) in out.buckets.iter().zip(&self.buckets).zip(&earlier.buckets) {
            o.store(
                a.load(Ordering::Relaxed)
                    .saturating_sub(b.load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
        }
        out.count.store(
            self.count().saturating_sub(earlier.count()),
            Ordering::Relaxed,
        );
        out
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The `q` quantile (0..=1), as the lower edge of the bucket holding it.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a rank within 1..=n"
        )]
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                return Some(Duration::from_nanos(Self::lower(i)));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_within_one_sixteenth() {
        let mut last = 0;
        for ns in [0u64, 1, 15, 16, 17, 31, 32, 1000, 123_456, 10_000_000_000] {
            let i = LatencyHistogram::index(ns);
            assert!(i >= last);
            last = i;
            let lo = LatencyHistogram::lower(i);
            assert!(lo <= ns, "{lo} <= {ns}");
            assert!(ns - lo <= ns / 16, "{ns} in bucket starting {lo}");
        }
    }

    #[test]
    fn quantiles_pick_the_right_bucket() {
        let h = LatencyHistogram::new();
        for _ in 0..99 {
            h.record(1_000);
        }
        h.record(1_000_000);
        assert_eq!(h.quantile(0.5), Some(Duration::from_nanos(992)));
        assert_eq!(h.quantile(0.99), Some(Duration::from_nanos(992)));
        assert_eq!(h.quantile(1.0), Some(Duration::from_nanos(983_040)));
        assert_eq!(LatencyHistogram::new().quantile(0.5), None);
    }
}
