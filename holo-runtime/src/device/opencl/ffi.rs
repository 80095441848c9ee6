//! The OpenCL library, loaded at run time through `cl3` (the FFI layer of `opencl3`), the
//! few constants the backend names, the mapping of OpenCL status codes to holo's, and the
//! enumeration of platforms and devices.
//!
//! `cl3`'s loader exposes each entry point as a method that answers `None` when the
//! library lacks it; [`cl!`] turns that into `DeviceUnavailable`, naming the call. The
//! loader's methods are typed safe, but each call's soundness rests on the handles passed:
//! every call site names the invariant that keeps them live.

use std::ffi::c_void;
use std::ptr;
use std::sync::OnceLock;

pub(super) use cl3::types::{
    cl_command_queue, cl_context, cl_device_id, cl_event, cl_int, cl_mem, cl_platform_id, cl_uint,
};

use crate::{Error, ErrorCode, Result};

/// The loaded library.
pub(super) type Library = cl3::OpenClRuntime;

pub(super) const CL_SUCCESS: cl_int = 0;
pub(super) const CL_COMPLETE: cl_int = 0;
pub(super) const CL_FALSE: cl_uint = 0;
pub(super) const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
pub(super) const CL_DEVICE_NAME: cl_uint = 0x102B;
pub(super) const CL_PLATFORM_NAME: cl_uint = 0x0902;
pub(super) const CL_CONTEXT_DEVICES: cl_uint = 0x1081;
pub(super) const CL_QUEUE_CONTEXT: cl_uint = 0x1090;
pub(super) const CL_MEM_CONTEXT: cl_uint = 0x1106;
pub(super) const CL_MEM_SIZE: cl_uint = 0x1102;
pub(super) const CL_MEM_READ_WRITE: u64 = 1;
pub(super) const CL_EVENT_COMMAND_EXECUTION_STATUS: cl_uint = 0x11D3;

/// Calls `lib.$name(args…)`: the status or handle it returns, or `DeviceUnavailable` when
/// the loaded library lacks the entry point.
macro_rules! cl {
    ($lib:expr, $name:ident($($arg:expr),* $(,)?)) => {
        match $lib.$name($($arg),*) {
            Some(result) => result,
            None => return Err($crate::device::opencl::ffi::missing(stringify!($name))),
        }
    };
}
pub(super) use cl;

#[cold]
pub(super) fn missing(name: &'static str) -> Error {
    Error::new(
        ErrorCode::DeviceUnavailable,
        format!(
            "the OpenCL library lacks `{name}`: it is older than this build needs (OpenCL 1.2)"
        ),
    )
}

/// The library, loaded once. `DeviceUnavailable` when `libOpenCL.so.1` is absent.
pub(super) fn library() -> Result<&'static Library> {
    match cl3::load_library() {
        Ok(library) => Ok(library),
        Err(error) => Err(Error::new(
            ErrorCode::DeviceUnavailable,
            format!(
                "the OpenCL library (libOpenCL.so.1) was not found on this machine ({error}): install an ICD loader and a driver (Debian: apt-get install ocl-icd-libopencl1 pocl-opencl-icd)"
            ),
        )),
    }
}

/// Whether an OpenCL library (`libOpenCL.so.1`) can be loaded on this machine.
pub fn library_present() -> bool {
    cl3::is_opencl_runtime_available()
}

/// Maps an OpenCL status to holo's codes, naming the call that failed.
#[cold]
pub(super) fn cl_error(call: &'static str, status: cl_int) -> Error {
    let code = match status {
        // CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY,
        // CL_INVALID_BUFFER_SIZE.
        -4 | -5 | -6 | -61 => ErrorCode::ResourceExhausted,
        // CL_DEVICE_NOT_FOUND, CL_DEVICE_NOT_AVAILABLE, CL_PLATFORM_NOT_FOUND_KHR, and the
        // loader's own failures.
        -1 | -2 | -1001 | -2000 | -2001 => ErrorCode::DeviceUnavailable,
        // The CL_INVALID_* range, and what a caller's own objects can cause:
        // CL_MEM_COPY_OVERLAP, CL_IMAGE_FORMAT_NOT_SUPPORTED, CL_MISALIGNED_SUB_BUFFER_OFFSET
        // (a caller's sub-buffer wrapped with `Tensor::from_cl_mem`).
        -72..=-30 | -8 | -10 | -13 => ErrorCode::InvalidArgument,
        // CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: work the call waited on failed
        // (a device fault earlier on the queue), not a fault of holo's.
        -14 => ErrorCode::DeviceUnavailable,
        _ => ErrorCode::Internal,
    };
    Error::new(
        code,
        format!(
            "{call} failed: {} ({status})",
            cl3::error_codes::error_text(status)
        ),
    )
}

/// `Ok(())` for `CL_SUCCESS`, else the mapped error.
#[inline]
pub(super) fn check(call: &'static str, status: cl_int) -> Result<()> {
    if status == CL_SUCCESS {
        Ok(())
    } else {
        Err(cl_error(call, status))
    }
}

/// A handle as the integer holo's handles store.
#[inline]
pub(super) fn raw<T>(handle: *mut T) -> u64 {
    handle.expose_provenance() as u64
}

/// A stored integer as a handle.
#[inline]
pub(super) fn handle<T>(raw: u64) -> *mut T {
    ptr::with_exposed_provenance_mut(super::super::handle::addr_usize(raw))
}

/// One OpenCL device of the machine, in the order holo numbers them (`opencl:N`): every
/// device of the first platform, then of the second, and so on.
#[derive(Clone, Debug)]
pub(super) struct DeviceEntry {
    pub(super) platform: u64,
    pub(super) device: u64,
    pub(super) platform_name: String,
    pub(super) device_name: String,
}

/// Every OpenCL device of every platform, enumerated once per process.
pub(super) fn devices() -> Result<&'static [DeviceEntry]> {
    static DEVICES: OnceLock<Result<Vec<DeviceEntry>>> = OnceLock::new();
    match DEVICES.get_or_init(enumerate) {
        Ok(devices) => Ok(devices),
        Err(error) => Err(error.clone()),
    }
}

fn enumerate() -> Result<Vec<DeviceEntry>> {
    let lib = library()?;
    let mut count: cl_uint = 0;
    let status = cl!(lib, clGetPlatformIDs(0, ptr::null_mut(), &raw mut count));
    // CL_PLATFORM_NOT_FOUND_KHR: an ICD loader with no driver installed.
    if status == -1001 || count == 0 {
        return Ok(Vec::new());
    }
    check("clGetPlatformIDs", status)?;
    let mut platforms: Vec<cl_platform_id> = vec![ptr::null_mut(); count as usize];
    check(
        "clGetPlatformIDs",
        cl!(
            lib,
            clGetPlatformIDs(count, platforms.as_mut_ptr(), ptr::null_mut())
        ),
    )?;
    let mut out = Vec::new();
    for platform in platforms {
        let platform_name = info_string(|size, value, ret| {
            Ok(cl!(
                lib,
                clGetPlatformInfo(platform, CL_PLATFORM_NAME, size, value, ret)
            ))
        })?;
        let mut n: cl_uint = 0;
        let status = cl!(
            lib,
            clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, ptr::null_mut(), &raw mut n)
        );
        if status != CL_SUCCESS || n == 0 {
            // CL_DEVICE_NOT_FOUND: a platform with no device; skip it.
            continue;
        }
        let mut ids: Vec<cl_device_id> = vec![ptr::null_mut(); n as usize];
        check(
            "clGetDeviceIDs",
            cl!(
                lib,
                clGetDeviceIDs(
                    platform,
                    CL_DEVICE_TYPE_ALL,
                    n,
                    ids.as_mut_ptr(),
                    ptr::null_mut()
                )
            ),
        )?;
        for id in ids {
            let device_name = info_string(|size, value, ret| {
                Ok(cl!(
                    lib,
                    clGetDeviceInfo(id, CL_DEVICE_NAME, size, value, ret)
                ))
            })?;
            out.push(DeviceEntry {
                platform: raw(platform),
                device: raw(id),
                platform_name: platform_name.clone(),
                device_name,
            });
        }
    }
    Ok(out)
}

/// Reads a string info query (size first, then the value).
fn info_string(query: impl Fn(usize, *mut c_void, *mut usize) -> Result<cl_int>) -> Result<String> {
    let mut size = 0_usize;
    check("clGet*Info", query(0, ptr::null_mut(), &raw mut size)?)?;
    let mut bytes = vec![0_u8; size];
    check(
        "clGet*Info",
        query(size, bytes.as_mut_ptr().cast(), ptr::null_mut())?,
    )?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes.truncate(end);
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cl_errors_map_to_holo_codes() {
        assert_eq!(cl_error("clX", -5).code(), ErrorCode::ResourceExhausted);
        assert_eq!(cl_error("clX", -4).code(), ErrorCode::ResourceExhausted);
        assert_eq!(cl_error("clX", -36).code(), ErrorCode::InvalidArgument);
        assert_eq!(cl_error("clX", -2001).code(), ErrorCode::DeviceUnavailable);
        assert_eq!(cl_error("clX", -9999).code(), ErrorCode::Internal);
        // A caller's misaligned sub-buffer, overlapping copy or image format: theirs, not
        // holo's (they were `Internal`); a failed earlier event: the device's.
        for status in [-13, -8, -10] {
            assert_eq!(cl_error("clX", status).code(), ErrorCode::InvalidArgument);
        }
        assert_eq!(cl_error("clX", -14).code(), ErrorCode::DeviceUnavailable);
        assert_eq!(
            cl_error("clEnqueueMarkerWithWaitList", -36).message(),
            "clEnqueueMarkerWithWaitList failed: CL_INVALID_COMMAND_QUEUE (-36)"
        );
    }
}
