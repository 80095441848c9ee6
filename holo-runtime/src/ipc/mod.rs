//! Topics across processes (docs/IPC.md).
//!
//! A graph exports an output across processes with
//! [`TopicOptions::across_processes`](crate::TopicOptions::across_processes). The plan
//! records it; the session materializes the output's pool in a shared-memory segment and
//! serves the topic on an abstract Unix socket named by its namespace
//! ([`SessionOptions::ipc_namespace`](crate::SessionOptions::ipc_namespace)) and the topic.
//! The [`EndpointCatalog`] (`ExecutionPlan::endpoint_catalog`) is the one file both
//! processes read. In the importing process a [`ProcessSubscriber`] attaches by name:
//!
//! - once, at attach: a handshake on the socket checks the catalog's contract against the
//!   running exporter's, takes a subscriber seat, and passes the payload and control
//!   segments' descriptors (`SCM_RIGHTS`), which the subscriber maps;
//! - per frame: the exporter writes the slot's generation into the slot's fence word,
//!   sends a fixed-size `#[repr(C)]` slot descriptor through iceoryx2 and wakes the
//!   subscriber with an iceoryx2 event; the subscriber checks the descriptor against the
//!   fence and hands out a read-only [`Tensor`](crate::Tensor) over the shared slot;
//! - when the tensor's last handle drops, the subscriber writes the use into its release
//!   word; the exporter polls the word and only then lets the slot go back to the pool —
//!   or when the subscriber's process has exited (its pidfd), never earlier.
//!
//! In CUDA device memory the pool is a virtual-memory allocation whose descriptor the
//! subscriber imports once, and the fence and release words are written by streams
//! (`cuStreamWriteValue64_v2`): the writer's stream fences the slot, the subscriber's
//! stream waits for it (`cuStreamWaitValue64_v2`) and writes the release; in pinned host
//! memory the writer fences (the CPU, or its stream). A watchdog ends the fence waits of
//! an exporter that died. The device's part is [`DeviceIpc`](crate::device::DeviceIpc).

mod bridge;
mod catalog;
mod export;
mod import;
mod publish;
mod segment;
mod service;
mod wire;

pub(crate) use bridge::ImportBridge;
pub use catalog::{CATALOG_VERSION, CatalogTopic, EndpointCatalog};
pub(crate) use export::ExportServer;
pub use import::{ProcessSubscriber, ProcessSubscriberOptions, RemoteFrameInfo};
pub(crate) use publish::ImportServer;
pub use publish::{ProcessPublisher, ProcessPublisherOptions, RemoteLoan};
pub(crate) use segment::Segment;

use crate::Error;

/// A topic a session serves to other processes: to subscribers (an export) or from
/// publishers (an import).
pub(crate) enum Server {
    Export(ExportServer),
    Import(ImportServer),
    /// Not a server: an import fed by another process's export, which this session
    /// subscribes to.
    Bridge(ImportBridge),
}

impl Server {
    /// Starts its listener thread.
    pub(crate) fn spawn(&mut self) -> crate::Result<()> {
        match self {
            Server::Export(s) => s.spawn(),
            Server::Import(s) => s.spawn(),
            Server::Bridge(_) => Ok(()),
        }
    }

    /// An imported topic's name and its frames whose publisher died before its stream
    /// wrote their fence; `None` for an export.
    pub(crate) fn abandoned_frames(&self) -> Option<(&str, u64)> {
        match self {
            Server::Export(_) | Server::Bridge(_) => None,
            Server::Import(s) => Some((s.topic(), s.abandoned_frames())),
        }
    }

    /// What it holds for other processes: tensors sent to subscribers and not yet released
    /// (an export), frames committed by publishers and not yet queued (an import).
    pub(crate) fn outstanding(&self) -> usize {
        match self {
            Server::Export(s) => s.outstanding(),
            Server::Import(s) => s.outstanding(),
            Server::Bridge(_) => 0,
        }
    }

    /// An import fed by another process's export: the topic's name, and why its bridge
    /// ended (`None` while it runs); `None` for a server.
    pub(crate) fn import_end(&self) -> Option<(&str, Option<Error>)> {
        match self {
            Server::Bridge(b) => Some((b.topic(), b.ended())),
            _ => None,
        }
    }

    /// An import's state as the run report keeps it: a publishers' import's abandoned
    /// frames, why an import from another process's export ended; `None` for an export.
    pub(crate) fn import_report(&self) -> Option<crate::IpcImportReport> {
        let (topic, abandoned_frames, ended) = match self {
            Server::Export(_) => return None,
            Server::Import(s) => (s.topic(), s.abandoned_frames(), None),
            Server::Bridge(b) => (b.topic(), 0, b.ended()),
        };
        Some(crate::IpcImportReport {
            topic: topic.to_owned(),
            abandoned_frames,
            ended: ended.map(|e| (e.code(), e.message().to_owned())),
        })
    }

    /// Stops serving and joins every thread.
    pub(crate) fn stop(&mut self) {
        match self {
            Server::Export(s) => s.stop(),
            Server::Import(s) => s.stop(),
            Server::Bridge(s) => s.stop(),
        }
    }
}

/// iceoryx2 logs at `Error` and above unless `IOX2_LOG_LEVEL` says otherwise (its default
/// console logger warns of a missing config file on every node).
fn quiet_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        iceoryx2::prelude::set_log_level_from_env_or(iceoryx2::prelude::LogLevel::Error);
    });
}
