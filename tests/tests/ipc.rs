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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::ipc::{EndpointCatalog, ProcessSubscriber, ProcessSubscriberOptions};
use holo_runtime::{
    DType, ErrorCode, MemoryKind, RunSession, SessionOptions, TensorInputSpec, TopicOptions,
};
use holo_tests::ipc_frames::{check_frame, exporting_graph};

#[path = "common/ipc_peer.rs"]
mod ipc_peer;
use ipc_peer::{Peer, WAIT, catalog_path, eventually, namespace, serve_in};

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
    let (session, slots) = serve_in(test, graph, &plan, SessionOptions::default(), "camera.out");
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

/// A producing session (depth 2, `holds` per subscriber) and a subscriber process that
/// holds its first frame (`mode`: `hold`, or `hold-detached` after dropping its
/// subscriber); returns the session, the pool's slot count, the peer and the catalog.
fn holding(test: &str, holds: u32, mode: &str) -> (RunSession, u32, Peer, std::path::PathBuf) {
    let (session, go, _stats, slots) = exporter(
        test,
        u64::MAX,
        TopicOptions::DEFAULT
            .with_depth(2)
            .with_holds_per_subscriber(holds),
    );
    go.store(true, Ordering::Release);
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&[
        "subscribe",
        catalog.to_str().unwrap(),
        "cam",
        "1000000",
        mode,
    ]);
    assert_eq!(peer.expect("attached"), "0");
    peer.expect("holding");
    (session, slots, peer, catalog)
}

#[test]
fn a_killed_subscriber_returns_the_slots_it_held_and_not_before() {
    let (session, slots, mut peer, _) = holding("killed_sub", 2, "hold");
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
    let killed = Instant::now();
    peer.kill();
    // The process exited: its seat is free and everything it held is back in the pool
    // (the producer, its seat free, loans and releases one slot at a time).
    eventually("the killed subscriber's slots come back", || {
        session.pool_free_slots("camera.out").unwrap() == slots
            && session.topic_attachments("cam") == Some((0, 1))
    });
    println!(
        "ipc killed subscriber: its slots back {:.2?} after SIGKILL",
        killed.elapsed()
    );
    session.stop();
    session.join().expect("the session ends cleanly");
}

#[test]
fn a_detached_subscriber_keeps_what_it_holds_until_its_process_exits_while_its_seat_serves_another()
{
    let (session, slots, mut peer, catalog) = holding("detached_sub", 1, "hold-detached");
    // The subscriber closed its socket: its seat is free again, its queue was dropped...
    eventually("the seat is free", || {
        session.topic_attachments("cam") == Some((0, 1))
    });
    // ...and the slot its live process still reads stays out of the pool...
    for _ in 0..100 {
        assert!(
            session.pool_free_slots("camera.out").unwrap() < slots,
            "the slot a detached but live subscriber holds was recycled"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // ...also while a new subscriber takes the seat and receives in order.
    let mut next = Peer::spawn(&["subscribe", catalog.to_str().unwrap(), "cam", "300"]);
    assert_eq!(next.expect("attached"), "0");
    assert_eq!(next.expect("ok"), "300");
    next.wait_success();
    assert!(
        session.pool_free_slots("camera.out").unwrap() < slots,
        "the slot a detached but live subscriber holds was recycled"
    );
    peer.kill();
    eventually("the slot comes back once the process exited", || {
        session.pool_free_slots("camera.out").unwrap() == slots
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
    let killed = exporter.child.id();
    assert!(
        nodes_of(killed).0 >= 1,
        "the exporter's seat has a live iceoryx2 node"
    );
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
    // Nothing of the killed exporter's iceoryx2 node is left (its subscriber's ports and
    // the new exporter remove a dead process's node).
    assert_eq!(
        nodes_of(killed),
        (0, 0),
        "the killed exporter's iceoryx2 node is left"
    );
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

/// The iceoryx2 nodes of process `pid` listed now: (alive, dead).
fn nodes_of(pid: u32) -> (usize, usize) {
    use iceoryx2::node::NodeView;
    use iceoryx2::prelude::*;
    let of_pid = |d: &Option<iceoryx2::node::NodeDetails>| {
        d.as_ref()
            .is_some_and(|d| u32::try_from(d.process_id().value()).ok() == Some(pid))
    };
    let (mut alive, mut dead) = (0, 0);
    iceoryx2::node::Node::<ipc_threadsafe::Service>::list(Config::global_config(), |state| {
        match &state {
            NodeState::Alive(v) if of_pid(v.details()) => alive += 1,
            NodeState::Dead(v) if of_pid(v.details()) => dead += 1,
            _ => {}
        }
        CallbackProgression::Continue
    })
    .expect("iceoryx2 lists its nodes");
    (alive, dead)
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
    // A handshake step with no time at all (it failed as `PeerLost`).
    let e = attach(&catalog, "cam", d.with_handshake_timeout(Duration::ZERO));
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    assert!(e.message().contains("handshake_timeout of zero"), "{e}");
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

#[test]
fn join_and_detach_leave_no_descriptor_or_mapping_behind() {
    // In a process of its own: the other tests' sessions and pipes open descriptors too.
    let mut peer = Peer::spawn(&["leaks", &namespace("no_leaks")]);
    peer.expect("ok");
    peer.wait_success();
}

// ---- compile ------------------------------------------------------------------------

/// Compiles a graph whose `src` output (`memory = host` here) is exported as `options`.
fn compiled(
    options: TopicOptions,
) -> Result<holo_runtime::plan::ExecutionPlan, holo_runtime::Diagnostics> {
    let mut g = holo_runtime::Graph::new();
    let (op, _) = holo_tests::ipc_frames::IpcFrames::new(1, Arc::new(AtomicBool::new(true)));
    let s = g
        .add_operator("src", op, holo_runtime::ParamSet::defaults().unwrap())
        .unwrap();
    g.export_topic(s.out, "cam", options);
    holo_runtime::compile(&g, holo_runtime::CompileOptions::default())
}

fn only_code(d: &holo_runtime::Diagnostics) -> (holo_runtime::DiagnosticCode, String) {
    let all: Vec<_> = d.items.iter().collect();
    assert_eq!(all.len(), 1, "{d}");
    (all[0].code, all[0].message.clone())
}

#[test]
fn the_plan_records_a_topic_across_processes_and_its_pool_counts_the_holds() {
    let options = TopicOptions::DEFAULT
        .with_depth(3)
        .with_subscribers(2)
        .with_holds_per_subscriber(4)
        .across_processes();
    let plan = compiled(options).unwrap();
    let t = &plan.topics()[0];
    assert!(t.across_processes);
    assert_eq!(t.holds_per_subscriber, 4);
    let pool = plan
        .tensor_allocations()
        .iter()
        .find(|a| a.pool == "src.out")
        .unwrap();
    let held: u32 = pool
        .slot_terms
        .subscriber_terms
        .iter()
        .filter(|t| t.contributor == "subscriber_hold")
        .map(|t| t.entries)
        .sum();
    assert_eq!(held, 2 * 4, "two subscribers, four holds each");
    let in_process = compiled(TopicOptions::DEFAULT.with_depth(3).with_subscribers(2)).unwrap();
    let local = in_process
        .tensor_allocations()
        .iter()
        .find(|a| a.pool == "src.out")
        .unwrap();
    assert_eq!(
        pool.slot_count,
        local.slot_count + 2 * 3,
        "three more holds each"
    );
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    assert_eq!(json["topics"][0]["across_processes"], true);
    assert_eq!(json["topics"][0]["holds_per_subscriber"], 4);
    let text = plan.render_human();
    assert!(
        text.contains("across processes, 4 held per subscriber"),
        "{text}"
    );
    assert!(
        plan.dot().contains("export across processes"),
        "{}",
        plan.dot()
    );
    let catalog = plan.endpoint_catalog("lab");
    let entry = catalog.topic("cam").unwrap();
    assert_eq!(
        (
            entry.memory_kind.as_str(),
            entry.dtype.as_deref(),
            entry.depth
        ),
        ("host", Some("u8"), 3)
    );
    assert_eq!(
        EndpointCatalog::from_toml(&catalog.to_toml()).unwrap(),
        catalog,
        "the catalog round-trips through its file"
    );
    assert!(
        compiled(TopicOptions::DEFAULT)
            .unwrap()
            .endpoint_catalog("lab")
            .topics
            .is_empty(),
        "an in-process topic is not in the catalog"
    );
}

#[test]
fn what_cannot_cross_processes_is_refused_at_compile() {
    let (code, message) = only_code(
        &compiled(
            TopicOptions::DEFAULT
                .with_holds_per_subscriber(0)
                .across_processes(),
        )
        .unwrap_err(),
    );
    assert_eq!(code, holo_runtime::codes::TOPIC_CLIENT_COUNT);
    assert!(message.contains("0 holds per subscriber"), "{message}");
    // A host import across processes is planned (a publisher in another process writes
    // it: tests/tests/ipc_publish.rs); so is a pinned one (on the H200:
    // tests/tests/ipc_device.rs); a managed one is refused.
    let mut g = holo_runtime::Graph::new();
    let s = g
        .add_operator(
            "sink",
            Sink {
                frames: holo_runtime::Input::default(),
            },
            holo_runtime::ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.import_topic(
        s.frames,
        "cmds",
        TopicOptions::DEFAULT
            .with_max_bytes(8)
            .with_loans_per_publisher(3)
            .across_processes(),
    );
    let plan = holo_runtime::compile(&g, holo_runtime::CompileOptions::default())
        .expect("a host import crosses");
    let t = &plan.topics()[0];
    assert!(t.across_processes);
    assert_eq!((t.publishers, t.loans_per_publisher), (1, 3));
    for (kind, refused) in [
        ("pinned", None),
        (
            "managed",
            Some(holo_runtime::codes::TOPIC_MEMORY_NOT_SHAREABLE),
        ),
    ] {
        let mut graph = holo_runtime::Graph::new();
        let params = holo_runtime::ParamSet::defaults().unwrap();
        let frames = if kind == "pinned" {
            graph
                .add_operator(
                    "sink",
                    PinnedSink {
                        frames: holo_runtime::Input::default(),
                    },
                    params,
                )
                .unwrap()
                .frames
        } else {
            graph
                .add_operator(
                    "sink",
                    ManagedSink {
                        frames: holo_runtime::Input::default(),
                    },
                    params,
                )
                .unwrap()
                .frames
        };
        graph.import_topic(
            frames,
            "cmds",
            TopicOptions::DEFAULT.with_max_bytes(8).across_processes(),
        );
        let mut options = holo_runtime::CompileOptions::default();
        options
            .deployment
            .bind_imported_topic_device("cmds", holo_runtime::device::DeviceId::cuda(0));
        match (holo_runtime::compile(&graph, options), refused) {
            (Ok(plan), None) => {
                let t = &plan.topics()[0];
                assert!(t.across_processes);
                assert_eq!(
                    t.contract.memory_kind,
                    Some(holo_runtime::MemoryKind::PinnedHost)
                );
            }
            (Err(d), Some(code)) => {
                let found: Vec<_> = d.with_code(code).collect();
                assert_eq!(found.len(), 1, "{d}");
                assert!(
                    found[0]
                        .message
                        .contains("imported across processes in cuda_managed memory"),
                    "{}",
                    found[0].message
                );
            }
            (r, _) => panic!("{kind}: {:?}", r.map(|_| ())),
        }
    }
}

/// Receives managed frames (an importer).
#[holo_runtime::operator]
struct ManagedSink {
    #[input(memory = cuda_managed, dtype = u8, rank = 1)]
    frames: holo_runtime::Input<holo_runtime::Tensor>,
}

impl holo_runtime::Operator for ManagedSink {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        Ok(())
    }
}

/// Receives pinned frames (an importer).
#[holo_runtime::operator]
struct PinnedSink {
    #[input(memory = pinned, dtype = u8, rank = 1)]
    frames: holo_runtime::Input<holo_runtime::Tensor>,
}

impl holo_runtime::Operator for PinnedSink {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        Ok(())
    }
}

/// Receives host frames (an importer).
#[holo_runtime::operator]
struct Sink {
    #[input(memory = host, dtype = u8, rank = 1)]
    frames: holo_runtime::Input<holo_runtime::Tensor>,
}

impl holo_runtime::Operator for Sink {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        Ok(())
    }
}

/// A source of one memory kind.
macro_rules! kind_source {
    ($name:ident, $kind:ident) => {
        #[holo_runtime::operator]
        struct $name {
            #[output(storage = runtime_pool, memory = $kind, dtype = u8, rank = 1, bounds = 64)]
            out: holo_runtime::Output<holo_runtime::Tensor>,
        }

        impl holo_runtime::Operator for $name {
            fn compute(
                &mut self,
                _ctx: &mut holo_runtime::ExecutionContext<'_>,
            ) -> holo_runtime::Result<()> {
                Ok(())
            }
        }
    };
}

kind_source!(Managed, cuda_managed);
kind_source!(Pinned, pinned);
kind_source!(Device, device);
kind_source!(CudaDevice, cuda_device);

#[test]
fn a_memory_kind_that_cannot_cross_is_refused_with_its_code() {
    let cases: [(&str, holo_runtime::DiagnosticCode); 2] = [
        ("managed", holo_runtime::codes::TOPIC_MEMORY_NOT_SHAREABLE),
        (
            "device",
            holo_runtime::codes::TOPIC_ACROSS_PROCESSES_UNSUPPORTED,
        ),
    ];
    for (kind, code) in cases {
        let mut g = holo_runtime::Graph::new();
        let p = holo_runtime::ParamSet::defaults().unwrap();
        let out = match kind {
            "managed" => {
                g.add_operator(
                    "src",
                    Managed {
                        out: holo_runtime::Output::default(),
                    },
                    p,
                )
                .unwrap()
                .out
            }
            _ => {
                g.add_operator(
                    "src",
                    Device {
                        out: holo_runtime::Output::default(),
                    },
                    p,
                )
                .unwrap()
                .out
            }
        };
        g.export_topic(out, "cam", TopicOptions::DEFAULT.across_processes());
        let mut options = holo_runtime::CompileOptions::default();
        // `memory = device` on an OpenCL device is OpenCL memory, which does not cross.
        let device = if kind == "device" {
            holo_runtime::device::DeviceId::opencl(0)
        } else {
            holo_runtime::device::DeviceId::cuda(0)
        };
        options
            .deployment
            .bind_tensor_output_device("src", "out", device);
        let d = holo_runtime::compile(&g, options).unwrap_err();
        let found: Vec<_> = d.with_code(code).collect();
        assert_eq!(found.len(), 1, "{kind}: {d}");
        assert_eq!(found[0].operator.as_deref(), Some("src"));
    }
    // CUDA device and pinned memory cross (docs/IPC.md): the plan records the topic.
    for kind in [MemoryKind::CudaDevice, MemoryKind::PinnedHost] {
        let mut g = holo_runtime::Graph::new();
        let p = holo_runtime::ParamSet::defaults().unwrap();
        let out = if kind == MemoryKind::CudaDevice {
            let o = CudaDevice {
                out: holo_runtime::Output::default(),
            };
            g.add_operator("src", o, p).unwrap().out
        } else {
            let o = Pinned {
                out: holo_runtime::Output::default(),
            };
            g.add_operator("src", o, p).unwrap().out
        };
        g.export_topic(out, "cam", TopicOptions::DEFAULT.across_processes());
        let mut options = holo_runtime::CompileOptions::default();
        options.deployment.bind_tensor_output_device(
            "src",
            "out",
            holo_runtime::device::DeviceId::cuda(0),
        );
        let plan = holo_runtime::compile(&g, options).expect("the memory kind crosses");
        let t = &plan.topics()[0];
        assert!(t.across_processes);
        assert_eq!(t.contract.memory_kind, Some(kind));
    }
}

/// One frame (`fill_frame(0)`), emitted in the source's one activation once `go` is set.
#[holo_runtime::operator]
struct OneFrame {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 4096)]
    out: holo_runtime::Output<holo_runtime::Tensor>,
    go: Arc<AtomicBool>,
}

impl holo_runtime::Operator for OneFrame {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        while !self.go.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let loan = self.out.allocate_tensor(holo_runtime::TensorLoanRequest {
            shape: &[4096],
            dtype: DType::U8,
        })?;
        let t = loan.write_host_and_commit(|b| holo_tests::ipc_frames::fill_frame(0, b))?;
        self.out
            .emit(t, holo_runtime::EmitOptions::default().with_frame(0))
    }
}

#[test]
fn wait_idle_counts_what_a_subscriber_in_another_process_still_holds() {
    let test = "idle_remote_hold";
    let go = Arc::new(AtomicBool::new(false));
    let mut g = holo_runtime::Graph::new();
    let s = g
        .add_operator_with_defaults(
            "camera",
            OneFrame {
                out: holo_runtime::Output::default(),
                go: Arc::clone(&go),
            },
        )
        .unwrap();
    g.export_topic(s.out, "cam", TopicOptions::DEFAULT.across_processes());
    let plan = holo_runtime::compile(&g, holo_runtime::CompileOptions::default()).unwrap();
    let options = SessionOptions::default().with_max_source_activations(Some(1));
    let (session, slots) = serve_in(test, g, &plan, options, "camera.out");
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&["subscribe", catalog.to_str().unwrap(), "cam", "1", "hold"]);
    assert_eq!(peer.expect("attached"), "0");
    go.store(true, Ordering::Release);
    peer.expect("holding");
    // The source is done and no queue holds anything, but the subscriber holds the frame.
    assert!(
        !session.wait_idle(Duration::from_millis(200)),
        "idle while a subscriber in another process holds a frame"
    );
    assert!(session.pool_free_slots("camera.out").unwrap() < slots);
    peer.kill();
    assert!(
        session.wait_idle(WAIT),
        "idle once the subscriber's process exited"
    );
    assert_eq!(session.pool_free_slots("camera.out").unwrap(), slots);
    session.stop();
    session.join().expect("the session ends cleanly");
}

/// Once `go` is set: emits a pass-through tensor (`Tensor::from_host_vec`) through its
/// output, which has a pool of its own, then a frame of that pool; records both emits'
/// results.
#[holo_runtime::operator]
struct Smuggler {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 64)]
    out: holo_runtime::Output<holo_runtime::Tensor>,
    go: Arc<AtomicBool>,
    results: Arc<std::sync::Mutex<Vec<Option<ErrorCode>>>>,
}

impl holo_runtime::Operator for Smuggler {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        if !self.go.load(Ordering::Acquire) || !self.results.lock().unwrap().is_empty() {
            return Ok(());
        }
        let foreign = holo_runtime::Tensor::from_host_vec(&[64], DType::U8, vec![0xEE; 64])?;
        let smuggled = self
            .out
            .emit(foreign, holo_runtime::EmitOptions::default())
            .err()
            .map(|e| e.code());
        let loan = self.out.allocate_tensor(holo_runtime::TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        })?;
        let own = loan.write_host_and_commit(|b| b.fill(0x11))?;
        let sent = self
            .out
            .emit(own, holo_runtime::EmitOptions::default())
            .err()
            .map(|e| e.code());
        self.results.lock().unwrap().extend([smuggled, sent]);
        Ok(())
    }
}

/// An output with a pool of its own crosses processes through that pool: the other
/// process maps it and a descriptor names one of its slots. A tensor of another pool was
/// described as the served pool's slot of the same index (a host subscriber read another
/// frame's bytes; a device one could index past the pool). It is refused at the emit
/// now, with nothing published; a tensor of the pool still crosses. And an output with a
/// pool of its own that forwards received tensors cannot be exported across processes.
#[test]
fn a_tensor_outside_the_served_pool_is_refused_at_the_emit() {
    let test = "outside_served_pool";
    let go = Arc::new(AtomicBool::new(false));
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut g = holo_runtime::Graph::new();
    let s = g
        .add_operator_with_defaults(
            "camera",
            Smuggler {
                out: holo_runtime::Output::default(),
                go: Arc::clone(&go),
                results: Arc::clone(&results),
            },
        )
        .unwrap();
    g.export_topic(s.out, "cam", TopicOptions::DEFAULT.across_processes());
    let plan = holo_runtime::compile(&g, holo_runtime::CompileOptions::default()).unwrap();
    let (session, _) = serve_in(test, g, &plan, SessionOptions::default(), "camera.out");
    let mut sub = ProcessSubscriber::attach(
        &session.endpoint_catalog(),
        "cam",
        ProcessSubscriberOptions::DEFAULT,
    )
    .expect("the subscriber attaches");
    eventually("the seat is attached", || {
        session.topic_attachments("cam") == Some((1, 1))
    });
    go.store(true, Ordering::Release);
    let frame = sub
        .receive(WAIT)
        .unwrap()
        .expect("the pool's frame crosses");
    assert!(frame.data().unwrap().iter().all(|&b| b == 0x11));
    // The operator notes its second emit's result after the frame may have arrived.
    eventually("both emits are noted", || {
        results.lock().unwrap().len() == 2
    });
    let noted = results.lock().unwrap().clone();
    assert_eq!(noted, vec![Some(ErrorCode::ProtocolError), None]);
    assert!(
        sub.receive(Duration::from_millis(100)).unwrap().is_none(),
        "one frame crossed"
    );
    drop(frame);
    drop(sub);
    session.stop();
    session.join().expect("the session ends cleanly");

    // Forwarding from a pool of its own, across processes: refused at compile.
    let mut g = holo_runtime::Graph::new();
    let (op, _) = holo_tests::ipc_frames::IpcFrames::new(1, Arc::new(AtomicBool::new(true)));
    let s = g.add_operator_with_defaults("src", op).unwrap();
    let f = g
        .add_operator_with_defaults(
            "fwd",
            OwnPoolForward {
                input: holo_runtime::Input::default(),
                out: holo_runtime::Output::default(),
            },
        )
        .unwrap();
    g.add_flow(s.out, f.input, holo_runtime::ConnectionOptions::default());
    g.export_topic(f.out, "cam", TopicOptions::DEFAULT.across_processes());
    let d = holo_runtime::compile(&g, holo_runtime::CompileOptions::default()).unwrap_err();
    let (code, message) = only_code(&d);
    assert_eq!(
        code,
        holo_runtime::codes::TOPIC_ACROSS_PROCESSES_UNSUPPORTED
    );
    assert!(
        message.contains("with a pool of its own that forwards input \"input\""),
        "{message}"
    );
}

/// An output with a pool of its own that also forwards what it receives.
#[holo_runtime::operator]
struct OwnPoolForward {
    #[input(memory = host, dtype = u8, rank = 1)]
    input: holo_runtime::Input<holo_runtime::Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 64, forwards = input)]
    out: holo_runtime::Output<holo_runtime::Tensor>,
}

impl holo_runtime::Operator for OwnPoolForward {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        while let Some(t) = self.input.receive() {
            let _ = self.out.emit(t, holo_runtime::EmitOptions::default());
        }
        Ok(())
    }
}

/// A client that connects and then trickles its hello a byte at a time held the session's
/// `join` for as long as it kept trickling: the server read the hello with the socket's
/// 2 s timeout, restarted by every byte, and `join` waits for every connection thread.
/// Now the handshake waits in 20 ms slices and gives up when the session stops.
#[test]
fn a_client_trickling_its_hello_does_not_hold_the_sessions_join() {
    let test = "trickling_client";
    let (session, _go, _stats, _slots) = exporter(test, 0, TopicOptions::DEFAULT);
    // The topic's socket: the abstract address `holo/<namespace>/<topic>`.
    let sock = rustix::net::socket(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::STREAM,
        None,
    )
    .unwrap();
    let address = rustix::net::SocketAddrUnix::new_abstract_name(
        format!("holo/{}/cam", namespace(test)).as_bytes(),
    )
    .unwrap();
    rustix::net::connect(&sock, &address).unwrap();
    let trickle = std::thread::spawn(move || {
        // A byte every 200 ms, for at most 20 s, until the server hangs up.
        for _ in 0..100 {
            if rustix::io::write(&sock, &[0u8]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    session.stop();
    session.join().expect("the session ends cleanly");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "join waited {took:?} for a client still trickling its hello"
    );
    trickle.join().unwrap();
}
