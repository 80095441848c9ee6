//! The counting global allocator of the tests that check "no allocation per frame": a test
//! binary registers it —
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: holo_tests::counting::Counting = holo_tests::counting::Counting;
//! ```
//!
//! — and reads [`allocations`] around what it measures. Every allocation and reallocation
//! of the process is counted, then forwarded to the system allocator unchanged — except
//! those of the process's main thread, which in a test binary is libtest's harness: the
//! test runs on a thread of its own, and holo's workers on theirs, while the harness does
//! its own bookkeeping after it started the test. On a loaded machine that bookkeeping
//! (4 allocations) landed inside a measured window: `dlpack_no_alloc` failed 5 runs of 150
//! beside eight CPU hogs on a 2-vCPU VM, every time with 4 allocations, all made on the
//! main thread. (The benches have their own, `holo-runtime/benches/common/counting.rs`:
//! they cannot depend on this crate, and they measure on their main thread.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts every allocation of the process it is the global allocator of.
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's allocations are counted (`None`: not worked out yet).
    static COUNTED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Counts one allocation, unless the calling thread is the process's main thread (its
/// thread id is the process id), which is worked out once per thread.
fn count() {
    let counted = COUNTED
        .try_with(|c| {
            let counted = c
                .get()
                .unwrap_or_else(|| rustix::thread::gettid() != rustix::process::getpid());
            c.set(Some(counted));
            counted
        })
        // A thread being torn down: counted.
        .unwrap_or(true);
    if counted {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Allocations and reallocations so far (0 where `Counting` is not the global allocator).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Panics unless `Counting` is this process's global allocator and counts the calling
/// thread (a count that cannot move would make a "no allocation" check pass vacuously;
/// the main thread, libtest's harness, is not counted).
///
/// # Panics
/// As said.
pub fn assert_counting() {
    let before = allocations();
    let probe = std::hint::black_box(Box::new(7u64));
    drop(probe);
    assert!(
        allocations() > before,
        "holo_tests::counting::Counting is not the global allocator of this test binary, or the test runs on the process's main thread, which it does not count"
    );
}
