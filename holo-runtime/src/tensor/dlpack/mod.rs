//! DLPack export and import: a holo [`Tensor`] handed to another library as a versioned
//! DLPack 1.x tensor (`DLManagedTensorVersioned`), and a foreign DLPack tensor taken in as
//! a read-only holo `Tensor` (docs/DLPACK.md).
//!
//! **Export** ([`Tensor::to_dlpack`], [`Tensor::export_dlpack`]): the capsule is flagged
//! `READ_ONLY`, names its device (`kDLCUDA` for `cuda_device` with the backend's ordinal,
//! `kDLCUDAHost` for `pinned_host`, `kDLCUDAManaged` for `cuda_managed`, `kDLCPU` for
//! `host`), and carries explicit compact row-major strides. The consumer's stream
//! (DLPack's `stream` argument, read with [`StreamOrQueue::from_dlpack_stream`]) is handed
//! the tensor exactly as [`Tensor::device_array`] does: it waits on the readiness and
//! becomes a release stream. The capsule holds that [`DeviceArray`] (or, with no stream, a
//! handle of the slot); its deleter drops it — recording the release on the consumer's
//! stream — from any thread. A request that only understands the legacy unversioned ABI is
//! refused (`NotSupported`): the legacy struct has no `READ_ONLY` flag, and holo never
//! copies behind a caller's back.
//!
//! **Import** ([`Tensor::from_dlpack`]): the foreign tensor becomes a read-only `Tensor`
//! (mutable access is `PermissionDenied` forever) over a one-slot pass-through pool that
//! owns the foreign buffer and its DLPack deleter — never freed by holo's allocator; the
//! deleter runs exactly once, after the last handle drops. A device-memory import has no
//! readiness stream contract until [`Tensor::set_readiness_stream`] records an event on
//! the foreign producer's stream; until then every stream-aware consumer refuses it with
//! `ProtocolError`. A host-memory (`kDLCPU`) import needs no contract.
//!
//! [`Tensor`]: crate::Tensor
//! [`Tensor::to_dlpack`]: crate::Tensor::to_dlpack
//! [`Tensor::export_dlpack`]: crate::Tensor::export_dlpack
//! [`Tensor::device_array`]: crate::Tensor::device_array
//! [`Tensor::from_dlpack`]: crate::Tensor::from_dlpack
//! [`Tensor::set_readiness_stream`]: crate::Tensor::set_readiness_stream
//! [`DeviceArray`]: crate::DeviceArray
//!
//! Export and import allocate nothing once warm: capsules and the pools of imports are
//! recycled.
//!
//! ```
//! use holo_runtime::dlpack::DlpackFlags;
//! use holo_runtime::{DType, ErrorCode, Tensor};
//!
//! let tensor = Tensor::from_host_vec(&[2, 3], DType::U8, vec![1, 2, 3, 4, 5, 6])?;
//! // Export: a versioned, read-only DLPack tensor (host memory needs no stream).
//! let capsule = tensor.to_dlpack(None)?;
//! assert!(capsule.flags().contains(DlpackFlags::READ_ONLY));
//! // SAFETY: nothing mutates the descriptor while it is read.
//! let strides = unsafe {
//!     let t = capsule.tensor();
//!     std::slice::from_raw_parts(t.strides, 2).to_vec()
//! };
//! assert_eq!(strides, [3, 1]);
//! // Import it back: the same bytes, read-only.
//! let mut imported = Tensor::from_dlpack(capsule, None)?;
//! assert_eq!(imported.shape(), &[2, 3]);
//! assert_eq!(imported.data()?, &[1, 2, 3, 4, 5, 6]);
//! assert!(imported.has_readiness_stream_contract(), "host memory needs none");
//! assert_eq!(imported.mutable_data().unwrap_err().code(), ErrorCode::PermissionDenied);
//! # Ok::<(), holo_runtime::Error>(())
//! ```

mod export;
mod import;

use crate::device::{BackendKind, DeviceBackend, StreamOrQueue};
use crate::spec::DType;
use crate::{Error, ErrorCode, MemoryKind, Result};

pub use dlpark;
pub use dlpark::DlpackFlags;
pub use dlpark::ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensorVersioned, DLPackVersion,
    DLTensor,
};
/// An owning handle of a `DLManagedTensorVersioned`: dropping it runs the tensor's DLPack
/// deleter once; [`into_raw`](dlpark::Managed::into_raw) hands the pointer to C.
pub use dlpark::versioned::Dlpack;

/// The DLPack version holo's exports declare (and the newest it imports).
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion::CURRENT;

/// What a DLPack consumer asks of an export: `__dlpack__`'s `stream` and `max_version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportRequest {
    /// The consumer's stream or queue (DLPack's `stream` argument, read with
    /// [`StreamOrQueue::from_dlpack_stream`]); `None` for `-1`: the consumer synchronizes
    /// itself, nothing is ordered.
    pub stream: Option<StreamOrQueue>,
    /// The newest DLPack version the consumer understands; `None` for a consumer that
    /// knows only the legacy unversioned `DLManagedTensor` (refused: `NotSupported`).
    pub max_version: Option<DLPackVersion>,
}

impl ExportRequest {
    /// A request from a consumer of DLPack 1.x on `stream` (`None`: no synchronization).
    pub const fn new(stream: Option<StreamOrQueue>) -> ExportRequest {
        ExportRequest {
            stream,
            max_version: Some(DLPACK_VERSION),
        }
    }

    /// The newest version the consumer understands (`None`: legacy only).
    pub const fn with_max_version(mut self, max_version: Option<DLPackVersion>) -> Self {
        self.max_version = max_version;
        self
    }
}

/// The DLPack data type of a holo dtype: every holo dtype has one (one lane).
pub const fn dtype_to_dlpack(dtype: DType) -> DLDataType {
    let (code, bits) = match dtype {
        DType::U8 => (DLDataTypeCode::UINT, 8),
        DType::U16 => (DLDataTypeCode::UINT, 16),
        DType::U32 => (DLDataTypeCode::UINT, 32),
        DType::U64 => (DLDataTypeCode::UINT, 64),
        DType::I8 => (DLDataTypeCode::INT, 8),
        DType::I16 => (DLDataTypeCode::INT, 16),
        DType::I32 => (DLDataTypeCode::INT, 32),
        DType::I64 => (DLDataTypeCode::INT, 64),
        DType::F16 => (DLDataTypeCode::FLOAT, 16),
        DType::BF16 => (DLDataTypeCode::BFLOAT, 16),
        DType::F32 => (DLDataTypeCode::FLOAT, 32),
        DType::F64 => (DLDataTypeCode::FLOAT, 64),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

/// The holo dtype of a DLPack data type: `NotSupported` for one holo has no dtype for
/// (vector lanes, `bool`, complex, fp8 and sub-byte types, opaque handles).
pub fn dtype_from_dlpack(dtype: DLDataType) -> Result<DType> {
    DType::ALL
        .into_iter()
        .find(|&d| {
            let m = dtype_to_dlpack(d);
            m.code == dtype.code && m.bits == dtype.bits && m.lanes == dtype.lanes
        })
        .ok_or_else(|| {
            Error::new(
                ErrorCode::NotSupported,
                format!(
                    "DLPack data type (code {}, {} bits, {} lanes) has no holo dtype (one lane of u8-u64, i8-i64, f16, bf16, f32 or f64)",
                    dtype.code.0, dtype.bits, dtype.lanes
                ),
            )
        })
}

/// The DLPack device of memory of `kind` on a backend of `ordinal`.
const fn dl_device(kind: MemoryKind, ordinal: u32) -> DLDevice {
    let (device_type, id) = match kind {
        MemoryKind::Host => (DLDeviceType::CPU, 0),
        // DLPack: pinned and managed memory are not tied to one device (id 0).
        MemoryKind::PinnedHost => (DLDeviceType::CUDAHOST, 0),
        MemoryKind::CudaManaged => (DLDeviceType::CUDAMANAGED, 0),
        #[allow(
            clippy::cast_possible_wrap,
            reason = "a CUDA ordinal is far below i32::MAX"
        )]
        MemoryKind::CudaDevice => (DLDeviceType::CUDA, ordinal as i32),
        // Never exported (`export` refuses an OpenCL tensor: a `cl_mem` window is not an
        // address); named for completeness. A pool's kind is never the neutral `device`,
        // which compile resolves.
        #[allow(
            clippy::cast_possible_wrap,
            reason = "an OpenCL ordinal is far below i32::MAX"
        )]
        MemoryKind::OpenClDevice | MemoryKind::Device => (DLDeviceType::OPENCL, ordinal as i32),
    };
    DLDevice {
        device_type,
        device_id: id,
    }
}

/// The memory kind of a DLPack device, after checking that `backend` serves it: host
/// memory needs none; CUDA memory needs a CUDA backend (or the software device, which
/// stands in for one), and device memory one of the same ordinal. Anything else is
/// `InvalidArgument`: holo never copies a tensor across devices.
fn memory_kind_of(device: DLDevice, backend: Option<&dyn DeviceBackend>) -> Result<MemoryKind> {
    let kind = match device.device_type {
        DLDeviceType::CPU => return Ok(MemoryKind::Host),
        DLDeviceType::CUDA => MemoryKind::CudaDevice,
        DLDeviceType::CUDAHOST => MemoryKind::PinnedHost,
        DLDeviceType::CUDAMANAGED => MemoryKind::CudaManaged,
        other => {
            return Err(Error::invalid_argument(format!(
                "the DLPack tensor lives on device type {} (id {}), which no holo backend serves; holo never copies across devices",
                other.0, device.device_id
            )));
        }
    };
    let Some(backend) = backend else {
        return Err(Error::invalid_argument(format!(
            "the DLPack tensor is {kind} memory (device type {}, id {}): name the device backend it belongs to",
            device.device_type.0, device.device_id
        )));
    };
    match backend.backend_kind() {
        BackendKind::Cuda | BackendKind::Software => {}
        // No mapping between the kinds: CUDA memory never becomes OpenCL memory.
        BackendKind::OpenCl => {
            return Err(Error::invalid_argument(format!(
                "the DLPack tensor is {kind} memory (device type {}, id {}) and the backend is OpenCL device {}: holo never maps CUDA memory to OpenCL (wrap a cl_mem with Tensor::from_cl_mem)",
                device.device_type.0,
                device.device_id,
                backend.ordinal()
            )));
        }
    }
    if kind == MemoryKind::CudaDevice && i64::from(device.device_id) != i64::from(backend.ordinal())
    {
        return Err(Error::invalid_argument(format!(
            "the DLPack tensor lives on CUDA device {}, the backend is device {} ({}); holo never copies across devices",
            device.device_id,
            backend.ordinal(),
            backend.backend_kind().name()
        )));
    }
    Ok(kind)
}

#[cfg(test)]
mod tests;
