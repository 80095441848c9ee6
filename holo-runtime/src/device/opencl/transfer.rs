//! The OpenCL backend's memory calls: allocation (a `cl_mem` per pool, host memory for
//! pinned and managed kinds), wrapping a caller's `cl_mem`, and the fills and copies, each
//! resolving its [`DevicePtr`]s to a `cl_mem` and offset or a host pointer (`memory.rs`).

use std::ptr;
use std::sync::PoisonError;

use super::ffi::{self, CL_FALSE, check, cl, cl_context, cl_int, cl_mem};
use super::memory::{self, Backing, Place};
use super::{OpenClDevice, host_fn};
use crate::device::counters::Count;
use crate::device::{AllocKind, DevicePtr, MemoryObject, OpenClMemPtr, StreamHandle};
use crate::{Error, ErrorCode, Result};

impl OpenClDevice {
    pub(super) fn allocate(&self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(Error::invalid_argument("an allocation of zero bytes"));
        }
        let mut table = self.memory.write().unwrap_or_else(PoisonError::into_inner);
        let ptr = match kind {
            AllocKind::Device => {
                if bytes as u64 > memory::WINDOW_BYTES {
                    return Err(Error::new(
                        ErrorCode::ResourceExhausted,
                        format!(
                            "an OpenCL buffer of {bytes} bytes is larger than holo's 1 TiB window"
                        ),
                    ));
                }
                let mut status: cl_int = 0;
                let mem = cl!(
                    self.lib,
                    clCreateBuffer(
                        ffi::handle(self.context),
                        ffi::CL_MEM_READ_WRITE,
                        bytes,
                        ptr::null_mut(),
                        &raw mut status
                    )
                );
                check("clCreateBuffer", status)?;
                match table.insert_buffer(mem, kind, bytes, false) {
                    Ok(ptr) => ptr,
                    Err(error) => {
                        let _ = self.lib.clReleaseMemObject(mem);
                        return Err(error);
                    }
                }
            }
            AllocKind::PinnedHost | AllocKind::Managed => table.insert_host(kind, bytes)?,
        };
        self.counters.bump(Count::alloc);
        Ok(ptr)
    }

    pub(super) fn wrap_cl_mem(&self, memory: OpenClMemPtr) -> Result<(MemoryObject, usize)> {
        let raw = memory.raw();
        if raw == 0 {
            return Err(Error::invalid_argument("the cl_mem to wrap is null"));
        }
        let mem: cl_mem = ffi::handle(raw);
        let mut context: cl_context = ptr::null_mut();
        check(
            "clGetMemObjectInfo(CL_MEM_CONTEXT)",
            cl!(
                self.lib,
                clGetMemObjectInfo(
                    mem,
                    ffi::CL_MEM_CONTEXT,
                    size_of::<cl_context>(),
                    (&raw mut context).cast(),
                    ptr::null_mut()
                )
            ),
        )
        .map_err(|e| {
            Error::invalid_argument(format!(
                "cl_mem {raw:#x} is not a live OpenCL memory object ({})",
                e.message()
            ))
        })?;
        if ffi::raw(context) != self.context {
            return Err(Error::invalid_argument(format!(
                "cl_mem {raw:#x} belongs to cl_context {:#x}, not to this device's context {:#x}: create the buffer in the device's context (OpenClDevice::native_context), or give the device the caller's context (OpenClDevice::from_context)",
                ffi::raw(context),
                self.context
            )));
        }
        let mut size = 0_usize;
        check(
            "clGetMemObjectInfo(CL_MEM_SIZE)",
            cl!(
                self.lib,
                clGetMemObjectInfo(
                    mem,
                    ffi::CL_MEM_SIZE,
                    size_of::<usize>(),
                    (&raw mut size).cast(),
                    ptr::null_mut()
                )
            ),
        )?;
        let mut table = self.memory.write().unwrap_or_else(PoisonError::into_inner);
        check("clRetainMemObject", cl!(self.lib, clRetainMemObject(mem)))?;
        match table.insert_buffer(mem, AllocKind::Device, size, true) {
            Ok(base) => Ok((MemoryObject::from_raw(base.raw()), size)),
            Err(error) => {
                let _ = self.lib.clReleaseMemObject(mem);
                Err(error)
            }
        }
    }

    pub(super) fn unwrap_cl_mem(&self, memory: MemoryObject) -> Result<()> {
        let mem = self
            .memory
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove_adopted(memory.raw())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{memory:?} is not a wrapped cl_mem of this OpenCL device"
                ))
            })?;
        check(
            "clReleaseMemObject",
            cl!(self.lib, clReleaseMemObject(ffi::handle(mem))),
        )
    }

    /// # Safety
    /// As [`DeviceBackend::free`].
    pub(super) unsafe fn release(
        &self,
        kind: AllocKind,
        ptr: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        let region = self
            .memory
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(ptr, kind, bytes)?;
        match region.backing {
            Backing::Buffer { mem, .. } => check(
                "clReleaseMemObject",
                cl!(self.lib, clReleaseMemObject(ffi::handle(mem))),
            )?,
            // SAFETY: the caller's contract: no pending operation uses the memory; `ptr`
            // is the region's start (checked by `remove`).
            Backing::Host { layout } => unsafe { memory::free_host(ptr, layout) },
        }
        self.counters.bump(Count::free);
        Ok(())
    }

    /// # Safety
    /// As [`DeviceBackend::memset_async`].
    pub(super) unsafe fn fill(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            let table = self.memory();
            match Self::place(&table, dst, bytes, "memset_async")? {
                Place::Buffer { mem, offset } => check(
                    "clEnqueueFillBuffer",
                    cl!(
                        self.lib,
                        clEnqueueFillBuffer(
                            queue,
                            mem,
                            (&raw const value).cast(),
                            1,
                            offset,
                            bytes,
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                Place::Host(ptr) => self.enqueue_host(
                    queue,
                    host_fn::Action::Fill {
                        dst: ffi::raw(ptr),
                        value,
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.bump(Count::memset);
        Ok(())
    }

    /// # Safety
    /// As [`DeviceBackend::copy_async`].
    pub(super) unsafe fn copy(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            let table = self.memory();
            let to = Self::place(&table, dst, bytes, "copy_async destination")?;
            let from = Self::place(&table, src, bytes, "copy_async source")?;
            // SAFETY (each arm): the caller's contract keeps both ranges live and unaliased
            // until the queue has run the copy; the table's read lock keeps the cl_mems.
            match (to, from) {
                (
                    Place::Buffer {
                        mem: d,
                        offset: doff,
                    },
                    Place::Buffer {
                        mem: s,
                        offset: soff,
                    },
                ) => check(
                    "clEnqueueCopyBuffer",
                    cl!(
                        self.lib,
                        clEnqueueCopyBuffer(
                            queue,
                            s,
                            d,
                            soff,
                            doff,
                            bytes,
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                (
                    Place::Host(d),
                    Place::Buffer {
                        mem: s,
                        offset: soff,
                    },
                ) => check(
                    "clEnqueueReadBuffer",
                    cl!(
                        self.lib,
                        clEnqueueReadBuffer(
                            queue,
                            s,
                            CL_FALSE,
                            soff,
                            bytes,
                            d.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                (
                    Place::Buffer {
                        mem: d,
                        offset: doff,
                    },
                    Place::Host(s),
                ) => check(
                    "clEnqueueWriteBuffer",
                    cl!(
                        self.lib,
                        clEnqueueWriteBuffer(
                            queue,
                            d,
                            CL_FALSE,
                            doff,
                            bytes,
                            s.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                (Place::Host(d), Place::Host(s)) => self.enqueue_host(
                    queue,
                    host_fn::Action::Copy {
                        dst: ffi::raw(d),
                        src: ffi::raw(s),
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.bump(Count::copy);
        Ok(())
    }

    /// # Safety
    /// As [`DeviceBackend::copy_to_host_async`].
    pub(super) unsafe fn read_to_host(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            if dst.is_null() {
                return Err(Error::invalid_argument(
                    "the copy destination host pointer is null",
                ));
            }
            let table = self.memory();
            match Self::place(&table, src, bytes, "copy_to_host_async source")? {
                Place::Buffer { mem, offset } => check(
                    "clEnqueueReadBuffer",
                    cl!(
                        self.lib,
                        clEnqueueReadBuffer(
                            queue,
                            mem,
                            CL_FALSE,
                            offset,
                            bytes,
                            dst.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                Place::Host(s) => self.enqueue_host(
                    queue,
                    host_fn::Action::Copy {
                        dst: ffi::raw(dst),
                        src: ffi::raw(s),
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.bump(Count::copy);
        Ok(())
    }

    /// # Safety
    /// As [`DeviceBackend::copy_from_host_async`].
    pub(super) unsafe fn write_from_host(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        self.on_queue(stream, |queue| {
            if bytes == 0 {
                return Ok(());
            }
            if src.is_null() {
                return Err(Error::invalid_argument(
                    "the copy source host pointer is null",
                ));
            }
            let table = self.memory();
            match Self::place(&table, dst, bytes, "copy_from_host_async destination")? {
                Place::Buffer { mem, offset } => check(
                    "clEnqueueWriteBuffer",
                    cl!(
                        self.lib,
                        clEnqueueWriteBuffer(
                            queue,
                            mem,
                            CL_FALSE,
                            offset,
                            bytes,
                            src.cast(),
                            0,
                            ptr::null(),
                            ptr::null_mut()
                        )
                    ),
                ),
                Place::Host(d) => self.enqueue_host(
                    queue,
                    host_fn::Action::Copy {
                        dst: ffi::raw(d),
                        src: ffi::raw(src.cast_mut()),
                        len: bytes,
                    },
                ),
            }
        })?;
        self.counters.bump(Count::copy);
        Ok(())
    }
}
