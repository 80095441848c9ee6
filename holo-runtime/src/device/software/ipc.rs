//! The software device's [`DeviceIpc`]: a stand-in for CUDA's, so that topics across
//! processes in device and pinned memory run — fences, waits, kills — where there is no
//! GPU (CI). Its "device memory" is host memory: an exportable allocation is a sealed
//! memfd another process maps (where CUDA passes a virtual-memory allocation's
//! descriptor), a registered host range is used at its own address, and its streams write
//! and wait on 64-bit words in their worker threads, in order with everything else they
//! run — `cuStreamWriteValue64` and `cuStreamWaitValue64` (`GEQ`, wrap-aware) as the
//! worker runs them.

use std::alloc::Layout;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::PoisonError;

use super::stream::Op;
use super::{Allocation, Memory, SoftwareDevice};
use crate::device::counters::Count;
use crate::device::{AllocKind, DeviceIpc, DevicePtr, StreamHandle};
use crate::ipc::Segment;
use crate::{Error, ErrorCode, Result};

/// Every software device's UUID: all of them are one "GPU" (this machine's host memory),
/// so any two may share memory.
pub(crate) const SOFTWARE_UUID: [u8; 16] = *b"holo-software-dv";

fn layout(bytes: usize) -> Result<Layout> {
    Layout::from_size_align(bytes, 1).map_err(|_| {
        Error::new(
            ErrorCode::ResourceExhausted,
            format!("{bytes} bytes cannot be mapped"),
        )
    })
}

fn descriptor(fd: BorrowedFd<'_>) -> Result<OwnedFd> {
    fd.try_clone_to_owned().map_err(|e| {
        Error::new(
            ErrorCode::ResourceExhausted,
            format!("cannot duplicate a descriptor: {e}"),
        )
    })
}

impl SoftwareDevice {
    /// Records a shared range (for the range checks of fills, copies and words).
    fn insert_shared(&self, at: u64, kind: AllocKind, bytes: usize, memory: Memory) -> Result<()> {
        let mut allocations = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if allocations.contains_key(&at) {
            return Err(Error::invalid_argument(format!(
                "{:?} is already mapped or registered on this software device",
                DevicePtr::from_raw(at)
            )));
        }
        allocations.insert(
            at,
            Allocation {
                kind,
                layout: layout(bytes)?,
                memory,
            },
        );
        Ok(())
    }

    /// Removes the shared range at `at` if `is` says it is the right kind.
    fn remove_shared(&self, at: u64, is: fn(&Memory) -> bool, what: &str) -> Result<Allocation> {
        let mut allocations = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !allocations.get(&at).is_some_and(|a| is(&a.memory)) {
            return Err(Error::invalid_argument(format!(
                "{:?} is no {what} of this software device",
                DevicePtr::from_raw(at)
            )));
        }
        allocations
            .remove(&at)
            .ok_or_else(|| Error::new(ErrorCode::Internal, "a checked range vanished"))
    }
}

impl DeviceIpc for SoftwareDevice {
    fn device_uuid(&self) -> Result<[u8; 16]> {
        Ok(SOFTWARE_UUID)
    }

    fn alloc_exportable(&self, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Err(Error::invalid_argument("an allocation of zero bytes"));
        }
        let segment = Segment::create("holo:software-device", bytes)?;
        let at = segment.as_ptr() as u64;
        self.insert_shared(at, AllocKind::Device, bytes, Memory::Exported(segment))?;
        self.counters.bump(Count::alloc);
        Ok(DevicePtr::from_raw(at))
    }

    fn export_fd(&self, ptr: DevicePtr) -> Result<OwnedFd> {
        let allocations = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match allocations.get(&ptr.raw()).map(|a| &a.memory) {
            Some(Memory::Exported(segment)) => descriptor(segment.fd()),
            _ => Err(Error::invalid_argument(format!(
                "{ptr:?} is no exportable allocation of this software device"
            ))),
        }
    }

    fn import_fd(&self, fd: BorrowedFd<'_>, bytes: usize) -> Result<DevicePtr> {
        let segment =
            Segment::import(descriptor(fd.as_fd())?, bytes.max(1), true).map_err(|e| {
                Error::invalid_argument(format!(
                    "the peer's descriptor is no allocation this software device can import: {}",
                    e.message()
                ))
            })?;
        let at = segment.as_ptr() as u64;
        self.insert_shared(
            at,
            AllocKind::Device,
            bytes.max(1),
            Memory::Imported(segment),
        )?;
        self.counters.bump(Count::ipc_import);
        Ok(DevicePtr::from_raw(at))
    }

    unsafe fn release_import(&self, ptr: DevicePtr) -> Result<()> {
        // The segment unmaps as the entry drops.
        self.remove_shared(
            ptr.raw(),
            |m| matches!(m, Memory::Imported(_)),
            "imported mapping",
        )?;
        self.counters.bump(Count::ipc_release);
        Ok(())
    }

    unsafe fn register_host(&self, ptr: *mut u8, len: usize) -> Result<DevicePtr> {
        if ptr.is_null() || len == 0 {
            return Err(Error::invalid_argument("an empty host range to register"));
        }
        let at = DevicePtr::from_host_ptr(ptr);
        self.insert_shared(at.raw(), AllocKind::PinnedHost, len, Memory::Registered)?;
        self.counters.bump(Count::host_register);
        Ok(at)
    }

    unsafe fn register_host_read_only(&self, ptr: *mut u8, len: usize) -> Result<DevicePtr> {
        // SAFETY: the caller's contract, forwarded (the worker never writes a payload it
        // was not asked to).
        unsafe { self.register_host(ptr, len) }
    }

    unsafe fn unregister_host(&self, ptr: *mut u8) -> Result<()> {
        self.remove_shared(
            DevicePtr::from_host_ptr(ptr).raw(),
            |m| matches!(m, Memory::Registered),
            "registered host range",
        )?;
        self.counters.bump(Count::host_unregister);
        Ok(())
    }

    unsafe fn write_value(&self, stream: StreamHandle, addr: DevicePtr, value: u64) -> Result<()> {
        let stream = self.stream(stream)?;
        self.check_word(addr)?;
        stream.enqueue(Op::WriteValue {
            addr: addr.raw(),
            value,
        })?;
        Ok(())
    }

    unsafe fn wait_value_geq(
        &self,
        stream: StreamHandle,
        addr: DevicePtr,
        value: u64,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        self.check_word(addr)?;
        stream.enqueue(Op::WaitValueGeq {
            addr: addr.raw(),
            value,
        })?;
        Ok(())
    }
}

impl SoftwareDevice {
    /// An 8-aligned word inside a live range.
    fn check_word(&self, addr: DevicePtr) -> Result<()> {
        if !addr.raw().is_multiple_of(8) {
            return Err(Error::invalid_argument(format!(
                "{addr:?} is no 8-aligned word"
            )));
        }
        self.check_range(addr, 8, "word")
    }
}

// Not under Miri: every test here maps a memfd segment, a call Miri does not run.
#[cfg(all(test, not(miri)))]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::device::DeviceBackend;

    #[test]
    fn a_stream_waits_for_the_word_in_cudas_wrap_aware_comparison_then_runs_on() {
        let d = SoftwareDevice::new();
        let ipc = d.ipc().unwrap();
        let words = Box::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let base = words.as_ptr().cast_mut().cast::<u8>();
        // SAFETY: the words outlive the registration, which ends below.
        let dev = unsafe { ipc.register_host(base, 16).unwrap() };
        let s = d.create_stream().unwrap();
        let second = DevicePtr::from_raw(dev.raw() + 8);
        // SAFETY: registered words.
        unsafe {
            ipc.wait_value_geq(s, dev, 5).unwrap();
            ipc.write_value(s, second, 7).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(words[1].load(Ordering::Acquire), 0, "the write waits");
        words[0].store(4, Ordering::Release);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(words[1].load(Ordering::Acquire), 0, "4 is below 5");
        // The abandoned value (2^62) is past every fence value.
        words[0].store(1 << 62, Ordering::Release);
        d.synchronize_stream(s).unwrap();
        assert_eq!(words[1].load(Ordering::Acquire), 7);
        // SAFETY: registered words; the stream runs the wait before the host checks.
        unsafe { ipc.wait_value_geq(s, dev, 1 << 61).unwrap() };
        d.synchronize_stream(s).unwrap();
        d.destroy_stream(s).unwrap();
        // SAFETY: nothing uses the words any more.
        unsafe { ipc.unregister_host(base).unwrap() };
        // An unaligned word, or one outside every range, is refused.
        let s = d.create_stream().unwrap();
        // SAFETY: refused before anything is enqueued.
        unsafe {
            assert_eq!(
                ipc.write_value(s, dev, 1).unwrap_err().code(),
                ErrorCode::InvalidArgument
            );
        }
        d.destroy_stream(s).unwrap();
    }

    #[test]
    fn an_exported_allocation_imports_as_the_same_bytes_and_each_kind_ends_its_own_way() {
        let d = SoftwareDevice::new();
        let ipc = d.ipc().unwrap();
        let p = ipc.alloc_exportable(4096).unwrap();
        let fd = ipc.export_fd(p).unwrap();
        let other = SoftwareDevice::new();
        let oipc = other.ipc().unwrap();
        let q = oipc.import_fd(fd.as_fd(), 4096).unwrap();
        let stream = other.create_stream().unwrap();
        // SAFETY: the imported mapping, 4096 bytes.
        unsafe { other.memset_async(q, 0x5a, 4096, stream).unwrap() };
        other.synchronize_stream(stream).unwrap();
        // SAFETY: the exported allocation, 4096 bytes, written above through the import.
        let bytes = unsafe { std::slice::from_raw_parts(p.as_host_ptr(), 4096) };
        assert!(bytes.iter().all(|&b| b == 0x5a));
        other.destroy_stream(stream).unwrap();
        // An import is no allocation to free; an allocation is no import to release.
        // SAFETY: both refused before anything is unmapped.
        unsafe {
            assert!(other.free(AllocKind::Device, q, 4096).is_err());
            assert!(ipc.release_import(p).is_err());
            oipc.release_import(q).unwrap();
            d.free(AllocKind::Device, p, 4096).unwrap();
        }
        let c = d.counters().snapshot();
        assert_eq!((c.alloc, c.free), (1, 1));
        let c = other.counters().snapshot();
        assert_eq!((c.ipc_import, c.ipc_release), (1, 1));
        assert_eq!(ipc.device_uuid().unwrap(), oipc.device_uuid().unwrap());
        assert!(SoftwareDevice::without_ipc().ipc().is_none());
    }
}
