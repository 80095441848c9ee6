//! The timing helpers of the benches that pace frames and compare latencies across
//! processes (`#[path = "common/timing.rs"] mod timing;`).

#![allow(
    clippy::cast_sign_loss,
    reason = "CLOCK_MONOTONIC's seconds and nanoseconds are never negative"
)]

use std::time::{Duration, Instant};

/// `CLOCK_MONOTONIC` in nanoseconds: the clock every process of the machine shares.
pub(crate) fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Sleeps to `deadline`, spinning its last 30 µs.
pub(crate) fn pace(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > Duration::from_micros(60) {
            std::thread::sleep(left.saturating_sub(Duration::from_micros(30)));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Latencies (ns) of the measured frames: p50, p99.
pub(crate) fn percentiles(mut v: Vec<u64>) -> (u64, u64) {
    v.sort_unstable();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}
