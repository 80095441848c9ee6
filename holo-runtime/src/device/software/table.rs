//! A generation-checked table from raw handle values to shared objects.
//!
//! A raw handle packs `tag << 48 | generation << 24 | index`: the tag names the table's
//! device (so a handle from another device is rejected), the generation makes a handle of
//! a destroyed object stale even after its slot is reused. Raw value 0 is never issued.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

const INDEX_BITS: u32 = 24;
const GENERATION_BITS: u32 = 24;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
const GENERATION_MASK: u64 = (1 << GENERATION_BITS) - 1;
/// At most this many live objects per table.
pub(super) const CAPACITY: usize = 1 << INDEX_BITS;

struct Slot<T> {
    generation: u64,
    value: Option<Arc<T>>,
}

struct Slots<T> {
    entries: Vec<Slot<T>>,
    free: Vec<usize>,
}

pub(super) struct HandleTable<T> {
    tag: u64,
    slots: RwLock<Slots<T>>,
}

/// Tags start at 1 so that no raw handle is 0.
static NEXT_TAG: AtomicU16 = AtomicU16::new(1);

impl<T> HandleTable<T> {
    pub(super) fn new() -> Self {
        let tag = match NEXT_TAG.fetch_add(1, Ordering::Relaxed) {
            0 => NEXT_TAG.fetch_add(1, Ordering::Relaxed),
            tag => tag,
        };
        Self {
            tag: u64::from(tag),
            slots: RwLock::new(Slots {
                entries: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    fn encode(&self, generation: u64, index: usize) -> u64 {
        (self.tag << (INDEX_BITS + GENERATION_BITS)) | (generation << INDEX_BITS) | index as u64
    }

    fn decode(&self, raw: u64) -> Option<(u64, usize)> {
        if raw >> (INDEX_BITS + GENERATION_BITS) != self.tag {
            return None;
        }
        let generation = (raw >> INDEX_BITS) & GENERATION_MASK;
        let index = super::super::handle::addr_usize(raw & INDEX_MASK);
        Some((generation, index))
    }

    /// Stores `value` and returns its raw handle, or `None` when the table is full.
    pub(super) fn insert(&self, value: Arc<T>) -> Option<u64> {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let index = match slots.free.pop() {
            Some(index) => index,
            None if slots.entries.len() < CAPACITY => {
                slots.entries.push(Slot {
                    generation: 0,
                    value: None,
                });
                slots.entries.len() - 1
            }
            None => return None,
        };
        let slot = &mut slots.entries[index];
        slot.generation = (slot.generation + 1) & GENERATION_MASK;
        slot.value = Some(value);
        let generation = slot.generation;
        Some(self.encode(generation, index))
    }

    /// The object a raw handle names, if it is live.
    pub(super) fn get(&self, raw: u64) -> Option<Arc<T>> {
        let (generation, index) = self.decode(raw)?;
        let slots = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        let slot = slots.entries.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.clone()
    }

    /// Removes and returns the object a raw handle names, if it is live.
    pub(super) fn remove(&self, raw: u64) -> Option<Arc<T>> {
        let (generation, index) = self.decode(raw)?;
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let slot = slots.entries.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        slots.free.push(index);
        Some(value)
    }

    /// Removes every object.
    pub(super) fn drain(&self) -> Vec<Arc<T>> {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let drained: Vec<Arc<T>> = slots
            .entries
            .iter_mut()
            .filter_map(|slot| slot.value.take())
            .collect();
        slots.free = (0..slots.entries.len()).collect();
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_zero_handles_are_rejected() {
        let table = HandleTable::new();
        let other = HandleTable::<u32>::new();
        let first = table.insert(Arc::new(1_u32)).unwrap();
        assert_ne!(first, 0);
        assert_eq!(table.get(first).as_deref(), Some(&1));
        assert!(other.get(first).is_none(), "a handle of another table");
        assert!(table.get(0).is_none());
        assert_eq!(table.remove(first).as_deref(), Some(&1));
        assert!(table.get(first).is_none(), "a removed handle");
        assert!(table.remove(first).is_none());
        let second = table.insert(Arc::new(2)).unwrap();
        assert_ne!(first, second, "a reused slot gets a new generation");
        assert!(table.get(first).is_none());
        assert_eq!(table.drain().len(), 1);
        assert!(table.get(second).is_none());
    }
}
