//! The CPU's own counters around a bench's batches (Linux `perf_event_open`, through
//! `perf-event2`), user space only: cycles, instructions, branch misses, L1 instruction
//! cache and instruction TLB read misses, counted as one group so that every figure covers
//! the same instructions, and the kernel's task clock and context switches beside them. A
//! counter the CPU or the kernel does not offer is left out (and named: a virtual machine
//! without a PMU has only the software two); where none can be opened (a container without
//! `perf_event_open`, or `perf_event_paranoid` above 2) [`CpuCounters::open`] says why, and
//! the bench prints it.

#![allow(
    clippy::cast_precision_loss,
    reason = "event counts per call, as floating-point figures"
)]
#![allow(dead_code, reason = "each bench uses its part")]

use std::time::Instant;

use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Event, Hardware, Software};
use perf_event::{Builder, Counter, Group};

/// One opened group and the members that could be opened (in the order `open` asks for
/// them).
pub(crate) struct CpuCounters {
    group: Group,
    members: Vec<(&'static str, Counter)>,
    /// The counters that could not be opened, and why.
    pub(crate) missing: Vec<String>,
}

/// What a batch cost, per call: each counter's count and the wall time.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerCall {
    pub(crate) counts: Vec<(&'static str, f64)>,
    pub(crate) ns: f64,
    /// Whether the group ran the whole batch (not multiplexed with another group).
    pub(crate) whole: bool,
}

impl PerCall {
    /// "ns, GHz (cycles over the wall time), then each count", and "(multiplexed)" where
    /// the group did not run the whole time.
    pub(crate) fn describe(&self) -> String {
        use std::fmt::Write as _;
        let cycles = self.get("cycles").unwrap_or(f64::NAN);
        let mut s = format!("{:>8.1} ns {:>5.2} GHz", self.ns, cycles / self.ns);
        for (name, v) in &self.counts {
            let _ = write!(s, "  {name} {v:.1}");
        }
        if !self.whole {
            s.push_str("  (multiplexed)");
        }
        s
    }

    /// Each figure less `base`'s.
    pub(crate) fn less(&self, base: &PerCall) -> String {
        use std::fmt::Write as _;
        let mut s = format!("{:>+8.1} ns", self.ns - base.ns);
        for ((name, v), (_, b)) in self.counts.iter().zip(&base.counts) {
            let _ = write!(s, "  {name} {:+.1}", v - b);
        }
        s
    }

    /// The count of `name`, if it was counted.
    pub(crate) fn get(&self, name: &str) -> Option<f64> {
        self.counts
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

fn builder(event: impl Event + 'static) -> Builder<'static> {
    let mut b = Builder::new(event);
    b.exclude_kernel(true).exclude_hv(true);
    b
}

impl CpuCounters {
    /// Opens the group on the calling thread.
    pub(crate) fn open() -> Result<Self, String> {
        let mut group = Group::builder()
            .exclude_kernel(true)
            .exclude_hv(true)
            .build_group()
            .map_err(|e| format!("perf_event_open: {e}"))?;
        let l1i = Cache {
            which: CacheId::L1I,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        };
        let itlb = Cache {
            which: CacheId::ITLB,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        };
        let wanted: Vec<(&'static str, Builder<'static>)> = vec![
            ("cycles", builder(Hardware::CPU_CYCLES)),
            ("instructions", builder(Hardware::INSTRUCTIONS)),
            ("branch-misses", builder(Hardware::BRANCH_MISSES)),
            ("L1i-misses", builder(l1i)),
            ("iTLB-misses", builder(itlb)),
            // Software events, counted by the kernel wherever perf_event_open is allowed:
            // the thread's time on a CPU (below the wall time when it was descheduled) and
            // its context switches.
            ("task-clock-ns", builder(Software::TASK_CLOCK)),
            ("context-switches", builder(Software::CONTEXT_SWITCHES)),
        ];
        let (mut members, mut missing) = (Vec::new(), Vec::new());
        for (name, b) in wanted {
            match b.build_with_group(&mut group) {
                Ok(c) => members.push((name, c)),
                Err(e) => missing.push(format!("{name} ({e})")),
            }
        }
        if members.is_empty() {
            return Err(format!(
                "no counter could be opened: {}",
                missing.join(", ")
            ));
        }
        Ok(Self {
            group,
            members,
            missing,
        })
    }

    /// Runs `calls` calls of `f`, counted, and returns the counts per call.
    pub(crate) fn measure(&mut self, calls: u32, mut f: impl FnMut()) -> PerCall {
        let started = self.start();
        for _ in 0..calls {
            f();
        }
        self.stop(started, u64::from(calls))
    }

    /// Starts counting from zero; returns when, for [`stop`](Self::stop).
    pub(crate) fn start(&mut self) -> Instant {
        let _ = self.group.reset();
        let t0 = Instant::now();
        let _ = self.group.enable();
        t0
    }

    /// Stops counting and returns the counts since `started`, per one of `calls` calls.
    pub(crate) fn stop(&mut self, started: Instant, calls: u64) -> PerCall {
        let _ = self.group.disable();
        let ns = started.elapsed().as_secs_f64() * 1e9;
        let n = calls as f64;
        match self.group.read() {
            Ok(data) => PerCall {
                counts: self
                    .members
                    .iter()
                    .map(|(name, c)| {
                        (
                            *name,
                            data.get(c).map_or(f64::NAN, |e| e.value() as f64) / n,
                        )
                    })
                    .collect(),
                ns: ns / n,
                whole: data.time_enabled() == data.time_running(),
            },
            Err(_) => PerCall {
                ns: ns / n,
                ..PerCall::default()
            },
        }
    }

    /// The counted names, in order.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.members.iter().map(|(n, _)| *n).collect()
    }
}

/// Medians, counter by counter, of per-call figures (and of the wall time).
pub(crate) fn medians(rows: &[PerCall], names: &[&'static str]) -> PerCall {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    PerCall {
        counts: names
            .iter()
            .map(|&name| {
                (
                    name,
                    median(rows.iter().filter_map(|r| r.get(name)).collect()),
                )
            })
            .collect(),
        ns: median(rows.iter().map(|r| r.ns).collect()),
        whole: rows.iter().all(|r| r.whole),
    }
}
