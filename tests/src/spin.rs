//! A GPU kernel that keeps a CUDA stream busy for a given time: the "delay kernel" of the
//! cross-process device tests. Unlike a host function (`DeviceBackend::enqueue_delay`), a
//! kernel dies with its process's context, so a process killed while it runs exits at
//! once.

use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::driver::sys;
use holo_runtime::{Error, ErrorCode, Result};

/// `spin(ns)`: one thread reads `%globaltimer` until `ns` nanoseconds have passed.
const PTX: &str = "
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 ns)
{
    .reg .u64 %t0, %t1, %d, %n;
    .reg .pred %p;
    ld.param.u64 %n, [ns];
    mov.u64 %t0, %globaltimer;
LOOP:
    mov.u64 %t1, %globaltimer;
    sub.u64 %d, %t1, %t0;
    setp.lt.u64 %p, %d, %n;
    @%p bra LOOP;
    ret;
}
\0";

/// The loaded kernel (one module per process: the tests use one context).
struct Kernel(sys::CUfunction);
// SAFETY: a CUfunction is a process-wide driver handle, usable from any thread.
unsafe impl Send for Kernel {}
// SAFETY: as above; never mutated.
unsafe impl Sync for Kernel {}

fn check(call: &str, r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::new(ErrorCode::Internal, format!("{call}: {r:?}")))
    }
}

fn kernel() -> Result<sys::CUfunction> {
    static KERNEL: OnceLock<std::result::Result<Kernel, String>> = OnceLock::new();
    KERNEL
        .get_or_init(|| {
            let mut module: sys::CUmodule = std::ptr::null_mut();
            // SAFETY: a NUL-terminated PTX image; the caller's context is current.
            check("cuModuleLoadData", unsafe {
                sys::cuModuleLoadData(&raw mut module, PTX.as_ptr().cast())
            })
            .map_err(|e| e.to_string())?;
            let mut f: sys::CUfunction = std::ptr::null_mut();
            // SAFETY: the module was loaded just above; the name is NUL-terminated.
            check("cuModuleGetFunction", unsafe {
                sys::cuModuleGetFunction(&raw mut f, module, c"spin".as_ptr())
            })
            .map_err(|e| e.to_string())?;
            Ok(Kernel(f))
        })
        .as_ref()
        .map(|k| k.0)
        .map_err(|e| Error::new(ErrorCode::Internal, e.clone()))
}

/// Enqueues the spin kernel for `duration` on the CUDA stream `raw` (a `CUstream` as an
/// integer), in the context current on this thread.
pub fn spin(raw: u64, duration: std::time::Duration) -> Result<()> {
    let f = kernel()?;
    let mut ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let mut params = [(&raw mut ns).cast::<c_void>()];
    let stream: sys::CUstream =
        std::ptr::with_exposed_provenance_mut(usize::try_from(raw).unwrap_or(usize::MAX));
    // SAFETY: one block of one thread; the one parameter is a u64 read during the call.
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}
