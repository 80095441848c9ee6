//! Zero heap allocations per DLPack export → import round trip once warm, checked with a
//! counting global allocator: a host tensor, and a device import (software device) exported
//! and imported again — each exported (`Tensor::to_dlpack`), imported
//! (`Tensor::from_dlpack`), read and dropped, which runs the import's deleter and the
//! capsule's (returning the slot).
//!
//! One test function per binary: the allocator counts process-wide, so nothing else may
//! run while it measures.

use std::hint::black_box;
use std::sync::Arc;

use holo_runtime::device::{AllocKind, DeviceBackend, SoftwareDevice};
use holo_runtime::dlpack::dtype_to_dlpack;
use holo_runtime::{DType, Tensor};

#[global_allocator]
static GLOBAL: holo_tests::counting::Counting = holo_tests::counting::Counting;

const ROUND_TRIPS: u64 = 10_000;

fn round_trip(t: &Tensor, backend: Option<&Arc<dyn DeviceBackend>>) {
    let capsule = t.to_dlpack(None).unwrap();
    let back = Tensor::from_dlpack(capsule, backend).unwrap();
    black_box(back.device_ptr());
    black_box(back.shape()[0]);
    drop(back);
}

/// Allocations made by `ROUND_TRIPS` round trips of `t`, after as many to warm up.
fn allocations(t: &Tensor, backend: Option<&Arc<dyn DeviceBackend>>) -> u64 {
    for _ in 0..ROUND_TRIPS {
        round_trip(t, backend);
    }
    let before = holo_tests::counting::allocations();
    for _ in 0..ROUND_TRIPS {
        round_trip(t, backend);
    }
    holo_tests::counting::allocations() - before
}

#[test]
fn a_dlpack_round_trip_allocates_nothing_once_warm() {
    holo_tests::counting::assert_counting();
    // Host memory: a pass-through tensor of the caller's bytes.
    let host = Tensor::from_host_vec(&[16, 16], DType::U8, vec![7; 256]).unwrap();
    assert_eq!(allocations(&host, None), 0, "host round trips allocated");

    // Device memory: another library's buffer on the software device, imported with its
    // readiness recorded, then exported and imported again.
    let backend: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let stream = backend.create_stream().unwrap();
    let ptr = backend.alloc(AllocKind::Device, 256).unwrap();
    let (d, _) = holo_tests::foreign::foreign_tensor(
        ptr.as_host_ptr().cast(),
        &[256],
        dtype_to_dlpack(DType::U8),
        holo_tests::foreign::cuda_device(0),
        None,
    );
    let device = Tensor::from_dlpack(d, Some(&backend)).unwrap();
    device.set_readiness_stream(stream).unwrap();
    assert_eq!(
        allocations(&device, Some(&backend)),
        0,
        "device round trips allocated"
    );
    drop(device);
    backend.synchronize_stream(stream).unwrap();
    backend.destroy_stream(stream).unwrap();
    // SAFETY: every import of the buffer is released and no stream uses it.
    unsafe { backend.free(AllocKind::Device, ptr, 256).unwrap() };
}
