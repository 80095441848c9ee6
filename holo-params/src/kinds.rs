//! Concrete memory kinds a tensor slot can live in.

use crate::Result;
use crate::decode::{decode_enum, encode_enum};
use crate::schema::{EnumDescriptor, FieldDescriptor, ParamEnum, ParamValue, TypeDescriptor};
use crate::value::{FieldPath, Value};

/// Where a tensor slot's bytes are allocated.
///
/// There is deliberately no `Unknown` kind: every allocation in a plan names one of the
/// concrete kinds (`host`, `pinned`, `cuda_device`, `cuda_managed`, `opencl_device`).
/// [`MemoryKind::Device`] is the one declaration that is not concrete: an operator that
/// calls no backend-specific API declares it, and the deployment binding's explicit
/// device (`cuda:N` or `opencl:N`) makes it `cuda_device` or `opencl_device` in the plan.
/// As a parameter, a `MemoryKind` field must narrow its domain with
/// `#[param(enum_values(...))]` to exactly the kinds the operator supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryKind {
    /// Ordinary pageable host memory.
    Host,
    /// Page-locked host memory, reachable by CUDA copies.
    PinnedHost,
    /// CUDA device memory on one bound device.
    CudaDevice,
    /// CUDA managed (unified) memory, process-local.
    CudaManaged,
    /// OpenCL global memory (`cl_mem` buffers) on one bound OpenCL device, in its
    /// session's `cl_context`.
    OpenClDevice,
    /// The memory of whichever device the output is bound to — CUDA device memory on a
    /// `cuda:N` binding, OpenCL global memory on an `opencl:N` one. A declaration only:
    /// compile resolves it to [`MemoryKind::CudaDevice`] or [`MemoryKind::OpenClDevice`]
    /// from the binding, never by guessing, and an input declaring it accepts either.
    Device,
}

impl MemoryKind {
    /// The stable wire name (`host`, `pinned`, `cuda_device`, `cuda_managed`,
    /// `opencl_device`, `device`).
    pub const fn wire_name(self) -> &'static str {
        match self {
            MemoryKind::Host => "host",
            MemoryKind::PinnedHost => "pinned",
            MemoryKind::CudaDevice => "cuda_device",
            MemoryKind::CudaManaged => "cuda_managed",
            MemoryKind::OpenClDevice => "opencl_device",
            MemoryKind::Device => "device",
        }
    }

    /// Whether the kind needs a CUDA device (`cuda_device`, `cuda_managed`).
    pub const fn is_cuda(self) -> bool {
        matches!(self, MemoryKind::CudaDevice | MemoryKind::CudaManaged)
    }

    /// Whether the kind needs an OpenCL device (`opencl_device`).
    pub const fn is_opencl(self) -> bool {
        matches!(self, MemoryKind::OpenClDevice)
    }

    /// Whether the kind lives on a device: a CUDA kind, `opencl_device`, or the neutral
    /// `device`.
    pub const fn is_device(self) -> bool {
        matches!(
            self,
            MemoryKind::CudaDevice
                | MemoryKind::CudaManaged
                | MemoryKind::OpenClDevice
                | MemoryKind::Device
        )
    }

    /// Whether the kind is a concrete allocation kind (everything but the neutral
    /// [`MemoryKind::Device`] declaration).
    pub const fn is_concrete(self) -> bool {
        !matches!(self, MemoryKind::Device)
    }

    /// Whether an input declaring this kind accepts a tensor of kind `have`: the same kind,
    /// or — for the neutral `device` — either API's device memory.
    pub const fn accepts(self, have: MemoryKind) -> bool {
        matches!(
            (self, have),
            (
                MemoryKind::Device,
                MemoryKind::CudaDevice | MemoryKind::OpenClDevice
            )
        ) || self as u8 == have as u8
    }

    /// Whether the CPU may read the bytes directly (after readiness).
    pub const fn is_host_accessible(self) -> bool {
        matches!(
            self,
            MemoryKind::Host | MemoryKind::PinnedHost | MemoryKind::CudaManaged
        )
    }
}

impl std::fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.wire_name())
    }
}

impl ParamEnum for MemoryKind {
    const VARIANTS: &'static [(&'static str, Self)] = &[
        ("host", MemoryKind::Host),
        ("pinned", MemoryKind::PinnedHost),
        ("cuda_device", MemoryKind::CudaDevice),
        ("cuda_managed", MemoryKind::CudaManaged),
        ("opencl_device", MemoryKind::OpenClDevice),
        ("device", MemoryKind::Device),
    ];
    const NAME: &'static str = "MemoryKind";

    fn wire_name(&self) -> &'static str {
        MemoryKind::wire_name(*self)
    }
}

impl ParamValue for MemoryKind {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::Enum(<Self as ParamEnum>::descriptor())
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        decode_enum::<Self>(value, field, path)
    }
    fn encode(&self) -> Value {
        encode_enum(self)
    }
}

impl MemoryKind {
    /// The enum's descriptor.
    pub fn enum_descriptor() -> EnumDescriptor {
        <Self as ParamEnum>::descriptor()
    }
}
