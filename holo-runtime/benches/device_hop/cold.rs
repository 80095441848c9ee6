//! `device_hop -- cold-probe`: what a cache line of code or data costs when it is touched
//! right after a driver call, as holo's work between a fused hop's two calls is.
//!
//! The raw fused loop (fill a slot, copy it into a scratch buffer, on one stream, from one
//! thread) runs plain, then with work between its calls: after each call, `LINES` lines of
//! code executed once each (one jump per line, 128 bytes apart, so that the next-line
//! prefetcher fetches padding, not the next jump), or `LINES` lines of data read once each
//! (4160 bytes apart, in ten chains of five: each line holds the next line's index, so
//! that a load waits for the one before, as holo's field-to-pointer-to-field loads do,
//! with ten such walks in flight), or both. The same
//! work is timed alone, in a loop with no driver call between (its warm cost). A line's
//! cost after a driver call is then (loop with the work − plain loop − warm cost) ÷ the
//! lines touched per frame. holo's fused hop executes about 100 distinct lines of code per
//! frame (60 if its hot instructions were contiguous): `BENCHMARKS.md`, "The fused hop's
//! code lines".

use std::hint::black_box;

use super::diag::{buffers, raw_for};
use super::{AllocKind, Arc, BYTES, DeviceBackend, FRAMES, Instant, K, WARMUP, median};

/// Lines touched after each driver call (twice a frame).
const LINES: usize = 50;

/// Bytes between two lines of the data chain: a page and a line, so that neither the
/// adjacent-line nor the stride prefetcher brings the next one in.
const DATA_STRIDE: usize = 4096 + 64;

/// The work between two driver calls.
#[derive(Clone, Copy, PartialEq)]
enum Work {
    None,
    Code,
    Data,
    Both,
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Work::None => "nothing between the calls",
            Work::Code => "50 code lines after each call",
            Work::Data => "50 data lines (10 chains of 5) after each call",
            Work::Both => "50 code and 50 data lines after each call",
        }
    }
}

/// Executes 50 jumps, each on a line of its own (the module's doc).
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn code_lines() {
    // SAFETY: straight-line jumps forward within the block; no memory, stack or flags
    // touched.
    unsafe {
        std::arch::asm!(
            ".p2align 7, 0xcc",
            ".rept 50",
            "jmp 2f",
            ".p2align 7, 0xcc",
            "2:",
            ".endr",
            options(nostack, preserves_flags, nomem)
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn code_lines() {}

/// The data lines: `LINES` lines `DATA_STRIDE` apart, in `CHAINS` chains, each line
/// holding the offset of the next line of its chain.
struct Chain(Vec<u64>);

/// Chains walked side by side: `LINES / CHAINS` dependent loads each, as holo's loads go
/// from a field to a pointer to a field a few deep, with several such walks in flight.
const CHAINS: usize = 10;

impl Chain {
    fn new() -> Chain {
        let words = DATA_STRIDE / 8;
        let depth = LINES / CHAINS;
        let mut v = vec![0u64; LINES * words + 8];
        for c in 0..CHAINS {
            for s in 0..depth {
                v[(c * depth + s) * words] = ((c * depth + (s + 1) % depth) * words) as u64;
            }
        }
        Chain(v)
    }

    /// Walks every chain once from its head; returns a sum of where they ended (kept, so
    /// the loads are not elided).
    #[inline(never)]
    fn walk(&self) -> u64 {
        let words = DATA_STRIDE / 8;
        let depth = LINES / CHAINS;
        let mut at: [u64; CHAINS] = std::array::from_fn(|c| (c * depth * words) as u64);
        for _ in 0..depth {
            for a in &mut at {
                *a = self.0[*a as usize];
            }
        }
        at.iter().sum()
    }
}

/// The work after one driver call.
#[inline]
fn after_call(work: Work, chain: &Chain, at: &mut u64) {
    if matches!(work, Work::Code | Work::Both) {
        code_lines();
    }
    if matches!(work, Work::Data | Work::Both) {
        *at = at.wrapping_add(chain.walk());
    }
}

/// ns per frame of the raw fused loop with `work` after each call, on a fresh thread.
fn raw_loop(device: &Arc<dyn DeviceBackend>, work: Work) -> f64 {
    let device = Arc::clone(device);
    std::thread::spawn(move || {
        let r = raw_for(&device);
        let d = device.as_ref();
        let stream = d.create_stream().unwrap();
        let slots = buffers(d, K);
        let scratch = buffers(d, 1)[0];
        let chain = Chain::new();
        let mut at = 0;
        let mut t0 = Instant::now();
        for i in 0..(WARMUP + FRAMES) as usize {
            if i == WARMUP as usize {
                d.synchronize_stream(stream).unwrap();
                t0 = Instant::now();
            }
            let k = i % K;
            r.memset(slots[k], stream);
            after_call(work, &chain, &mut at);
            r.copy(scratch, slots[k], stream);
            after_call(work, &chain, &mut at);
        }
        d.synchronize_stream(stream).unwrap();
        let ns = t0.elapsed().as_nanos() as f64 / FRAMES as f64;
        black_box(at);
        for p in slots.into_iter().chain([scratch]) {
            // SAFETY: the stream that used them was synchronized.
            unsafe { d.free(AllocKind::Device, p, BYTES).unwrap() };
        }
        d.destroy_stream(stream).unwrap();
        ns
    })
    .join()
    .unwrap()
}

/// ns of `work` done twice (a frame's worth), warm: in a loop with nothing between.
fn warm(work: Work) -> f64 {
    let chain = Chain::new();
    let mut at = 0;
    let n = 200_000;
    for _ in 0..n / 10 {
        after_call(work, &chain, &mut at);
    }
    let t0 = Instant::now();
    for _ in 0..n {
        after_call(work, &chain, &mut at);
        after_call(work, &chain, &mut at);
    }
    black_box(at);
    t0.elapsed().as_nanos() as f64 / f64::from(n)
}

/// `device_hop cold-probe` (the module's doc): 9 rounds, the variants in turn, medians.
pub(super) fn run(device: &Arc<dyn DeviceBackend>) {
    println!(
        "cold probe on {} {}: the raw fused loop with work after each driver call, ns per frame (medians of 9 rounds of {FRAMES}-frame runs)",
        device.backend_kind().name(),
        device.ordinal()
    );
    let variants = [Work::None, Work::Code, Work::Data, Work::Both];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for round in 0..9 {
        for k in 0..variants.len() {
            // Rotated, so that no variant always runs first.
            let v = (k + round) % variants.len();
            ns[v].push(raw_loop(device, variants[v]));
        }
    }
    let plain = median(ns[0].clone());
    for (v, runs) in variants.iter().zip(ns) {
        let wall = median(runs);
        let hot = warm(*v);
        let cold = wall - plain - hot;
        let lines = match v {
            Work::None => 0,
            Work::Code | Work::Data => 2 * LINES,
            Work::Both => 4 * LINES,
        };
        let per_line = if lines == 0 {
            String::new()
        } else {
            format!("; {:.2} ns a line more than warm", cold / lines as f64)
        };
        println!(
            "  {:<44} {wall:>8.1} ns/frame, {:>+7.1} over plain; the work alone, warm: {hot:>6.1} ns{per_line}",
            v.name(),
            wall - plain
        );
    }
}
