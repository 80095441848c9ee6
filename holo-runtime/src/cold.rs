//! Cold allocations — queues, rings, slot records, free lists, event inventories — sized
//! with checked arithmetic and reserved fallibly, so an absurd size is a
//! `ResourceExhausted` error naming what was being built, never an abort inside the
//! allocator. One larger than the host's physical memory is refused outright, whatever
//! the kernel's overcommit policy would grant.

use std::fmt;

/// A cold allocation that could not be made: `bytes` is `None` when the size overflowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColdAllocError {
    pub(crate) count: usize,
    pub(crate) elem_bytes: usize,
    pub(crate) bytes: Option<usize>,
}

impl fmt::Display for ColdAllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bytes {
            Some(b) => write!(
                f,
                "cannot reserve {b} bytes of host memory ({} entries × {} bytes)",
                self.count, self.elem_bytes
            ),
            None => write!(
                f,
                "{} entries × {} bytes overflow this host's address space",
                self.count, self.elem_bytes
            ),
        }
    }
}

/// The host's physical memory in bytes (Linux: `MemTotal` of `/proc/meminfo`), read once;
/// `None` where it cannot be read.
fn host_memory_bytes() -> Option<usize> {
    static TOTAL: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kib: usize = info
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()?;
        kib.checked_mul(1024)
    })
}

/// Refuses a cold allocation larger than the host's physical memory: it could never be
/// touched, and whether the allocator refuses it depends on the kernel's overcommit
/// policy (an H200 host granted a 1 TiB reservation this machine refused).
fn fits_the_host(count: usize, elem_bytes: usize, bytes: usize) -> Result<(), ColdAllocError> {
    match host_memory_bytes() {
        Some(total) if bytes > total => Err(ColdAllocError {
            count,
            elem_bytes,
            bytes: Some(bytes),
        }),
        _ => Ok(()),
    }
}

/// Checks that `count` elements of `elem_bytes` each can be reserved, by reserving (and
/// freeing) that many bytes: for a container that allocates infallibly
/// (`crossbeam_queue::ArrayQueue`), called right before it is built.
pub(crate) fn probe(count: usize, elem_bytes: usize) -> Result<(), ColdAllocError> {
    let bytes = checked_bytes(count, elem_bytes)?;
    Vec::<u8>::new()
        .try_reserve_exact(bytes)
        .map_err(|_| ColdAllocError {
            count,
            elem_bytes,
            bytes: Some(bytes),
        })
}

/// `count × elem_bytes`, checked for overflow and against the host's memory.
pub(crate) fn checked_bytes(count: usize, elem_bytes: usize) -> Result<usize, ColdAllocError> {
    let bytes = count.checked_mul(elem_bytes).ok_or(ColdAllocError {
        count,
        elem_bytes,
        bytes: None,
    })?;
    fits_the_host(count, elem_bytes, bytes)?;
    Ok(bytes)
}

/// `count` elements made by `make`, in a boxed slice reserved fallibly.
pub(crate) fn boxed_slice<T>(
    count: usize,
    make: impl FnMut(usize) -> T,
) -> Result<Box<[T]>, ColdAllocError> {
    let mut v = vec_with_capacity(count)?;
    v.extend((0..count).map(make));
    Ok(v.into_boxed_slice())
}

/// `count` uninitialized cells, reserved fallibly and never moved through the stack (an
/// element may be large).
pub(crate) fn uninit_slice<T>(
    count: usize,
) -> Result<Box<[std::cell::UnsafeCell<std::mem::MaybeUninit<T>>]>, ColdAllocError> {
    let mut v = vec_with_capacity(count)?;
    // SAFETY: the capacity is `count`, and an `UnsafeCell<MaybeUninit<T>>` (transparent
    // over `MaybeUninit<T>`) is valid uninitialized.
    unsafe { v.set_len(count) };
    Ok(v.into_boxed_slice())
}

/// An empty `Vec` with room for `count` elements, reserved fallibly.
pub(crate) fn vec_with_capacity<T>(count: usize) -> Result<Vec<T>, ColdAllocError> {
    let elem_bytes = size_of::<T>();
    let bytes = checked_bytes(count, elem_bytes)?;
    let mut v = Vec::new();
    v.try_reserve_exact(count).map_err(|_| ColdAllocError {
        count,
        elem_bytes,
        bytes: Some(bytes),
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "asks the allocator for more than a host holds: Miri stops the run where an allocator refuses"
    )]
    fn absurd_sizes_are_errors_not_aborts() {
        let e = boxed_slice::<[u8; 1 << 20]>(1 << 30, |_| unreachable!()).unwrap_err();
        assert_eq!(e.bytes, Some(1 << 50));
        assert!(
            e.to_string()
                .contains("cannot reserve 1125899906842624 bytes"),
            "{e}"
        );
        let e = probe(usize::MAX, 2).unwrap_err();
        assert_eq!(e.bytes, None);
        assert!(e.to_string().contains("overflow"), "{e}");
        assert_eq!(&*boxed_slice(3, |i| i * 2).unwrap(), &[0, 2, 4]);
        assert!(probe(1024, 8).is_ok());
        // More than the host has is refused before the allocator is asked (here, where
        // the memory size can be read).
        if let Some(total) = host_memory_bytes() {
            let e = probe(total / 8 + 1, 16).unwrap_err();
            assert!(e.bytes.is_some_and(|b| b > total), "{e}");
        }
    }
}
