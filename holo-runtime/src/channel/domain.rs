//! Ordering domains: where work on a slot's bytes is ordered (docs/ARCHITECTURE.md,
//! "Ordering domains").
//!
//! Readiness is recorded in the writer's domain, a reader's domain waits on it, and a
//! release is recorded in every reader's domain and polled. The slot ledger
//! ([`Pool`](super::pool::Pool)) is told which domain acts on every call — a commit, a
//! delivery, a release registration — and never asks the calling thread.

use crate::device::StreamHandle;

/// Who submits work to a device stream (or queue), which decides who records its release
/// events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DomainOwner {
    /// The runtime created it and one partition thread alone submits to it: a consumer on
    /// that thread records the stream's release event itself when it drops a handle (its
    /// work on the slot is enqueued by then), so no other thread submits to the stream.
    Partition,
    /// The runtime created it and several partitions submit to it (a shared stream
    /// policy): the slot's last handle records its release event.
    Shared,
    /// A caller lent it for the length of one call (`Tensor::copy_to_host_async`,
    /// `Tensor::synchronize_for_consumer_stream`): work may reach it from any thread, so
    /// the slot's last handle always records its release event.
    Caller,
    /// A caller lent it to a hand-off that lasts beyond the call (a
    /// [`DeviceArray`](crate::DeviceArray), a DLPack export): the hand-off records the
    /// stream's release event itself when it ends, and the caller keeps the stream alive
    /// until then.
    Borrowed,
}

/// Where work is ordered: the host, or a device stream — a CUDA stream (owned by the
/// runtime or borrowed from a caller), and an OpenCL command queue on a backend whose
/// [`StreamHandle`] names a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderingDomain {
    /// The host: work is complete when the call that did it returns. A host reader of
    /// stream-written bytes waits on the host for their readiness.
    Host,
    /// A device stream or queue, and who submits to it.
    Stream {
        /// The backend's stream (or queue) handle.
        stream: StreamHandle,
        /// Who submits to it.
        owner: DomainOwner,
    },
}

impl OrderingDomain {
    /// A stream the runtime created for one partition alone.
    pub const fn partition(stream: StreamHandle) -> Self {
        Self::Stream {
            stream,
            owner: DomainOwner::Partition,
        }
    }

    /// A stream a caller lends for one call.
    pub const fn caller(stream: StreamHandle) -> Self {
        Self::Stream {
            stream,
            owner: DomainOwner::Caller,
        }
    }

    /// A stream a caller lends to a hand-off that records its own release when it ends.
    pub const fn borrowed(stream: StreamHandle) -> Self {
        Self::Stream {
            stream,
            owner: DomainOwner::Borrowed,
        }
    }

    /// A runtime stream, owned by one partition (`exclusive`) or shared by several.
    pub const fn runtime(stream: StreamHandle, exclusive: bool) -> Self {
        Self::Stream {
            stream,
            owner: if exclusive {
                DomainOwner::Partition
            } else {
                DomainOwner::Shared
            },
        }
    }

    /// The stream, or `None` for the host.
    pub const fn stream(self) -> Option<StreamHandle> {
        match self {
            Self::Host => None,
            Self::Stream { stream, .. } => Some(stream),
        }
    }

    /// Who submits to the stream (`None` for the host).
    pub const fn owner(self) -> Option<DomainOwner> {
        match self {
            Self::Host => None,
            Self::Stream { owner, .. } => Some(owner),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_name_the_owner() {
        let s = StreamHandle::from_raw(7);
        assert_eq!(
            OrderingDomain::partition(s).owner(),
            Some(DomainOwner::Partition)
        );
        assert_eq!(
            OrderingDomain::runtime(s, false).owner(),
            Some(DomainOwner::Shared)
        );
        assert_eq!(
            OrderingDomain::runtime(s, true),
            OrderingDomain::partition(s)
        );
        assert_eq!(OrderingDomain::caller(s).stream(), Some(s));
        assert_eq!(OrderingDomain::Host.stream(), None);
        assert_eq!(OrderingDomain::Host.owner(), None);
    }
}
