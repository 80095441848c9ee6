//! Zero heap allocations per frame on the importing side of two sessions (issue 15: "0
//! allocations per frame on both sides"), counted with a counting global allocator over
//! every thread of this process: a session importing another process's export
//! (`TopicOptions::from_other_process`) — its bridge thread receiving each descriptor
//! (`ProcessSubscriber`), publishing the tensor into the input, the sink reading every
//! byte, the release word written when it drops — in host memory, and in device memory on
//! CUDA device 0 where it opens, else the software device (the fence wait, the readiness,
//! the read-back on the sink's stream, the release on the subscriber's stream). Then the
//! other direction into a session: publishers in another process (`ProcessPublisher`)
//! writing the session's imported pool — the seat granting slots and taking commits, in
//! host memory and in device memory (the fence wait on the seat's stream).
//!
//! The exporting process is another process here; its side is counted in
//! `ipc_export_no_alloc.rs`.
//!
//! One test function per binary: the allocator counts process-wide.

#[path = "common/ipc_peer.rs"]
mod ipc_peer;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use holo_runtime::device::DeviceId;
use holo_runtime::ipc::EndpointCatalog;
use holo_runtime::{
    CompileOptions, Graph, MemoryKind, RunSession, SessionOptions, TopicOptions, compile,
};
use holo_tests::ipc_frames::{
    IpcDeviceSink, IpcSink, SinkStats, cuda_or_software, importing_device_graph, importing_graph,
};
use ipc_peer::{Peer, WAIT, catalog_path, namespace, serve_in};

#[global_allocator]
static GLOBAL: holo_tests::counting::Counting = holo_tests::counting::Counting;

fn wait_until(stats: &SinkStats, at_least: u64) {
    let deadline = Instant::now() + WAIT;
    while stats.received.load(Ordering::Relaxed) < at_least {
        assert!(
            stats.wrong.lock().unwrap().is_none(),
            "{:?}",
            stats.wrong.lock().unwrap()
        );
        assert!(Instant::now() < deadline, "the frames stopped coming");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Allocations in this process while the importing session's sink receives `frames`
/// frames, after a warm-up of 500.
fn measured(session: &RunSession, stats: &SinkStats, frames: u64) -> u64 {
    wait_until(stats, 500);
    let start = stats.received.load(Ordering::Relaxed);
    let before = holo_tests::counting::allocations();
    wait_until(stats, start + frames);
    let after = holo_tests::counting::allocations();
    assert!(session.ipc_import_end("cam").is_none());
    after - before
}

/// The catalog the exporter `peer` wrote for `test`.
fn exporter(test: &str, args: &[&str]) -> (Peer, EndpointCatalog) {
    let catalog = catalog_path(test);
    let ns = namespace(test);
    let mut all = vec![args[0], catalog.to_str().unwrap(), ns.as_str()];
    all.extend_from_slice(&args[1..]);
    let mut peer = Peer::spawn(&all);
    peer.expect("serving");
    (peer, EndpointCatalog::read(&catalog).unwrap())
}

fn start(
    graph: Graph,
    catalog: EndpointCatalog,
    options: SessionOptions,
    device: bool,
) -> RunSession {
    let mut compile_options = CompileOptions::default().with_endpoint_catalog(catalog);
    if device {
        compile_options
            .deployment
            .bind_imported_topic_device("cam", DeviceId::cuda(0));
    }
    let plan = compile(&graph, compile_options).unwrap();
    RunSession::start(graph, &plan, options.with_wait_for_exporters(WAIT)).unwrap()
}

#[test]
fn importing_another_sessions_frames_allocates_nothing_per_frame() {
    holo_tests::counting::assert_counting();
    let remote = TopicOptions::DEFAULT.with_depth(2).from_other_process();
    // Host memory.
    let (mut peer, catalog) = exporter("no_alloc_host", &["export", "cam"]);
    let stats = Arc::new(SinkStats::default());
    let mut graph = Graph::new();
    let sink = graph
        .add_operator_with_defaults("sink", IpcSink::new(Arc::clone(&stats)))
        .unwrap();
    graph.import_topic(sink.frames, "cam", remote);
    let session = start(graph, catalog, SessionOptions::default(), false);
    let host = measured(&session, &stats, 2000);
    peer.kill();
    session.stop();
    session.join().unwrap();
    // Device memory: 64 KiB frames, the exporter's stream idling 20 µs before each fill.
    let device = cuda_or_software();
    let (mut peer, catalog) = exporter(
        "no_alloc_device",
        &["export-device", "cam", "65536", "20", "1000000"],
    );
    let stats = Arc::new(SinkStats::default());
    let mut graph = Graph::new();
    let sink = graph
        .add_operator_with_defaults("sink", IpcDeviceSink::new(Arc::clone(&stats)))
        .unwrap();
    graph.import_topic(sink.frames, "cam", remote);
    let session = start(
        graph,
        catalog,
        SessionOptions::default().on_device(Arc::clone(&device)),
        true,
    );
    let on_device = measured(&session, &stats, 2000);
    peer.kill();
    session.stop();
    session.join().unwrap();
    // Publishers in another process: host memory, then 64 KiB device frames written on
    // the publisher's stream after 20 µs.
    let published = TopicOptions::DEFAULT.with_loans_per_publisher(2);
    let (graph, plan, stats) = importing_graph("cam", published).unwrap();
    let (session, _) = serve_in(
        "no_alloc_pub_host",
        graph,
        &plan,
        SessionOptions::default(),
        "topic:cam",
    );
    let catalog = catalog_path("no_alloc_pub_host");
    let mut peer = Peer::spawn(&["publish", catalog.to_str().unwrap(), "cam", "2600"]);
    peer.expect("attached");
    let pub_host = measured(&session, &stats, 2000);
    assert_eq!(peer.expect("ok"), "2600");
    session.stop();
    session.join().unwrap();
    let (graph, plan, stats) =
        importing_device_graph("cam", MemoryKind::CudaDevice, 64 << 10, published).unwrap();
    let options = SessionOptions::default().on_device(Arc::clone(&device));
    let (session, _) = serve_in("no_alloc_pub_device", graph, &plan, options, "topic:cam");
    let catalog = catalog_path("no_alloc_pub_device");
    let mut peer = Peer::spawn(&[
        "publish-device",
        catalog.to_str().unwrap(),
        "cam",
        "2600",
        "65536",
        "20",
        "stream",
    ]);
    peer.expect("attached");
    let pub_device = measured(&session, &stats, 2000);
    assert_eq!(peer.expect("ok"), "2600");
    session.stop();
    session.join().unwrap();
    println!(
        "allocations over 2000 imported frames: host {host}, device ({}) {on_device}; from publishers: host {pub_host}, device {pub_device}",
        device.backend_kind().name()
    );
    assert_eq!(
        (host, on_device, pub_host, pub_device),
        (0, 0, 0, 0),
        "allocations over 2000 frames (host, device; from publishers: host, device)"
    );
}
