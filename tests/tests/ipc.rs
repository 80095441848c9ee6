//! Topics across processes (issue 15; docs/IPC.md): a session exports a host topic across
//! processes, a `ProcessSubscriber` in another process (the `ipc_peer` binary) receives it
//! through iceoryx2 descriptors over the session's shared pool.
//!
//! Provoked here: every frame arrives in order with its bytes; an importer killed with
//! `SIGKILL` while it holds a slot gives the slot back (and not before it died); an
//! importer that detaches while holding a tensor keeps that slot out of the pool until it
//! exits; an exporter killed mid-stream ends its subscriber with `PeerLost` (after what was
//! sent, whose bytes stay readable) and never wedges it; a restarted exporter is a new
//! incarnation; every attach error has its code and leaves nothing attached; `join` and
//! the subscriber's drop leave no descriptor (iceoryx2's nodes and ports hold theirs) or
//! mapping behind.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::ipc::{EndpointCatalog, ProcessSubscriber, ProcessSubscriberOptions};
use holo_runtime::{
    DType, ErrorCode, MemoryKind, RunSession, SessionOptions, TensorInputSpec, TopicOptions,
};
use holo_tests::ipc_frames::{check_frame, exporting_graph};

const PEER: &str = env!("CARGO_BIN_EXE_ipc_peer");
const WAIT: Duration = Duration::from_secs(20);

/// A namespace of this test alone (tests run in parallel, and so may two test runs).
fn namespace(test: &str) -> String {
    format!("t{}-{test}", std::process::id())
}

/// A catalog path of this test alone.
fn catalog_path(test: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("holo-ipc-{}.toml", namespace(test)))
}

/// A peer process and its stdout's lines.
struct Peer {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Peer {
    fn spawn(args: &[&str]) -> Peer {
        let mut child = Command::new(PEER)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the ipc_peer binary starts");
        let out = BufReader::new(child.stdout.take().expect("piped"));
        Peer { child, out }
    }

    /// The peer's next line, which must start with `prefix`; returns the rest.
    fn expect(&mut self, prefix: &str) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("the peer's stdout");
        let line = line.trim_end();
        assert!(
            line.starts_with(prefix),
            "the peer said {line:?} where {prefix:?} was expected"
        );
        line[prefix.len()..].trim().to_owned()
    }

    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the peer");
        self.child.wait().expect("reap the peer");
    }

    fn wait_success(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("the peer's status") {
                assert!(status.success(), "the peer exited with {status}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the peer did not finish in {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `f` holds, for up to `WAIT`.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// An exporting session of `limit` frames gated by the returned flag, its catalog written.
fn exporter(
    test: &str,
    limit: u64,
    options: TopicOptions,
) -> (
    RunSession,
    Arc<AtomicBool>,
    Arc<holo_tests::ipc_frames::IpcStats>,
    u32,
) {
    let go = Arc::new(AtomicBool::new(false));
    let (graph, plan, stats) =
        exporting_graph("cam", limit, Arc::clone(&go), options).expect("the graph compiles");
    let slots = plan
        .tensor_allocations()
        .iter()
        .find(|a| a.pool == "camera.out")
        .expect("the exported output's pool")
        .slot_count;
    let session = RunSession::start(
        graph,
        &plan,
        SessionOptions::default().with_ipc_namespace(namespace(test)),
    )
    .expect("the session starts");
    session
        .endpoint_catalog()
        .write(catalog_path(test))
        .expect("the catalog is written");
    (session, go, stats, slots)
}

#[test]
fn every_frame_reaches_a_subscriber_in_another_process_in_order() {
    const N: u64 = 3000;
    let test = "every_frame";
    let (session, go, stats, _) = exporter(
        test,
        N,
        TopicOptions::DEFAULT
            .with_depth(4)
            .with_holds_per_subscriber(2),
    );
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&[
        "subscribe",
        catalog.to_str().unwrap(),
        "cam",
        &N.to_string(),
    ]);
    assert_eq!(peer.expect("attached"), "0");
    eventually("the seat is attached", || {
        session.topic_attachments("cam") == Some((1, 1))
    });
    go.store(true, Ordering::Release);
    assert_eq!(peer.expect("ok"), N.to_string());
    peer.wait_success();
    assert_eq!(stats.emitted.load(Ordering::Relaxed), N);
    session.stop();
    let report = session.join().expect("the session ends cleanly");
    assert_eq!(report.drops, 0, "a Block topic drops nothing");
}

#[test]
fn a_killed_subscriber_returns_the_slots_it_held_and_not_before() {
    let test = "killed_sub";
    let (session, go, _stats, slots) = exporter(
        test,
        u64::MAX,
        TopicOptions::DEFAULT
            .with_depth(2)
            .with_holds_per_subscriber(2),
    );
    go.store(true, Ordering::Release);
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&[
        "subscribe",
        catalog.to_str().unwrap(),
        "cam",
        "1000000",
        "hold",
    ]);
    assert_eq!(peer.expect("attached"), "0");
    peer.expect("holding");
    // The subscriber holds one tensor and its second descriptor waits in its buffer (two
    // holds), its queue is full (depth 2): at most the producer's own loan is free.
    eventually("the seat fills", || {
        session.pool_free_slots("camera.out").unwrap() <= slots - 4
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        session.pool_free_slots("camera.out").unwrap() <= slots - 4,
        "a slot the live subscriber holds was recycled"
    );
    peer.kill();
    // The process exited: its seat is free and everything it held is back in the pool
    // (the producer, its seat free, loans and releases one slot at a time).
    eventually("the killed subscriber's slots come back", || {
        session.pool_free_slots("camera.out").unwrap() >= slots - 1
            && session.topic_attachments("cam") == Some((0, 1))
    });
    session.stop();
    session.join().expect("the session ends cleanly");
}

#[test]
fn a_detached_subscriber_keeps_what_it_holds_until_its_process_exits() {
    let test = "detached_sub";
    let (session, go, _stats, slots) = exporter(
        test,
        u64::MAX,
        TopicOptions::DEFAULT
            .with_depth(2)
            .with_holds_per_subscriber(1),
    );
    go.store(true, Ordering::Release);
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&[
        "subscribe",
        catalog.to_str().unwrap(),
        "cam",
        "1000000",
        "hold-detached",
    ]);
    assert_eq!(peer.expect("attached"), "0");
    peer.expect("holding");
    // The subscriber closed its socket: its seat is free again, its queue was dropped...
    eventually("the seat is free", || {
        session.topic_attachments("cam") == Some((0, 1))
    });
    // ...and the slot its live process still reads stays out of the pool.
    for _ in 0..100 {
        assert!(
            session.pool_free_slots("camera.out").unwrap() < slots,
            "the slot a detached but live subscriber holds was recycled"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    peer.kill();
    eventually("the slot comes back once the process exited", || {
        session.pool_free_slots("camera.out").unwrap() >= slots - 1
    });
    session.stop();
    session.join().expect("the session ends cleanly");
}

#[test]
fn a_killed_exporter_ends_its_subscriber_with_peer_lost_and_a_new_one_is_a_new_incarnation() {
    let test = "killed_exporter";
    let catalog = catalog_path(test);
    let ns = namespace(test);
    let mut exporter = Peer::spawn(&["export", catalog.to_str().unwrap(), &ns, "cam"]);
    exporter.expect("serving");
    let cat = EndpointCatalog::read(&catalog).expect("the catalog the exporter wrote");
    let mut sub = ProcessSubscriber::attach(&cat, "cam", ProcessSubscriberOptions::DEFAULT)
        .expect("the subscriber attaches");
    let first = sub.incarnation();
    let (held, info) = sub
        .receive_with_info(WAIT)
        .expect("a frame")
        .expect("within the wait");
    check_frame(info.frame, held.data().unwrap()).unwrap();
    exporter.kill();
    // Everything sent is received, then `PeerLost`, well within the wait (no wedge).
    let start = Instant::now();
    let err = loop {
        match sub.receive(WAIT) {
            Ok(Some(t)) => {
                let i = sub.last_info();
                check_frame(i.frame, t.data().unwrap()).unwrap();
            }
            Ok(None) => panic!("a dead exporter left its subscriber waiting out the wait"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.code(), ErrorCode::PeerLost, "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(
        sub.receive(Duration::ZERO).unwrap_err().code(),
        ErrorCode::PeerLost
    );
    // The tensor held across the exporter's death is still its frame.
    check_frame(info.frame, held.data().unwrap()).unwrap();
    drop((held, sub));

    let mut again = Peer::spawn(&["export", catalog.to_str().unwrap(), &ns, "cam"]);
    again.expect("serving");
    let cat = EndpointCatalog::read(&catalog).unwrap();
    let mut sub = ProcessSubscriber::attach(&cat, "cam", ProcessSubscriberOptions::DEFAULT)
        .expect("the subscriber attaches to the restarted exporter");
    assert_ne!(
        sub.incarnation(),
        first,
        "a restarted exporter is a new incarnation"
    );
    let (t, info) = sub.receive_with_info(WAIT).unwrap().unwrap();
    check_frame(info.frame, t.data().unwrap()).unwrap();
}

#[test]
fn attach_errors_have_their_codes_and_attach_nothing() {
    let test = "attach_errors";
    let (session, _go, _stats, _) = exporter(test, 0, TopicOptions::DEFAULT.with_depth(2));
    let catalog = session.endpoint_catalog();
    let attach = |c: &EndpointCatalog, topic: &str, o: ProcessSubscriberOptions| {
        ProcessSubscriber::attach(c, topic, o)
            .map(|_| ())
            .unwrap_err()
    };
    let d = ProcessSubscriberOptions::DEFAULT;
    // A topic the catalog lacks.
    assert_eq!(attach(&catalog, "nope", d).code(), ErrorCode::NotFound);
    // A namespace no session serves: at once, or after the wait.
    let mut elsewhere = catalog.clone();
    elsewhere.namespace = format!("{}-nobody", catalog.namespace);
    assert_eq!(attach(&elsewhere, "cam", d).code(), ErrorCode::NotFound);
    let start = Instant::now();
    let waited = attach(
        &elsewhere,
        "cam",
        d.with_wait_for_exporter(Duration::from_millis(200)),
    );
    assert_eq!(waited.code(), ErrorCode::NotFound);
    assert!(start.elapsed() >= Duration::from_millis(200));
    // A catalog that says another contract than the running exporter's.
    let mut edited = catalog.clone();
    edited.topics[0].depth = 3;
    let e = attach(&edited, "cam", d);
    assert_eq!(e.code(), ErrorCode::ProtocolError, "{e}");
    // A client contract the catalog does not meet.
    let e = attach(
        &catalog,
        "cam",
        d.with_expected(TensorInputSpec {
            dtype: Some(DType::F32),
            ..TensorInputSpec::default()
        }),
    );
    assert_eq!(e.code(), ErrorCode::ProtocolError, "{e}");
    assert_eq!(
        session.topic_attachments("cam"),
        Some((0, 1)),
        "nothing attached"
    );
    // One declared subscriber: the second is refused while the first holds the seat.
    let first = ProcessSubscriber::attach(
        &catalog,
        "cam",
        d.with_expected(TensorInputSpec {
            memory_kind: Some(MemoryKind::Host),
            dtype: Some(DType::U8),
            rank: Some(1),
        }),
    )
    .expect("the first subscriber attaches");
    let e = attach(&catalog, "cam", d);
    assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{e}");
    drop(first);
    eventually("the seat is free again", || {
        session.topic_attachments("cam") == Some((0, 1))
    });
    ProcessSubscriber::attach(&catalog, "cam", d).expect("the freed seat is taken again");
    // A second session serving the topic in the namespace is refused at start.
    let (graph, plan, _) = exporting_graph(
        "cam",
        0,
        Arc::new(AtomicBool::new(false)),
        TopicOptions::DEFAULT.with_depth(2),
    )
    .unwrap();
    let e = RunSession::start(
        graph,
        &plan,
        SessionOptions::default().with_ipc_namespace(namespace(test)),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    session.join().unwrap();
}

/// Open descriptors and holo's shared mappings of this process.
fn resources() -> (usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    (
        fds,
        maps.lines().filter(|l| l.contains("memfd:holo")).count(),
    )
}

#[test]
fn join_and_detach_leave_no_descriptor_or_mapping_behind() {
    let test = "no_leaks";
    // Warm up what a process keeps once (iceoryx2's config, the foreign-pool recycler).
    for round in 0..2 {
        let before = resources();
        let (session, go, _stats, _) = exporter(
            &format!("{test}{round}"),
            50,
            TopicOptions::DEFAULT.with_depth(2),
        );
        let catalog = session.endpoint_catalog();
        let mut sub =
            ProcessSubscriber::attach(&catalog, "cam", ProcessSubscriberOptions::DEFAULT).unwrap();
        go.store(true, Ordering::Release);
        for _ in 0..50 {
            let t = sub.receive(WAIT).unwrap().unwrap();
            check_frame(sub.last_info().frame, t.data().unwrap()).unwrap();
        }
        drop(sub);
        session.join().unwrap();
        if round == 1 {
            assert_eq!(resources(), before, "(descriptors, memfd:holo mappings)");
        }
    }
}
