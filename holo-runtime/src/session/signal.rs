//! One partition's shared state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use crossbeam_utils::CachePadded;

use super::stats::LatencyHistogram;
use crate::channel::queue::Endpoint;

/// One partition's shared state: its queue endpoint (to wake its thread), whether it is
/// scanning its operators, and how many activations it began and finished. Padded to its
/// own cache line: the hot path touches only its own partition's line. It also holds the
/// latency histogram its sinks record into (only this partition's thread writes it).
pub(crate) struct PartitionSignal {
    /// The end of every queue this partition reads or feeds.
    pub(crate) endpoint: Arc<CachePadded<Endpoint>>,
    pub(crate) scanning: AtomicBool,
    /// Activations begun (written before `compute` runs, so before anything it pops).
    pub(crate) started: AtomicU64,
    /// Activations finished (written after `compute` returned, so after anything it
    /// pushed).
    pub(crate) progress: AtomicU64,
    pub(crate) latency: LatencyHistogram,
}

impl Default for PartitionSignal {
    fn default() -> Self {
        Self {
            endpoint: Arc::default(),
            scanning: AtomicBool::new(false),
            started: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            latency: LatencyHistogram::new(),
        }
    }
}

impl PartitionSignal {
    /// The calling thread runs this partition from now on.
    pub(crate) fn register(&self) {
        self.endpoint.register();
    }

    pub(crate) fn wake(&self) {
        self.endpoint.wake();
    }
}
