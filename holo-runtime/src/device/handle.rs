//! Copyable handles that name a backend's streams, events and allocations.
//!
//! A handle is a plain integer: for CUDA it is the raw `CUstream`, `CUevent` or
//! `CUdeviceptr` value (so it can be handed to a kernel launch or another library), for
//! the software device an index or a host address. Handles carry no lifetime: a backend
//! checks each one it is given and answers `InvalidArgument` for a handle it did not
//! create or already destroyed.

use std::fmt;

// Raw CUDA handles and host addresses are stored in `u64`; holo supports 64-bit targets only.
const _: () = assert!(
    size_of::<usize>() == 8,
    "holo's device handles store pointers in u64 and need a 64-bit target"
);

/// Converts a stored address back to `usize`. Lossless: holo builds only for 64-bit targets.
#[allow(
    clippy::cast_possible_truncation,
    reason = "the const assertion above makes usize 64 bits wide"
)]
pub(crate) const fn addr_usize(raw: u64) -> usize {
    raw as usize
}

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u64);

        impl $name {
            #[doc = concat!("Wraps a raw ", $what, " value. A backend rejects a value it did not create.")]
            pub const fn from_raw(raw: u64) -> Self {
                Self(raw)
            }

            #[doc = concat!("The raw ", $what, " value.")]
            pub const fn raw(self) -> u64 {
                self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#x})"), self.0)
            }
        }
    };
}

handle!(
    /// A stream: a FIFO of asynchronous device operations.
    ///
    /// For CUDA the raw value is the `CUstream`; it stays owned by the backend that created it.
    StreamHandle,
    "stream"
);

handle!(
    /// An event: a marker recorded on a stream, completed when the stream reaches it.
    ///
    /// For CUDA the raw value is the `CUevent` (created with timing disabled).
    EventHandle,
    "event"
);

handle!(
    /// An address in the backend's unified address space: device, pinned-host or managed
    /// memory. For CUDA the raw value is the `CUdeviceptr` (for pinned memory, the host
    /// address, which unified addressing makes valid on the device too).
    DevicePtr,
    "device address"
);

handle!(
    /// A backend's memory object: what an allocation is named by. On a backend with
    /// unified addressing (CUDA, the software device, host memory) it is the allocation's
    /// base address; on one without (an OpenCL `cl_mem`, a shared-memory segment) it is
    /// the object's handle, and a buffer inside it is the object plus an offset
    /// ([`BufferRef`](crate::channel::BufferRef)), never an address.
    MemoryObject,
    "memory object"
);

impl DevicePtr {
    /// The address `bytes` past this one, or `None` on overflow.
    pub const fn checked_add(self, bytes: usize) -> Option<Self> {
        match self.0.checked_add(bytes as u64) {
            Some(raw) => Some(Self(raw)),
            None => None,
        }
    }

    /// The address as a host pointer. Dereferencing it is sound only for host-accessible
    /// memory ([`AllocKind::host_accessible`](super::AllocKind::host_accessible)) that is
    /// still allocated and not being written by a pending stream operation.
    pub fn as_host_ptr(self) -> *mut u8 {
        std::ptr::with_exposed_provenance_mut(addr_usize(self.0))
    }

    /// The address of a host pointer (its provenance is exposed so that
    /// [`as_host_ptr`](Self::as_host_ptr) can rebuild it).
    pub fn from_host_ptr<T>(ptr: *const T) -> Self {
        Self(ptr.expose_provenance() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ptr_round_trips_a_host_pointer_and_offsets() {
        let mut bytes = [1_u8, 2, 3, 4];
        let ptr = DevicePtr::from_host_ptr(bytes.as_mut_ptr());
        let third = ptr.checked_add(2).expect("no overflow");
        // SAFETY: `third` points at bytes[2] of a live local array; nothing else accesses it.
        let value = unsafe { *third.as_host_ptr() };
        assert_eq!(value, 3);
        assert_eq!(DevicePtr::from_raw(u64::MAX).checked_add(1), None);
        assert_eq!(
            format!("{:?}", StreamHandle::from_raw(255)),
            "StreamHandle(0xff)"
        );
    }
}
