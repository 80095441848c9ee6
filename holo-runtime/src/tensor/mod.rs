//! Tensors, loans and write guards.
//!
//! The producer lifecycle is `allocate_tensor` → [`TensorOutputLoan`] →
//! [`write_host`](TensorOutputLoan::write_host) → [`HostWriteGuard`] →
//! [`commit`](HostWriteGuard::commit) → [`CommittedTensor`] → `emit`. Every step consumes
//! the previous object, so a step cannot be repeated or skipped; dropping a loan or guard
//! before commit abandons it and returns the slot to its pool.
//!
//! A [`Tensor`] is what consumers receive: a read-only handle to a committed slot. Its
//! clones and [`TensorReadLease`]s keep the slot out of the pool; the last one dropped
//! returns it.

pub(crate) mod pool;

use std::fmt;
use std::sync::Arc;

use pool::{Pool, TensorMeta};

use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::{Error, ErrorCode, MemoryKind, Result};

/// What one loan asks for: a shape and an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorLoanRequest<'a> {
    /// The extents, outermost first. Its length is the rank.
    pub shape: &'a [u64],
    /// The element type.
    pub dtype: DType,
}

fn meta_for(shape: &[u64], dtype: DType) -> Option<TensorMeta> {
    if shape.len() > MAX_TENSOR_RANK as usize {
        return None;
    }
    let mut bytes = dtype.size_bytes();
    for &e in shape {
        bytes = bytes.checked_mul(e)?;
    }
    let mut meta = TensorMeta {
        rank: u8::try_from(shape.len()).ok()?,
        dtype,
        byte_size: usize::try_from(bytes).ok()?,
        ..TensorMeta::EMPTY
    };
    meta.shape[..shape.len()].copy_from_slice(shape);
    Some(meta)
}

/// A borrowed pool slot with write authority, not yet written.
///
/// Made by `Output<Tensor>::allocate_tensor`. Dropping it returns the slot.
#[must_use = "a loan does nothing until it is written, committed and emitted"]
pub struct TensorOutputLoan {
    pool: Arc<Pool>,
    slot: u32,
    meta: TensorMeta,
}

impl TensorOutputLoan {
    pub(crate) fn new(pool: &Arc<Pool>, request: TensorLoanRequest<'_>) -> Result<Self> {
        if let Some(declared) = pool.dtype
            && declared != request.dtype
        {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                "the loan's dtype differs from the dtype the output declares",
            )
            .at(pool.location));
        }
        if request.shape.len() > pool.max_rank as usize {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                "the loan's rank exceeds the output's max_rank (a zero bound rejects every loan)",
            )
            .at(pool.location));
        }
        let Some(meta) = meta_for(request.shape, request.dtype) else {
            return Err(Error::new(
                ErrorCode::ArithmeticOverflow,
                "the loan's byte size overflows",
            )
            .at(pool.location));
        };
        if meta.byte_size > pool.per_slot_bytes {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                "the loan's byte size exceeds the pool's per-slot bound (a zero bound rejects every loan)",
            )
            .at(pool.location));
        }
        let slot = pool.borrow_slot()?;
        Ok(Self {
            pool: Arc::clone(pool),
            slot,
            meta,
        })
    }

    /// The requested shape.
    pub fn shape(&self) -> &[u64] {
        self.meta.shape()
    }

    /// The requested byte size (`product(shape) × dtype size`).
    pub fn byte_size(&self) -> usize {
        self.meta.byte_size
    }

    /// Starts the host write phase. Needs host-accessible memory (`host`, `pinned`,
    /// `cuda_managed`); a `cuda_device` slot is written on the compute stream instead.
    pub fn write_host(self) -> Result<HostWriteGuard> {
        if !self.pool.kind.is_host_accessible() {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "host writes need host-accessible memory; this pool is cuda_device",
            )
            .at(self.pool.location));
        }
        Ok(HostWriteGuard { loan: self })
    }

    /// Writes the slot on the host with `fill` and commits. The bytes are complete when
    /// this returns, so no readiness fence is recorded.
    pub fn write_host_and_commit(self, fill: impl FnOnce(&mut [u8])) -> Result<CommittedTensor> {
        let mut guard = self.write_host()?;
        fill(guard.as_mut_slice());
        guard.commit()
    }
}

impl Drop for TensorOutputLoan {
    fn drop(&mut self) {
        self.pool.release(self.slot);
    }
}

impl fmt::Debug for TensorOutputLoan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorOutputLoan")
            .field("pool", &self.pool.name)
            .field("slot", &self.slot)
            .field("shape", &self.shape())
            .finish_non_exhaustive()
    }
}

/// The host write phase of a loan. Commit it to make the tensor emittable.
#[must_use = "uncommitted writes are abandoned when the guard drops"]
#[derive(Debug)]
pub struct HostWriteGuard {
    loan: TensorOutputLoan,
}

impl HostWriteGuard {
    /// The slot's bytes, exactly `byte_size()` long.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let ptr = self.loan.pool.slot_ptr(self.loan.slot);
        // SAFETY: the guard owns the slot's loan, so nobody else reads or writes these
        // bytes until commit publishes them; `byte_size <= per_slot_bytes`.
        unsafe { std::slice::from_raw_parts_mut(ptr, self.loan.meta.byte_size) }
    }

    /// The requested byte size.
    pub fn byte_size(&self) -> usize {
        self.loan.meta.byte_size
    }

    /// Ends the write phase. For a host write this records nothing: the bytes are
    /// complete now.
    pub fn commit(self) -> Result<CommittedTensor> {
        let loan = self.loan;
        // SAFETY: the loan is exclusive until it is turned into a Tensor below.
        unsafe { loan.pool.set_meta(loan.slot, loan.meta) };
        let loan = std::mem::ManuallyDrop::new(loan);
        // SAFETY: the loan is not used again and its Drop is suppressed; its reference
        // moves into the Tensor.
        let pool = unsafe { std::ptr::read(&raw const loan.pool) };
        Ok(CommittedTensor(Tensor {
            inner: TensorInner::Pooled {
                pool,
                slot: loan.slot,
            },
        }))
    }
}

/// A tensor whose writes are committed, ready for `emit`.
#[must_use = "a committed tensor does nothing until it is emitted"]
#[derive(Debug)]
pub struct CommittedTensor(Tensor);

impl CommittedTensor {
    /// The tensor, for forwarding through a pass-through output or inspection.
    pub fn into_tensor(self) -> Tensor {
        self.0
    }
}

impl From<CommittedTensor> for Tensor {
    fn from(c: CommittedTensor) -> Self {
        c.0
    }
}

struct OwnedTensor {
    bytes: Box<[u8]>,
    meta: TensorMeta,
}

enum TensorInner {
    Pooled { pool: Arc<Pool>, slot: u32 },
    Owned(Arc<OwnedTensor>),
}

/// A committed tensor as consumers see it: read-only.
///
/// Clones are cheap (a reference count) and share the slot; the slot returns to its pool
/// when the last clone and the last [`TensorReadLease`] are dropped.
pub struct Tensor {
    inner: TensorInner,
}

impl Tensor {
    /// A pass-through host tensor over caller-supplied bytes (for a
    /// `storage = pass_through` output). `bytes.len()` must equal the shape's byte size.
    pub fn from_host_vec(shape: &[u64], dtype: DType, bytes: Vec<u8>) -> Result<Tensor> {
        let meta = meta_for(shape, dtype).ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidArgument,
                "the shape has more than 8 extents or overflows",
            )
        })?;
        if meta.byte_size != bytes.len() {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "the shape {shape:?} of {dtype} needs {} bytes, the buffer has {}",
                    meta.byte_size,
                    bytes.len()
                ),
            ));
        }
        Ok(Tensor {
            inner: TensorInner::Owned(Arc::new(OwnedTensor {
                bytes: bytes.into_boxed_slice(),
                meta,
            })),
        })
    }

    fn meta(&self) -> &TensorMeta {
        match &self.inner {
            TensorInner::Pooled { pool, slot } => pool.meta(*slot),
            TensorInner::Owned(o) => &o.meta,
        }
    }

    /// The extents.
    pub fn shape(&self) -> &[u64] {
        self.meta().shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.meta().dtype
    }

    /// The rank.
    pub fn rank(&self) -> u32 {
        u32::from(self.meta().rank)
    }

    /// The byte size.
    pub fn byte_size(&self) -> usize {
        self.meta().byte_size
    }

    /// Where the bytes live.
    pub fn memory_kind(&self) -> MemoryKind {
        match &self.inner {
            TensorInner::Pooled { pool, .. } => pool.kind,
            TensorInner::Owned(_) => MemoryKind::Host,
        }
    }

    /// The pool the tensor was borrowed from (`<operator>.<port>`), or `None` for a
    /// pass-through tensor.
    pub fn pool_name(&self) -> Option<&str> {
        match &self.inner {
            TensorInner::Pooled { pool, .. } => Some(&pool.name),
            TensorInner::Owned(_) => None,
        }
    }

    /// The bytes, for host-accessible memory (`NotSupported` for `cuda_device`).
    pub fn data(&self) -> Result<&[u8]> {
        match &self.inner {
            TensorInner::Pooled { pool, slot } => {
                if !pool.kind.is_host_accessible() {
                    return Err(Error::new(
                        ErrorCode::NotSupported,
                        "the tensor lives in cuda_device memory: copy it to the host first",
                    )
                    .at(pool.location));
                }
                // SAFETY: the slot is committed and this handle keeps it out of the pool;
                // nobody writes it until the last handle drops.
                Ok(unsafe {
                    std::slice::from_raw_parts(pool.slot_ptr(*slot), pool.meta(*slot).byte_size)
                })
            }
            TensorInner::Owned(o) => Ok(&o.bytes),
        }
    }

    /// Always `PermissionDenied`: write authority stayed with the producer's guard and
    /// was spent at commit. Copy into a slot you allocate to change the bytes.
    pub fn mutable_data(&mut self) -> Result<&mut [u8]> {
        Err(Error::new(
            ErrorCode::PermissionDenied,
            "a received tensor is read-only: write authority was spent at the producer's commit",
        )
        .at(match &self.inner {
            TensorInner::Pooled { pool, .. } => pool.location,
            TensorInner::Owned(_) => "a pass-through tensor",
        }))
    }

    /// A read lease: keeps the slot out of the pool until it is dropped, like a clone,
    /// but grants only reads.
    pub fn read_lease(&self) -> TensorReadLease {
        TensorReadLease(self.clone())
    }
}

impl Clone for Tensor {
    fn clone(&self) -> Self {
        match &self.inner {
            TensorInner::Pooled { pool, slot } => {
                pool.retain(*slot);
                Tensor {
                    inner: TensorInner::Pooled {
                        pool: Arc::clone(pool),
                        slot: *slot,
                    },
                }
            }
            TensorInner::Owned(o) => Tensor {
                inner: TensorInner::Owned(Arc::clone(o)),
            },
        }
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        if let TensorInner::Pooled { pool, slot } = &self.inner {
            pool.release(*slot);
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("pool", &self.pool_name())
            .field("memory_kind", &self.memory_kind())
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .finish()
    }
}

/// A read-only claim on a tensor's slot; the slot stays out of its pool until every
/// lease and every `Tensor` handle is dropped.
#[derive(Debug)]
pub struct TensorReadLease(Tensor);

impl TensorReadLease {
    /// The bytes (see [`Tensor::data`]).
    pub fn data(&self) -> Result<&[u8]> {
        self.0.data()
    }
}

/// Implemented only by [`Tensor`]: tensor port specs apply only to `Tensor` payloads.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `holo_runtime::Tensor`",
    note = "tensor keys (`memory`, `dtype`, `rank`, `storage`, …) apply only to `Input<Tensor>` / `Output<Tensor>` ports"
)]
pub trait IsTensor: sealed::Sealed {}
impl IsTensor for Tensor {}
mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Tensor {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(slots: u32, bytes: u64) -> Arc<Pool> {
        Arc::new(
            Pool::materialize(
                "p.out".into(),
                "p.out",
                MemoryKind::Host,
                Some(DType::U8),
                2,
                bytes,
                slots,
            )
            .unwrap(),
        )
    }

    #[test]
    fn lifecycle_write_commit_read_and_return() {
        let p = pool(1, 16);
        let loan = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[2, 4],
                dtype: DType::U8,
            },
        )
        .unwrap();
        let t: Tensor = loan.write_host_and_commit(|b| b.fill(7)).unwrap().into();
        assert_eq!(t.data().unwrap(), &[7; 8]);
        assert_eq!(t.shape(), &[2, 4]);
        let lease = t.read_lease();
        drop(t);
        assert_eq!(p.free_slots(), 0, "the lease still holds the slot");
        assert_eq!(lease.data().unwrap(), &[7; 8]);
        drop(lease);
        assert_eq!(p.free_slots(), 1);
    }

    #[test]
    fn abandoned_loans_and_guards_return_their_slot() {
        let p = pool(1, 16);
        let loan = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[4],
                dtype: DType::U8,
            },
        )
        .unwrap();
        drop(loan);
        assert_eq!(p.free_slots(), 1);
        let guard = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[4],
                dtype: DType::U8,
            },
        )
        .unwrap()
        .write_host()
        .unwrap();
        drop(guard);
        assert_eq!(p.free_slots(), 1);
    }

    #[test]
    fn requests_beyond_the_bounds_are_rejected() {
        let p = pool(1, 16);
        let too_big = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[17],
                dtype: DType::U8,
            },
        );
        assert_eq!(too_big.unwrap_err().code(), ErrorCode::InvalidArgument);
        let rank = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[1, 1, 1],
                dtype: DType::U8,
            },
        );
        assert_eq!(rank.unwrap_err().code(), ErrorCode::InvalidArgument);
        let dtype = TensorOutputLoan::new(
            &p,
            TensorLoanRequest {
                shape: &[1],
                dtype: DType::F32,
            },
        );
        assert_eq!(dtype.unwrap_err().code(), ErrorCode::InvalidArgument);
        assert_eq!(p.free_slots(), 1);
    }

    #[test]
    fn received_tensors_are_read_only() {
        let mut t = Tensor::from_host_vec(&[2], DType::U8, vec![1, 2]).unwrap();
        assert_eq!(
            t.mutable_data().unwrap_err().code(),
            ErrorCode::PermissionDenied
        );
        let bad = Tensor::from_host_vec(&[3], DType::U8, vec![1, 2]);
        assert_eq!(bad.unwrap_err().code(), ErrorCode::InvalidArgument);
    }

    const _: () = {
        const fn send_sync<T: Send + Sync>() {}
        send_sync::<Tensor>();
        send_sync::<TensorReadLease>();
        const fn send<T: Send>() {}
        send::<TensorOutputLoan>();
        send::<HostWriteGuard>();
    };
}
