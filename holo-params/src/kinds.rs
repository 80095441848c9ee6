//! Concrete memory kinds a tensor slot can live in.

use crate::Result;
use crate::decode::{decode_enum, encode_enum};
use crate::schema::{EnumDescriptor, FieldDescriptor, ParamEnum, ParamValue, TypeDescriptor};
use crate::value::{FieldPath, Value};

/// Where a tensor slot's bytes are allocated.
///
/// There is deliberately no `Unknown` kind: every allocation in a plan names one of
/// these concrete kinds. As a parameter, a `MemoryKind` field must narrow its domain with
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
}

impl MemoryKind {
    /// The stable wire name (`host`, `pinned`, `cuda_device`, `cuda_managed`).
    pub const fn wire_name(self) -> &'static str {
        match self {
            MemoryKind::Host => "host",
            MemoryKind::PinnedHost => "pinned",
            MemoryKind::CudaDevice => "cuda_device",
            MemoryKind::CudaManaged => "cuda_managed",
        }
    }

    /// Whether the kind needs a CUDA device.
    pub const fn is_cuda(self) -> bool {
        matches!(self, MemoryKind::CudaDevice | MemoryKind::CudaManaged)
    }

    /// Whether the CPU may read the bytes directly (after readiness).
    pub const fn is_host_accessible(self) -> bool {
        !matches!(self, MemoryKind::CudaDevice)
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
