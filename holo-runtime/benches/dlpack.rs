//! DLPack export → import round trip, beside its baseline in the same process
//! (DESIGN.md, "Performance method").
//!
//! - **holo**: a host tensor → `Tensor::to_dlpack` (a read-only versioned capsule holding
//!   a slot handle) → `Tensor::from_dlpack` (a read-only tensor over a one-slot foreign
//!   pool) → read its first byte → drop (the import's deleter runs the capsule's, which
//!   releases the slot).
//! - **baseline**: the same exchange by hand with dlpark's types and no holo: box a
//!   `DLManagedTensorVersioned` with its shape and strides, take it with
//!   `Managed::from_raw`, read its shape and first byte, drop it (its deleter frees the box).
//!
//! Reported: ns per tensor, medians of 15 interleaved holo/baseline run pairs of 100,000
//! round trips each; the ratio is the median of the pairs' ratios. Target: holo ≤ 2 µs per
//! round trip (and 0 allocations: `tests/tests/dlpack_no_alloc.rs`).
//!
//! ```text
//! cargo bench -p holo-runtime --bench dlpack
//! ```

#![allow(
    clippy::cast_precision_loss,
    reason = "bench arithmetic on nanosecond timings"
)]

use std::ffi::c_void;
use std::hint::black_box;
use std::time::Instant;

use holo_runtime::dlpack::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensorVersioned, DLPACK_VERSION,
    DLTensor, Dlpack, DlpackFlags,
};
use holo_runtime::{DType, Tensor};

const ROUND_TRIPS: u32 = 100_000;
const PAIRS: usize = 15;

fn holo_round_trips(t: &Tensor) -> f64 {
    let start = Instant::now();
    for _ in 0..ROUND_TRIPS {
        let capsule = t.to_dlpack(None).expect("export");
        let back = Tensor::from_dlpack(capsule, None).expect("import");
        black_box(back.data().expect("host bytes")[0]);
        drop(back);
    }
    start.elapsed().as_nanos() as f64 / f64::from(ROUND_TRIPS)
}

/// A hand-built capsule: the managed tensor first, then what it points into.
#[repr(C)]
struct Bare {
    managed: DLManagedTensorVersioned,
    shape: [i64; 2],
    strides: [i64; 2],
}

unsafe extern "C" fn delete_bare(m: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `bare` below; called once.
    drop(unsafe { Box::from_raw(m.cast::<Bare>()) });
}

fn bare(data: *mut c_void) -> Dlpack {
    let mut b = Box::new(Bare {
        managed: DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_bare),
            flags: DlpackFlags::READ_ONLY,
            dl_tensor: DLTensor {
                data,
                device: DLDevice {
                    device_type: DLDeviceType::CPU,
                    device_id: 0,
                },
                ndim: 2,
                dtype: DLDataType {
                    code: DLDataTypeCode::UINT,
                    bits: 8,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: [16, 16],
        strides: [16, 1],
    });
    b.managed.dl_tensor.shape = b.shape.as_mut_ptr();
    b.managed.dl_tensor.strides = b.strides.as_mut_ptr();
    // SAFETY: a valid versioned tensor, owned, with a once-callable deleter.
    unsafe { Dlpack::from_raw(Box::into_raw(b).cast()) }.expect("current version")
}

fn baseline_round_trips(bytes: &mut [u8]) -> f64 {
    let data = bytes.as_mut_ptr().cast::<c_void>();
    let start = Instant::now();
    for _ in 0..ROUND_TRIPS {
        let capsule = bare(black_box(data));
        let raw = capsule.into_raw();
        // SAFETY: `raw` is the owned capsule just handed over.
        let taken = unsafe { Dlpack::from_raw(black_box(raw)) }.expect("current version");
        // SAFETY: the descriptor is not mutated; data and shape point to live memory.
        unsafe {
            let t = taken.tensor();
            black_box(*t.shape);
            black_box(*t.data.cast::<u8>());
        }
        drop(taken);
    }
    start.elapsed().as_nanos() as f64 / f64::from(ROUND_TRIPS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let t = Tensor::from_host_vec(&[16, 16], DType::U8, vec![7; 256]).expect("a tensor");
    let mut bytes = vec![7_u8; 256];
    // Warm-up: the recycled capsules and pools, the caches.
    holo_round_trips(&t);
    baseline_round_trips(&mut bytes);
    let (mut holo, mut base, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let (h, b) = (holo_round_trips(&t), baseline_round_trips(&mut bytes));
        holo.push(h);
        base.push(b);
        ratios.push(h / b);
    }
    if std::env::var_os("HOLO_BENCH_VERBOSE").is_some() {
        println!("  holo runs: {holo:.1?}\n  baseline runs: {base:.1?}\n  ratios: {ratios:.2?}");
    }
    let (h, b, r) = (median(holo), median(base), median(ratios));
    println!(
        "DLPack export → import round trip (16×16 u8 host tensor, ns/tensor, medians of {PAIRS} interleaved runs of {ROUND_TRIPS}):"
    );
    println!(
        "  holo {h:>9.1}   hand-built dlpark baseline {b:>9.1}   ratio {r:.2} (target: holo ≤ 2000 ns)"
    );
}
