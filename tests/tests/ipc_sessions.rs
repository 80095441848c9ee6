//! Two sessions in two processes (issue 15; docs/IPC.md, "Two sessions"): one exports a
//! topic across processes, the other imports it with `TopicOptions::from_other_process`
//! and the first one's endpoint catalog — its input receives the other process's tensors
//! in place.
//!
//! Provoked here: compile checks the import against the catalog (a topic no catalog
//! exports is `TOPIC_REMOTE_UNKNOWN`, an input that cannot take the catalog's contract
//! `TOPIC_REMOTE_CONTRACT_MISMATCH`, an import both fed by another process and served to
//! publishers `TOPIC_ACROSS_PROCESSES_UNSUPPORTED`) and records where it comes from; a
//! session whose exporter does not serve fails to start (`NotFound`); host frames and
//! device frames (CUDA device 0 where it opens, else the software device) reach the
//! importing operator in order with every byte; when the exporter dies the importing
//! session goes on (`ipc_import_end` says `PeerLost`) and joins cleanly, and when it stops
//! serving it says `Cancelled`.

#[path = "common/ipc_peer.rs"]
mod ipc_peer;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use holo_runtime::device::DeviceId;
use holo_runtime::ipc::EndpointCatalog;
use holo_runtime::{
    CompileOptions, ErrorCode, Graph, ParamSet, RunSession, SessionOptions, TopicOptions, codes,
    compile,
};
use holo_tests::ipc_frames::{IpcDeviceSink, IpcPinnedSink, IpcSink, SinkStats, cuda_or_software};
use ipc_peer::{Peer, WAIT, catalog_path, eventually, namespace};

/// The catalog of a session exporting host frames as "cam" in namespace `ns`.
fn host_catalog(ns: &str) -> EndpointCatalog {
    let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (_, plan, _) = holo_tests::ipc_frames::exporting_graph(
        "cam",
        1,
        go,
        TopicOptions::DEFAULT.with_holds_per_subscriber(2),
    )
    .unwrap();
    plan.endpoint_catalog(ns)
}

/// A graph importing "cam" from another process into `sink` (operator `sink`, its input
/// `frames`), compiled with `catalog`; devices bound to CUDA device 0 when `device`.
fn importing<O: holo_runtime::Operator>(
    sink: O,
    frames: impl FnOnce(&O::Ports) -> holo_runtime::InPort<holo_runtime::Tensor>,
    topic: TopicOptions,
    catalog: Option<EndpointCatalog>,
    device: bool,
) -> (
    Graph,
    Result<holo_runtime::plan::ExecutionPlan, holo_runtime::Diagnostics>,
) {
    let mut graph = Graph::new();
    let h = graph
        .add_operator("sink", sink, ParamSet::defaults().unwrap())
        .unwrap();
    graph.import_topic(frames(&h), "cam", topic);
    let mut options = CompileOptions::default();
    if let Some(c) = catalog {
        options = options.with_endpoint_catalog(c);
    }
    if device {
        options
            .deployment
            .bind_imported_topic_device("cam", DeviceId::cuda(0));
    }
    let plan = compile(&graph, options);
    (graph, plan)
}

fn host_sink() -> (IpcSink, Arc<SinkStats>) {
    let stats = Arc::new(SinkStats::default());
    (IpcSink::new(Arc::clone(&stats)), stats)
}

#[test]
fn compile_checks_an_import_from_another_process_against_the_exporters_catalog() {
    let remote = TopicOptions::DEFAULT.from_other_process();
    let catalog = host_catalog("cameras");
    let (sink, _) = host_sink();
    let (_, plan) = importing(sink, |h| h.frames, remote, Some(catalog.clone()), false);
    let plan = plan.expect("an import the catalog exports compiles");
    let t = &plan.topics()[0];
    let from = t
        .from_export
        .as_ref()
        .expect("the record says where it comes from");
    assert_eq!(
        (
            from.namespace.as_str(),
            from.topic.name.as_str(),
            t.pool.as_deref()
        ),
        ("cameras", "cam", None)
    );
    assert_eq!(t.contract.max_bytes, Some(4096), "the exporter's bound");
    assert!(
        plan.tensor_allocations().is_empty(),
        "no pool of its own: the tensors are the exporter's"
    );
    assert!(
        plan.render_human()
            .contains("from another process (namespace \"cameras\", host memory)"),
        "{}",
        plan.render_human()
    );
    assert!(plan.json().contains("\"from_export\""));
    // The catalog is the importing session's business only: its own lists nothing.
    assert!(plan.endpoint_catalog("b").topics.is_empty());
    // No catalog exports the topic.
    let (sink, _) = host_sink();
    let (_, plan) = importing(sink, |h| h.frames, remote, None, false);
    let d = plan.map(|_| ()).unwrap_err();
    assert_eq!(d.with_code(codes::TOPIC_REMOTE_UNKNOWN).count(), 1, "{d}");
    assert_eq!(d.items.len(), 1, "{d}");
    // An input that cannot take host frames.
    let stats = Arc::new(SinkStats::default());
    let (_, plan) = importing(
        IpcPinnedSink::new(stats),
        |h| h.frames,
        remote,
        Some(catalog.clone()),
        true,
    );
    let d = plan.map(|_| ()).unwrap_err();
    let found: Vec<_> = d.with_code(codes::TOPIC_REMOTE_CONTRACT_MISMATCH).collect();
    assert_eq!(found.len(), 1, "{d}");
    assert!(found[0].message.contains("memory"), "{d}");
    // Fed by another process and served to publishers at once.
    let (sink, _) = host_sink();
    let both = remote.across_processes().with_max_bytes(4096);
    let (_, plan) = importing(sink, |h| h.frames, both, Some(catalog), false);
    let d = plan.map(|_| ()).unwrap_err();
    assert_eq!(
        d.with_code(codes::TOPIC_ACROSS_PROCESSES_UNSUPPORTED)
            .count(),
        1,
        "{d}"
    );
}

#[test]
fn a_session_whose_exporter_does_not_serve_fails_to_start() {
    let catalog = host_catalog(&namespace("no_exporter"));
    let (sink, _) = host_sink();
    let remote = TopicOptions::DEFAULT.from_other_process();
    let (graph, plan) = importing(sink, |h| h.frames, remote, Some(catalog), false);
    let e = RunSession::start(graph, &plan.unwrap(), SessionOptions::default())
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound, "{e}");
}

#[test]
fn a_session_takes_another_sessions_host_frames_in_place_and_goes_on_when_it_dies() {
    let test = "sessions_host";
    let catalog = catalog_path(test);
    let mut exporter = Peer::spawn(&["export", catalog.to_str().unwrap(), &namespace(test), "cam"]);
    exporter.expect("serving");
    let cat = EndpointCatalog::read(&catalog).unwrap();
    let (sink, stats) = host_sink();
    let remote = TopicOptions::DEFAULT.with_depth(2).from_other_process();
    let (graph, plan) = importing(sink, |h| h.frames, remote, Some(cat), false);
    let session = RunSession::start(
        graph,
        &plan.unwrap(),
        SessionOptions::default().with_wait_for_exporters(WAIT),
    )
    .expect("the importing session starts, attached to the exporter");
    eventually("frames arrive from the other session", || {
        stats.received.load(Ordering::Relaxed) >= 300
    });
    assert_eq!(*stats.wrong.lock().unwrap(), None, "in order, every byte");
    assert!(session.ipc_import_end("cam").is_none());
    exporter.kill();
    eventually("the import says its exporter died", || {
        session.ipc_import_end("cam").is_some()
    });
    assert_eq!(
        session.ipc_import_end("cam").map(|e| e.code()),
        Some(ErrorCode::PeerLost)
    );
    assert!(!session.is_stopping(), "the session goes on");
    assert_eq!(*stats.wrong.lock().unwrap(), None);
    session.stop();
    let report = session.join().expect("the session ends cleanly");
    let cam = &report.ipc_imports[0];
    assert_eq!(
        (cam.topic.as_str(), cam.ended.as_ref().map(|e| e.0)),
        ("cam", Some(ErrorCode::PeerLost)),
        "the run report keeps why the import ended"
    );
}

#[test]
fn a_session_takes_another_sessions_device_frames_behind_their_fences() {
    let device = cuda_or_software();
    let test = "sessions_device";
    let catalog = catalog_path(test);
    let n = 300;
    let mut exporter = Peer::spawn(&[
        "export-device",
        catalog.to_str().unwrap(),
        &namespace(test),
        "cam",
        "65536",
        "20",
        &n.to_string(),
    ]);
    exporter.expect("serving");
    let cat = EndpointCatalog::read(&catalog).unwrap();
    let stats = Arc::new(SinkStats::default());
    let remote = TopicOptions::DEFAULT.with_depth(2).from_other_process();
    let (graph, plan) = importing(
        IpcDeviceSink::new(Arc::clone(&stats)),
        |h| h.frames,
        remote,
        Some(cat),
        true,
    );
    let session = RunSession::start(
        graph,
        &plan.unwrap(),
        SessionOptions::default()
            .on_device(Arc::clone(&device))
            .with_wait_for_exporters(WAIT),
    )
    .expect("the importing session starts on the exporter's device");
    eventually("every frame arrives", || {
        stats.received.load(Ordering::Relaxed) == n || stats.wrong.lock().unwrap().is_some()
    });
    assert_eq!(
        *stats.wrong.lock().unwrap(),
        None,
        "in order, every byte its frame's (a read before the fence shows another's)"
    );
    // The exporter stops serving after its frames.
    assert_eq!(exporter.expect("done"), n.to_string());
    exporter.wait_success();
    eventually("the import says its exporter stopped", || {
        session.ipc_import_end("cam").is_some()
    });
    assert_eq!(
        session.ipc_import_end("cam").map(|e| e.code()),
        Some(ErrorCode::Cancelled)
    );
    session.stop();
    session.join().expect("the session ends cleanly");
}
