//! The device write phase on a caller's stream: a standalone publisher's loans
//! ([`PublisherLoan::write`](crate::PublisherLoan::write)) are written on the publisher's
//! own stream, not an operator's planned one, and the readiness is recorded there.

use super::{DeviceWriteGuard, TensorOutputLoan};
use crate::channel::OrderingDomain;
use crate::device::StreamHandle;
use crate::{Error, ErrorCode, Result};

impl TensorOutputLoan {
    /// Starts the device write phase on `stream`, a stream the caller owns: commit
    /// records the readiness event there. A host pool is `NotSupported` (its bytes are
    /// written with `write_host`).
    pub(crate) fn write_on_caller_stream(self, stream: StreamHandle) -> Result<DeviceWriteGuard> {
        if self.pool.device().is_none() {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "this pool is pageable host memory: write it with write_host",
            )
            .at(self.pool.location));
        }
        self.pool
            .set_writer(self.slot, OrderingDomain::caller(stream));
        Ok(DeviceWriteGuard { loan: self, stream })
    }
}
