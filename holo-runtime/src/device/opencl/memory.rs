//! How holo names OpenCL memory through the trait's address-based calls.
//!
//! OpenCL has no unified addressing: a buffer is a `cl_mem` and bytes in it an offset. The
//! device trait and the slot ledger name bytes as a [`MemoryObject`] plus an offset, and
//! the copy and fill calls take a [`DevicePtr`]. The OpenCL backend gives each `cl_mem` a
//! *window* — a private, never-reused range of a backend-local address space — so that a
//! memory object is the window's base and `object + offset` is a `DevicePtr` the backend
//! resolves back to `(cl_mem, offset)`:
//!
//! ```text
//! bit 63 = 1 | window index (bits 40..62) | offset in the cl_mem (bits 0..39)
//! ```
//!
//! Such a value is never an address a kernel or the host can dereference; it is a name the
//! backend checks (a freed window, or an offset past the buffer's size, is
//! `InvalidArgument`). Pinned and managed memory are ordinary page-aligned host memory,
//! named by their host address: copies into and out of them are `clEnqueueReadBuffer` /
//! `clEnqueueWriteBuffer` on the host pointer, which every implementation keeps coherent.
//! Windows are never reused, so a stale name can never alias a later buffer.

use std::alloc::Layout;
use std::collections::{BTreeMap, HashMap};

use super::ffi::{self, cl_mem};
use crate::device::{AllocKind, DevicePtr};
use crate::{Error, ErrorCode, Result};

/// Set on every window address; host addresses of the supported 64-bit targets never
/// have it (user space is below 2^47 on x86-64 and AArch64).
pub(super) const WINDOW_BIT: u64 = 1 << 63;
const WINDOW_SHIFT: u32 = 40;
/// The largest buffer a window holds (1 TiB).
pub(super) const WINDOW_BYTES: u64 = 1 << WINDOW_SHIFT;
const INDEX_MASK: u64 = (1 << (63 - WINDOW_SHIFT)) - 1;

/// The host alignment of pinned and managed memory.
const HOST_ALIGN: usize = 4096;

/// What backs a region.
pub(super) enum Backing {
    /// A `cl_mem` this backend created (`adopted: false`, released on free) or a caller's,
    /// retained when wrapped (`adopted: true`, released once when the wrap ends).
    Buffer { mem: u64, adopted: bool },
    /// Host memory this backend allocated.
    Host { layout: Layout },
}

pub(super) struct Region {
    pub(super) kind: AllocKind,
    pub(super) bytes: usize,
    pub(super) backing: Backing,
}

/// Where a resolved range is.
#[derive(Clone, Copy, Debug)]
pub(super) enum Place {
    /// In a `cl_mem` at an offset.
    Buffer { mem: cl_mem, offset: usize },
    /// In host memory.
    Host(*mut u8),
}

/// The live regions: windows by index, host regions by start address.
#[derive(Default)]
pub(super) struct MemoryTable {
    windows: HashMap<u64, Region>,
    host: BTreeMap<u64, Region>,
    next_window: u64,
}

impl MemoryTable {
    /// Registers a `cl_mem` of `bytes` and returns its window's base.
    pub(super) fn insert_buffer(
        &mut self,
        mem: cl_mem,
        kind: AllocKind,
        bytes: usize,
        adopted: bool,
    ) -> Result<DevicePtr> {
        if bytes as u64 > WINDOW_BYTES {
            return Err(Error::new(
                ErrorCode::ResourceExhausted,
                format!("an OpenCL buffer of {bytes} bytes is larger than holo's 1 TiB window"),
            ));
        }
        if self.next_window > INDEX_MASK {
            return Err(Error::new(
                ErrorCode::ResourceExhausted,
                "this OpenCL device has named 2^23 buffers: its windows are spent (open a new device)",
            ));
        }
        let index = self.next_window;
        self.next_window += 1;
        self.windows.insert(
            index,
            Region {
                kind,
                bytes,
                backing: Backing::Buffer {
                    mem: ffi::raw(mem),
                    adopted,
                },
            },
        );
        Ok(DevicePtr::from_raw(WINDOW_BIT | (index << WINDOW_SHIFT)))
    }

    /// Allocates zeroed, page-aligned host memory of `bytes` and registers it.
    pub(super) fn insert_host(&mut self, kind: AllocKind, bytes: usize) -> Result<DevicePtr> {
        let layout = Layout::from_size_align(bytes, HOST_ALIGN).map_err(|_| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("{bytes} bytes of {kind:?} memory exceed the address space"),
            )
        })?;
        // SAFETY: `layout` has a non-zero size (the caller refuses zero bytes).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::new(
                ErrorCode::ResourceExhausted,
                format!("out of host memory allocating {bytes} bytes of {kind:?} memory"),
            ));
        }
        let addr = DevicePtr::from_host_ptr(ptr);
        self.host.insert(
            addr.raw(),
            Region {
                kind,
                bytes,
                backing: Backing::Host { layout },
            },
        );
        Ok(addr)
    }

    /// Removes the region that starts at `ptr`, checking its kind and size.
    pub(super) fn remove(
        &mut self,
        ptr: DevicePtr,
        kind: AllocKind,
        bytes: usize,
    ) -> Result<Region> {
        let region = if ptr.raw() & WINDOW_BIT == 0 {
            self.host.get(&ptr.raw())
        } else if ptr.raw() & (WINDOW_BYTES - 1) == 0 {
            self.windows.get(&window_index(ptr.raw()))
        } else {
            None
        };
        match region {
            None => Err(Error::invalid_argument(format!(
                "{ptr:?} is not a live allocation of this OpenCL device"
            ))),
            Some(r) if r.kind != kind || r.bytes != bytes => Err(Error::invalid_argument(format!(
                "{ptr:?} is {} bytes of {:?} memory, not {bytes} bytes of {kind:?}",
                r.bytes, r.kind
            ))),
            Some(_) => Ok(if ptr.raw() & WINDOW_BIT == 0 {
                self.host.remove(&ptr.raw())
            } else {
                self.windows.remove(&window_index(ptr.raw()))
            }
            .expect("found just above")),
        }
    }

    /// The window base of a wrapped (adopted) buffer, removed: `None` if it is not one.
    pub(super) fn remove_adopted(&mut self, base: u64) -> Option<u64> {
        if base & WINDOW_BIT == 0 || base & (WINDOW_BYTES - 1) != 0 {
            return None;
        }
        let index = window_index(base);
        match self.windows.get(&index)?.backing {
            Backing::Buffer { mem, adopted: true } => {
                self.windows.remove(&index);
                Some(mem)
            }
            _ => None,
        }
    }

    /// Resolves `ptr..ptr + len` to a `cl_mem` and offset or a host pointer; `None` if it
    /// does not lie inside one live region.
    pub(super) fn resolve(&self, ptr: DevicePtr, len: usize) -> Option<Place> {
        let raw = ptr.raw();
        if raw & WINDOW_BIT != 0 {
            let region = self.windows.get(&window_index(raw))?;
            let offset = usize::try_from(raw & (WINDOW_BYTES - 1)).ok()?;
            if offset.checked_add(len)? > region.bytes {
                return None;
            }
            match region.backing {
                Backing::Buffer { mem, .. } => Some(Place::Buffer {
                    mem: ffi::handle(mem),
                    offset,
                }),
                Backing::Host { .. } => None,
            }
        } else {
            let (&start, region) = self.host.range(..=raw).next_back()?;
            let end = start.checked_add(region.bytes as u64)?;
            if raw.checked_add(len as u64)? > end {
                return None;
            }
            Some(Place::Host(ptr.as_host_ptr()))
        }
    }

    /// Takes every region out, for teardown.
    pub(super) fn drain(&mut self) -> Vec<Region> {
        let mut out: Vec<Region> = self.windows.drain().map(|(_, r)| r).collect();
        out.extend(std::mem::take(&mut self.host).into_values());
        out
    }
}

fn window_index(raw: u64) -> u64 {
    (raw >> WINDOW_SHIFT) & INDEX_MASK
}

/// Frees a region's host memory (buffers are released by the caller, which holds the library).
///
/// # Safety
/// `ptr` is the region's start and no pending operation uses it.
pub(super) unsafe fn free_host(ptr: DevicePtr, layout: Layout) {
    // SAFETY: the caller's contract: `ptr` came from `alloc_zeroed(layout)`.
    unsafe { std::alloc::dealloc(ptr.as_host_ptr(), layout) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_resolve_offsets_inside_their_buffer_only() {
        let mut table = MemoryTable::default();
        let fake: cl_mem = ffi::handle(0x1000);
        let a = table
            .insert_buffer(fake, AllocKind::Device, 256, false)
            .unwrap();
        let b = table
            .insert_buffer(fake, AllocKind::Device, 64, false)
            .unwrap();
        assert_ne!(a, b);
        assert!(a.raw() & WINDOW_BIT != 0);
        match table.resolve(a.checked_add(200).unwrap(), 56) {
            Some(Place::Buffer { offset, .. }) => assert_eq!(offset, 200),
            other => panic!("{other:?}"),
        }
        assert!(table.resolve(a.checked_add(200).unwrap(), 57).is_none());
        assert!(table.remove(a, AllocKind::Device, 255).is_err());
        table.remove(a, AllocKind::Device, 256).unwrap();
        assert!(
            table.resolve(a, 1).is_none(),
            "a freed window is never reused"
        );
        let c = table
            .insert_buffer(fake, AllocKind::Device, 256, false)
            .unwrap();
        assert_ne!(a, c);
        let host = table.insert_host(AllocKind::PinnedHost, 100).unwrap();
        assert!(matches!(
            table.resolve(host.checked_add(99).unwrap(), 1),
            Some(Place::Host(_))
        ));
        assert!(table.resolve(host.checked_add(99).unwrap(), 2).is_none());
        for region in table.drain() {
            if let Backing::Host { layout } = region.backing {
                // SAFETY: the only host region, unused.
                unsafe { free_host(host, layout) };
            }
        }
    }
}
