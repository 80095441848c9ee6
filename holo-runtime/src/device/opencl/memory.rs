//! How holo names OpenCL memory through the trait's address-based calls.
//!
//! OpenCL has no unified addressing: a buffer is a `cl_mem` and bytes in it an offset. The
//! device trait and the slot ledger name bytes as a [`MemoryObject`] plus an offset, and
//! the copy and fill calls take a [`DevicePtr`]. The OpenCL backend gives each `cl_mem` a
//! *window* — a private, never-reused range of an address space — so that a memory object
//! is the window's base and `object + offset` is a `DevicePtr` the backend resolves back
//! to `(cl_mem, offset)`. Windows come in two sizes:
//!
//! ```text
//! small (a buffer under 256 MiB): bit 63 = 1 | bit 62 = 0 | index (bits 28..61) | offset (bits 0..27)
//! large (up to 1 TiB):            bit 63 = 1 | bit 62 = 1 | index (bits 40..61) | offset (bits 0..39)
//! ```
//!
//! Window indices are numbered per process, not per device: a window of one OpenCL device
//! (or of another backend opened on the same device) is not a live window of any other,
//! so passing it to the wrong one is `InvalidArgument`, never another buffer's bytes. The
//! process names 2^34 small buffers (at a thousand wrapped frames a second, half a year)
//! and 2^22 large ones; past that an allocation or wrap is `ResourceExhausted`.
//!
//! Such a value is never an address a kernel or the host can dereference; it is a name the
//! backend checks (a freed window, or an offset past the buffer's size, is
//! `InvalidArgument`). Pinned and managed memory are ordinary page-aligned host memory,
//! named by their host address: copies into and out of them are `clEnqueueReadBuffer` /
//! `clEnqueueWriteBuffer` on the host pointer, which every implementation keeps coherent.
//! Windows are never reused, so a stale name can never alias a later buffer.
//!
//! [`MemoryObject`]: crate::device::MemoryObject

use std::alloc::Layout;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use super::ffi::{self, cl_mem};
use crate::device::{AllocKind, DevicePtr};
use crate::{Error, ErrorCode, Result};

/// Set on every window address; host addresses of the supported 64-bit targets never
/// have it (user space is below 2^47 on x86-64 and AArch64).
pub(super) const WINDOW_BIT: u64 = 1 << 63;
/// Set on a large window's address.
const LARGE_BIT: u64 = 1 << 62;
const SMALL_SHIFT: u32 = 28;
const LARGE_SHIFT: u32 = 40;
/// A small window holds a buffer of fewer bytes than this (256 MiB).
const SMALL_BYTES: u64 = 1 << SMALL_SHIFT;
/// The largest buffer a window holds (1 TiB).
pub(super) const WINDOW_BYTES: u64 = 1 << LARGE_SHIFT;
/// The last index of each size (bits 62 and 63 are the tags).
const SMALL_LAST: u64 = (1 << (62 - SMALL_SHIFT)) - 1;
const LARGE_LAST: u64 = (1 << (62 - LARGE_SHIFT)) - 1;

/// The next index of each window size, for every OpenCL backend of the process.
static NEXT_SMALL: AtomicU64 = AtomicU64::new(0);
static NEXT_LARGE: AtomicU64 = AtomicU64::new(0);

/// Claims the next index below or at `last` of `next`, never the same twice.
fn claim(next: &AtomicU64, last: u64) -> Option<u64> {
    next.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        (n <= last).then_some(n + 1)
    })
    .ok()
}

/// The bytes of the window `raw` lies in, less one: the mask of its offset.
const fn offset_mask(raw: u64) -> u64 {
    if raw & LARGE_BIT == 0 {
        SMALL_BYTES - 1
    } else {
        WINDOW_BYTES - 1
    }
}

/// The base of the window `raw` lies in: the key of its region.
const fn window_base(raw: u64) -> u64 {
    raw & !offset_mask(raw)
}

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

/// The live regions: windows by base, host regions by start address.
#[derive(Default)]
pub(super) struct MemoryTable {
    windows: HashMap<u64, Region>,
    host: BTreeMap<u64, Region>,
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
        let claimed = if (bytes as u64) < SMALL_BYTES {
            claim(&NEXT_SMALL, SMALL_LAST).map(|i| WINDOW_BIT | (i << SMALL_SHIFT))
        } else {
            claim(&NEXT_LARGE, LARGE_LAST).map(|i| WINDOW_BIT | LARGE_BIT | (i << LARGE_SHIFT))
        };
        let Some(base) = claimed else {
            return Err(Error::new(
                ErrorCode::ResourceExhausted,
                if (bytes as u64) < SMALL_BYTES {
                    "this process has named 2^34 OpenCL buffers under 256 MiB: holo never reuses a buffer's name, and they are spent"
                } else {
                    "this process has named 2^22 OpenCL buffers of 256 MiB or more: holo never reuses a buffer's name, and they are spent"
                },
            ));
        };
        self.windows.insert(
            base,
            Region {
                kind,
                bytes,
                backing: Backing::Buffer {
                    mem: ffi::raw(mem),
                    adopted,
                },
            },
        );
        Ok(DevicePtr::from_raw(base))
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
        } else if ptr.raw() & offset_mask(ptr.raw()) == 0 {
            self.windows.get(&ptr.raw())
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
                self.windows.remove(&ptr.raw())
            }
            .expect("found just above")),
        }
    }

    /// The window base of a wrapped (adopted) buffer, removed: `None` if it is not one.
    pub(super) fn remove_adopted(&mut self, base: u64) -> Option<u64> {
        if base & WINDOW_BIT == 0 || base & offset_mask(base) != 0 {
            return None;
        }
        match self.windows.get(&base)?.backing {
            Backing::Buffer { mem, adopted: true } => {
                self.windows.remove(&base);
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
            let region = self.windows.get(&window_base(raw))?;
            let offset = usize::try_from(raw & offset_mask(raw)).ok()?;
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
        // A buffer of 256 MiB or more takes a large window: offsets past 2^28 resolve.
        let big = table
            .insert_buffer(fake, AllocKind::Device, 1 << 30, false)
            .unwrap();
        assert!(big.raw() & LARGE_BIT != 0 && a.raw() & LARGE_BIT == 0);
        match table.resolve(big.checked_add((1 << 30) - 8).unwrap(), 8) {
            Some(Place::Buffer { offset, .. }) => assert_eq!(offset, (1 << 30) - 8),
            other => panic!("{other:?}"),
        }
        assert!(
            table
                .resolve(big.checked_add((1 << 30) - 8).unwrap(), 9)
                .is_none()
        );
        for region in table.drain() {
            if let Backing::Host { layout } = region.backing {
                // SAFETY: the only host region, unused.
                unsafe { free_host(host, layout) };
            }
        }
    }

    /// Two tables (two devices, or two backends of one device) never name the same
    /// window: one's buffer is not a live region of the other.
    #[test]
    fn a_window_of_one_table_is_unknown_to_another() {
        let fake: cl_mem = ffi::handle(0x1000);
        let mut one = MemoryTable::default();
        let mut other = MemoryTable::default();
        for bytes in [64, 1 << 30] {
            let a = one
                .insert_buffer(fake, AllocKind::Device, bytes, false)
                .unwrap();
            let b = other
                .insert_buffer(fake, AllocKind::Device, bytes, false)
                .unwrap();
            assert_ne!(a, b, "{bytes} bytes");
            assert!(other.resolve(a, 1).is_none(), "{bytes} bytes");
            assert!(one.resolve(b, 1).is_none(), "{bytes} bytes");
            assert!(other.remove(a, AllocKind::Device, bytes).is_err());
            assert!(one.resolve(a, 1).is_some());
        }
    }

    #[test]
    fn a_spent_window_size_is_refused_not_wrapped() {
        let next = AtomicU64::new(SMALL_LAST);
        assert_eq!(claim(&next, SMALL_LAST), Some(SMALL_LAST));
        assert_eq!(claim(&next, SMALL_LAST), None);
        assert_eq!(claim(&next, SMALL_LAST), None, "never wraps to 0");
    }
}
