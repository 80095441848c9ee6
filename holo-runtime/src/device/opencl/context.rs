//! Contexts both ways (the seed's "GPU Context Sharing", OpenCL): a device in a context of
//! its own ([`OpenClDevice::open`]) whose context a caller adopts
//! ([`native_context`](OpenClDevice::native_context)), or in a context the caller gives
//! ([`OpenClDevice::from_context`]); the check that a caller's queue lives in it; and the
//! teardown that releases what the device holds.

use std::ptr;
use std::sync::{Arc, PoisonError};

use crossbeam_utils::sync::ShardedLock;

use super::ffi::{self, check, cl, cl_context, cl_device_id, cl_int};
use super::memory::{Backing, MemoryTable};
use super::{Live, OpenClDevice, unavailable};
use crate::device::DeviceCounters;
use crate::{Error, Result};

impl OpenClDevice {
    /// Opens OpenCL device `ordinal` (every device of the first platform, then of the
    /// second, …) in a context of its own.
    ///
    /// `DeviceUnavailable` when no OpenCL library or driver is installed, or the ordinal
    /// names no device. Never panics.
    ///
    /// ```
    /// use holo_runtime::device::{AllocKind, DeviceBackend, OpenClDevice};
    ///
    /// let Ok(cl) = OpenClDevice::open(0) else {
    ///     return Ok(()); // no OpenCL here (Debian: apt-get install pocl-opencl-icd)
    /// };
    /// let (producer, consumer) = (cl.create_stream()?, cl.create_stream()?);
    /// let ready = cl.create_event()?;
    /// let frame = cl.alloc(AllocKind::Device, 256)?; // a cl_mem, named by its window
    /// let mut host = [0_u8; 256];
    /// // SAFETY: `frame` is a live 256-byte buffer and `host` outlives the wait below.
    /// unsafe { cl.memset_async(frame, 7, 256, producer)? };
    /// cl.record_event(ready, producer)?; // a marker on the producer's queue
    /// cl.wait_event(consumer, ready)?; // a barrier on the consumer's queue
    /// unsafe { cl.copy_to_host_async(host.as_mut_ptr(), frame, 256, consumer)? };
    /// cl.synchronize_stream(consumer)?;
    /// assert!(host.iter().all(|&b| b == 7));
    /// let (mem, offset) = cl.resolve(frame)?.expect("device memory is a cl_mem");
    /// assert!(mem != 0 && offset == 0);
    /// // SAFETY: both queues finished every operation on `frame`.
    /// unsafe { cl.free(AllocKind::Device, frame, 256)? };
    /// # Ok::<(), holo_runtime::Error>(())
    /// ```
    pub fn open(ordinal: u32) -> Result<Arc<Self>> {
        let lib = ffi::library()?;
        let devices = ffi::devices()?;
        let Some(entry) = devices.get(ordinal as usize) else {
            return Err(unavailable(format!(
                "OpenCL device {ordinal} is not present: this machine has {} OpenCL device(s){}",
                devices.len(),
                if devices.is_empty() {
                    " (an ICD loader with no driver: Debian: apt-get install pocl-opencl-icd)"
                } else {
                    ""
                }
            )));
        };
        let device: cl_device_id = ffi::handle(entry.device);
        let mut status: cl_int = 0;
        let context = cl!(
            lib,
            clCreateContext(
                ptr::null(),
                1,
                &raw const device,
                None,
                ptr::null_mut(),
                &raw mut status
            )
        );
        check("clCreateContext", status)?;
        Ok(Self::with_context(
            lib,
            ordinal,
            entry.device,
            ffi::raw(context),
            false,
            format!("{} ({})", entry.device_name, entry.platform_name),
        ))
    }

    /// A device on a `cl_context` the caller made (option 1 of the seed: *give* holo the
    /// context). holo retains it, creates its queues and buffers in it on the context's
    /// first device, and refuses any queue or `cl_mem` of another context. The caller may
    /// release its own reference at any time; holo releases its one when the device drops.
    ///
    /// `DeviceUnavailable` without an OpenCL library; `InvalidArgument` for a null context
    /// or one with no device.
    ///
    /// # Safety
    /// `context` is null or a live `cl_context` (holo retains it before returning).
    pub unsafe fn from_context(context: u64) -> Result<Arc<Self>> {
        let lib = ffi::library()?;
        if context == 0 {
            return Err(Error::invalid_argument(
                "a null cl_context was given to OpenClDevice::from_context",
            ));
        }
        let raw: cl_context = ffi::handle(context);
        let mut device: cl_device_id = ptr::null_mut();
        // Reads the first device only: CL_INVALID_VALUE would mean a zero-device context.
        let mut size = 0_usize;
        check(
            "clGetContextInfo(CL_CONTEXT_DEVICES)",
            cl!(
                lib,
                clGetContextInfo(
                    raw,
                    ffi::CL_CONTEXT_DEVICES,
                    0,
                    ptr::null_mut(),
                    &raw mut size
                )
            ),
        )
        .map_err(|e| {
            Error::invalid_argument(format!("cl_context {context:#x}: {}", e.message()))
        })?;
        if size < size_of::<cl_device_id>() {
            return Err(Error::invalid_argument(format!(
                "cl_context {context:#x} has no device"
            )));
        }
        let mut ids: Vec<cl_device_id> = vec![ptr::null_mut(); size / size_of::<cl_device_id>()];
        check(
            "clGetContextInfo(CL_CONTEXT_DEVICES)",
            cl!(
                lib,
                clGetContextInfo(
                    raw,
                    ffi::CL_CONTEXT_DEVICES,
                    size,
                    ids.as_mut_ptr().cast(),
                    ptr::null_mut()
                )
            ),
        )?;
        device = ids.first().copied().unwrap_or(device);
        check("clRetainContext", cl!(lib, clRetainContext(raw)))?;
        let entries = ffi::devices().unwrap_or(&[]);
        let position = entries.iter().position(|e| e.device == ffi::raw(device));
        let name = position.map_or_else(
            || "a device of the caller's context".to_owned(),
            |i| format!("{} ({})", entries[i].device_name, entries[i].platform_name),
        );
        Ok(Self::with_context(
            lib,
            position.map_or(0, |i| u32::try_from(i).unwrap_or(u32::MAX)),
            ffi::raw(device),
            context,
            true,
            name,
        ))
    }

    /// Takes ownership of one reference to `context` (released when the device drops).
    fn with_context(
        lib: &'static ffi::Library,
        ordinal: u32,
        device: u64,
        context: u64,
        given: bool,
        name: String,
    ) -> Arc<Self> {
        Arc::new(Self {
            lib,
            ordinal,
            device,
            context,
            given,
            name,
            adopted: crate::device::Adoptions::new(),
            live: ShardedLock::new(Live::default()),
            memory: ShardedLock::new(MemoryTable::default()),
            counters: DeviceCounters::default(),
        })
    }

    /// The raw `cl_context` holo creates its queues and buffers in (option 2 of the seed:
    /// the caller *adopts* it and creates its queues there). Live while this device is; a
    /// caller that keeps it longer retains it.
    pub fn native_context(&self) -> u64 {
        self.context
    }

    /// The raw `cl_device_id` of this device, to create a queue on in
    /// [`native_context`](Self::native_context).
    pub fn native_device(&self) -> u64 {
        self.device
    }

    /// Whether the caller gave the context ([`from_context`](Self::from_context)).
    pub fn context_was_given(&self) -> bool {
        self.given
    }

    /// The device's and platform's names, as the driver reports them.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The context a caller's queue belongs to, checked against this device's.
    pub(super) fn check_queue_context(&self, raw: u64) -> Result<()> {
        let mut context: cl_context = ptr::null_mut();
        let status = cl!(
            self.lib,
            clGetCommandQueueInfo(
                ffi::handle(raw),
                ffi::CL_QUEUE_CONTEXT,
                size_of::<cl_context>(),
                (&raw mut context).cast(),
                ptr::null_mut()
            )
        );
        check("clGetCommandQueueInfo(CL_QUEUE_CONTEXT)", status).map_err(|e| {
            Error::invalid_argument(format!(
                "cl_command_queue {raw:#x} is not a live OpenCL command queue ({})",
                e.message()
            ))
        })?;
        if ffi::raw(context) != self.context {
            return Err(Error::invalid_argument(format!(
                "cl_command_queue {raw:#x} belongs to cl_context {:#x}, not to this device's context {:#x}: create the queue in the device's context (OpenClDevice::native_context), or give the device the caller's context (OpenClDevice::from_context)",
                ffi::raw(context),
                self.context
            )));
        }
        Ok(())
    }
}

impl Drop for OpenClDevice {
    fn drop(&mut self) {
        let live = std::mem::take(self.live.get_mut().unwrap_or_else(PoisonError::into_inner));
        // Teardown errors have no caller to report to; each resource is still released.
        for &queue in &live.queues {
            // Finishing first keeps the queue's work off memory released below.
            let _ = self.lib.clFinish(ffi::handle(queue));
        }
        for (_, slot) in live.events {
            self.release_event(*slot.latest.lock().unwrap_or_else(PoisonError::into_inner));
        }
        for queue in live.queues {
            let _ = self.lib.clReleaseCommandQueue(ffi::handle(queue));
        }
        let regions = self
            .memory
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain();
        for region in regions {
            match region.backing {
                Backing::Buffer { mem, .. } => {
                    let _ = self.lib.clReleaseMemObject(ffi::handle(mem));
                }
                Backing::Host { layout } => {
                    // Host regions are freed by the pools that own them; one still here was
                    // leaked by its owner and is left alone rather than freed under it.
                    let _ = layout;
                }
            }
        }
        let _ = self.lib.clReleaseContext(ffi::handle(self.context));
    }
}
