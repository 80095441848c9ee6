//! The device write phase on a caller's stream: a standalone publisher's loans
//! ([`PublisherLoan::write`](crate::PublisherLoan::write)) are written on the publisher's
//! own stream, not an operator's planned one, and the readiness is recorded there.

use super::{DeviceWriteGuard, TensorOutputLoan};
use crate::channel::OrderingDomain;
use crate::device::StreamOrQueue;
use crate::{Error, ErrorCode, Result};

impl TensorOutputLoan {
    /// Starts the device write phase on `stream`, a stream the caller owns, adopted by the
    /// pool's backend (a stream of another context is `InvalidArgument`): commit records
    /// the readiness event there. The caller ends the adoption
    /// (`DeviceBackend::release_adopted_stream` of the guard's stream) once the guard is
    /// committed or dropped. A host pool is `NotSupported` (its bytes are written with
    /// `write_host`).
    pub(crate) fn write_on_caller_stream(self, stream: StreamOrQueue) -> Result<DeviceWriteGuard> {
        let Some(d) = self.pool.device() else {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "this pool is pageable host memory: write it with write_host",
            )
            .at(self.pool.location));
        };
        let adopted = d.backend.adopt_stream(stream)?;
        self.pool
            .set_writer(self.slot, OrderingDomain::caller(adopted));
        Ok(DeviceWriteGuard {
            loan: std::mem::ManuallyDrop::new(self),
            stream: adopted,
        })
    }
}
