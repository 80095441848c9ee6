//! Wrapping a caller's OpenCL buffer (the seed's `createDeviceArrayView`, OpenCL
//! overload): a read-only foreign tensor over a `cl_mem` of the device's context.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use dlpark::AllocationDeleter;

use super::Tensor;
use crate::channel::pool::{ForeignBytes, Holder, Pool, TensorMeta};
use crate::device::{DeviceBackend, OpenClMemPtr};
use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::{Error, ErrorCode, MemoryKind, Result};

impl Tensor {
    /// Wraps the caller's `memory` (a `cl_mem`) as a read-only tensor of `shape` and
    /// `dtype` on the OpenCL `device`, with no copy — the seed's `createDeviceArrayView`.
    ///
    /// - The buffer must live in the device's context (`clGetMemObjectInfo(CL_MEM_CONTEXT)`):
    ///   one of another context, or a null one, is `InvalidArgument`; a device that is not
    ///   OpenCL answers `NotSupported`.
    /// - `shape` × `dtype` must fit in the buffer (`InvalidArgument` otherwise), with at
    ///   most [`MAX_TENSOR_RANK`] extents (`NotSupported`).
    /// - The tensor is read-only forever ([`mutable_data`](Self::mutable_data) is
    ///   `PermissionDenied`) and follows the foreign-tensor rules of DLPack imports: it has
    ///   no readiness contract until [`set_readiness_stream`](Self::set_readiness_stream)
    ///   names the queue the caller wrote it on, and holo holds its own reference to the
    ///   `cl_mem` (`clRetainMemObject`) until its last handle drops and every queue it was
    ///   handed to passed its release event; then holo releases that reference, once.
    pub fn from_cl_mem(
        device: &Arc<dyn DeviceBackend>,
        memory: OpenClMemPtr,
        shape: &[u64],
        dtype: DType,
    ) -> Result<Tensor> {
        let rank = u8::try_from(shape.len())
            .ok()
            .filter(|&r| u32::from(r) <= MAX_TENSOR_RANK)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NotSupported,
                    format!(
                        "a cl_mem view of rank {}: holo tensors have at most {MAX_TENSOR_RANK} extents",
                        shape.len()
                    ),
                )
            })?;
        let bytes = shape
            .iter()
            .try_fold(dtype.size_bytes(), |n, &e| n.checked_mul(e))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::ArithmeticOverflow,
                    format!("a cl_mem view of shape {shape:?} of {dtype:?} overflows"),
                )
            })?;
        let mut meta = TensorMeta {
            rank,
            dtype,
            byte_size: bytes,
            ..TensorMeta::EMPTY
        };
        meta.shape[..shape.len()].copy_from_slice(shape);
        let (object, size) = device.adopt_memory_object(memory)?;
        let backend = Arc::clone(device);
        let owner = AllocationDeleter::new(move || {
            // SAFETY: the pool runs the deleter after its last handle dropped and every
            // release event passed: nothing of holo's uses the object any more.
            let _ = unsafe { backend.release_adopted_memory_object(object) };
        });
        if bytes > size {
            drop(owner);
            return Err(Error::invalid_argument(format!(
                "a view of shape {shape:?} of {dtype:?} needs {bytes} bytes; {memory:?} has {size}"
            )));
        }
        // OpenCL device memory, as an OpenCL runtime pool's tensors report it (an input
        // or topic that declares `opencl_device` takes it; a `cuda_device` one refuses it).
        let pool = Pool::wrap_foreign(ForeignBytes {
            kind: MemoryKind::OpenClDevice,
            addr: object.raw(),
            meta,
            backend: Some(device),
            owner,
        })?;
        Ok(Tensor {
            pool: ManuallyDrop::new(pool),
            slot: 0,
            holder: Holder::NONE,
        })
    }
}
