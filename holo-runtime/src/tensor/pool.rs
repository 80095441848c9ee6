//! Runtime pools: sized when the plan is compiled, materialized once in
//! `RunSession::start`, borrowed on the hot path.
//!
//! A pool owns one contiguous backing of `slot_count × per_slot_bytes` bytes, one
//! metadata record per slot and a lock-free free list of slot indices, all allocated
//! before the first `compute()`. `allocate_tensor` pops an index or fails with
//! `ResourceExhausted` at once; a slot goes back on the free list when its last handle
//! (every consumer's `Tensor` and every `TensorReadLease`) is dropped.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use crossbeam_queue::ArrayQueue;

use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::{Error, ErrorCode, MemoryKind, Result};

/// What a slot holds once its writer committed: shape, dtype and byte size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TensorMeta {
    pub(crate) shape: [u64; MAX_TENSOR_RANK as usize],
    pub(crate) rank: u8,
    pub(crate) dtype: DType,
    pub(crate) byte_size: usize,
}

impl TensorMeta {
    pub(crate) const EMPTY: TensorMeta = TensorMeta {
        shape: [0; MAX_TENSOR_RANK as usize],
        rank: 0,
        dtype: DType::U8,
        byte_size: 0,
    };

    pub(crate) fn shape(&self) -> &[u64] {
        &self.shape[..usize::from(self.rank)]
    }
}

struct Slot {
    /// Live handles: the producer's loan, then every `Tensor` and read lease.
    refs: AtomicU32,
    /// Written only by the slot's exclusive loan holder before publication.
    meta: UnsafeCell<TensorMeta>,
}

/// Counters a pool keeps for the run summary and for tests.
#[derive(Debug, Default)]
pub(crate) struct PoolCounters {
    pub(crate) loans: AtomicU64,
    pub(crate) exhausted: AtomicU64,
}

/// A materialized pool.
pub(crate) struct Pool {
    pub(crate) name: String,
    /// `operator "camera", port "frames"` — interned, so hot-path errors name it without
    /// allocating.
    pub(crate) location: &'static str,
    pub(crate) kind: MemoryKind,
    pub(crate) dtype: Option<DType>,
    pub(crate) max_rank: u32,
    pub(crate) per_slot_bytes: usize,
    pub(crate) slot_count: u32,
    backing: *mut u8,
    backing_len: usize,
    slots: Box<[Slot]>,
    free: ArrayQueue<u32>,
    pub(crate) counters: PoolCounters,
}

// SAFETY: the backing and each slot's metadata are written only by the holder of that
// slot's loan, which took the index off the free list exclusively; readers access them only
// after the loan was committed and published through a queue (a release/acquire pair), and
// the slot returns to the free list only after its last reader's release-ordered decrement.
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Drop for Pool {
    fn drop(&mut self) {
        if self.backing_len > 0 {
            // SAFETY: `backing` came from `Box::<[u8]>::into_raw` with this length in
            // `materialize`, and no handle outlives the pool (handles hold an `Arc<Pool>`).
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.backing,
                    self.backing_len,
                ))
            });
        }
    }
}

impl Pool {
    /// Materializes a host pool: every byte, every slot record and the full free list,
    /// or an error naming the pool. Nothing is allocated for it afterwards.
    pub(crate) fn materialize(
        name: String,
        location: &'static str,
        kind: MemoryKind,
        dtype: Option<DType>,
        max_rank: u32,
        per_slot_bytes: u64,
        slot_count: u32,
    ) -> Result<Pool> {
        if kind != MemoryKind::Host {
            return Err(Error::new(
                ErrorCode::DeviceUnavailable,
                format!(
                    "pool {name} needs {kind} memory, which this session cannot provide: host sessions materialize only `host` pools"
                ),
            )
            .at(location));
        }
        let per_slot = usize::try_from(per_slot_bytes).map_err(|_| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("pool {name}: {per_slot_bytes} bytes per slot do not fit this host"),
            )
            .at(location)
        })?;
        let total = per_slot.checked_mul(slot_count as usize).ok_or_else(|| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("pool {name}: {slot_count} slots × {per_slot} bytes overflow this host"),
            )
            .at(location)
        })?;
        let mut backing_vec = Vec::new();
        backing_vec.try_reserve_exact(total).map_err(|e| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("pool {name}: cannot reserve {total} bytes: {e}"),
            )
            .at(location)
        })?;
        backing_vec.resize(total, 0u8);
        let backing_len = backing_vec.len();
        let backing = Box::into_raw(backing_vec.into_boxed_slice()).cast::<u8>();
        let slots = (0..slot_count)
            .map(|_| Slot {
                refs: AtomicU32::new(0),
                meta: UnsafeCell::new(TensorMeta::EMPTY),
            })
            .collect();
        let free = ArrayQueue::new(slot_count.max(1) as usize);
        for i in 0..slot_count {
            let _ = free.push(i);
        }
        Ok(Pool {
            name,
            location,
            kind,
            dtype,
            max_rank,
            per_slot_bytes: per_slot,
            slot_count,
            backing,
            backing_len,
            slots,
            free,
            counters: PoolCounters::default(),
        })
    }

    /// Borrows a free slot, or `ResourceExhausted` at once. The slot starts with one
    /// reference: the loan's.
    pub(crate) fn borrow_slot(&self) -> Result<u32> {
        if let Some(slot) = self.free.pop() {
            self.slots[slot as usize].refs.store(1, Ordering::Relaxed);
            self.counters.loans.fetch_add(1, Ordering::Relaxed);
            Ok(slot)
        } else {
            self.counters.exhausted.fetch_add(1, Ordering::Relaxed);
            Err(Error::new(
                ErrorCode::ResourceExhausted,
                "the pool has no free slot: every slot is queued, held or loaned (allocate_tensor never waits)",
            )
            .at(self.location))
        }
    }

    /// The bytes of `slot`.
    pub(crate) fn slot_ptr(&self, slot: u32) -> *mut u8 {
        // SAFETY: `slot < slot_count`, so the offset stays inside the backing allocation.
        unsafe { self.backing.add(slot as usize * self.per_slot_bytes) }
    }

    /// Writes the metadata of a slot the caller holds the loan of.
    ///
    /// # Safety
    /// The caller holds the slot's loan (exclusive write authority).
    pub(crate) unsafe fn set_meta(&self, slot: u32, meta: TensorMeta) {
        // SAFETY: exclusive per the caller's contract.
        unsafe { *self.slots[slot as usize].meta.get() = meta };
    }

    /// The metadata of a committed slot.
    pub(crate) fn meta(&self, slot: u32) -> &TensorMeta {
        // SAFETY: read only through a handle of a committed slot, after publication;
        // nobody writes the metadata until the slot is free again.
        unsafe { &*self.slots[slot as usize].meta.get() }
    }

    pub(crate) fn retain(&self, slot: u32) {
        self.slots[slot as usize]
            .refs
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one reference; the last one returns the slot to the free list.
    pub(crate) fn release(&self, slot: u32) {
        if self.slots[slot as usize]
            .refs
            .fetch_sub(1, Ordering::Release)
            == 1
        {
            fence(Ordering::Acquire);
            // The free list has room for every slot, so this cannot fail.
            let _ = self.free.push(slot);
        }
    }

    /// Slots currently free.
    pub(crate) fn free_slots(&self) -> u32 {
        u32::try_from(self.free.len()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(slots: u32) -> Pool {
        Pool::materialize(
            "op.out".into(),
            "op.out",
            MemoryKind::Host,
            Some(DType::U8),
            1,
            16,
            slots,
        )
        .unwrap()
    }

    #[test]
    fn borrow_until_exhausted_then_release_returns_the_slot() {
        let p = pool(2);
        let a = p.borrow_slot().unwrap();
        let b = p.borrow_slot().unwrap();
        assert_ne!(a, b);
        let err = p.borrow_slot().unwrap_err();
        assert_eq!(err.code(), ErrorCode::ResourceExhausted);
        assert_eq!(err.location(), Some("op.out"));
        p.retain(a);
        p.release(a);
        assert_eq!(p.free_slots(), 0, "one reference is still live");
        p.release(a);
        assert_eq!(p.free_slots(), 1);
        assert_eq!(p.counters.exhausted.load(Ordering::Relaxed), 1);
        p.release(b);
    }

    #[test]
    fn non_host_pools_fail_closed() {
        let err = Pool::materialize(
            "op.out".into(),
            "op.out",
            MemoryKind::PinnedHost,
            None,
            1,
            16,
            2,
        )
        .err()
        .unwrap();
        assert_eq!(err.code(), ErrorCode::DeviceUnavailable);
    }
}
