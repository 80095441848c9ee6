//! Which device a plan places work on: an API and an ordinal, spelled `cuda:N` or
//! `opencl:N` as `HOLO_DEVICE` spells them.

use std::fmt;

use serde::Serialize;

use crate::{Error, MemoryKind, Result};

/// The GPU API a placed device speaks. A plan's streams, pools and operators on a device
/// belong to one API; compile never maps one API's memory kind to the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceApi {
    /// CUDA: streams, events, `CUdeviceptr` memory, in a `CUcontext`. Holo's software
    /// device stands in for it where no GPU is present.
    Cuda,
    /// OpenCL: command queues, `cl_event`s, `cl_mem` buffers, in a `cl_context`.
    #[serde(rename = "opencl")]
    OpenCl,
}

impl DeviceApi {
    /// The stable name (`cuda`, `opencl`).
    pub const fn name(self) -> &'static str {
        match self {
            DeviceApi::Cuda => "cuda",
            DeviceApi::OpenCl => "opencl",
        }
    }

    /// What this API's ordering domains are called: `stream` (CUDA), `queue` (OpenCL).
    pub const fn ordering_domain(self) -> &'static str {
        match self {
            DeviceApi::Cuda => "stream",
            DeviceApi::OpenCl => "queue",
        }
    }

    /// Whether memory of `kind` may live on a device of this API: the neutral `device`
    /// kind on either; `cuda_device`, `cuda_managed` and `pinned` (written on a stream)
    /// only on CUDA; `opencl_device` only on OpenCL; pageable `host` memory on neither.
    pub const fn holds(self, kind: MemoryKind) -> bool {
        match kind {
            MemoryKind::Device => true,
            MemoryKind::CudaDevice | MemoryKind::CudaManaged | MemoryKind::PinnedHost => {
                matches!(self, DeviceApi::Cuda)
            }
            MemoryKind::OpenClDevice => matches!(self, DeviceApi::OpenCl),
            MemoryKind::Host => false,
        }
    }

    /// The concrete kind a neutral `device` declaration becomes on this API
    /// (`cuda_device`, `opencl_device`); a concrete kind is returned unchanged.
    pub const fn resolve(self, kind: MemoryKind) -> MemoryKind {
        match (kind, self) {
            (MemoryKind::Device, DeviceApi::Cuda) => MemoryKind::CudaDevice,
            (MemoryKind::Device, DeviceApi::OpenCl) => MemoryKind::OpenClDevice,
            (kind, _) => kind,
        }
    }
}

impl fmt::Display for DeviceApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One device, named explicitly: an API and its ordinal there (`cuda:0`, `opencl:1`).
/// OpenCL ordinals count every device of the first platform, then of the second, … (as
/// `HOLO_DEVICE=opencl:N` and `OpenClDevice::open` count them).
///
/// A bare `u32` converts to a CUDA ordinal (`DeviceId::from(0) == DeviceId::cuda(0)`):
/// an OpenCL device is always named with [`DeviceId::opencl`].
///
/// ```
/// use holo_runtime::device::{DeviceApi, DeviceId};
///
/// let id: DeviceId = "opencl:1".parse()?;
/// assert_eq!(id, DeviceId::opencl(1));
/// assert_eq!(id.api, DeviceApi::OpenCl);
/// assert_eq!(DeviceId::from(0).to_string(), "cuda:0");
/// # Ok::<(), holo_runtime::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct DeviceId {
    /// The API.
    pub api: DeviceApi,
    /// The ordinal within the API.
    pub ordinal: u32,
}

impl DeviceId {
    /// CUDA device `ordinal`.
    pub const fn cuda(ordinal: u32) -> Self {
        Self {
            api: DeviceApi::Cuda,
            ordinal,
        }
    }

    /// OpenCL device `ordinal`.
    pub const fn opencl(ordinal: u32) -> Self {
        Self {
            api: DeviceApi::OpenCl,
            ordinal,
        }
    }
}

impl From<u32> for DeviceId {
    /// A CUDA ordinal.
    fn from(ordinal: u32) -> Self {
        Self::cuda(ordinal)
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.api.name(), self.ordinal)
    }
}

impl std::str::FromStr for DeviceId {
    type Err = Error;

    /// `cuda:N` or `opencl:N`.
    fn from_str(s: &str) -> Result<Self> {
        let parsed = s.split_once(':').and_then(|(api, n)| {
            let ordinal = n.parse().ok()?;
            match api {
                "cuda" => Some(Self::cuda(ordinal)),
                "opencl" => Some(Self::opencl(ordinal)),
                _ => None,
            }
        });
        parsed.ok_or_else(|| {
            Error::invalid_argument(format!(
                "unknown device `{s}`: expected `cuda:N` or `opencl:N`"
            ))
        })
    }
}

impl Serialize for DeviceId {
    /// As its name, `cuda:0` or `opencl:1`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_and_parse_as_holo_device_spells_them() {
        for id in [DeviceId::cuda(0), DeviceId::opencl(3)] {
            assert_eq!(id.to_string().parse::<DeviceId>().unwrap(), id);
        }
        for bad in ["cuda", "gpu:0", "opencl:-1", "cuda:x"] {
            let e = bad.parse::<DeviceId>().unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::InvalidArgument, "{bad}");
        }
        assert_eq!(
            serde_json::to_string(&DeviceId::opencl(1)).unwrap(),
            "\"opencl:1\""
        );
    }

    #[test]
    fn an_api_holds_its_own_kinds_and_resolves_only_the_neutral_one() {
        use DeviceApi::{Cuda, OpenCl};
        assert!(Cuda.holds(MemoryKind::CudaDevice) && !OpenCl.holds(MemoryKind::CudaDevice));
        assert!(OpenCl.holds(MemoryKind::OpenClDevice) && !Cuda.holds(MemoryKind::OpenClDevice));
        assert!(!OpenCl.holds(MemoryKind::CudaManaged) && !OpenCl.holds(MemoryKind::PinnedHost));
        assert!(Cuda.holds(MemoryKind::Device) && OpenCl.holds(MemoryKind::Device));
        assert_eq!(OpenCl.resolve(MemoryKind::Device), MemoryKind::OpenClDevice);
        assert_eq!(Cuda.resolve(MemoryKind::Device), MemoryKind::CudaDevice);
        assert_eq!(
            OpenCl.resolve(MemoryKind::CudaDevice),
            MemoryKind::CudaDevice
        );
    }
}
