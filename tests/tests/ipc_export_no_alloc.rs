//! Zero heap allocations per frame on the exporting side (issue 15: "0 allocations per
//! frame on both sides"), counted with a counting global allocator over every thread of
//! this process: a session exporting a topic across processes — its source loaning,
//! filling, committing and emitting, the seat sending each descriptor through iceoryx2
//! (holo's service type, `ipc/service.rs`: iceoryx2's stock `ipc_threadsafe` allocates an
//! `Arc` per loaned sample) and waking the subscriber, the retirement worker polling the
//! release words — to a subscriber in another process (`ipc_peer`), in host memory, and
//! in device memory on CUDA device 0 where it opens, else the software device (the fence
//! written on the source's stream). Then a publisher in this process (`ProcessPublisher`)
//! writing granted slots of a session in another process and publishing them, host
//! memory and device memory (the fence written on the publisher's stream). The importing
//! side is counted in `ipc_import_no_alloc.rs`.
//!
//! One test function per binary: the allocator counts process-wide.

#[path = "common/ipc_peer.rs"]
mod ipc_peer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::ipc::{EndpointCatalog, ProcessPublisher, ProcessPublisherOptions};
use holo_runtime::{SessionOptions, TopicOptions};
use holo_tests::ipc_frames::{
    IpcDeviceFrames, IpcStats, cuda_or_software, exporting_device_graph, exporting_graph,
    publish_device_frames, publish_host_frames,
};
use ipc_peer::{Peer, WAIT, catalog_path, namespace, serve_in};

#[global_allocator]
static GLOBAL: holo_tests::counting::Counting = holo_tests::counting::Counting;

/// Frames measured, after `WARM_UP`; the subscriber takes `WARM_UP + MEASURED + 100`.
const MEASURED: u64 = 2000;
const WARM_UP: u64 = 500;

const SERVED: TopicOptions = TopicOptions::DEFAULT
    .with_depth(2)
    .with_holds_per_subscriber(2);

fn wait_emitted(stats: &IpcStats, at_least: u64) {
    let deadline = Instant::now() + WAIT;
    while stats.emitted.load(Ordering::Relaxed) < at_least {
        assert!(Instant::now() < deadline, "the frames stopped going out");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Allocations in this process while the exporting session emits `MEASURED` frames to the
/// subscriber `mode` (`subscribe` or `subscribe-device`) in another process, after
/// `WARM_UP`; the subscriber checks every frame's bytes.
fn measured(test: &str, go: &AtomicBool, stats: &IpcStats, mode: &str) -> u64 {
    let catalog = catalog_path(test);
    let frames = (WARM_UP + MEASURED + 100).to_string();
    let mut peer = Peer::spawn(&[mode, catalog.to_str().unwrap(), "cam", &frames]);
    assert_eq!(peer.expect("attached"), "0");
    go.store(true, Ordering::Release);
    wait_emitted(stats, WARM_UP);
    let before = holo_tests::counting::allocations();
    wait_emitted(stats, WARM_UP + MEASURED);
    let after = holo_tests::counting::allocations();
    assert!(
        peer.expect("ok").starts_with(&frames),
        "{test}: the subscriber checked every frame"
    );
    peer.wait_success();
    after - before
}

/// Allocations in this process while it publishes `MEASURED` frames with `publish`, after
/// `WARM_UP`, into a session in another process (`ipc_peer import`, `extra` its memory's
/// arguments) that checks every frame.
fn published(
    test: &str,
    extra: &[&str],
    publish: impl Fn(&ProcessPublisher, std::ops::Range<u64>) -> holo_runtime::Result<()>,
) -> u64 {
    let catalog = catalog_path(test);
    let ns = namespace(test);
    let total = WARM_UP + MEASURED + 100;
    let frames = total.to_string();
    let mut args = vec![
        "import",
        catalog.to_str().unwrap(),
        ns.as_str(),
        "cam",
        &frames,
    ];
    args.extend_from_slice(extra);
    let mut peer = Peer::spawn(&args);
    peer.expect("serving");
    let catalog = EndpointCatalog::read(&catalog).expect("the peer's catalog");
    let publisher = ProcessPublisher::attach(&catalog, "cam", ProcessPublisherOptions::DEFAULT)
        .expect("the publisher attaches");
    publish(&publisher, 0..WARM_UP).expect("the warm-up frames");
    let before = holo_tests::counting::allocations();
    publish(&publisher, WARM_UP..WARM_UP + MEASURED).expect("the measured frames");
    let after = holo_tests::counting::allocations();
    publish(&publisher, WARM_UP + MEASURED..total).expect("the last frames");
    assert_eq!(
        peer.expect("ok"),
        frames,
        "{test}: the session checked every frame"
    );
    peer.wait_success();
    after - before
}

#[test]
fn exporting_and_publishing_frames_to_another_process_allocate_nothing_per_frame() {
    holo_tests::counting::assert_counting();
    // Host memory.
    let go = Arc::new(AtomicBool::new(false));
    let (graph, plan, stats) =
        exporting_graph("cam", u64::MAX, Arc::clone(&go), SERVED).expect("the graph compiles");
    let (session, _) = serve_in(
        "export_no_alloc_host",
        graph,
        &plan,
        SessionOptions::default(),
        "camera.out",
    );
    let host = measured("export_no_alloc_host", &go, &stats, "subscribe");
    session.stop();
    session.join().expect("the session ends cleanly");
    // Device memory: 64 KiB frames, the source's stream idling 20 µs before each fill.
    let device = cuda_or_software();
    let go = Arc::new(AtomicBool::new(false));
    let (source, stats) = IpcDeviceFrames::new(
        u64::MAX,
        64 << 10,
        Duration::from_micros(20),
        Arc::clone(&go),
    );
    let (graph, plan) = exporting_device_graph("cam", source, SERVED).expect("the graph compiles");
    let (session, _) = serve_in(
        "export_no_alloc_device",
        graph,
        &plan,
        SessionOptions::default().on_device(Arc::clone(&device)),
        "camera.out",
    );
    let on_device = measured("export_no_alloc_device", &go, &stats, "subscribe-device");
    session.stop();
    session.join().expect("the session ends cleanly");
    // Publishing into a session in another process: host memory, then 64 KiB device
    // frames written on this process's stream after 20 µs of it idling.
    let pub_host = published("publish_no_alloc_host", &[], |p, r| {
        publish_host_frames(p, r)
    });
    let pub_device = published("publish_no_alloc_device", &["65536"], |p, r| {
        publish_device_frames(p, r, 64 << 10, Duration::from_micros(20), false)
    });
    println!(
        "allocations over {MEASURED} frames: exported host {host}, device ({}) {on_device}; published host {pub_host}, device {pub_device}",
        device.backend_kind().name()
    );
    assert_eq!(
        (host, on_device, pub_host, pub_device),
        (0, 0, 0, 0),
        "allocations over {MEASURED} frames (exported host, device; published host, device)"
    );
}
