//! DLPack import: a foreign tensor as a read-only holo tensor over a one-slot pool that
//! owns the foreign buffer and its deleter ([`Pool::wrap_foreign`]).

use std::mem::ManuallyDrop;
use std::sync::Arc;

use super::{DLManagedTensorVersioned, Dlpack, dtype_from_dlpack, memory_kind_of};
use crate::channel::pool::{ForeignBytes, Holder, Pool, TensorMeta};
use crate::device::{DeviceBackend, StreamOrQueue};
use crate::spec::MAX_TENSOR_RANK;
use crate::tensor::Tensor;
use crate::{Error, ErrorCode, Result};

use dlpark::ffi::{DLPackVersion, DLTensor};

/// Reads the descriptor into holo's metadata: rank, extents, dtype, byte size, after the
/// checks that make it a dense holo tensor.
fn describe(t: &DLTensor, version: DLPackVersion) -> Result<TensorMeta> {
    let rank = usize::try_from(t.ndim).map_err(|_| {
        Error::invalid_argument(format!("the DLPack tensor's ndim {} is negative", t.ndim))
    })?;
    if rank > MAX_TENSOR_RANK as usize {
        return Err(Error::new(
            ErrorCode::NotSupported,
            format!(
                "the DLPack tensor has rank {rank}; holo tensors have at most {MAX_TENSOR_RANK} extents"
            ),
        ));
    }
    let dtype = dtype_from_dlpack(t.dtype)?;
    if t.data.is_null() {
        return Err(Error::invalid_argument(
            "the DLPack tensor's data pointer is null",
        ));
    }
    if rank > 0 && t.shape.is_null() {
        return Err(Error::invalid_argument(format!(
            "the DLPack tensor has rank {rank} and a null shape pointer"
        )));
    }
    let mut meta = TensorMeta {
        #[allow(
            clippy::cast_possible_truncation,
            reason = "rank <= MAX_TENSOR_RANK = 8"
        )]
        rank: rank as u8,
        dtype,
        ..TensorMeta::EMPTY
    };
    let mut shape = [0_i64; MAX_TENSOR_RANK as usize];
    if rank > 0 {
        // SAFETY: the producer's contract (DLPack): `shape` points to `ndim` int64 values,
        // readable and unchanged while the managed tensor is owned.
        shape[..rank].copy_from_slice(unsafe { std::slice::from_raw_parts(t.shape, rank) });
    }
    for (axis, (&e, m)) in shape[..rank].iter().zip(&mut meta.shape).enumerate() {
        *m = u64::try_from(e).map_err(|_| {
            Error::invalid_argument(format!(
                "the DLPack tensor's extent {axis} is negative: {e}"
            ))
        })?;
    }
    if rank > 0 && t.strides.is_null() {
        // DLPack before 1.2 allowed null strides for a compact row-major tensor.
        if version.minor >= 2 {
            return Err(Error::invalid_argument(format!(
                "the DLPack {}.{} tensor has rank {rank} and null strides (required since DLPack 1.2)",
                version.major, version.minor
            )));
        }
    } else if rank > 0 {
        // SAFETY: as for `shape`.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, rank) };
        check_compact(&shape[..rank], strides)?;
    }
    let bytes = crate::channel::pool::checked_byte_size(meta.shape(), dtype)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| {
            Error::new(
                ErrorCode::ArithmeticOverflow,
                format!(
                    "the DLPack tensor's byte size overflows: {:?} of {dtype}",
                    meta.shape()
                ),
            )
        })?;
    meta.byte_size = bytes;
    Ok(meta)
}

/// Refuses strides that are not compact row-major (`NotSupported`: holo tensors are
/// dense). An extent of 1 may carry any stride, and a tensor with no element any strides.
fn check_compact(shape: &[i64], strides: &[i64]) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut expected = 1_i64;
    for (axis, (&e, &s)) in shape.iter().zip(strides).enumerate().rev() {
        if e != 1 && s != expected {
            return Err(Error::new(
                ErrorCode::NotSupported,
                format!(
                    "the DLPack tensor is not compact row-major (shape {shape:?}, strides {strides:?}: axis {axis} has stride {s}, dense needs {expected}); holo tensors are dense: make it contiguous first"
                ),
            ));
        }
        expected = expected.saturating_mul(e);
    }
    Ok(())
}

impl Tensor {
    /// Takes a foreign DLPack tensor in as a read-only holo tensor, with no copy.
    ///
    /// Host memory (`kDLCPU`) needs no backend. CUDA memory (`kDLCUDA`, `kDLCUDAHost`,
    /// `kDLCUDAManaged`) needs the backend of its device — `backend`'s kind must serve
    /// CUDA memory (the software device stands in for CUDA) and, for device memory, its
    /// ordinal must be the tensor's device id — else `InvalidArgument`: holo never copies
    /// across devices. Refused as well: a null data pointer or shape, a negative extent
    /// or ndim (`InvalidArgument`), a rank above [`MAX_TENSOR_RANK`], strides that are not
    /// compact row-major, a dtype holo has no name for (`NotSupported`), a major version
    /// other than 1 (`NotSupported`). A refused tensor is released: its deleter has run
    /// when this returns.
    ///
    /// The tensor is read-only forever ([`mutable_data`](Self::mutable_data) is
    /// `PermissionDenied`), fans out and travels through a `storage = pass_through`
    /// output like any tensor, and its deleter runs exactly once, after its last handle
    /// drops and every release stream registered on it has passed its release event —
    /// on the thread that drops the last handle, or on holo's retirement thread.
    ///
    /// A device-memory import has no readiness stream contract: call
    /// [`set_readiness_stream`](Self::set_readiness_stream) with the stream the foreign
    /// producer wrote on before a stream-aware consumer takes it.
    pub fn from_dlpack(tensor: Dlpack, backend: Option<&Arc<dyn DeviceBackend>>) -> Result<Tensor> {
        let version = tensor.version();
        if version.major != 1 {
            return Err(major_refused(version));
        }
        // SAFETY: an owned `Dlpack`'s descriptor is readable and unchanged until its
        // deleter runs (its producer's contract).
        let t = *unsafe { tensor.tensor() };
        let meta = describe(&t, version)?;
        let kind = memory_kind_of(t.device, backend.map(|b| &**b))?;
        let addr = crate::device::DevicePtr::from_host_ptr(t.data)
            .raw()
            .checked_add(t.byte_offset)
            .ok_or_else(|| {
                Error::invalid_argument(
                    "the DLPack tensor's data pointer plus byte_offset overflows",
                )
            })?;
        let pool = Pool::wrap_foreign(ForeignBytes {
            kind,
            addr,
            meta,
            backend: if kind == crate::MemoryKind::Host {
                None
            } else {
                backend
            },
            owner: tensor.into_deleter(),
        })?;
        Ok(Tensor {
            pool: ManuallyDrop::new(pool),
            slot: 0,
            holder: Holder::NONE,
        })
    }

    /// [`from_dlpack`](Self::from_dlpack) from a raw pointer, as a C producer hands it
    /// over: a null pointer is `InvalidArgument`; a major version other than 1 is
    /// `NotSupported`, after calling the tensor's deleter (DLPack: the only field a
    /// consumer may touch then).
    ///
    /// # Safety
    /// `tensor` is null or points to a `DLManagedTensorVersioned` whose ownership the
    /// caller hands over: its descriptor stays readable and unchanged, and its data
    /// allocated, until its deleter (if any) runs, which may run once from any thread and
    /// does not unwind.
    pub unsafe fn from_dlpack_raw(
        tensor: *mut DLManagedTensorVersioned,
        backend: Option<&Arc<dyn DeviceBackend>>,
    ) -> Result<Tensor> {
        if tensor.is_null() {
            return Err(Error::invalid_argument(
                "the DLManagedTensorVersioned pointer is null",
            ));
        }
        // SAFETY: non-null and owned by the caller (the contract); DLPack keeps the
        // version and deleter at the head of the struct across major versions.
        let version = unsafe { (*tensor).version };
        if version.major != 1 {
            // SAFETY: as above; the deleter is the one field a consumer may use.
            if let Some(deleter) = unsafe { (*tensor).deleter } {
                unsafe { deleter(tensor) };
            }
            return Err(major_refused(version));
        }
        // SAFETY: the caller's contract; the version was checked above.
        let owned = unsafe { Dlpack::from_raw(tensor) }
            .map_err(|e| Error::invalid_argument(format!("the DLPack tensor: {e}")))?;
        Tensor::from_dlpack(owned, backend)
    }

    /// Whether consumers can be ordered behind this tensor's writes: `true` for every
    /// runtime tensor and host-memory import, and for a device-memory DLPack import once
    /// [`set_readiness_stream`](Self::set_readiness_stream) recorded its producer's stream.
    pub fn has_readiness_stream_contract(&self) -> bool {
        self.pool.has_readiness_contract(self.slot)
    }

    /// Records the readiness event of a device-memory DLPack import on `stream`, the
    /// stream its foreign producer issued its writes on (a caller's stream, checked like a
    /// hand-off's: same context and device, else `InvalidArgument`): the author's only
    /// hook for a foreign producer's ordering. From then on consumers wait on that event,
    /// as on a runtime producer's commit, and `stream` is the tensor's
    /// [`sdk_stream`](Self::sdk_stream); calling it again re-records it.
    ///
    /// `NotSupported` for a tensor that is not a device-memory DLPack import (a runtime
    /// tensor's readiness was recorded at its producer's commit; host memory needs none).
    pub fn set_readiness_stream(&self, stream: impl Into<StreamOrQueue>) -> Result<()> {
        self.pool.record_foreign_readiness(self.slot, stream.into())
    }

    /// Whether the tensor was imported through DLPack.
    pub fn is_dlpack_import(&self) -> bool {
        self.pool.is_foreign()
    }
}

#[cold]
fn major_refused(version: DLPackVersion) -> Error {
    Error::new(
        ErrorCode::NotSupported,
        format!(
            "the DLPack tensor declares version {}.{}; holo imports DLPack 1.x (the tensor was released)",
            version.major, version.minor
        ),
    )
}
