//! Imports fed by another process's export (`TopicOptions::from_other_process`): at start
//! the session attaches to the exporting session's topic as a [`ProcessSubscriber`] — on
//! the session's device for pinned or device memory, whose GPU must be the exporter's — and
//! a bridge thread publishes each tensor it receives into the importing input's queue in
//! place: the tensor is the other process's slot, ordered behind its fence on the
//! subscriber's stream, and the importing operator's stream waits for its readiness like
//! any import's; the subscriber's release word is written when the last handle drops.
//! When the exporter stops serving or dies, the bridge ends and the session goes on with
//! its other topics: the input receives nothing more, and `RunSession::ipc_import_end`
//! says why.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::catalog::{CATALOG_VERSION, EndpointCatalog};
use super::import::{ProcessSubscriber, ProcessSubscriberOptions};
use crate::device::DeviceBackend;
use crate::plan::TopicRecord;
use crate::topic::{ChannelPublisher, PublisherOptions, TopicRegistry};
use crate::{EmitOptions, Error, ErrorCode, MemoryKind, Result, Tensor};

/// One import fed by another process's export; [`stop`](Self::stop) ends its thread (the
/// subscriber detaches; what the session still holds stays mapped until it drops).
pub(crate) struct ImportBridge {
    topic: String,
    stop: Arc<AtomicBool>,
    /// Why the bridge ended: the exporter stopped serving (`Cancelled`) or died
    /// (`PeerLost`).
    ended: Arc<Mutex<Option<Error>>>,
    thread: Option<JoinHandle<()>>,
}

impl ImportBridge {
    /// Attaches to the exporting session (waiting up to `wait` for it; `None`: not at
    /// all) and starts the bridge thread. Refused with the attach's error (`NotFound`: no
    /// session serves the topic; `ProtocolError`: the running exporter's contract is not
    /// the catalog's; `InvalidArgument`: the session's device is not the exporter's GPU),
    /// having attached nothing.
    pub(crate) fn start(
        registry: &Arc<TopicRegistry>,
        record: &TopicRecord,
        device: Option<&Arc<dyn DeviceBackend>>,
        wait: Option<Duration>,
    ) -> Result<ImportBridge> {
        let at = || format!("topic {:?}", record.name);
        let remote = record.from_export.as_ref().ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                "a bridge for an import not fed by another process",
            )
            .at(at())
        })?;
        let catalog = EndpointCatalog {
            version: CATALOG_VERSION,
            namespace: remote.namespace.clone(),
            topics: vec![remote.topic.clone()],
        };
        let mut options = ProcessSubscriberOptions::DEFAULT;
        if let Some(w) = wait {
            options = options.with_wait_for_exporter(w);
        }
        let on_device = remote
            .topic
            .memory_kind()
            .is_ok_and(|k| k != MemoryKind::Host);
        let sub = match device.filter(|_| on_device) {
            Some(d) => ProcessSubscriber::attach_with_device(
                &catalog,
                &record.name,
                options,
                Arc::clone(d),
            ),
            None => ProcessSubscriber::attach(&catalog, &record.name, options),
        }?;
        let publisher = ChannelPublisher::<Tensor>::attach_to(
            registry,
            &record.name,
            PublisherOptions::DEFAULT,
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(Mutex::new(None));
        let (s, e) = (Arc::clone(&stop), Arc::clone(&ended));
        let thread = crate::cpus::spawn_worker(
            format!("holo-ipc-{}", record.name),
            "holo-ipc bridge",
            move || bridge(sub, publisher, &s, &e),
        )
        .map_err(|e| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("cannot start the import's bridge thread: {e}"),
            )
            .at(at())
        })?;
        Ok(ImportBridge {
            topic: record.name.clone(),
            stop,
            ended,
            thread: Some(thread),
        })
    }

    /// The imported topic's name.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Why the bridge ended, once it did.
    pub(crate) fn ended(&self) -> Option<Error> {
        self.ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Ends the bridge thread.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ImportBridge {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Receives from the exporter and publishes into the import, in order, holding a frame
/// back while a `Block` queue is full; ends when stopped, when the session stops, or when
/// the exporter stops or dies (kept in `ended`).
fn bridge(
    mut sub: ProcessSubscriber,
    mut publisher: ChannelPublisher<Tensor>,
    stop: &AtomicBool,
    ended: &Mutex<Option<Error>>,
) {
    let end = 'outer: loop {
        if stop.load(Ordering::Acquire) {
            break None;
        }
        let (t, info) = match sub.receive_with_info(Duration::from_millis(20)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            // A descriptor of no live use was skipped: the next one may be good.
            Err(e) if e.code() == ErrorCode::InvalidArgument => continue,
            Err(e) => break Some(e),
        };
        let mut options = EmitOptions::default().with_frame(info.frame);
        if let Some(at) = info.capture_ns.and_then(super::publish::instant_of) {
            options = options.with_capture_time(at);
        }
        let mut value = t;
        loop {
            let r = match publisher.try_publish(value, options) {
                Ok(()) => break,
                Err(r) => r,
            };
            match r.error.code() {
                ErrorCode::Backpressured => {
                    if stop.load(Ordering::Acquire) {
                        break 'outer None;
                    }
                    value = r.value;
                    std::thread::sleep(Duration::from_micros(50));
                }
                // The session stops: nothing more is published.
                ErrorCode::Cancelled => break 'outer None,
                // Refused for good (a contract the attach checked): this frame is dropped.
                _ => break,
            }
        }
    };
    *ended.lock().unwrap_or_else(PoisonError::into_inner) = end;
}
