//! The counting global allocator of the tests that check "no allocation per frame": a test
//! binary registers it —
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: holo_tests::counting::Counting = holo_tests::counting::Counting;
//! ```
//!
//! — and reads [`allocations`] around what it measures. Every allocation and reallocation
//! of the process is counted, then forwarded to the system allocator unchanged. (The
//! benches have their own, `holo-runtime/benches/common/counting.rs`: they cannot depend on
//! this crate.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts every allocation of the process it is the global allocator of.
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Allocations and reallocations so far (0 where `Counting` is not the global allocator).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Panics unless `Counting` is this process's global allocator (a count that cannot move
/// would make a "no allocation" check pass vacuously).
///
/// # Panics
/// As said.
pub fn assert_counting() {
    let before = allocations();
    let probe = std::hint::black_box(Box::new(7u64));
    drop(probe);
    assert!(
        allocations() > before,
        "holo_tests::counting::Counting is not the global allocator of this test binary"
    );
}
