//! How a thread that found nothing to do waits for work: a partition thread between
//! scheduling rounds ([`partition_loop`](super::run)) and a standalone subscriber in
//! [`ChannelSubscriber::receive`](crate::ChannelSubscriber::receive), one policy for both.
//!
//! It spins 2^step times for steps 0..=[`SPIN_STEPS`] (crossbeam's `Backoff`), then keeps
//! re-checking, with a spin hint between checks, until the idle spin has passed since the
//! wait began, yielding the CPU once every [`YIELD_EVERY`]; then the caller parks until a
//! push wakes it. A steady stream is picked up without a futex wake; an idle thread parks
//! after the idle spin.

use std::time::{Duration, Instant};

/// The spinning steps before the re-checking phase.
const SPIN_STEPS: u32 = 6;

/// How long an idle thread re-checks between two `sched_yield`s. A yield lets another
/// thread of the CPU run (a machine with fewer cores than busy threads still runs them
/// all), but a frame that arrives while the waiter is inside one waits for the call to
/// return; re-checking for a while between yields, as the raw baselines' consumers do (a
/// yield every 64th check), finds most frames within one check. (A subscriber that yielded
/// at every check after its first 64 took 1.21× the operator hop's p50 on an H100 in the
/// twenty-eighth session: BENCHMARKS.md.)
pub(crate) const YIELD_EVERY: Duration = Duration::from_micros(4);

/// What the caller does after one [`IdleWait::snooze`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Idle {
    /// It waited a little: check for work again.
    Check,
    /// The idle spin has passed: park until woken (then [`IdleWait::reset`]).
    Park,
}

/// One waiter's idle state (the module's documentation).
pub(crate) struct IdleWait {
    step: u32,
    since: Instant,
    last_yield: Instant,
    /// The yields made (a test's observation of [`YIELD_EVERY`]).
    #[cfg(test)]
    yields: u32,
}

impl IdleWait {
    pub(crate) fn new() -> Self {
        let now = Instant::now();
        Self {
            step: 0,
            since: now,
            last_yield: now,
            #[cfg(test)]
            yields: 0,
        }
    }

    /// Work was found, or the waiter parked and woke: the next wait starts over.
    #[inline]
    pub(crate) fn reset(&mut self) {
        self.step = 0;
    }

    /// One round of waiting after a check that found nothing, `idle_spin` long in all
    /// before it says [`Idle::Park`].
    pub(crate) fn snooze(&mut self, idle_spin: Duration) -> Idle {
        if self.step <= SPIN_STEPS {
            for _ in 0..1u32 << self.step {
                std::hint::spin_loop();
            }
            if self.step == 0 {
                self.since = Instant::now();
                self.last_yield = self.since;
            }
            self.step += 1;
            return Idle::Check;
        }
        let now = Instant::now();
        if now.duration_since(self.since) >= idle_spin {
            return Idle::Park;
        }
        if now.duration_since(self.last_yield) >= YIELD_EVERY {
            std::thread::yield_now();
            self.last_yield = Instant::now();
            #[cfg(test)]
            {
                self.yields += 1;
            }
        } else {
            std::hint::spin_loop();
        }
        Idle::Check
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
    )]
    fn spins_then_parks_after_the_idle_spin_and_starts_over_on_reset() {
        let mut w = IdleWait::new();
        // The spinning steps never park, whatever the idle spin.
        for _ in 0..=SPIN_STEPS {
            assert_eq!(w.snooze(Duration::ZERO), Idle::Check);
        }
        // Past them, a zero idle spin parks at once.
        assert_eq!(w.snooze(Duration::ZERO), Idle::Park);
        // A long one keeps checking.
        assert_eq!(w.snooze(Duration::from_mins(1)), Idle::Check);
        // The timed part holds in at least one of four attempts, each idle spin four times
        // the last (5, 20, 80, 320 ms): on a loaded machine each yield can give the CPU
        // away for milliseconds, leaving too few checks in a short idle spin to count (CI's
        // load, RELIABILITY.md "The suite under load": 16 test threads beside three CPU
        // hogs failed five attempts of 5 ms in 6 runs of 15); a waiter that slept instead
        // of checking, or yielded at every check, fails every attempt.
        let mut failed = String::new();
        for attempt in 0..4 {
            let idle_spin = Duration::from_millis(5 << (2 * attempt));
            // Reset: the wait starts over (spinning steps, then the idle spin from now).
            w.reset();
            let yields_before = w.yields;
            let begun = Instant::now();
            let mut checks = 0u32;
            while w.snooze(idle_spin) == Idle::Check {
                checks += 1;
            }
            // It parked no earlier than the idle spin after the wait began (always), having
            // checked many times meanwhile (not one long sleep), and yielded at most once
            // every YIELD_EVERY, not after every check.
            let elapsed = begun.elapsed();
            assert!(elapsed >= idle_spin);
            let most = u32::try_from(elapsed.as_nanos() / YIELD_EVERY.as_nanos()).unwrap() + 1;
            let yields = w.yields - yields_before;
            if checks <= SPIN_STEPS + 10 {
                failed = format!("{checks} checks");
            } else if yields < 1 || yields > most {
                failed = format!("{yields} yields in {elapsed:?}");
            } else if checks <= 2 * yields {
                failed = format!("{checks} checks, {yields} yields");
            } else {
                return;
            }
        }
        panic!("in every attempt: the last, {failed}");
    }
}
