//! The session's CUDA compute streams: one per plan record, created at start on the
//! session's device and destroyed at teardown after a final synchronization.

use std::sync::Arc;

use crate::channel::OrderingDomain;
use crate::device::{DeviceBackend, StreamHandle};
use crate::plan::ExecutionPlan;
use crate::{Error, Result};

pub(crate) struct Streams {
    device: Option<Arc<dyn DeviceBackend>>,
    /// Indexed by the plan's stream id.
    handles: Vec<StreamHandle>,
    /// Indexed by the plan's stream id: one partition thread alone submits to the stream,
    /// so its consumers record their own release events (`DomainOwner::Partition`).
    exclusive: Vec<bool>,
}

impl Streams {
    /// No device and no stream (what a session abandoned in a fork keeps).
    pub(crate) fn none() -> Self {
        Self {
            device: None,
            handles: Vec::new(),
            exclusive: Vec::new(),
        }
    }

    /// Creates every planned stream, or none: on failure the ones created are destroyed.
    pub(crate) fn create(
        device: Option<&Arc<dyn DeviceBackend>>,
        plan: &ExecutionPlan,
    ) -> Result<Streams> {
        let mut out = Streams {
            device: device.cloned(),
            handles: Vec::with_capacity(plan.cuda_compute_streams().len()),
            exclusive: Vec::new(),
        };
        // How many partition threads submit to each stream (under the shared policy the
        // partitions of one stream share a thread, which then owns the stream alone).
        let mut users = vec![0_u32; plan.cuda_compute_streams().len()];
        let mut seen: Vec<(u32, u32)> = plan
            .partitions()
            .iter()
            .flat_map(|p| {
                p.operators.iter().filter_map(|&o| {
                    Some((plan.operators().get(o as usize)?.cuda_stream?, p.thread))
                })
            })
            .collect();
        seen.sort_unstable();
        seen.dedup();
        for (id, _) in seen {
            if let Some(n) = users.get_mut(id as usize) {
                *n += 1;
            }
        }
        out.exclusive = users.iter().map(|&n| n == 1).collect();
        if let Some(d) = device {
            for record in plan.cuda_compute_streams() {
                let stream = d.create_stream().map_err(|e| {
                    Error::new(
                        e.code(),
                        format!("creating compute stream S{}: {}", record.id, e.message()),
                    )
                })?;
                out.handles.push(stream);
            }
        }
        Ok(out)
    }

    /// The stream with plan id `id`.
    /// The session's device, if the plan needs one.
    pub(crate) fn device(&self) -> Option<&Arc<dyn DeviceBackend>> {
        self.device.as_ref()
    }

    pub(crate) fn handle(&self, id: u32) -> Option<StreamHandle> {
        self.handles.get(id as usize).copied()
    }

    /// Operator `op`'s planned stream.
    pub(crate) fn of_operator(&self, plan: &ExecutionPlan, op: usize) -> Option<StreamHandle> {
        plan.operators()
            .get(op)?
            .cuda_stream
            .and_then(|id| self.handle(id))
    }

    /// The ordering domain of the stream with plan id `id`: owned by one partition thread alone
    /// or shared with others (`None` if the stream was not created).
    pub(crate) fn domain(&self, id: u32) -> Option<OrderingDomain> {
        let stream = self.handle(id)?;
        let exclusive = self.exclusive.get(id as usize).copied().unwrap_or(false);
        Some(OrderingDomain::runtime(stream, exclusive))
    }

    /// Blocks until every stream has run its work (teardown only).
    pub(crate) fn synchronize(&self) -> Result<()> {
        if let Some(d) = &self.device {
            for &s in &self.handles {
                d.synchronize_stream(s)?;
            }
        }
        Ok(())
    }
}

impl Streams {
    /// Destroys every stream (teardown, after [`synchronize`](Self::synchronize)); the
    /// first failure is returned, the other streams are destroyed all the same.
    pub(crate) fn destroy(&mut self) -> Result<()> {
        let mut first = Ok(());
        if let Some(d) = &self.device {
            for s in self.handles.drain(..) {
                if let Err(e) = d.destroy_stream(s)
                    && first.is_ok()
                {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}
