//! What a device must do for a topic served across processes (docs/IPC.md): memory another
//! process can map, host words the device's streams write and wait on, and the device's
//! identity. Only the CUDA backend has it ([`DeviceBackend::ipc`](super::DeviceBackend::ipc)).

use std::os::fd::{BorrowedFd, OwnedFd};

use super::{DevicePtr, StreamHandle};
use crate::Result;

/// Cross-process memory and stream-ordered fences of one device. Every method is cold
/// (once per pool, per attach) except [`write_value`](Self::write_value) and
/// [`wait_value_geq`](Self::wait_value_geq), which enqueue and never block.
pub trait DeviceIpc: Send + Sync {
    /// The device's UUID (CUDA: `cuDeviceGetUuid_v2`): what both processes compare to know
    /// they name the same GPU.
    fn device_uuid(&self) -> Result<[u8; 16]>;

    /// Allocates `bytes` of device memory another process can map: a virtual-memory
    /// allocation (`cuMemCreate` with POSIX file-descriptor handles), mapped here
    /// read-write. Freed by the backend's `free` (`AllocKind::Device`, the same `bytes`).
    fn alloc_exportable(&self, bytes: usize) -> Result<DevicePtr>;

    /// A file descriptor of an [`alloc_exportable`](Self::alloc_exportable) allocation
    /// (`cuMemExportToShareableHandle`), to pass to another process (`SCM_RIGHTS`).
    fn export_fd(&self, ptr: DevicePtr) -> Result<OwnedFd>;

    /// Maps another process's exported allocation: at least `bytes` of it
    /// (`cuMemImportFromShareableHandle`, `cuMemAddressReserve`, `cuMemMap`,
    /// `cuMemSetAccess`). `InvalidArgument` for a descriptor that is no such allocation or
    /// is smaller than `bytes`.
    fn import_fd(&self, fd: BorrowedFd<'_>, bytes: usize) -> Result<DevicePtr>;

    /// Unmaps an [`import_fd`](Self::import_fd) mapping.
    ///
    /// # Safety
    /// No pending or later stream operation reads the mapping.
    unsafe fn release_import(&self, ptr: DevicePtr) -> Result<()>;

    /// Registers `len` bytes of host memory at `ptr` (page-aligned, e.g. a shared-memory
    /// mapping) with the device (`cuMemHostRegister_v2`, portable and device-mapped) and
    /// gives the device address of `ptr`, for [`write_value`](Self::write_value) and
    /// [`wait_value_geq`](Self::wait_value_geq).
    ///
    /// # Safety
    /// The memory stays mapped until [`unregister_host`](Self::unregister_host).
    unsafe fn register_host(&self, ptr: *mut u8, len: usize) -> Result<DevicePtr>;

    /// [`register_host`](Self::register_host) for memory this process maps read-only (a
    /// pinned pool another process exports): the device may read it, never write it
    /// (`CU_MEMHOSTREGISTER_READ_ONLY`).
    ///
    /// # Safety
    /// As [`register_host`](Self::register_host).
    unsafe fn register_host_read_only(&self, ptr: *mut u8, len: usize) -> Result<DevicePtr>;

    /// Ends a [`register_host`](Self::register_host).
    ///
    /// # Safety
    /// No pending or later stream operation uses the registered memory.
    unsafe fn unregister_host(&self, ptr: *mut u8) -> Result<()>;

    /// Enqueues on `stream` the write of `value` to the 8-byte word at `addr` (registered
    /// host memory), after everything enqueued before it, with the default memory barrier:
    /// every write the stream made before is visible to whoever sees the value
    /// (`cuStreamWriteValue64_v2`).
    ///
    /// # Safety
    /// `addr` is an 8-aligned word of memory registered with this device, registered until
    /// the stream has run the write.
    unsafe fn write_value(&self, stream: StreamHandle, addr: DevicePtr, value: u64) -> Result<()>;

    /// Enqueues on `stream` a wait until the 8-byte word at `addr` is at least `value`
    /// (`cuStreamWaitValue64_v2`, `GEQ`): nothing enqueued after it runs before.
    ///
    /// # Safety
    /// As [`write_value`](Self::write_value).
    unsafe fn wait_value_geq(
        &self,
        stream: StreamHandle,
        addr: DevicePtr,
        value: u64,
    ) -> Result<()>;
}

impl std::fmt::Debug for dyn DeviceIpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceIpc")
    }
}
