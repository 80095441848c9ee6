//! The channel layer: what moves a value from a producer to its consumers, below any
//! session (docs/ARCHITECTURE.md, "Channels"). Today it holds the edge queues — a
//! session's partitions use them through `Endpoint`s, and `graph.rs` builds their
//! type-erased factories without knowing of sessions — and [`SlotRef`], the name of one
//! use of one pool slot.

pub(crate) mod queue;

/// One use of one pool slot: the slot's index and its generation, which advances every
/// time the slot is loaned. A `SlotRef` outlives nothing: it names the use, and a pool
/// refuses one whose generation is not the slot's current one (`InvalidArgument`) — never
/// aliasing a later use of the same slot. ([`Tensor::slot_ref`](crate::Tensor::slot_ref);
/// a descriptor or capsule that leaves the process carries one.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
