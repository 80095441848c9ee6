//! `device_hop copy-probe`: what the fused hop's driver calls cost the host, by which call
//! makes the copy. The raw fused loop (fill a slot of a ring of `K`, copy it into a scratch
//! buffer, on one stream, from a fresh thread) with its 256-byte device-to-device copy made
//! by `cuMemcpyAsync` (the unified-address call, which finds out the direction itself) and
//! by `cuMemcpyDtoDAsync_v2` (told it), and each call alone; rounds alternate the variants,
//! so a change in the card's state reaches all alike. Per variant: wall ns a frame, and the
//! host ns inside each call. Needs CUDA; elsewhere it says so.

use super::{Arc, BYTES, DeviceBackend, FRAMES, Instant, K, WARMUP};

/// The variants: (name, fill, copy, copy call).
#[cfg(feature = "cuda")]
const VARIANTS: [(&str, bool, bool, bool); 5] = [
    ("fill + cuMemcpyAsync", true, true, false),
    ("fill + cuMemcpyDtoDAsync", true, true, true),
    ("cuMemcpyAsync alone", false, true, false),
    ("cuMemcpyDtoDAsync alone", false, true, true),
    ("fill alone", true, false, false),
];

/// Rounds of every variant.
#[cfg(feature = "cuda")]
const ROUNDS: usize = 5;

#[cfg(feature = "cuda")]
#[allow(
    clippy::many_single_char_names,
    reason = "the raw loop names its device, stream, slot and clock readings as diag.rs's does"
)]
pub(super) fn run(device: &Arc<dyn DeviceBackend>) {
    use cudarc::driver::sys;
    if device.backend_kind() != holo_runtime::device::BackendKind::Cuda {
        println!("copy-probe needs HOLO_DEVICE=cuda");
        return;
    }
    println!(
        "copy probe on cuda {}: the raw fused loop from a fresh thread, {FRAMES} frames after {WARMUP}, {ROUNDS} rounds alternating; ns a frame (wall / in the fill / in the copy)",
        device.ordinal()
    );
    let ok = |r: sys::CUresult| assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    let mut rows: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); VARIANTS.len()];
    for _ in 0..ROUNDS {
        for (v, &(_, fill, copy, dtod)) in VARIANTS.iter().enumerate() {
            let device = Arc::clone(device);
            let r = std::thread::spawn(move || {
                let d = device.as_ref();
                // Makes the context current on this thread (the sys calls need it).
                let _ = d.create_event().map(|e| d.destroy_event(e));
                let s = d.create_stream().unwrap();
                let raw_s = super::ptr(s.raw());
                let slots = super::diag::buffers(d, K);
                let scratch = super::diag::buffers(d, 1);
                let (mut in_fill, mut in_copy) = (0u64, 0u64);
                let mut t0 = Instant::now();
                for i in 0..(WARMUP + FRAMES) as usize {
                    if i == WARMUP as usize {
                        d.synchronize_stream(s).unwrap();
                        (in_fill, in_copy) = (0, 0);
                        t0 = Instant::now();
                    }
                    let k = i % K;
                    let a = Instant::now();
                    if fill {
                        // SAFETY: a live allocation of BYTES on a live stream; context current.
                        ok(unsafe { sys::cuMemsetD8Async(slots[k].raw(), 0x2A, BYTES, raw_s) });
                    }
                    let b = Instant::now();
                    if copy {
                        let (dst, src) = (scratch[0].raw(), slots[k].raw());
                        // SAFETY: two live, disjoint device allocations of BYTES.
                        ok(unsafe {
                            if dtod {
                                sys::cuMemcpyDtoDAsync_v2(dst, src, BYTES, raw_s)
                            } else {
                                sys::cuMemcpyAsync(dst, src, BYTES, raw_s)
                            }
                        });
                    }
                    in_copy += b.elapsed().as_nanos() as u64;
                    in_fill += (b - a).as_nanos() as u64;
                }
                d.synchronize_stream(s).unwrap();
                let per = |x: f64| x / FRAMES as f64;
                let out = (
                    per(t0.elapsed().as_nanos() as f64),
                    per(in_fill as f64),
                    per(in_copy as f64),
                );
                for p in slots.into_iter().chain(scratch) {
                    // SAFETY: the stream that used them was synchronized.
                    unsafe {
                        d.free(holo_runtime::device::AllocKind::Device, p, BYTES)
                            .unwrap();
                    }
                }
                d.destroy_stream(s).unwrap();
                out
            })
            .join()
            .unwrap();
            rows[v].push(r);
        }
    }
    for (v, &(name, ..)) in VARIANTS.iter().enumerate() {
        let cells: Vec<String> = rows[v]
            .iter()
            .map(|(w, f, c)| format!("{w:.0} / {f:.0} / {c:.0}"))
            .collect();
        println!("  {name:<26} {}", cells.join("   "));
    }
}

#[cfg(not(feature = "cuda"))]
pub(super) fn run(_device: &Arc<dyn DeviceBackend>) {
    println!("copy-probe needs the cuda feature and HOLO_DEVICE=cuda");
}
