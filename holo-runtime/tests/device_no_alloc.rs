//! The hot-path device calls allocate nothing on the caller's thread, checked with a
//! counting global allocator on every backend `test_backends()` returns.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use holo_runtime::__test_support::test_backends;
use holo_runtime::device::{AllocKind, DeviceBackend};

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

struct CountingAllocator;

// SAFETY: every call forwards to `System`; the count is a const-initialized thread-local
// `Cell`, which never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: forwarded from the caller.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: forwarded from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// One round of every hot-path call, with a pending event so waits really enqueue.
fn hot_path_round(device: &dyn DeviceBackend, host: &mut [u8; 256]) -> (u64, bool) {
    let streams = (
        device.create_stream().unwrap(),
        device.create_stream().unwrap(),
    );
    let event = device.create_event().unwrap();
    let buffer = device.alloc(AllocKind::Device, 256).unwrap();
    let before = allocations();
    let mut saw_pending = false;
    for _ in 0..50 {
        device
            .enqueue_delay(streams.0, Duration::from_micros(200))
            .unwrap();
        // SAFETY: `buffer` and `host` are live and 256 bytes long until the stream
        // synchronizations below, and are touched by no one else meanwhile.
        unsafe {
            device.memset_async(buffer, 7, 256, streams.0).unwrap();
            device
                .copy_async(buffer, buffer.checked_add(128).unwrap(), 64, streams.0)
                .unwrap();
        }
        device.record_event(event, streams.0).unwrap();
        saw_pending |= !device.query_event(event).unwrap();
        device.wait_event(streams.1, event).unwrap();
        // SAFETY: as above.
        unsafe {
            device
                .copy_to_host_async(host.as_mut_ptr(), buffer, 256, streams.1)
                .unwrap();
            device
                .copy_from_host_async(buffer, host.as_ptr(), 256, streams.1)
                .unwrap();
        }
    }
    device.synchronize_event(event).unwrap();
    device.synchronize_stream(streams.1).unwrap();
    let allocated = allocations() - before;
    // SAFETY: both streams have finished every operation on `buffer`.
    unsafe { device.free(AllocKind::Device, buffer, 256) }.unwrap();
    device.destroy_event(event).unwrap();
    device.destroy_stream(streams.0).unwrap();
    device.destroy_stream(streams.1).unwrap();
    (allocated, saw_pending)
}

#[test]
fn hot_path_calls_do_not_allocate_on_the_callers_thread() {
    for device in test_backends() {
        let mut host = [0_u8; 256];
        // The first round warms lazily initialized per-thread state (channel wakers, the
        // CUDA context binding); the second must allocate nothing.
        hot_path_round(device.as_ref(), &mut host);
        let (allocated, saw_pending) = hot_path_round(device.as_ref(), &mut host);
        assert!(
            saw_pending,
            "{}: the delays kept no event pending",
            device.backend_kind().name()
        );
        assert_eq!(
            allocated,
            0,
            "{}: hot-path allocations",
            device.backend_kind().name()
        );
        assert!(
            host.iter().all(|&b| b == 7),
            "{}",
            device.backend_kind().name()
        );
    }
}
