//! The channel layer: what moves a value from a producer to its consumers, below any
//! session (docs/ARCHITECTURE.md, "Channels"). A channel is a pool, its slot ledger and
//! its queues:
//! - `pool`: the slot ledger — slots named by [`SlotRef`] (a stale generation is refused),
//!   bytes named by [`BufferRef`] (memory object plus offset), readiness recorded in the
//!   writer's [`OrderingDomain`] and release in every reader's, each call told which
//!   domain acts;
//! - `free_list`, `retire`: the free list and the retirement worker that polls release
//!   events;
//! - `queue`: the edge queues, which a session's partitions use through `Endpoint`s and
//!   `graph.rs` builds type-erased factories of without knowing of sessions;
//! - `sync`: the atomics, queues and cells of all of the above: `std`'s and crossbeam's,
//!   or loom's under `--cfg holo_loom` (the loom models at the end of each file).
//!
//! Nothing here depends on `session/`: a pool materializes, loans, commits, delivers and
//! retires with a device backend and a retirer alone (the unit tests below do).

mod domain;
pub(crate) mod free_list;
pub(crate) mod pool;
pub(crate) mod queue;
pub(crate) mod retire;
mod sync;

pub use domain::{DomainOwner, OrderingDomain};

use crate::device::{DevicePtr, MemoryObject};

/// Where a slot's bytes are: a memory object of the pool's backend and an offset into it.
/// On a backend with unified addressing (CUDA, the software device, host memory) the
/// object is the allocation's base address and [`unified_address`](Self::unified_address)
/// is the bytes' address; on one without (OpenCL) the pair is the only name of the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferRef {
    /// The backend's memory object.
    pub memory: MemoryObject,
    /// The offset of the bytes in it.
    pub offset: u64,
    /// The bytes' length.
    pub len: u64,
}

impl BufferRef {
    /// The bytes' address, on a backend with unified addressing (the object's base plus
    /// the offset; `None` if that overflows).
    pub const fn unified_address(self) -> Option<DevicePtr> {
        match self.memory.raw().checked_add(self.offset) {
            Some(raw) => Some(DevicePtr::from_raw(raw)),
            None => None,
        }
    }
}

/// One use of one pool slot: the slot's index and its generation, which advances every
/// time the slot is loaned. A `SlotRef` outlives nothing: it names the use, and a pool
/// refuses one whose generation is not the slot's current one (`InvalidArgument`) — never
/// aliasing a later use of the same slot. ([`Tensor::slot_ref`](crate::Tensor::slot_ref);
/// a descriptor or capsule that leaves the process carries one.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotRef {
    /// The slot's index in its pool.
    pub slot: u32,
    /// The slot's generation when it was loaned for this use.
    pub generation: u32,
}

impl std::fmt::Display for SlotRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "slot {} generation {}", self.slot, self.generation)
    }
}
