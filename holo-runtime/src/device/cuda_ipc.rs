//! [`DeviceIpc`] for CUDA: virtual-memory allocations exported as POSIX file descriptors,
//! host-registered fence words, `cuStreamWriteValue64_v2` / `cuStreamWaitValue64_v2`.
//!
//! The driver symbols are looked up the first time a device is asked for them: a driver
//! without them (or a device without virtual memory management, POSIX handles or 64-bit
//! stream memory operations) gives `NotSupported` there, and nothing else of the backend
//! depends on them.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::{OnceLock, PoisonError};

use cudarc::driver::sys;

use super::{CudaDevice, check};
use crate::device::counters::Count;
use crate::device::handle::addr_usize;
use crate::device::ipc::DeviceIpc;
use crate::device::{AllocKind, DevicePtr, StreamHandle};
use crate::{Error, ErrorCode, Result};

/// The driver calls of this module.
const IPC_SYMBOLS: &[&str] = &[
    "cuDeviceGetUuid_v2",
    "cuDeviceGetAttribute",
    "cuMemGetAllocationGranularity",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle",
    "cuMemHostRegister_v2",
    "cuMemHostUnregister",
    "cuMemHostGetDevicePointer_v2",
    "cuStreamWriteValue64_v2",
    "cuStreamWaitValue64_v2",
];

/// One virtual-memory mapping of this device: its allocation handle and mapped size.
#[derive(Clone, Copy, Debug)]
pub(super) struct Vmm {
    handle: sys::CUmemGenericAllocationHandle,
    size: usize,
}

fn not_supported(what: String) -> Error {
    Error::new(ErrorCode::NotSupported, what)
}

fn symbols_present() -> Result<()> {
    static PRESENT: OnceLock<Result<()>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            super::device_count()?;
            // SAFETY: `device_count` succeeded, so the library is loaded.
            let library = unsafe { sys::culib() };
            for name in IPC_SYMBOLS {
                // SAFETY: looked up only, never called through this pointer.
                if unsafe { library.get::<*const c_void>(*name) }.is_err() {
                    return Err(not_supported(format!(
                        "the CUDA driver lacks `{name}`: topics across processes in device memory need a CUDA 12 driver or newer"
                    )));
                }
            }
            Ok(())
        })
        .clone()
}

impl CudaDevice {
    fn attribute(&self, attribute: sys::CUdevice_attribute) -> Result<i32> {
        let mut value = 0;
        // SAFETY: a valid out-pointer and this device's handle.
        check("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(&raw mut value, attribute, self.device)
        })?;
        Ok(value)
    }

    /// Whether this device can serve device memory across processes; checked once per
    /// device (`NotSupported` names what is missing).
    fn ipc_ready(&self) -> Result<()> {
        self.ipc_checked
            .get_or_init(|| {
                use sys::CUdevice_attribute as A;
                symbols_present()?;
                for (attribute, what) in [
                    (
                        A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                        "virtual memory management",
                    ),
                    (
                        A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                        "POSIX file-descriptor handles",
                    ),
                    (
                        A::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                        "64-bit stream memory operations",
                    ),
                ] {
                    if self.attribute(attribute)? == 0 {
                        return Err(not_supported(format!(
                            "CUDA device {} has no {what}, which device memory across processes needs",
                            self.ordinal
                        )));
                    }
                }
                Ok(())
            })
            .clone()
    }

    fn allocation_prop(&self) -> sys::CUmemAllocationProp {
        // SAFETY: a plain C struct, valid all-zero.
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.requestedHandleTypes =
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = self.device;
        prop
    }

    fn granularity(&self) -> Result<usize> {
        let prop = self.allocation_prop();
        let mut granularity = 0usize;
        // SAFETY: valid pointers for the call.
        check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &raw mut granularity,
                &raw const prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
            )
        })?;
        Ok(granularity.max(1))
    }

    /// Reserves an address range for `handle`, maps it and gives this device read-write
    /// access; on failure releases what it made (not `handle`).
    fn map_handle(&self, handle: sys::CUmemGenericAllocationHandle, size: usize) -> Result<u64> {
        let mut base: sys::CUdeviceptr = 0;
        // SAFETY: a valid out-pointer; no fixed address asked.
        check("cuMemAddressReserve", unsafe {
            sys::cuMemAddressReserve(&raw mut base, size, 0, 0, 0)
        })?;
        // SAFETY: `base..+size` was just reserved; `handle` holds `size` bytes.
        let mapped = check("cuMemMap", unsafe {
            sys::cuMemMap(base, size, 0, handle, 0)
        });
        if let Err(e) = mapped {
            // SAFETY: the reservation made above, unused.
            unsafe { sys::cuMemAddressFree(base, size) };
            return Err(e);
        }
        // SAFETY: a plain C struct, valid all-zero.
        let mut access: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
        access.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = self.device;
        access.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        // SAFETY: the range is mapped; one access descriptor.
        let granted = check("cuMemSetAccess", unsafe {
            sys::cuMemSetAccess(base, size, &raw const access, 1)
        });
        if let Err(e) = granted {
            // SAFETY: the mapping and reservation made above, unused.
            unsafe {
                sys::cuMemUnmap(base, size);
                sys::cuMemAddressFree(base, size);
            }
            return Err(e);
        }
        Ok(base)
    }

    /// Registers host memory with `extra` flags besides portable and device-mapped.
    ///
    /// # Safety
    /// `ptr..+len` is mapped until unregistered.
    unsafe fn register(&self, ptr: *mut u8, len: usize, extra: u32) -> Result<DevicePtr> {
        self.ipc_ready()?;
        self.make_current()?;
        // SAFETY: the caller's contract: `ptr..+len` is mapped until unregistered.
        check("cuMemHostRegister", unsafe {
            sys::cuMemHostRegister_v2(
                ptr.cast(),
                len,
                sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP | extra,
            )
        })?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `ptr` was registered just above.
        let mapped = check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&raw mut device, ptr.cast(), 0)
        });
        if let Err(e) = mapped {
            // SAFETY: registered above, unused.
            unsafe { sys::cuMemHostUnregister(ptr.cast()) };
            return Err(e);
        }
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(ptr.expose_provenance() as u64);
        self.counters.bump(Count::host_register);
        Ok(DevicePtr::from_raw(device))
    }

    fn remember(&self, base: u64, vmm: Vmm) {
        self.vmm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(base, vmm);
    }
}

/// Unmaps a mapping and releases its handle.
///
/// # Safety
/// `base` is the mapping of `vmm`, unused by any pending operation.
pub(super) unsafe fn vmm_free(base: u64, vmm: Vmm) -> sys::CUresult {
    // SAFETY: the caller's contract.
    unsafe {
        let unmapped = sys::cuMemUnmap(base, vmm.size);
        let freed = sys::cuMemAddressFree(base, vmm.size);
        let released = sys::cuMemRelease(vmm.handle);
        [unmapped, freed, released]
            .into_iter()
            .find(|r| *r != sys::CUresult::CUDA_SUCCESS)
            .unwrap_or(sys::CUresult::CUDA_SUCCESS)
    }
}

impl DeviceIpc for CudaDevice {
    fn device_uuid(&self) -> Result<[u8; 16]> {
        symbols_present()?;
        // SAFETY: a plain C struct, valid all-zero.
        let mut uuid: sys::CUuuid = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-pointer and this device's handle.
        check("cuDeviceGetUuid_v2", unsafe {
            sys::cuDeviceGetUuid_v2(&raw mut uuid, self.device)
        })?;
        Ok(uuid.bytes.map(i8::cast_unsigned))
    }

    fn alloc_exportable(&self, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(Error::invalid_argument("an allocation of zero bytes"));
        }
        self.ipc_ready()?;
        self.make_current()?;
        let granularity = self.granularity()?;
        let size = bytes
            .div_ceil(granularity)
            .checked_mul(granularity)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::ResourceExhausted,
                    format!("{bytes} bytes rounded to the allocation granularity overflow"),
                )
            })?;
        let prop = self.allocation_prop();
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: valid pointers; `size` is a multiple of the granularity.
        check("cuMemCreate", unsafe {
            sys::cuMemCreate(&raw mut handle, size, &raw const prop, 0)
        })?;
        let base = match self.map_handle(handle, size) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: the handle made above, mapped nowhere.
                unsafe { sys::cuMemRelease(handle) };
                return Err(e);
            }
        };
        self.remember(base, Vmm { handle, size });
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(base, (AllocKind::Device, bytes));
        self.counters.bump(Count::alloc);
        Ok(DevicePtr::from_raw(base))
    }

    fn export_fd(&self, ptr: DevicePtr) -> Result<OwnedFd> {
        let vmm = self
            .vmm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&ptr.raw())
            .copied()
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{ptr:?} is no exportable allocation of this CUDA device"
                ))
            })?;
        let mut fd: i32 = -1;
        // SAFETY: the handle is live; a POSIX handle is an `int` written to `fd`.
        check("cuMemExportToShareableHandle", unsafe {
            sys::cuMemExportToShareableHandle(
                (&raw mut fd).cast(),
                vmm.handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        })?;
        if fd < 0 {
            return Err(Error::new(
                ErrorCode::Internal,
                "cuMemExportToShareableHandle gave no descriptor",
            ));
        }
        // SAFETY: the driver made `fd` for the caller, who now owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn import_fd(&self, fd: BorrowedFd<'_>, bytes: usize) -> Result<DevicePtr> {
        self.ipc_ready()?;
        self.make_current()?;
        let granularity = self.granularity()?;
        let size = bytes
            .max(1)
            .div_ceil(granularity)
            .saturating_mul(granularity);
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // The driver takes a POSIX handle as the `int` itself, cast to a pointer.
        let os_handle: *mut c_void = ptr::without_provenance_mut(addr_usize(
            u64::try_from(fd.as_raw_fd()).unwrap_or(u64::MAX),
        ));
        // SAFETY: a valid out-pointer; the descriptor stays open for the call.
        check("cuMemImportFromShareableHandle", unsafe {
            sys::cuMemImportFromShareableHandle(
                &raw mut handle,
                os_handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        })
        .map_err(|e| {
            Error::invalid_argument(format!(
                "the peer's descriptor is no CUDA allocation this device can import: {}",
                e.message()
            ))
        })?;
        let base = match self.map_handle(handle, size) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: the handle imported above, mapped nowhere.
                unsafe { sys::cuMemRelease(handle) };
                return Err(Error::invalid_argument(format!(
                    "the peer's allocation does not map {size} bytes on CUDA device {}: {}",
                    self.ordinal,
                    e.message()
                )));
            }
        };
        self.remember(base, Vmm { handle, size });
        self.counters.bump(Count::ipc_import);
        Ok(DevicePtr::from_raw(base))
    }

    unsafe fn release_import(&self, ptr: DevicePtr) -> Result<()> {
        let vmm = self
            .vmm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&ptr.raw())
            .ok_or_else(|| {
                Error::invalid_argument(format!("{ptr:?} is no imported mapping of this device"))
            })?;
        self.make_current()?;
        // SAFETY: the caller's contract: nothing uses the mapping any more.
        check("cuMemUnmap", unsafe { vmm_free(ptr.raw(), vmm) })?;
        self.counters.bump(Count::ipc_release);
        Ok(())
    }

    unsafe fn register_host(&self, ptr: *mut u8, len: usize) -> Result<DevicePtr> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.register(ptr, len, 0) }
    }

    unsafe fn register_host_read_only(&self, ptr: *mut u8, len: usize) -> Result<DevicePtr> {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.register(ptr, len, sys::CU_MEMHOSTREGISTER_READ_ONLY) }
    }

    unsafe fn unregister_host(&self, ptr: *mut u8) -> Result<()> {
        let known = self
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(ptr.expose_provenance() as u64));
        if !known {
            return Err(Error::invalid_argument(format!(
                "{ptr:p} is no host range registered with this device"
            )));
        }
        self.make_current()?;
        // SAFETY: the caller's contract.
        check("cuMemHostUnregister", unsafe {
            sys::cuMemHostUnregister(ptr.cast())
        })?;
        self.counters.bump(Count::host_unregister);
        Ok(())
    }

    unsafe fn write_value(&self, stream: StreamHandle, addr: DevicePtr, value: u64) -> Result<()> {
        // SAFETY: the stream is checked live by `on_stream`; the caller's contract covers
        // `addr`. Flags 0: CU_STREAM_WRITE_VALUE_DEFAULT, with its memory barrier.
        self.on_stream("cuStreamWriteValue64_v2", stream, |s| unsafe {
            sys::cuStreamWriteValue64_v2(s, addr.raw(), value, 0)
        })
    }

    unsafe fn wait_value_geq(
        &self,
        stream: StreamHandle,
        addr: DevicePtr,
        value: u64,
    ) -> Result<()> {
        // SAFETY: as `write_value`. Flags 0: CU_STREAM_WAIT_VALUE_GEQ.
        self.on_stream("cuStreamWaitValue64_v2", stream, |s| unsafe {
            sys::cuStreamWaitValue64_v2(s, addr.raw(), value, 0)
        })
    }
}
