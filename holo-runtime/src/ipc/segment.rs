//! Shared-memory segments: a sealed memfd mapped by both processes. The exporter creates
//! one per shared pool (its payload) and one per served topic (its fence and release
//! words); their descriptors pass once, over the topic's socket, and the importer maps
//! them. A mapping outlives the process that made the segment: an importer's tensors stay
//! readable after the exporter died, and the exporter's after an importer died.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::{Error, ErrorCode, Result};

/// One mapped memfd segment. Dropping it unmaps it and closes its descriptor.
pub(crate) struct Segment {
    fd: OwnedFd,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; what is written where is ordered by the
// pool's ledger (payload) or by atomics (control words).
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("fd", &self.fd)
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

fn io_error(what: &str, e: rustix::io::Errno) -> Error {
    Error::new(
        ErrorCode::ResourceExhausted,
        format!("{what}: {}", std::io::Error::from(e)),
    )
}

impl Segment {
    /// A new zeroed segment of `len` bytes named `name` (visible in `/proc/<pid>/maps` as
    /// `memfd:<name>`), sealed against shrinking and growing — a peer cannot truncate it
    /// under a reader — and mapped read-write.
    pub(crate) fn create(name: &str, len: usize) -> Result<Segment> {
        let len = len.max(1);
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
            .map_err(|e| io_error(&format!("cannot create the shared segment {name:?}"), e))?;
        rustix::fs::ftruncate(&fd, len as u64).map_err(|e| {
            io_error(
                &format!("cannot size the shared segment {name:?} to {len} bytes"),
                e,
            )
        })?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(|e| io_error(&format!("cannot seal the shared segment {name:?}"), e))?;
        Self::map_fd(fd, len, true)
    }

    /// Maps a segment received from a peer: `len` bytes of it, read-write or read-only.
    /// `InvalidArgument` when the descriptor is not a segment sealed against shrinking, or
    /// holds fewer than `len` bytes (a peer that could shrink it could make a read fault).
    pub(crate) fn import(fd: OwnedFd, len: usize, writable: bool) -> Result<Segment> {
        let seals = rustix::fs::fcntl_get_seals(&fd).map_err(|e| {
            Error::invalid_argument(format!(
                "the peer's segment is not a sealed memfd: {}",
                std::io::Error::from(e)
            ))
        })?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(Error::invalid_argument(
                "the peer's segment is not sealed against shrinking",
            ));
        }
        let size = rustix::fs::fstat(&fd)
            .map_err(|e| io_error("cannot stat the peer's segment", e))?
            .st_size;
        if u64::try_from(size).unwrap_or(0) < len as u64 || len == 0 {
            return Err(Error::invalid_argument(format!(
                "the peer's segment holds {size} bytes; its handshake announced {len}"
            )));
        }
        Self::map_fd(fd, len, writable)
    }

    fn map_fd(fd: OwnedFd, len: usize, writable: bool) -> Result<Segment> {
        let prot = if writable {
            ProtFlags::READ | ProtFlags::WRITE
        } else {
            ProtFlags::READ
        };
        // SAFETY: a fresh shared mapping of `len` bytes of `fd`, which holds at least that
        // many and is sealed against shrinking; nothing else is mapped at the address the
        // kernel picks.
        let ptr =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, &fd, 0) }
                .map_err(|e| io_error(&format!("cannot map a shared segment of {len} bytes"), e))?;
        Ok(Segment {
            fd,
            ptr: ptr.cast(),
            len,
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The `index`-th 64-bit word of the segment, as an atomic (`None` past its end).
    pub(crate) fn word(&self, index: usize) -> Option<&AtomicU64> {
        let end = index.checked_add(1)?.checked_mul(8)?;
        if end > self.len {
            return None;
        }
        // SAFETY: in bounds (checked), 8-aligned (a page-aligned mapping plus a multiple
        // of 8), and only ever accessed atomically by both processes.
        #[allow(
            clippy::cast_ptr_alignment,
            reason = "the mapping is page-aligned and the offset a multiple of 8"
        )]
        let word = self.ptr.cast::<AtomicU64>();
        // SAFETY: as above.
        Some(unsafe { &*word.add(index) })
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map_fd`, unmapped once; every user holds the
        // segment (an `Arc`) for as long as it reads it.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}
