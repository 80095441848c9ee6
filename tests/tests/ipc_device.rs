//! Topics across processes in CUDA device memory (issue 15; docs/IPC.md): the exporting
//! session's pool is a CUDA virtual-memory allocation whose file descriptor the subscriber
//! maps once; per frame, the writer's stream writes the slot's fence value into a
//! host-registered word (`cuStreamWriteValue64_v2`), the subscriber's stream waits for it
//! (`cuStreamWaitValue64_v2`) and writes its release word when the tensor drops.
//!
//! Provoked here, on CUDA device 0 on the GPU machine (`HOLO_REQUIRE_DEVICE=cuda` makes its
//! absence a failure) and in CI on the software device, whose `DeviceIpc` stands in for
//! CUDA's (memfd "device memory", the fence words written and waited on by its stream
//! worker threads, in order with their fills): every frame read back in another process holds its own
//! bytes although the producer's stream idles before each fill (an early read, or a slot
//! reused before its release, shows as another frame's bytes) at 256 B, 64 KiB and 4 MiB;
//! a subscriber killed while its stream still reads a slot gives the slot back only once
//! its process exited; an exporter killed after sending a descriptor whose fence never
//! comes does not wedge the subscriber's stream (its watchdog abandons the fence, the
//! frame counts as abandoned, `receive` says `PeerLost`). The other direction: a
//! `ProcessPublisher` in another process writes slots of a session's imported device or
//! pinned pool on its own stream (behind a spin kernel) or on the host, and every frame
//! reaches the importing operator in order with its own bytes; a publisher killed while
//! its stream has not yet written a fence does not wedge the session (the seat abandons
//! the fence and counts the frame, the session stops and joins). A session exporting or
//! importing device memory across processes on a backend with no `DeviceIpc` fails to
//! start with `NotSupported`, having served nothing.

#[path = "common/ipc_peer.rs"]
mod ipc_peer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::MemoryKind;
use holo_runtime::device::DeviceBackend;
use holo_runtime::ipc::{EndpointCatalog, ProcessSubscriber, ProcessSubscriberOptions};
use holo_runtime::{ErrorCode, RunSession, SessionOptions, TopicOptions};
use holo_tests::ipc_frames::{
    IpcDeviceFrames, IpcPinnedFrames, SinkStats, exporting_device_graph, exporting_pinned_graph,
    importing_device_graph,
};
use ipc_peer::{Peer, WAIT, catalog_path, eventually, namespace, serve_in};

/// CUDA device 0 where it opens — else the software device, whose `DeviceIpc` stands in
/// for CUDA's (memfd "device memory", stream-ordered words in its worker threads), so that
/// every test here runs in CI too — unless `HOLO_REQUIRE_DEVICE=cuda`, where CUDA's
/// absence fails the test. The tests take turns (`SERIAL`): the leak test counts the
/// process's descriptors and mappings.
fn device() -> (Arc<dyn DeviceBackend>, std::sync::MutexGuard<'static, ()>) {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let turn = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    (holo_tests::ipc_frames::cuda_or_software(), turn)
}

/// Frames per size of the checksum tests: `HOLO_IPC_DEVICE_FRAMES` (the 10⁶-frame run),
/// else 2000 on CUDA and 300 on the software device (whose fills are host memsets on a
/// 2-core CI machine).
fn frames(device: &Arc<dyn DeviceBackend>) -> u64 {
    std::env::var("HOLO_IPC_DEVICE_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(
            if device.backend_kind() == holo_runtime::device::BackendKind::Cuda {
                2000
            } else {
                300
            },
        )
}

/// A session exporting `limit` device frames of `bytes` on `device`, each filled after
/// `delay`, gated by the returned flag; its catalog is written.
fn device_exporter(
    test: &str,
    device: &Arc<dyn DeviceBackend>,
    limit: u64,
    bytes: u64,
    delay: Duration,
) -> (
    RunSession,
    Arc<AtomicBool>,
    Arc<holo_tests::ipc_frames::IpcStats>,
    u32,
) {
    let go = Arc::new(AtomicBool::new(false));
    let (source, stats) = IpcDeviceFrames::new(limit, bytes, delay, Arc::clone(&go));
    let compiled = exporting_device_graph("cam", source, SERVED).expect("the graph compiles");
    let (session, slots) = serve(test, device, compiled);
    (session, go, stats, slots)
}

/// Depth 2, 2 holds per subscriber.
const SERVED: TopicOptions = TopicOptions::DEFAULT
    .with_depth(2)
    .with_holds_per_subscriber(2);

/// Starts an exporting session of `compiled` on `device` and writes its catalog; the
/// session and the exported pool's slot count.
fn serve(
    test: &str,
    device: &Arc<dyn DeviceBackend>,
    (graph, plan): (holo_runtime::Graph, holo_runtime::plan::ExecutionPlan),
) -> (RunSession, u32) {
    let options = SessionOptions::default().on_device(Arc::clone(device));
    serve_in(test, graph, &plan, options, "camera.out")
}

#[test]
fn device_frames_reach_another_process_behind_their_fences_with_their_own_bytes() {
    let (device, _turn) = device();
    let n = frames(&device);
    // `HOLO_IPC_DEVICE_SIZES` (comma-separated bytes) narrows a long run to some sizes.
    let sizes: Vec<u64> = std::env::var("HOLO_IPC_DEVICE_SIZES").map_or_else(
        |_| vec![256, 64 << 10, 4 << 20],
        |v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
    );
    for bytes in sizes {
        let test = format!("device_checksum_{bytes}");
        let (session, go, stats, _) =
            device_exporter(&test, &device, n, bytes, Duration::from_micros(20));
        let catalog = catalog_path(&test);
        let mut peer = Peer::spawn(&[
            "subscribe-device",
            catalog.to_str().unwrap(),
            "cam",
            &n.to_string(),
        ]);
        assert_eq!(peer.expect("attached"), "0");
        let start = Instant::now();
        go.store(true, Ordering::Release);
        assert_eq!(
            peer.expect("ok"),
            format!("{n} abandoned 0"),
            "{bytes} B: every frame's bytes are its own"
        );
        let elapsed = start.elapsed();
        peer.wait_success();
        assert_eq!(stats.emitted.load(Ordering::Relaxed), n);
        session.stop();
        session.join().expect("the session ends cleanly");
        #[allow(clippy::cast_precision_loss, reason = "a rate for a log line")]
        let rate = n as f64 / elapsed.as_secs_f64();
        println!(
            "ipc device checksum: {n} frames of {bytes} B in {elapsed:.2?} ({rate:.0} frames/s), every byte checked, 0 abandoned"
        );
    }
}

#[test]
fn a_killed_device_subscriber_gives_its_slot_back_only_once_its_process_exited() {
    let (device, _turn) = device();
    let test = "device_killed_sub";
    let (session, go, _stats, slots) =
        device_exporter(test, &device, u64::MAX, 4096, Duration::ZERO);
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&[
        "subscribe-device",
        catalog.to_str().unwrap(),
        "cam",
        "1000000",
        "hold",
    ]);
    assert_eq!(peer.expect("attached"), "0");
    go.store(true, Ordering::Release);
    peer.expect("holding");
    // The peer's stream reads the slot for 20 s: the slot stays out of the pool.
    for _ in 0..200 {
        assert!(
            session.pool_free_slots("camera.out").unwrap() < slots,
            "a slot a live subscriber's stream still reads was recycled"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let killed = Instant::now();
    peer.kill();
    let reaped = killed.elapsed();
    eventually("the slot comes back once the process exited", || {
        session.pool_free_slots("camera.out").unwrap() == slots
    });
    println!(
        "ipc device killed subscriber: reaped {reaped:.2?} after SIGKILL, its slot back {:.2?} after",
        killed.elapsed()
    );
    session.stop();
    session.join().expect("the session ends cleanly");
}

/// An exporter in another process whose every fill waits 3 s on its stream (each
/// descriptor is sent long before its fence is written), a subscriber on `device`, and
/// the first frame it received.
fn slow_exporter_and_a_frame(
    device: &Arc<dyn DeviceBackend>,
    test: &str,
) -> (Peer, ProcessSubscriber, holo_runtime::Tensor) {
    let catalog = catalog_path(test);
    let ns = namespace(test);
    let mut exporter = Peer::spawn(&[
        "export-device",
        catalog.to_str().unwrap(),
        &ns,
        "cam",
        "4096",
        "3000000",
        "1000",
    ]);
    exporter.expect("serving");
    let cat = EndpointCatalog::read(&catalog).expect("the catalog the exporter wrote");
    let mut sub = ProcessSubscriber::attach_with_device(
        &cat,
        "cam",
        ProcessSubscriberOptions::DEFAULT,
        Arc::clone(device),
    )
    .expect("the subscriber attaches");
    let held = sub
        .receive(WAIT)
        .expect("a descriptor")
        .expect("within the wait");
    (exporter, sub, held)
}

/// The watchdog belonged to the subscriber: a tensor kept after its subscriber dropped
/// waited for ever on a dead exporter's fence (its host wait, and every stream ordered
/// behind it), since only the mirror's drop — after that tensor's — abandoned the fences.
#[test]
fn a_tensor_kept_past_its_subscriber_is_not_wedged_by_a_killed_exporter() {
    let (device, _turn) = device();
    let (mut exporter, sub, held) =
        slow_exporter_and_a_frame(&device, "device_kept_past_subscriber");
    assert!(!held.fence_abandoned(), "the fence is pending");
    drop(sub);
    let killed = Instant::now();
    exporter.kill();
    // The host wait for the kept tensor's readiness, on a thread: it must end, not hang.
    let (done, waited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = held.synchronize_for_host();
        let _ = done.send((r, held.fence_abandoned()));
    });
    let (result, abandoned) = waited
        .recv_timeout(Duration::from_secs(10))
        .expect("the kept tensor's wait ended after its exporter was killed");
    result.expect("the wait ends without an error");
    assert!(abandoned, "the kept tensor says its fence was abandoned");
    println!(
        "ipc device kept tensor: its wait ended {:.2?} after SIGKILL",
        killed.elapsed()
    );
}

#[test]
fn a_killed_device_exporter_never_wedges_its_subscribers_stream() {
    let (device, _turn) = device();
    let (mut exporter, mut sub, held) =
        slow_exporter_and_a_frame(&device, "device_killed_exporter");
    let stream = sub
        .stream()
        .expect("a device topic's subscriber has a stream");
    assert!(
        !held.fence_abandoned(),
        "the fence is pending, not abandoned, while the exporter lives"
    );
    eprintln!("killed exporter: a descriptor received; killing the exporter");
    // The subscriber's stream now waits for a fence the exporter's stream writes in 3 s.
    let killed = Instant::now();
    exporter.kill();
    eprintln!(
        "killed exporter: reaped {:.2?} after SIGKILL",
        killed.elapsed()
    );
    let start = Instant::now();
    device
        .synchronize_stream(stream)
        .expect("the subscriber's stream runs on");
    let waited = start.elapsed();
    let since_kill = killed.elapsed();
    println!(
        "ipc device killed exporter: the subscriber's stream ran on {waited:.2?} after the exporter was reaped, {since_kill:.2?} after SIGKILL"
    );
    assert!(
        since_kill < Duration::from_secs(5),
        "the subscriber's stream waited {since_kill:?} after SIGKILL for a dead exporter's fence"
    );
    assert!(sub.abandoned_frames() >= 1, "the lost frame is counted");
    assert!(
        held.fence_abandoned(),
        "the received tensor says its fence was abandoned"
    );
    let err = loop {
        match sub.receive(WAIT) {
            Ok(Some(_)) => {}
            Ok(None) => panic!("a dead exporter left its subscriber waiting out the wait"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.code(), ErrorCode::PeerLost, "{err}");
    drop((held, sub));
}

#[test]
fn a_backend_that_cannot_share_device_memory_refuses_the_session_and_serves_nothing() {
    let (_, _turn) = device();
    // A software device without its `DeviceIpc`: no memory another process can map (as
    // OpenCL's).
    let device: Arc<dyn DeviceBackend> = holo_runtime::device::SoftwareDevice::without_ipc();
    let test = "device_unsupported";
    let go = Arc::new(AtomicBool::new(true));
    // Pinned memory: the same refusal.
    let (pinned, _) = IpcPinnedFrames::new(1, 256, Duration::ZERO, true, Arc::clone(&go));
    let (graph, plan) =
        exporting_pinned_graph("cam", pinned, TopicOptions::DEFAULT).expect("it compiles");
    let e = RunSession::start(
        graph,
        &plan,
        SessionOptions::default()
            .on_device(Arc::clone(&device))
            .with_ipc_namespace(namespace(test)),
    )
    .map(|_| ())
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
    assert!(e.message().contains("cannot share"), "{e}");
    let (source, _stats) = IpcDeviceFrames::new(1, 256, Duration::ZERO, go);
    let (graph, plan) =
        exporting_device_graph("cam", source, TopicOptions::DEFAULT).expect("it compiles");
    let e = RunSession::start(
        graph,
        &plan,
        SessionOptions::default()
            .on_device(Arc::clone(&device))
            .with_ipc_namespace(namespace(test)),
    )
    .map(|_| ())
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
    assert!(
        e.message().contains("cannot share"),
        "the refusal says why: {e}"
    );
    // Nothing serves the topic: an attach finds no exporter.
    let catalog = plan.endpoint_catalog(&namespace(test));
    let e = ProcessSubscriber::attach(&catalog, "cam", ProcessSubscriberOptions::DEFAULT)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound, "{e}");
    // An import in device or pinned memory: the same refusal, and no publisher attaches.
    for kind in [MemoryKind::CudaDevice, MemoryKind::PinnedHost] {
        let (graph, plan, _) =
            importing_device_graph("cam", kind, 256, TopicOptions::DEFAULT).expect("it compiles");
        let e = RunSession::start(
            graph,
            &plan,
            SessionOptions::default()
                .on_device(Arc::clone(&device))
                .with_ipc_namespace(namespace(test)),
        )
        .map(|_| ())
        .unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotSupported, "{kind}: {e}");
        assert!(e.message().contains("cannot share"), "{kind}: {e}");
        let catalog = plan.endpoint_catalog(&namespace(test));
        let e = holo_runtime::ipc::ProcessPublisher::attach(
            &catalog,
            "cam",
            holo_runtime::ipc::ProcessPublisherOptions::DEFAULT,
        )
        .map(|_| ())
        .unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotFound, "{kind}: {e}");
    }
}

/// Open descriptors and holo's shared mappings of this process, and the iceoryx2 nodes of
/// the machine (the tests run one at a time on the GPU machine: `--test-threads=1`).
fn resources() -> (usize, usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let nodes = std::fs::read_dir("/tmp/iceoryx2/nodes").map_or(0, Iterator::count);
    (
        fds,
        maps.lines().filter(|l| l.contains("memfd:holo")).count(),
        nodes,
    )
}

/// What a round made and did not undo: (made, undone) pairs of device allocations,
/// streams, events, imports of another process's allocation and host registrations.
fn unbalanced(c: holo_runtime::device::CounterSnapshot) -> Vec<(&'static str, u64, u64)> {
    [
        ("allocations", c.alloc, c.free),
        ("streams", c.stream_create, c.stream_destroy),
        ("events", c.event_create, c.event_destroy),
        ("imports", c.ipc_import, c.ipc_release),
        ("host registrations", c.host_register, c.host_unregister),
    ]
    .into_iter()
    .filter(|(_, made, undone)| made != undone)
    .collect()
}

#[test]
fn join_and_detach_of_a_device_topic_leave_nothing_behind() {
    let (device, _turn) = device();
    // Two rounds, both directions in this process: an exporting session and a
    // subscriber, an importing session and a publisher. After the second, every device
    // allocation, stream, event, import and host registration it made was undone, and the
    // descriptors, memfd mappings and iceoryx2 nodes are the ones before it; the first
    // warms up what a process keeps once (and may keep only that).
    for round in 0..2 {
        let before = resources();
        let counters = device.counters().snapshot();
        let test = format!("device_leaks_{round}");
        let (session, go, _stats, _) = device_exporter(&test, &device, 200, 4096, Duration::ZERO);
        let catalog = session.endpoint_catalog();
        let mut sub = ProcessSubscriber::attach_with_device(
            &catalog,
            "cam",
            ProcessSubscriberOptions::DEFAULT,
            Arc::clone(&device),
        )
        .expect("the subscriber attaches in the exporter's own process");
        go.store(true, Ordering::Release);
        let stream = sub.stream().unwrap();
        let mut buf = [0u8; 64];
        for _ in 0..200 {
            let t = sub.receive(WAIT).unwrap().expect("a frame");
            t.copy_to_host(&mut buf, stream).unwrap();
            holo_tests::ipc_frames::check_device_frame(sub.last_info().frame, &buf).unwrap();
        }
        drop(sub);
        session.stop();
        session.join().expect("the session ends cleanly");
        // The other direction: 200 frames published on the publisher's stream.
        let test = format!("device_leaks_import_{round}");
        let (session, stats, _) = device_importer(&test, &device, MemoryKind::CudaDevice, 4096);
        let publisher = holo_runtime::ipc::ProcessPublisher::attach_with_device(
            &session.endpoint_catalog(),
            "cam",
            holo_runtime::ipc::ProcessPublisherOptions::DEFAULT,
            Arc::clone(&device),
        )
        .expect("the publisher attaches in the importer's own process");
        let stream = publisher.stream().unwrap();
        for k in 0..200 {
            let loan = publisher.loan(WAIT).unwrap().expect("a grant");
            let ptr = loan.device_ptr().unwrap();
            let fill = holo_tests::ipc_frames::device_fill(k);
            // SAFETY: the granted slot, written on the publisher's stream before its fence.
            unsafe { device.memset_async(ptr, fill, 4096, stream).unwrap() };
            loan.publish(&[4096], holo_runtime::DType::U8, k).unwrap();
        }
        eventually("every published frame is received", || {
            stats.received.load(Ordering::Relaxed) == 200
        });
        assert_eq!(*stats.wrong.lock().unwrap(), None);
        drop(publisher);
        session.stop();
        session.join().expect("the session ends cleanly");
        let after = resources();
        let left = unbalanced(device.counters().snapshot() - counters);
        // Round 0 keeps what the process reuses: a received tensor's one-slot pool, with its
        // 1 + 8 events, in the bounded reserve of released imports (docs/DLPACK.md, "Cost").
        let warm = [("events", 9)];
        assert!(
            left.iter()
                .all(|(what, made, undone)| round == 0 && warm.contains(&(*what, made - undone))),
            "round {round}: (what, made, undone): {left:?}"
        );
        if round == 1 {
            assert_eq!(
                after, before,
                "(descriptors, memfd:holo mappings, iceoryx2 nodes) before the round and after"
            );
        }
    }
}

#[test]
fn pinned_frames_cross_processes_fenced_by_their_writer() {
    let (device, _turn) = device();
    let n = frames(&device);
    for writer in ["host", "stream"] {
        let test = format!("pinned_{writer}");
        let go = Arc::new(AtomicBool::new(false));
        let (source, stats) = IpcPinnedFrames::new(
            n,
            4096,
            Duration::from_micros(20),
            writer == "host",
            Arc::clone(&go),
        );
        let compiled = exporting_pinned_graph("cam", source, SERVED).expect("it compiles");
        let (session, _) = serve(&test, &device, compiled);
        let catalog = catalog_path(&test);
        let mut peer = Peer::spawn(&[
            "subscribe-pinned",
            catalog.to_str().unwrap(),
            "cam",
            &n.to_string(),
            writer,
        ]);
        assert_eq!(peer.expect("attached"), "0");
        go.store(true, Ordering::Release);
        assert_eq!(peer.expect("ok"), n.to_string(), "{writer} writer");
        peer.wait_success();
        assert_eq!(stats.emitted.load(Ordering::Relaxed), n);
        session.stop();
        session.join().expect("the session ends cleanly");
        println!("ipc pinned: {n} frames of 4096 B written on the {writer}, every byte checked");
    }
}

/// A session on `device` importing "cam" across processes in `kind` memory (frames of
/// `max_bytes` at most) into a device-frame sink, its catalog written; the session, the
/// sink's stats and the topic pool's slot count.
fn device_importer(
    test: &str,
    device: &Arc<dyn DeviceBackend>,
    kind: MemoryKind,
    max_bytes: u64,
) -> (RunSession, Arc<SinkStats>, u32) {
    let (graph, plan, stats) = importing_device_graph(
        "cam",
        kind,
        max_bytes,
        TopicOptions::DEFAULT.with_loans_per_publisher(2),
    )
    .expect("the graph compiles");
    let options = SessionOptions::default().on_device(Arc::clone(device));
    let (session, slots) = serve_in(test, graph, &plan, options, "topic:cam");
    (session, stats, slots)
}

#[test]
fn device_and_pinned_publishers_in_another_process_reach_the_session_behind_their_fences() {
    let (device, _turn) = device();
    let n = frames(&device);
    let cases = [
        (MemoryKind::CudaDevice, 256, "stream"),
        (MemoryKind::CudaDevice, 64 << 10, "stream"),
        (MemoryKind::CudaDevice, 4 << 20, "stream"),
        (MemoryKind::PinnedHost, 4096, "stream"),
        (MemoryKind::PinnedHost, 4096, "host"),
    ];
    for (kind, bytes, writer) in cases {
        let test = format!("publish_device_{}_{bytes}_{writer}", kind.wire_name());
        let (session, stats, slots) = device_importer(&test, &device, kind, bytes);
        let catalog = catalog_path(&test);
        let start = Instant::now();
        let mut peer = Peer::spawn(&[
            "publish-device",
            catalog.to_str().unwrap(),
            "cam",
            &n.to_string(),
            &bytes.to_string(),
            "20",
            writer,
        ]);
        peer.expect("attached");
        assert_eq!(peer.expect("ok"), n.to_string());
        peer.wait_success();
        eventually("every frame is received", || {
            stats.received.load(Ordering::Relaxed) == n || stats.wrong.lock().unwrap().is_some()
        });
        let elapsed = start.elapsed();
        assert_eq!(
            *stats.wrong.lock().unwrap(),
            None,
            "{kind} {bytes} B written on the {writer}: every frame's bytes are its own"
        );
        assert_eq!(stats.received.load(Ordering::Relaxed), n);
        assert_eq!(session.ipc_abandoned_frames("cam"), Some(0));
        eventually("every slot is back", || {
            session.pool_free_slots("topic:cam").unwrap() == slots
        });
        session.stop();
        session.join().expect("the session ends cleanly");
        #[allow(clippy::cast_precision_loss, reason = "a rate for a log line")]
        let rate = n as f64 / elapsed.as_secs_f64();
        println!(
            "ipc device publisher: {n} frames of {bytes} B in {kind} memory written on the {writer} in {elapsed:.2?} ({rate:.0} frames/s), every byte checked, 0 abandoned"
        );
    }
}

/// Waits on the host for each pinned frame's fence (`synchronize_for_host`), blocking its
/// partition meanwhile, and counts the frames whose fence was abandoned.
#[holo_runtime::operator]
struct HostWaitingSink {
    #[input(memory = pinned, dtype = u8, rank = 1)]
    frames: holo_runtime::Input<holo_runtime::Tensor>,
    stats: Arc<holo_tests::ipc_frames::SinkStats>,
}

impl holo_runtime::Operator for HostWaitingSink {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        while let Some(t) = self.frames.receive() {
            t.synchronize_for_host()?;
            if t.fence_abandoned() {
                self.stats.abandoned.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

/// A dead publisher's fences were abandoned only once every frame it committed had found
/// room in the importing input's queue: with the consumer blocked on the first frame's
/// fence (a host wait), the second filled the queue, the third waited for room for ever,
/// and so did the consumer.
#[test]
fn a_killed_publishers_fences_are_abandoned_while_its_frames_wait_for_room() {
    let (device, _turn) = device();
    let test = "publish_device_killed_full";
    let stats = Arc::new(SinkStats::default());
    let mut graph = holo_runtime::Graph::new();
    let sink = graph
        .add_operator_with_defaults(
            "sink",
            HostWaitingSink {
                frames: holo_runtime::Input::default(),
                stats: Arc::clone(&stats),
            },
        )
        .unwrap();
    graph.import_topic(
        sink.frames,
        "cam",
        TopicOptions::DEFAULT
            .with_depth(1)
            .with_loans_per_publisher(3)
            .with_max_bytes(4096)
            .across_processes(),
    );
    let mut options = holo_runtime::CompileOptions::default();
    options
        .deployment
        .bind_imported_topic_device("cam", holo_runtime::device::DeviceId::cuda(0));
    let plan = holo_runtime::compile(&graph, options).unwrap();
    let (session, slots) = serve_in(
        test,
        graph,
        &plan,
        SessionOptions::default().on_device(Arc::clone(&device)),
        "topic:cam",
    );
    let catalog = catalog_path(test);
    // Three frames, each behind 3 s of spinning on the publisher's stream.
    let mut peer = Peer::spawn(&[
        "publish-device",
        catalog.to_str().unwrap(),
        "cam",
        "3",
        "4096",
        "3000000",
        "stream",
        "die",
    ]);
    peer.expect("attached");
    peer.expect("published");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(stats.abandoned.load(Ordering::Relaxed), 0);
    let killed = Instant::now();
    peer.kill();
    eventually(
        "the dead publisher's three frames reach the sink, abandoned",
        || stats.abandoned.load(Ordering::Relaxed) == 3,
    );
    let since_kill = killed.elapsed();
    assert!(
        since_kill < Duration::from_secs(5),
        "the sink waited {since_kill:?} after SIGKILL"
    );
    assert_eq!(session.ipc_abandoned_frames("cam"), Some(3));
    eventually("every slot comes back", || {
        session.pool_free_slots("topic:cam").unwrap() == slots
    });
    session.stop();
    session.join().expect("the session ends cleanly");
}

#[test]
fn a_publisher_killed_before_its_fence_never_wedges_the_importing_session() {
    let (device, _turn) = device();
    let test = "publish_device_killed";
    let (session, stats, slots) = device_importer(test, &device, MemoryKind::CudaDevice, 4096);
    let catalog = catalog_path(test);
    // The publisher's stream spins 3 s before the fill and the fence: the commit reaches
    // the session long before its fence would.
    let mut peer = Peer::spawn(&[
        "publish-device",
        catalog.to_str().unwrap(),
        "cam",
        "1",
        "4096",
        "3000000",
        "stream",
        "die",
    ]);
    peer.expect("attached");
    peer.expect("published");
    // The session's stream waits for the fence meanwhile: nothing was received.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(session.ipc_abandoned_frames("cam"), Some(0));
    let killed = Instant::now();
    peer.kill();
    eventually("the dead publisher's fence is abandoned", || {
        session.ipc_abandoned_frames("cam") == Some(1)
    });
    eventually("the frame's slot comes back", || {
        session.pool_free_slots("topic:cam").unwrap() == slots
    });
    let since_kill = killed.elapsed();
    println!(
        "ipc device killed publisher: its fence abandoned and its slot back {since_kill:.2?} after SIGKILL"
    );
    assert!(
        since_kill < Duration::from_secs(5),
        "the session waited {since_kill:?} after SIGKILL for a dead publisher's fence"
    );
    // The sink's stream ran on past the abandoned fence: the frame reached it, and the
    // tensor says its fence was abandoned (its bytes were never written by the dead
    // publisher), so the sink did not take them for the frame's.
    eventually("the frame reaches the sink, marked abandoned", || {
        stats.abandoned.load(Ordering::Relaxed) == 1
    });
    assert_eq!(
        (
            stats.received.load(Ordering::Relaxed),
            stats.wrong.lock().unwrap().clone()
        ),
        (0, None),
        "the abandoned frame is neither taken nor checked as the frame's"
    );
    session.stop();
    let report = session.join().expect("the session ends cleanly");
    let cam = &report.ipc_imports[0];
    assert_eq!(
        (
            report.ipc_imports.len(),
            cam.topic.as_str(),
            cam.abandoned_frames
        ),
        (1, "cam", 1),
        "the run report keeps the count"
    );
}
