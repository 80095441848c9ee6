//! `device_hop copy-probe`: what the fused hop's driver calls cost the host, by which call
//! makes the copy. The raw fused loop ([`raw_fused_loop`], the fused-probe's, from a fresh
//! thread) with its 256-byte device-to-device copy made by `cuMemcpyAsync` (the
//! unified-address call, which finds out the direction itself) and by
//! `cuMemcpyDtoDAsync_v2` (told it), and each call alone; rounds alternate the variants,
//! so a change in the card's state reaches all alike. Per variant: wall ns a frame, and the
//! host ns inside each call. Needs CUDA; elsewhere it says so.

use super::diag::{Calls, Memory, raw_fused_loop};
use super::{Arc, DeviceBackend, FRAMES, WARMUP};

/// The variants: a name and the calls.
const VARIANTS: [(&str, Calls); 5] = [
    ("fill + cuMemcpyAsync", Calls::FUSED),
    (
        "fill + cuMemcpyDtoDAsync",
        Calls {
            fill: true,
            copy_dtod: Some(true),
        },
    ),
    (
        "cuMemcpyAsync alone",
        Calls {
            fill: false,
            copy_dtod: Some(false),
        },
    ),
    (
        "cuMemcpyDtoDAsync alone",
        Calls {
            fill: false,
            copy_dtod: Some(true),
        },
    ),
    (
        "fill alone",
        Calls {
            fill: true,
            copy_dtod: None,
        },
    ),
];

/// Rounds of every variant.
const ROUNDS: usize = 5;

pub(super) fn run(device: &Arc<dyn DeviceBackend>) {
    if device.backend_kind() != holo_runtime::device::BackendKind::Cuda {
        println!("copy-probe needs HOLO_DEVICE=cuda");
        return;
    }
    println!(
        "copy probe on cuda {}: the raw fused loop from a fresh thread, {FRAMES} frames after {WARMUP}, {ROUNDS} rounds alternating; ns a frame (wall / in the fill / in the copy)",
        device.ordinal()
    );
    let mut rows: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); VARIANTS.len()];
    for _ in 0..ROUNDS {
        for (v, &(_, calls)) in VARIANTS.iter().enumerate() {
            let device = Arc::clone(device);
            let r = std::thread::spawn(move || {
                let s = device.create_stream().unwrap();
                let r = raw_fused_loop(&device, s, 0, Memory::Separate, calls);
                device.destroy_stream(s).unwrap();
                r
            })
            .join()
            .unwrap();
            rows[v].push(r);
        }
    }
    for (v, &(name, _)) in VARIANTS.iter().enumerate() {
        let cells: Vec<String> = rows[v]
            .iter()
            .map(|(w, f, c)| format!("{w:.0} / {f:.0} / {c:.0}"))
            .collect();
        println!("  {name:<26} {}", cells.join("   "));
    }
}
