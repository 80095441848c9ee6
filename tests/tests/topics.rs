//! Topics and standalone clients in one process (issue 13, item 5): a graph exports an
//! output or imports an input under a topic name, the plan records each topic's contract
//! and sizes its pools, and a `ChannelSubscriber` / `ChannelPublisher` outside the graph
//! attaches by name.
//!
//! Each rule is provoked: every compile diagnostic of a topic and every attach error with
//! its exact code (and a refused attach leaves the topic as it was); frames reach a
//! subscriber in order with their frame ids; a slow subscriber drops its oldest or holds
//! the producer back as its policy says; a free seat holds no slot and blocks nothing; a
//! dropped subscriber returns its slots; a publisher's loans come from the topic's pool
//! and run out with `ResourceExhausted`; on every device backend, a subscriber's stream is
//! ordered after the producer's writes and a slot is never reused before the subscriber's
//! stream has read it (a delayed read and a producer that would overwrite the slot), and a
//! publisher's stream writes reach the importer's stream.
#![allow(
    clippy::many_single_char_names,
    reason = "test fixtures: short names for graph handles"
)]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test fixtures: frame numbers become the frames' bytes, counts stay small"
)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Counter;
use holo_runtime::__test_support::test_backends;
use holo_runtime::device::{AllocKind, BackendKind, DeviceBackend, DeviceId};
use holo_runtime::plan::TopicDirection;
use holo_runtime::{
    ChannelPublisher, ChannelSubscriber, CompileOptions, ConnectionOptions, DType, Diagnostics,
    EmitOptions, ErrorCode, ExecutionContext, Graph, Input, MAX_TOPIC_CLIENTS, MemoryKind,
    Operator, Output, ParamSet, PublisherOptions, QueuePolicy, Result, RunSession, SessionOptions,
    SubscriberOptions, Tensor, TensorInputSpec, TensorLoanRequest, TopicOptions, codes, compile,
    operator,
};

const WAIT: Duration = Duration::from_secs(10);

/// What a `Record` sink received: (frame id, first byte) of each frame.
type Got = Arc<Mutex<Vec<(u64, u8)>>>;

/// Emits frame k (8 bytes, each `k % 256`) per activation, up to `limit` frames.
#[operator]
struct Frames {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 8)]
    out: Output<Tensor>,
    k: u64,
    limit: u64,
    /// Emits only while set (a test attaches its subscriber first).
    go: Arc<AtomicBool>,
    stats: Arc<Stats>,
}

#[derive(Debug, Default)]
struct Stats {
    emitted: AtomicU64,
    exhausted: AtomicU64,
    backpressured: AtomicU64,
}

fn frames(limit: u64) -> (Frames, Arc<Stats>) {
    let stats = Arc::new(Stats::default());
    (
        Frames {
            out: Output::default(),
            k: 0,
            limit,
            go: Arc::new(AtomicBool::new(true)),
            stats: Arc::clone(&stats),
        },
        stats,
    )
}

impl Operator for Frames {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if self.k >= self.limit || !self.go.load(Ordering::Acquire) {
            std::thread::yield_now();
            return Ok(());
        }
        let loan = match self.out.allocate_tensor(TensorLoanRequest {
            shape: &[8],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        #[allow(clippy::cast_possible_truncation, reason = "the frame's byte")]
        let fill = self.k as u8;
        let t = loan.write_host_and_commit(|b| b.fill(fill))?;
        match self.out.emit(t, EmitOptions::default().with_frame(self.k)) {
            Ok(()) => {
                self.k += 1;
                self.stats.emitted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) if e.code() == ErrorCode::Backpressured => {
                self.stats.backpressured.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// Receives host frames and records (frame id, first byte).
#[operator]
struct Record {
    #[input(memory = host, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    got: Got,
}

impl Record {
    fn new() -> (Self, Got) {
        let got = Arc::new(Mutex::new(Vec::new()));
        (
            Self {
                frames: Input::default(),
                got: Arc::clone(&got),
            },
            got,
        )
    }
}

impl Operator for Record {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some((t, info)) = self.frames.receive_with_info() {
            self.got.lock().unwrap().push((info.frame, t.data()?[0]));
        }
        Ok(())
    }
}

/// An imported input with no declared memory kind.
#[operator]
struct Untyped {
    frames: Input<Tensor>,
}

impl Operator for Untyped {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

/// An imported window input (its window needs at least 3 entries).
#[operator]
struct Windowed {
    #[input(memory = host, window = 3)]
    frames: Input<Tensor>,
}

impl Operator for Windowed {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

/// An imported CUDA input.
#[operator]
struct CudaIn {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
}

impl Operator for CudaIn {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

/// An imported CUDA input forwarded on.
#[operator]
struct CudaRelay {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    #[output(forwards = frames)]
    out: Output<Tensor>,
}

impl Operator for CudaRelay {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            self.out.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// A message sink.
#[operator]
struct Numbers {
    input: Input<u64>,
    got: Arc<Mutex<Vec<u64>>>,
}

impl Operator for Numbers {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            self.got.lock().unwrap().push(v);
        }
        Ok(())
    }
}

fn defaults<S: holo_runtime::ParamSchema>() -> ParamSet<S> {
    ParamSet::defaults().unwrap()
}

/// `frames` exported as "cam" with `options`, nothing else.
fn exported(limit: u64, options: TopicOptions) -> (Graph, Arc<Stats>) {
    let mut g = Graph::new();
    let (src, stats) = frames(limit);
    let s = g.add_operator("src", src, defaults()).unwrap();
    g.export_topic(s.out, "cam", options);
    (g, stats)
}

/// A `Record` sink importing "cmds" with `options`.
fn imported(options: TopicOptions) -> (Graph, Got) {
    let mut g = Graph::new();
    let (sink, got) = Record::new();
    let r = g.add_operator("sink", sink, defaults()).unwrap();
    g.import_topic(r.frames, "cmds", options);
    (g, got)
}

fn rejected(g: &Graph, options: CompileOptions) -> Diagnostics {
    compile(g, options).expect_err("the graph must be rejected")
}

fn only(d: &Diagnostics, code: holo_runtime::DiagnosticCode) -> holo_runtime::Diagnostic {
    let found: Vec<_> = d.with_code(code).cloned().collect();
    assert_eq!(found.len(), 1, "{d}");
    found.into_iter().next().unwrap()
}

// ---- the plan ----------------------------------------------------------------------

#[test]
fn the_plan_records_each_topics_contract_and_sizes_its_pools_term_by_term() {
    let mut g = Graph::new();
    let (src, _) = frames(1);
    let (sink, _) = Record::new();
    let (cmd_sink, _) = Record::new();
    let s = g.add_operator("src", src, defaults()).unwrap();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    let c = g.add_operator("cmd", cmd_sink, defaults()).unwrap();
    g.add_flow(
        s.out,
        k.frames,
        ConnectionOptions::default().with_queue_depth(2),
    );
    g.export_topic(
        s.out,
        "cam",
        TopicOptions::DEFAULT
            .with_subscribers(2)
            .with_depth(3)
            .with_policy(QueuePolicy::DropOldest),
    );
    g.import_topic(
        c.frames,
        "cmds",
        TopicOptions::DEFAULT
            .with_publishers(2)
            .with_depth(4)
            .with_max_bytes(64)
            .with_loans_per_publisher(2),
    );
    let plan = compile(&g, CompileOptions::default()).unwrap();

    let cam = plan.topic("cam").unwrap();
    assert_eq!(cam.direction, TopicDirection::Export);
    assert_eq!((cam.operator, cam.port.as_str()), (0, "out"));
    assert_eq!((cam.depth, cam.depth_source.as_str()), (3, "explicit"));
    assert_eq!(cam.policy, QueuePolicy::DropOldest);
    assert_eq!((cam.subscribers, cam.publishers), (2, 0));
    assert_eq!(cam.pool.as_deref(), Some("src.out"));
    assert!(cam.tensor);
    let c = &cam.contract;
    assert_eq!(c.memory_kind, Some(MemoryKind::Host));
    assert_eq!(
        (c.dtype, c.rank, c.max_bytes),
        (Some(DType::U8), Some(1), Some(8))
    );

    // The exported output's pool: its flow (queue 2, hold 1), one loan, one retirement,
    // and per subscriber its queue (3) and its held tensor (1).
    let pool = plan.tensor_allocation("src.out").unwrap();
    let t = &pool.slot_terms;
    assert_eq!(
        (
            t.queue_entries,
            t.consumer_holds,
            t.producer_loans,
            t.retirement
        ),
        (2, 1, 1, 1)
    );
    assert_eq!(t.subscribers, 8);
    let terms: Vec<(u32, &str, u32)> = t
        .subscriber_terms
        .iter()
        .map(|x| (x.subscriber, x.contributor.as_str(), x.entries))
        .collect();
    assert_eq!(
        terms,
        [
            (0, "queue_depth", 3),
            (0, "subscriber_hold", 1),
            (1, "queue_depth", 3),
            (1, "subscriber_hold", 1)
        ]
    );
    assert_eq!(pool.slot_count, 2 + 1 + 1 + 1 + 8);
    let dep = plan.pool_capacity_dependency("src.out").unwrap();
    assert_eq!(dep.subscriber_entries, 8);
    assert_eq!(dep.admitted_entries, Some(13));

    // The imported topic's own pool: its queue (4), the importer's hold (1), two
    // publishers' two loans each (4), one retirement.
    let cmds = plan.topic("cmds").unwrap();
    assert_eq!(cmds.direction, TopicDirection::Import);
    assert_eq!((cmds.subscribers, cmds.publishers), (0, 2));
    assert_eq!(cmds.pool.as_deref(), Some("topic:cmds"));
    assert_eq!(
        (cmds.contract.memory_kind, cmds.contract.max_bytes),
        (Some(MemoryKind::Host), Some(64))
    );
    assert!(!cmds.host_wait, "a host pool is never stream-written");
    let ip = plan.tensor_allocation("topic:cmds").unwrap();
    assert_eq!(ip.topic.as_deref(), Some("cmds"));
    assert_eq!((ip.operator, ip.port.as_str()), (2, "frames"));
    let t = &ip.slot_terms;
    assert_eq!(
        (
            t.queue_entries,
            t.consumer_holds,
            t.producer_loans,
            t.retirement
        ),
        (4, 1, 4, 1)
    );
    assert_eq!(
        (ip.slot_count, ip.per_slot_bytes, ip.aggregate_bytes),
        (10, 64, 640)
    );

    // The three renderings show them.
    let text = plan.render_human();
    assert!(text.contains("topics:"), "{text}");
    assert!(
        text.contains(
            "\"cam\" (export): src.out → 2 subscriber(s), depth 3 (explicit), drop_oldest"
        ),
        "{text}"
    );
    assert!(
        text.contains("\"cmds\" (import): 2 publisher(s) → cmd.frames, depth 4 (explicit), block"),
        "{text}"
    );
    assert!(text.contains("+ 8 subscribers = 13"), "{text}");
    assert!(
        text.contains("subscriber 1 of topic \"cam\": queue depth 3"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    let topics = json["topics"].as_array().unwrap();
    assert_eq!(topics.len(), 2);
    assert_eq!(topics[0]["name"], "cam");
    assert_eq!(topics[0]["direction"], "export");
    assert_eq!(topics[0]["policy"], "drop_oldest");
    assert_eq!(topics[0]["contract"]["dtype"], "u8");
    assert_eq!(topics[1]["direction"], "import");
    assert_eq!(topics[1]["pool"], "topic:cmds");
    let allocations = json["tensor_allocations"].as_array().unwrap();
    assert!(allocations.iter().any(|a| a["topic"] == "cmds"));
    let dot = plan.dot();
    assert!(dot.contains("\"topic_cam\" [shape=note"), "{dot}");
    assert!(dot.contains("op0 -> \"topic_cam\""), "{dot}");
    assert!(dot.contains("\"topic_cmds\" -> op2"), "{dot}");
}

#[test]
fn an_imported_input_counts_as_connected() {
    let (g, _) = imported(TopicOptions::DEFAULT.with_max_bytes(8));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert_eq!(plan.topics().len(), 1);
}

#[test]
fn the_topic_is_part_of_the_graphs_fingerprint() {
    let (a, _) = exported(1, TopicOptions::DEFAULT);
    let mut b = Graph::new();
    let (src, _) = frames(1);
    b.add_operator("src", src, defaults()).unwrap();
    let pa = compile(&a, CompileOptions::default()).unwrap();
    let pb = compile(&b, CompileOptions::default()).unwrap();
    assert_ne!(pa.fingerprint(), pb.fingerprint());
    let err = RunSession::start(b, &pa, SessionOptions::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
}

// ---- compile diagnostics -------------------------------------------------------------

#[test]
fn a_topic_name_that_is_empty_or_holds_whitespace() {
    for name in ["", "two words", "tab\tbed"] {
        let mut g = Graph::new();
        let (src, _) = frames(1);
        let s = g.add_operator("src", src, defaults()).unwrap();
        g.export_topic(s.out, name, TopicOptions::DEFAULT);
        let d = rejected(&g, CompileOptions::default());
        let x = only(&d, codes::TOPIC_NAME_INVALID);
        assert_eq!(
            (x.operator.as_deref(), x.port.as_deref()),
            (Some("src"), Some("out"))
        );
    }
}

#[test]
fn a_duplicate_topic_name() {
    let mut g = Graph::new();
    let (src, _) = frames(1);
    let (sink, _) = Record::new();
    let s = g.add_operator("src", src, defaults()).unwrap();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    g.export_topic(s.out, "same", TopicOptions::DEFAULT);
    g.import_topic(k.frames, "same", TopicOptions::DEFAULT.with_max_bytes(8));
    let d = rejected(&g, CompileOptions::default());
    let x = only(&d, codes::TOPIC_NAME_DUPLICATE);
    assert_eq!(x.operator.as_deref(), Some("sink"));
    assert!(x.message.contains("export on operator \"src\""), "{x}");
}

#[test]
fn two_topics_on_one_port_and_a_flow_into_an_imported_input() {
    let mut g = Graph::new();
    let (src, _) = frames(1);
    let s = g.add_operator("src", src, defaults()).unwrap();
    g.export_topic(s.out, "a", TopicOptions::DEFAULT);
    g.export_topic(s.out, "b", TopicOptions::DEFAULT);
    let d = rejected(&g, CompileOptions::default());
    assert!(
        only(&d, codes::TOPIC_PORT_CONFLICT)
            .message
            .contains("\"a\"")
    );

    let mut g = Graph::new();
    let (src, _) = frames(1);
    let (sink, _) = Record::new();
    let s = g.add_operator("src", src, defaults()).unwrap();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    g.add_flow(s.out, k.frames, ConnectionOptions::default());
    g.import_topic(k.frames, "cmds", TopicOptions::DEFAULT.with_max_bytes(8));
    let d = rejected(&g, CompileOptions::default());
    let x = only(&d, codes::TOPIC_PORT_CONFLICT);
    assert_eq!(
        (x.operator.as_deref(), x.port.as_deref()),
        (Some("sink"), Some("frames"))
    );
    assert!(x.message.contains("one producer"), "{x}");
}

#[test]
fn zero_or_too_many_clients() {
    let (g, _) = exported(1, TopicOptions::DEFAULT.with_subscribers(0));
    let d = rejected(&g, CompileOptions::default());
    assert!(
        only(&d, codes::TOPIC_CLIENT_COUNT)
            .message
            .contains("0 subscribers")
    );
    let (g, _) = imported(
        TopicOptions::DEFAULT
            .with_max_bytes(8)
            .with_publishers(MAX_TOPIC_CLIENTS + 1),
    );
    let d = rejected(&g, CompileOptions::default());
    assert!(
        only(&d, codes::TOPIC_CLIENT_COUNT)
            .message
            .contains("65 publishers")
    );
}

#[test]
fn an_imported_tensor_input_without_a_bound_or_a_memory_kind() {
    let (g, _) = imported(TopicOptions::DEFAULT);
    let d = rejected(&g, CompileOptions::default());
    let x = only(&d, codes::TOPIC_IMPORT_UNBOUNDED);
    assert_eq!(x.port.as_deref(), Some("frames"));
    assert!(x.hint.contains("with_max_bytes"), "{x}");

    let mut g = Graph::new();
    let u = g
        .add_operator(
            "u",
            Untyped {
                frames: Input::default(),
            },
            defaults(),
        )
        .unwrap();
    g.import_topic(u.frames, "raw", TopicOptions::DEFAULT.with_max_bytes(8));
    let d = rejected(&g, CompileOptions::default());
    only(&d, codes::TOPIC_IMPORT_MEMORY_KIND_MISSING);
}

#[test]
fn a_topic_depth_of_zero_or_below_an_imported_window() {
    let (g, _) = exported(1, TopicOptions::DEFAULT.with_depth(0));
    let d = rejected(&g, CompileOptions::default());
    assert!(
        only(&d, codes::QUEUE_DEPTH_ZERO)
            .message
            .contains("topic \"cam\"")
    );

    let mut g = Graph::new();
    let w = g
        .add_operator(
            "w",
            Windowed {
                frames: Input::default(),
            },
            defaults(),
        )
        .unwrap();
    g.import_topic(
        w.frames,
        "win",
        TopicOptions::DEFAULT.with_max_bytes(8).with_depth(2),
    );
    let d = rejected(&g, CompileOptions::default());
    only(&d, codes::RATE_QUEUE_DEPTH_BELOW_HARD_FLOOR);
    // Left out, the depth is raised to the window.
    let mut g = Graph::new();
    let w = g
        .add_operator(
            "w",
            Windowed {
                frames: Input::default(),
            },
            defaults(),
        )
        .unwrap();
    g.import_topic(w.frames, "win", TopicOptions::DEFAULT.with_max_bytes(8));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert_eq!(
        (
            plan.topics()[0].depth,
            plan.topics()[0].depth_source.as_str()
        ),
        (3, "default")
    );
}

#[test]
fn two_pools_of_one_id_do_not_compile() {
    // Operator `topic:cam`'s output `out` is pool `topic:cam.out`; so is the pool of the
    // imported topic `cam.out`. The session finds pools by id: the topic's publishers
    // were handed the operator's pool.
    let mut g = Graph::new();
    let (source, _) = frames(1);
    let s = g.add_operator("topic:cam", source, defaults()).unwrap();
    let (sink, _) = Record::new();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    g.add_flow(s.out, k.frames, ConnectionOptions::default());
    let (importer, _) = Record::new();
    let i = g.add_operator("importer", importer, defaults()).unwrap();
    g.import_topic(i.frames, "cam.out", TopicOptions::DEFAULT.with_max_bytes(8));
    let d = rejected(&g, CompileOptions::default());
    let x = only(&d, codes::POOL_NAME_CONFLICT);
    assert_eq!(
        x.message,
        "pool id \"topic:cam.out\" names two pools: output \"out\" of operator \"topic:cam\" and the pool of imported topic \"cam.out\""
    );
    // Another topic name: two pools, two ids.
    let mut g = Graph::new();
    let (source, _) = frames(1);
    let s = g.add_operator("topic:cam", source, defaults()).unwrap();
    let (sink, _) = Record::new();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    g.add_flow(s.out, k.frames, ConnectionOptions::default());
    let (importer, _) = Record::new();
    let i = g.add_operator("importer", importer, defaults()).unwrap();
    g.import_topic(i.frames, "cam", TopicOptions::DEFAULT.with_max_bytes(8));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert_eq!(plan.tensor_allocations().len(), 2);
}

#[test]
fn an_imported_topic_reaching_more_streams_than_the_cap_does_not_compile() {
    // topic "gpu" → relay (its own stream) → c0, c1 (a stream each): every published
    // tensor is registered on three consumer streams.
    let mut g = Graph::new();
    let r = g
        .add_operator(
            "relay",
            CudaRelay {
                frames: Input::default(),
                out: Output::default(),
            },
            defaults(),
        )
        .unwrap();
    g.import_topic(r.frames, "gpu", TopicOptions::DEFAULT.with_max_bytes(256));
    for name in ["c0", "c1"] {
        let c = g
            .add_operator(
                name,
                CudaIn {
                    frames: Input::default(),
                },
                defaults(),
            )
            .unwrap();
        g.add_flow(r.out, c.frames, ConnectionOptions::default());
    }
    let options = |cap| {
        let mut o = CompileOptions::default().with_max_fanout_release_streams(cap);
        o.deployment.bind_imported_topic_device("gpu", 0);
        o
    };
    let d = rejected(&g, options(2));
    let x = only(&d, codes::POOL_RELEASE_STREAMS_EXCEEDED);
    assert_eq!(
        (x.operator.as_deref(), x.port.as_deref()),
        (Some("relay"), Some("frames"))
    );
    assert!(x.message.contains("3 distinct device streams"), "{x}");
    let plan = compile(&g, options(3)).unwrap();
    assert_eq!(
        plan.tensor_allocation("topic:gpu")
            .unwrap()
            .release_stream_capacity,
        3
    );
}

#[test]
fn an_imported_cuda_topic_needs_a_bound_device_and_a_binding_needs_a_topic() {
    let mut g = Graph::new();
    let c = g
        .add_operator(
            "c",
            CudaIn {
                frames: Input::default(),
            },
            defaults(),
        )
        .unwrap();
    g.import_topic(c.frames, "gpu", TopicOptions::DEFAULT.with_max_bytes(256));
    let d = rejected(&g, CompileOptions::default());
    let x = only(&d, codes::PLACEMENT_DEVICE_REQUIRED);
    assert!(x.hint.contains("bind_imported_topic_device"), "{x}");

    let mut options = CompileOptions::default();
    options.deployment.bind_imported_topic_device("gpu", 0);
    let plan = compile(&g, options).unwrap();
    let t = plan.topic("gpu").unwrap();
    assert_eq!(t.contract.device, Some(DeviceId::cuda(0)));
    assert_eq!(
        t.consumer_stream,
        Some(0),
        "the importer waits on its own stream"
    );
    let pool = plan.tensor_allocation("topic:gpu").unwrap();
    assert_eq!(
        (pool.device, pool.release_stream_capacity),
        (Some(DeviceId::cuda(0)), 8)
    );

    let mut options = CompileOptions::default();
    options.deployment.bind_imported_topic_device("gpu", 0);
    options.deployment.bind_imported_topic_device("nope", 0);
    let d = rejected(&g, options);
    assert!(
        only(&d, codes::PLACEMENT_UNKNOWN_BINDING)
            .message
            .contains("\"nope\"")
    );
}

#[test]
fn a_topic_handle_of_another_graph() {
    let mut other = Graph::new();
    let (src, _) = frames(1);
    let s = other.add_operator("src", src, defaults()).unwrap();
    let mut g = Graph::new();
    let (src, _) = frames(1);
    g.add_operator("src", src, defaults()).unwrap();
    g.export_topic(s.out, "cam", TopicOptions::DEFAULT);
    let d = rejected(&g, CompileOptions::default());
    assert!(
        only(&d, codes::GRAPH_FOREIGN_PORT)
            .message
            .contains("topic \"cam\"")
    );
}

/// A CUDA source → sink chain in one partition is fused; exporting the output as well
/// leaves every edge of it unfused (a subscriber is a successor whose stream the plan
/// does not know).
#[test]
fn an_exported_output_gets_no_fusion() {
    #[operator]
    struct GpuSrc {
        #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 64)]
        out: Output<Tensor>,
    }
    impl Operator for GpuSrc {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            Ok(())
        }
    }
    let build = |export: bool| {
        let mut g = Graph::new();
        let s = g
            .add_operator(
                "src",
                GpuSrc {
                    out: Output::default(),
                },
                defaults(),
            )
            .unwrap();
        let c = g
            .add_operator(
                "sink",
                CudaIn {
                    frames: Input::default(),
                },
                defaults(),
            )
            .unwrap();
        g.add_flow(s.out, c.frames, ConnectionOptions::default());
        if export {
            g.export_topic(s.out, "gpu", TopicOptions::DEFAULT);
        }
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "out", 0);
        compile(&g, options).unwrap()
    };
    assert!(build(false).edges()[0].fusion.is_some());
    let plan = build(true);
    assert!(plan.edges()[0].fusion.is_none());
    assert_eq!(
        plan.topic("gpu").unwrap().contract.device,
        Some(DeviceId::cuda(0))
    );
}

// ---- subscribers on host memory --------------------------------------------------------

fn stepped(g: Graph) -> (RunSession, holo_runtime::plan::ExecutionPlan) {
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start_stepped(g, &plan, SessionOptions::default()).unwrap();
    (session, plan)
}

fn steps(session: &mut RunSession, n: usize) {
    for _ in 0..n {
        session.step().unwrap();
    }
}

/// `(frame id, first byte)` of every tensor the subscriber has queued now.
fn drain(sub: &mut ChannelSubscriber) -> Vec<(u64, u8)> {
    let mut out = Vec::new();
    while let Some(t) = sub.try_receive().unwrap() {
        out.push((sub.last_info().frame, t.data().unwrap()[0]));
    }
    out
}

#[test]
fn frames_reach_a_subscriber_in_order_with_their_frame_ids() {
    let mut g = Graph::new();
    let (mut src, stats) = frames(200);
    let go = Arc::new(AtomicBool::new(false));
    src.go = Arc::clone(&go);
    let s = g.add_operator("src", src, defaults()).unwrap();
    g.export_topic(s.out, "cam", TopicOptions::DEFAULT.with_depth(4));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    // The source emits once the subscriber is attached (a frame emitted before goes to
    // no seat, and holds nothing).
    go.store(true, Ordering::Release);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        while let Some((t, info)) = sub.receive_with_info(WAIT).unwrap() {
            got.push((
                info.frame,
                t.data().unwrap()[0],
                info.capture_time.is_some(),
            ));
            if info.frame == 199 {
                break;
            }
        }
        got
    });
    let got = reader.join().unwrap();
    assert_eq!(got.len(), 200, "a blocking subscriber loses nothing");
    for (i, &(frame, byte, captured)) in got.iter().enumerate() {
        assert_eq!(frame, i as u64);
        #[allow(clippy::cast_possible_truncation)]
        let expect = frame as u8;
        assert_eq!(byte, expect, "frame {frame}");
        assert!(captured);
    }
    session.stop();
    let report = session.join().unwrap();
    assert_eq!(stats.emitted.load(Ordering::Relaxed), 200);
    assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
}

#[test]
fn a_slow_drop_oldest_subscriber_keeps_the_newest_frames_and_never_holds_the_producer() {
    let (g, stats) = exported(
        10,
        TopicOptions::DEFAULT
            .with_depth(2)
            .with_policy(QueuePolicy::DropOldest),
    );
    let (mut session, _) = stepped(g);
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    steps(&mut session, 10);
    assert_eq!(stats.emitted.load(Ordering::Relaxed), 10);
    assert_eq!(
        (
            stats.exhausted.load(Ordering::Relaxed),
            stats.backpressured.load(Ordering::Relaxed)
        ),
        (0, 0)
    );
    assert_eq!(drain(&mut sub), [(8, 8), (9, 9)]);
    drop(sub);
    let report = session.join().unwrap();
    assert_eq!(
        report.drops, 8,
        "eight frames evicted from the subscriber's queue"
    );
}

#[test]
fn a_slow_blocking_subscriber_holds_the_producer_back_and_loses_nothing() {
    let (g, stats) = exported(10, TopicOptions::DEFAULT.with_depth(2));
    let (mut session, _) = stepped(g);
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    steps(&mut session, 5);
    // Two frames fill the queue; the source then waits for room (it is not run).
    assert_eq!(stats.emitted.load(Ordering::Relaxed), 2);
    assert_eq!(stats.backpressured.load(Ordering::Relaxed), 0);
    let mut got = drain(&mut sub);
    while got.len() < 10 {
        steps(&mut session, 3);
        got.extend(drain(&mut sub));
    }
    let want: Vec<(u64, u8)> = (0..10).map(|k| (k, k as u8)).collect();
    assert_eq!(got, want);
    drop(sub);
    let report = session.join().unwrap();
    assert_eq!(report.drops, 0);
}

#[test]
fn a_free_seat_holds_no_slot_and_blocks_nothing() {
    // Two blocking seats of depth 1, none attached: the source runs freely.
    let (g, stats) = exported(50, TopicOptions::DEFAULT.with_subscribers(2).with_depth(1));
    let (mut session, plan) = stepped(g);
    let slots = plan.tensor_allocation("src.out").unwrap().slot_count;
    steps(&mut session, 50);
    assert_eq!(stats.emitted.load(Ordering::Relaxed), 50);
    assert_eq!(session.pool_free_slots("src.out"), Some(slots));
    assert_eq!(session.topic_attachments("cam"), Some((0, 2)));
    session.join().unwrap();
}

#[test]
fn a_dropped_subscriber_detaches_and_returns_its_queued_slots() {
    let (g, stats) = exported(100, TopicOptions::DEFAULT.with_depth(4));
    let (mut session, plan) = stepped(g);
    let slots = plan.tensor_allocation("src.out").unwrap().slot_count;
    assert_eq!(slots, 4 + 1 + 1 + 1, "queue, hold, loan, retirement");
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    assert_eq!(session.topic_attachments("cam"), Some((1, 1)));
    steps(&mut session, 3);
    let held = sub.try_receive().unwrap().unwrap();
    assert_eq!(session.pool_free_slots("src.out"), Some(slots - 3));
    drop(sub);
    assert_eq!(session.topic_attachments("cam"), Some((0, 1)));
    assert_eq!(
        session.pool_free_slots("src.out"),
        Some(slots - 1),
        "the queued slots came back; the received tensor still holds its own"
    );
    drop(held);
    assert_eq!(session.pool_free_slots("src.out"), Some(slots));
    // The seat is free again: a new subscriber gets frames emitted from then on.
    steps(&mut session, 2);
    let mut again: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    steps(&mut session, 2);
    assert_eq!(drain(&mut again), [(5, 5), (6, 6)]);
    assert_eq!(stats.exhausted.load(Ordering::Relaxed), 0);
    drop(again);
    session.join().unwrap();
}

/// A subscriber that holds one received tensor while its queue is full, and a producer
/// that runs whenever there is room: the pool the plan sized never runs out.
#[test]
fn the_pool_covers_a_full_queue_and_a_held_tensor_for_every_subscriber() {
    let (g, stats) = exported(
        1_000,
        TopicOptions::DEFAULT.with_subscribers(2).with_depth(3),
    );
    let (mut session, _) = stepped(g);
    let mut a: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    let mut b: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    let mut held = (None, None);
    for _ in 0..200 {
        steps(&mut session, 2);
        // Each keeps the newest tensor it received, so one is always held.
        if let Some(t) = a.try_receive().unwrap() {
            held.0 = Some(t);
        }
        if let Some(t) = b.try_receive().unwrap() {
            held.1 = Some(t);
        }
    }
    assert!(stats.emitted.load(Ordering::Relaxed) > 100);
    assert_eq!(
        stats.exhausted.load(Ordering::Relaxed),
        0,
        "allocate_tensor never ran out"
    );
    drop(held);
    drop((a, b));
    session.join().unwrap();
}

#[test]
fn an_attached_subscribers_queue_keeps_the_session_from_idle_and_its_frames_are_produced() {
    let (g, _) = exported(5, TopicOptions::DEFAULT.with_depth(8));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let mut session = RunSession::start_stepped(g, &plan, SessionOptions::frames(5)).unwrap();
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    steps(&mut session, 6);
    assert!(
        !session.wait_idle(Duration::ZERO),
        "five frames wait for the subscriber"
    );
    assert_eq!(drain(&mut sub).len(), 5);
    assert!(session.wait_idle(Duration::ZERO));
    drop(sub);
    let report = session.join().unwrap();
    assert_eq!(report.produced, [("src".to_owned(), 5)]);
}

#[test]
fn messages_travel_on_a_topic_too() {
    let mut g = Graph::new();
    let c = g
        .add_operator(
            "count",
            Counter {
                out: Output::default(),
                n: 0,
            },
            defaults(),
        )
        .unwrap();
    g.export_topic(c.out, "n", TopicOptions::DEFAULT.with_depth(8));
    let (mut session, plan) = stepped(g);
    assert!(!plan.topic("n").unwrap().tensor);
    let mut sub: ChannelSubscriber<u64> =
        ChannelSubscriber::attach(&session, "n", SubscriberOptions::DEFAULT).unwrap();
    steps(&mut session, 3);
    let got: Vec<u64> = std::iter::from_fn(|| sub.try_receive().unwrap()).collect();
    assert_eq!(got, [1, 2, 3]);
    drop(sub);
    session.join().unwrap();

    // And into an imported message input.
    let mut g = Graph::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    let n = g
        .add_operator(
            "numbers",
            Numbers {
                input: Input::default(),
                got: Arc::clone(&got),
            },
            defaults(),
        )
        .unwrap();
    g.import_topic(n.input, "in", TopicOptions::DEFAULT.with_depth(4));
    let (mut session, plan) = stepped(g);
    assert!(
        plan.tensor_allocations().is_empty(),
        "a message topic has no pool"
    );
    let mut p: ChannelPublisher<u64> =
        ChannelPublisher::attach(&session, "in", PublisherOptions::DEFAULT).unwrap();
    for v in [5u64, 6, 7] {
        p.publish(v, EmitOptions::default()).unwrap();
    }
    steps(&mut session, 1);
    assert_eq!(*got.lock().unwrap(), [5, 6, 7]);
    drop(p);
    session.join().unwrap();
}

/// Forwards what it receives on a host input through a pass-through output.
#[operator]
struct HostForward {
    #[input(memory = host, dtype = u8, rank = 1)]
    input: Input<Tensor>,
    #[output(storage = pass_through, forwards = input)]
    output: Output<Tensor>,
}

impl Operator for HostForward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.output.has_room() {
            let Some(t) = self.input.receive() else {
                break;
            };
            self.output.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// A forwarder's output exported: the subscribers hold slots of the pool the forwarded
/// tensors come from, so that pool counts them (through the forwarding walk), and they
/// receive that pool's tensors.
#[test]
fn subscribers_of_a_forwarding_output_are_counted_in_the_origin_pool() {
    let mut g = Graph::new();
    let (src, _) = frames(100);
    let s = g.add_operator("src", src, defaults()).unwrap();
    let f = g
        .add_operator(
            "fwd",
            HostForward {
                input: Input::default(),
                output: Output::default(),
            },
            defaults(),
        )
        .unwrap();
    g.add_flow(
        s.out,
        f.input,
        ConnectionOptions::default().with_queue_depth(2),
    );
    g.export_topic(
        f.output,
        "relayed",
        TopicOptions::DEFAULT.with_subscribers(2).with_depth(3),
    );
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let t = plan.topic("relayed").unwrap();
    assert_eq!(t.pool, None, "a pass-through output has no pool of its own");
    let pool = plan.tensor_allocation("src.out").unwrap();
    assert_eq!(pool.slot_terms.subscribers, 8);
    assert_eq!(pool.slot_count, 2 + 1 + 1 + 1 + 8);
    let text = plan.render_human();
    assert!(
        text.contains("subscriber 1 of topic \"relayed\": held 1"),
        "{text}"
    );

    let mut session = RunSession::start_stepped(g, &plan, SessionOptions::default()).unwrap();
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "relayed", SubscriberOptions::DEFAULT).unwrap();
    steps(&mut session, 3);
    let got = drain(&mut sub);
    assert_eq!(got.first(), Some(&(0, 0)));
    assert!(got.len() >= 2, "{got:?}");
    drop(sub);
    session.join().unwrap();
}

/// An imported topic whose input is forwarded on: the topic's pool counts the flow after
/// the forwarding output and its consumer's hold.
#[test]
fn an_imported_topic_forwarded_on_counts_what_follows_in_its_pool() {
    let mut g = Graph::new();
    let f = g
        .add_operator(
            "fwd",
            HostForward {
                input: Input::default(),
                output: Output::default(),
            },
            defaults(),
        )
        .unwrap();
    let (sink, got) = Record::new();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    g.add_flow(
        f.output,
        k.frames,
        ConnectionOptions::default().with_queue_depth(2),
    );
    g.import_topic(
        f.input,
        "cmds",
        TopicOptions::DEFAULT.with_max_bytes(8).with_depth(3),
    );
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let pool = plan.tensor_allocation("topic:cmds").unwrap();
    let t = &pool.slot_terms;
    assert_eq!(
        (
            t.queue_entries,
            t.consumer_holds,
            t.producer_loans,
            t.retirement,
            t.forwarded
        ),
        (3, 1, 1, 1, 3)
    );
    let through: Vec<(&str, u32)> = t
        .forwarded_through
        .iter()
        .map(|x| (x.contributor.as_str(), x.entries))
        .collect();
    assert_eq!(through, [("queue_depth", 2), ("consumer_hold", 1)]);
    assert_eq!(pool.slot_count, 9);

    let mut session = RunSession::start_stepped(g, &plan, SessionOptions::default()).unwrap();
    let mut p: ChannelPublisher =
        ChannelPublisher::attach(&session, "cmds", PublisherOptions::DEFAULT).unwrap();
    for k in 0..3 {
        publish_one(&mut p, k, u64::from(k)).unwrap();
    }
    steps(&mut session, 3);
    assert_eq!(*got.lock().unwrap(), [(0, 0), (1, 1), (2, 2)]);
    drop(p);
    session.join().unwrap();
}

// ---- attach errors -------------------------------------------------------------------

#[test]
fn every_attach_error_has_its_code_and_a_refused_attach_changes_nothing() {
    let mut g = Graph::new();
    let (src, _) = frames(10);
    let (sink, _) = Record::new();
    let s = g.add_operator("src", src, defaults()).unwrap();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    g.export_topic(s.out, "cam", TopicOptions::DEFAULT);
    g.import_topic(k.frames, "cmds", TopicOptions::DEFAULT.with_max_bytes(8));
    let (session, plan) = stepped(g);
    let free = |s: &RunSession| {
        (
            s.pool_free_slots("src.out"),
            s.pool_free_slots("topic:cmds"),
            s.topic_attachments("cam"),
            s.topic_attachments("cmds"),
        )
    };
    let before = free(&session);
    assert_eq!(before.2, Some((0, 1)));
    let code = |r: Result<ChannelSubscriber>| r.unwrap_err().code();

    // Unknown topic: NotFound, naming the ones there are.
    let e = ChannelSubscriber::<Tensor>::attach(&session, "nope", SubscriberOptions::DEFAULT)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound);
    assert!(e.to_string().contains("[\"cam\", \"cmds\"]"), "{e}");
    let e = ChannelPublisher::<Tensor>::attach(&session, "nope", PublisherOptions::DEFAULT)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound);
    // Direction: a subscriber of an imported topic, a publisher of an exported one.
    assert_eq!(
        code(ChannelSubscriber::attach(
            &session,
            "cmds",
            SubscriberOptions::DEFAULT
        )),
        ErrorCode::InvalidArgument
    );
    let e =
        ChannelPublisher::<Tensor>::attach(&session, "cam", PublisherOptions::DEFAULT).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(e.to_string().contains("attach a ChannelSubscriber"), "{e}");
    // Payload: a message subscriber of a tensor topic.
    let e =
        ChannelSubscriber::<u64>::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    // Contract: the client states what the topic does not declare.
    let f32s = TensorInputSpec {
        dtype: Some(DType::F32),
        ..TensorInputSpec::default()
    };
    let e = ChannelSubscriber::<Tensor>::attach(
        &session,
        "cam",
        SubscriberOptions::DEFAULT.with_expected(f32s),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ProtocolError);
    assert!(
        e.to_string().contains("dtype u8 where f32 is expected"),
        "{e}"
    );
    let e = ChannelPublisher::<Tensor>::attach(
        &session,
        "cmds",
        PublisherOptions::DEFAULT.with_expected(TensorInputSpec {
            memory_kind: Some(MemoryKind::CudaDevice),
            ..TensorInputSpec::default()
        }),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ProtocolError);
    assert_eq!(free(&session), before, "nothing half-attached");

    // A matching contract attaches; a second client past the declared one is refused.
    let host_u8 = TensorInputSpec {
        memory_kind: Some(MemoryKind::Host),
        dtype: Some(DType::U8),
        rank: Some(1),
    };
    let sub: ChannelSubscriber = ChannelSubscriber::attach(
        &session,
        "cam",
        SubscriberOptions::DEFAULT.with_expected(host_u8),
    )
    .unwrap();
    let publisher: ChannelPublisher = ChannelPublisher::attach(
        &session,
        "cmds",
        PublisherOptions::DEFAULT.with_expected(host_u8),
    )
    .unwrap();
    let during = free(&session);
    assert_eq!(
        code(ChannelSubscriber::attach(
            &session,
            "cam",
            SubscriberOptions::DEFAULT
        )),
        ErrorCode::ResourceExhausted
    );
    let e = ChannelPublisher::<Tensor>::attach(&session, "cmds", PublisherOptions::DEFAULT)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ResourceExhausted);
    assert_eq!(free(&session), during, "nothing half-attached");
    assert_eq!((during.2, during.3), (Some((1, 1)), Some((1, 1))));
    // Detached, the seats take a client again.
    drop((sub, publisher));
    assert_eq!(free(&session), before);
    let again: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    drop(again);

    // A stopped session takes no client.
    session.stop();
    assert_eq!(
        code(ChannelSubscriber::attach(
            &session,
            "cam",
            SubscriberOptions::DEFAULT
        )),
        ErrorCode::Cancelled
    );
    assert!(plan.topic("cam").is_some());
    session.join().unwrap();
}

#[test]
fn a_subscriber_of_a_stopped_session_is_cancelled() {
    let (g, _) = exported(10, TopicOptions::DEFAULT);
    let (session, _) = stepped(g);
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    assert!(sub.try_receive().unwrap().is_none());
    session.join().unwrap();
    assert_eq!(sub.try_receive().unwrap_err().code(), ErrorCode::Cancelled);
    assert_eq!(
        sub.receive(Duration::from_secs(1)).unwrap_err().code(),
        ErrorCode::Cancelled
    );
}

// ---- publishers on host memory ---------------------------------------------------------

fn publish_one(p: &mut ChannelPublisher, fill: u8, frame: u64) -> Result<()> {
    let loan = p.allocate_tensor(TensorLoanRequest {
        shape: &[8],
        dtype: DType::U8,
    })?;
    let t = loan.write_host_and_commit(|b| b.fill(fill))?;
    p.publish(t, EmitOptions::default().with_frame(frame))
}

#[test]
fn a_publisher_feeds_an_imported_input_in_order_with_its_frame_ids() {
    let (g, got) = imported(TopicOptions::DEFAULT.with_max_bytes(8).with_depth(4));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    // No source: `frames(0)` lets `wait_idle` see every source done.
    let session = RunSession::start(g, &plan, SessionOptions::frames(0)).unwrap();
    let mut p: ChannelPublisher =
        ChannelPublisher::attach(&session, "cmds", PublisherOptions::DEFAULT).unwrap();
    let mut sent = 0u64;
    while sent < 100 {
        #[allow(clippy::cast_possible_truncation)]
        match publish_one(&mut p, sent as u8, 1_000 + sent) {
            Ok(()) => sent += 1,
            Err(e)
                if matches!(
                    e.code(),
                    ErrorCode::Backpressured | ErrorCode::ResourceExhausted
                ) =>
            {
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(session.wait_idle(WAIT));
    let got = got.lock().unwrap().clone();
    let want: Vec<(u64, u8)> = (0..100u64).map(|k| (1_000 + k, k as u8)).collect();
    assert_eq!(got, want);
    drop(p);
    let report = session.join().unwrap();
    let pool = report
        .pools
        .iter()
        .find(|r| r.pool == "topic:cmds")
        .unwrap();
    assert_eq!(pool.free_at_end, pool.slot_count);
}

#[test]
fn a_publishers_loans_come_from_the_topic_pool_and_run_out_at_once() {
    let (g, got) = imported(TopicOptions::DEFAULT.with_max_bytes(8).with_depth(2));
    let (mut session, plan) = stepped(g);
    let slots = plan.tensor_allocation("topic:cmds").unwrap().slot_count;
    assert_eq!(
        slots,
        2 + 1 + 1 + 1,
        "queue, the importer's hold, a loan, retirement"
    );
    let mut p: ChannelPublisher =
        ChannelPublisher::attach(&session, "cmds", PublisherOptions::DEFAULT).unwrap();
    publish_one(&mut p, 1, 0).unwrap();
    publish_one(&mut p, 2, 1).unwrap();
    // The queue is full: Backpressured, with the value handed back.
    let loan = p
        .allocate_tensor(TensorLoanRequest {
            shape: &[8],
            dtype: DType::U8,
        })
        .unwrap();
    let t = loan.write_host_and_commit(|b| b.fill(3)).unwrap();
    let refused = p.try_publish(t, EmitOptions::default()).unwrap_err();
    assert_eq!(refused.error.code(), ErrorCode::Backpressured);
    assert!(!p.has_room());
    // Loans until none is free: ResourceExhausted at once.
    let mut loans = Vec::new();
    let e = loop {
        match p.allocate_tensor(TensorLoanRequest {
            shape: &[8],
            dtype: DType::U8,
        }) {
            Ok(l) => loans.push(l),
            Err(e) => break e,
        }
    };
    assert_eq!(e.code(), ErrorCode::ResourceExhausted);
    assert_eq!(
        2 + 1 + loans.len() as u32,
        slots,
        "every slot loaned or queued"
    );
    assert_eq!(session.pool_free_slots("topic:cmds"), Some(0));
    // A request past the topic's bound or dtype: InvalidArgument.
    drop(loans);
    let e = p
        .allocate_tensor(TensorLoanRequest {
            shape: &[9],
            dtype: DType::U8,
        })
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    let e = p
        .allocate_tensor(TensorLoanRequest {
            shape: &[2],
            dtype: DType::F32,
        })
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    // The importer drains; the refused tensor is published on retry.
    steps(&mut session, 1);
    p.publish(refused.value, EmitOptions::default().with_frame(2))
        .unwrap();
    steps(&mut session, 1);
    assert_eq!(*got.lock().unwrap(), [(0, 1), (1, 2), (2, 3)]);
    drop(p);
    let report = session.join().unwrap();
    assert_eq!(report.drops, 1, "the one refused publish");
}

#[test]
fn a_publisher_refuses_a_tensor_of_another_pool_or_contract_and_a_stopped_session() {
    let mut g = Graph::new();
    let (src, _) = frames(10);
    let (sink, got) = Record::new();
    let s = g.add_operator("src", src, defaults()).unwrap();
    let k = g.add_operator("sink", sink, defaults()).unwrap();
    g.export_topic(s.out, "cam", TopicOptions::DEFAULT);
    g.import_topic(k.frames, "cmds", TopicOptions::DEFAULT.with_max_bytes(8));
    let (mut session, _) = stepped(g);
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&session, "cam", SubscriberOptions::DEFAULT).unwrap();
    let mut p: ChannelPublisher =
        ChannelPublisher::attach(&session, "cmds", PublisherOptions::DEFAULT).unwrap();
    steps(&mut session, 1);
    let theirs = sub.try_receive().unwrap().unwrap();
    let refused = p.try_publish(theirs, EmitOptions::default()).unwrap_err();
    assert_eq!(refused.error.code(), ErrorCode::ProtocolError);
    assert!(
        refused.error.to_string().contains("operator \"src\""),
        "{}",
        refused.error
    );
    // A pass-through tensor is admitted when it meets the contract, refused otherwise.
    let wrong = Tensor::from_host_vec(&[2], DType::U16, vec![0; 4]).unwrap();
    let e = p.publish(wrong, EmitOptions::default()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ProtocolError);
    let big = Tensor::from_host_vec(&[16], DType::U8, vec![7; 16]).unwrap();
    assert_eq!(
        p.publish(big, EmitOptions::default()).unwrap_err().code(),
        ErrorCode::ProtocolError
    );
    let fine = Tensor::from_host_vec(&[4], DType::U8, vec![9; 4]).unwrap();
    p.publish(fine, EmitOptions::default().with_frame(77))
        .unwrap();
    steps(&mut session, 1);
    assert_eq!(*got.lock().unwrap(), [(77, 9)]);
    drop(refused);
    session.stop();
    let e = publish_one(&mut p, 1, 1).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Cancelled);
    drop((sub, p));
    session.join().unwrap();
}

// ---- on every device backend -----------------------------------------------------------

/// Frame k is `64 + k % 128` bytes, every byte `k % 128`, written on the runtime stream
/// after an optional delay: a reader knows what it must see from the size alone.
#[operator]
struct DevFrames {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
    k: u64,
    go: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    delay: Duration,
    stats: Arc<Stats>,
}

fn frame_len(k: u64) -> u64 {
    64 + k % 128
}

impl Operator for DevFrames {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if !self.go.load(Ordering::Acquire) || self.done.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_micros(50));
            return Ok(());
        }
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(ctx.device().expect("a CUDA-active operator has a device"));
        let loan = match self.out.allocate_tensor(TensorLoanRequest {
            shape: &[frame_len(self.k)],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let guard = loan.write(stream)?;
        if !self.delay.is_zero() {
            device.enqueue_delay(guard.stream(), self.delay)?;
        }
        #[allow(clippy::cast_possible_truncation)]
        let value = (self.k % 128) as u8;
        // SAFETY: the guard owns the slot until commit and the fill stays inside it; the
        // stream orders the fill before the readiness event commit records.
        unsafe {
            device.memset_async(guard.device_ptr(), value, guard.byte_size(), guard.stream())?;
        }
        let t = guard.commit()?;
        self.k += 1;
        self.out.emit(t, EmitOptions::default())?;
        self.stats.emitted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

struct DevRun {
    session: RunSession,
    go: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    stats: Arc<Stats>,
}

fn dev_export(device: &Arc<dyn DeviceBackend>, delay: Duration, topic: TopicOptions) -> DevRun {
    let go = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Stats::default());
    let mut g = Graph::new();
    let s = g
        .add_operator(
            "src",
            DevFrames {
                out: Output::default(),
                k: 0,
                go: Arc::clone(&go),
                done: Arc::clone(&done),
                delay,
                stats: Arc::clone(&stats),
            },
            defaults(),
        )
        .unwrap();
    g.export_topic(s.out, "gpu", topic);
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("src", "out", device.device_id());
    let plan = compile(&g, options).unwrap();
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::default().on_device(Arc::clone(device)),
    )
    .unwrap();
    DevRun {
        session,
        go,
        done,
        stats,
    }
}

fn name(d: &Arc<dyn DeviceBackend>) -> &'static str {
    d.backend_kind().name()
}

#[test]
fn a_subscriber_stream_is_ordered_after_the_producers_writes() {
    for device in test_backends() {
        // The producer's fill waits 2 ms on its stream: a subscriber stream that did not
        // wait on the readiness event would copy stale bytes.
        let run = dev_export(
            &device,
            Duration::from_millis(2),
            TopicOptions::DEFAULT.with_depth(4),
        );
        let stream = device.create_stream().unwrap();
        let mut sub: ChannelSubscriber =
            ChannelSubscriber::attach(&run.session, "gpu", SubscriberOptions::DEFAULT).unwrap();
        run.go.store(true, Ordering::Release);
        let mut bad = 0;
        for _ in 0..20 {
            let array = sub
                .receive_on(stream, WAIT)
                .unwrap_or_else(|e| panic!("{}: {e}", name(&device)))
                .expect("a frame within the wait");
            let n = array.byte_size();
            #[allow(clippy::cast_possible_truncation)]
            let expect = (n - 64) as u8;
            assert!(array.is_ordered());
            assert_eq!(
                array.tensor().release_stream_count(),
                1,
                "the caller's stream is registered"
            );
            let host = array
                .copy_to_host_async(vec![0; n])
                .unwrap()
                .synchronize_stream()
                .unwrap();
            bad += usize::from(host.iter().any(|&b| b != expect));
        }
        assert_eq!(
            bad,
            0,
            "{}: the subscriber read before the producer's fill",
            name(&device)
        );
        run.done.store(true, Ordering::Release);
        drop(sub);
        run.session
            .join()
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        // The caller's stream outlived the session, as its duty says.
        device.destroy_stream(stream).unwrap();
    }
}

/// A free-running producer (drop-oldest, a one-deep queue) and a subscriber that reads
/// each frame on its stream 3 ms late, after dropping its handle, with up to 8 such reads
/// in flight: no slot may be reused before its read ran.
#[test]
fn a_slot_is_never_reused_before_the_subscribers_stream_has_read_it() {
    // The rule is checked on every run; a run must also have provoked it (the producer ran
    // into slots still retiring), which depends on how the threads interleave: a run that
    // did not is repeated, up to three runs (on the H200 one run did not).
    for device in test_backends() {
        let provoked = (0..3).any(|_| reuse_run(&device) > 0);
        assert!(
            provoked,
            "{}: in three runs the producer never ran into slots still retiring",
            name(&device)
        );
    }
}

/// One run of the rule above on `device`: asserts no slot was overwritten while the
/// subscriber's stream read it; returns how often the producer found the pool exhausted.
fn reuse_run(device: &Arc<dyn DeviceBackend>) -> u64 {
    const IN_FLIGHT: usize = 8;
    let run = dev_export(
        device,
        Duration::ZERO,
        TopicOptions::DEFAULT
            .with_depth(1)
            .with_policy(QueuePolicy::DropOldest),
    );
    let stream = device.create_stream().unwrap();
    let mut sub: ChannelSubscriber =
        ChannelSubscriber::attach(&run.session, "gpu", SubscriberOptions::DEFAULT).unwrap();
    run.go.store(true, Ordering::Release);
    // The reads land in pinned memory: a copy into pageable memory would block the host
    // until it ran (CUDA stages it), so only one read would ever be in flight.
    let pinned = device
        .alloc(AllocKind::PinnedHost, 256 * IN_FLIGHT)
        .unwrap();
    let mut expect = [(0usize, 0u8); IN_FLIGHT];
    let (mut bad, mut read) = (0, 0);
    while read < 10 * IN_FLIGHT {
        let Some(array) = sub.receive_on(stream, WAIT).unwrap() else {
            panic!("{}: no frame within the wait", name(device));
        };
        let n = array.byte_size();
        #[allow(clippy::cast_possible_truncation)]
        let value = (n - 64) as u8;
        let at = read % IN_FLIGHT;
        expect[at] = (n, value);
        device
            .enqueue_delay(stream, Duration::from_millis(3))
            .unwrap();
        let dst = pinned.checked_add(256 * at).unwrap();
        // SAFETY: `dst` (inside the pinned allocation) is not read until the stream
        // synchronization below; the release event the array records on `stream` as it
        // drops keeps the slot until the copy ran.
        unsafe {
            device.copy_async(dst, array.data_ptr(), n, stream).unwrap();
        }
        drop(array);
        read += 1;
        if at == IN_FLIGHT - 1 {
            device.synchronize_stream(stream).unwrap();
            for (i, &(n, v)) in expect.iter().enumerate() {
                // SAFETY: the stream has run every copy into the pinned buffer.
                let h = unsafe {
                    std::slice::from_raw_parts(
                        pinned.checked_add(256 * i).unwrap().as_host_ptr(),
                        n,
                    )
                };
                bad += usize::from(h.iter().any(|&b| b != v));
            }
        }
    }
    // SAFETY: the stream that used it is synchronized; nothing else holds it.
    unsafe { device.free(AllocKind::PinnedHost, pinned, 256 * IN_FLIGHT) }.unwrap();
    run.done.store(true, Ordering::Release);
    assert_eq!(
        bad,
        0,
        "{}: a slot was overwritten while the subscriber's stream read it",
        name(device)
    );
    let exhausted = run.stats.exhausted.load(Ordering::Relaxed);
    drop(sub);
    let report = run
        .session
        .join()
        .unwrap_or_else(|e| panic!("{}: {e}", name(device)));
    assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
    device.destroy_stream(stream).unwrap();
    exhausted
}

/// Copies each received frame to the host on its own stream and checks it.
#[operator]
struct DevCheck {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    got: Arc<Mutex<Vec<(u64, bool)>>>,
}

impl Operator for DevCheck {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let mut host = [0u8; 256];
        while let Some((t, info)) = self.frames.receive_with_info() {
            let n = t.byte_size();
            t.copy_to_host(&mut host[..n], ctx.cuda_stream()?)?;
            #[allow(clippy::cast_possible_truncation)]
            let ok = host[..n].iter().all(|&b| b == info.frame as u8);
            self.got.lock().unwrap().push((info.frame, ok));
        }
        Ok(())
    }
}

#[test]
fn a_publishers_stream_writes_reach_the_importers_stream() {
    for device in test_backends() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut g = Graph::new();
        let c = g
            .add_operator(
                "check",
                DevCheck {
                    frames: Input::default(),
                    got: Arc::clone(&got),
                },
                defaults(),
            )
            .unwrap();
        g.import_topic(
            c.frames,
            "up",
            TopicOptions::DEFAULT.with_max_bytes(256).with_depth(2),
        );
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_imported_topic_device("up", device.device_id());
        let plan = compile(&g, options).unwrap();
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(0).on_device(Arc::clone(&device)),
        )
        .unwrap();
        let stream = device.create_stream().unwrap();
        let mut p: ChannelPublisher =
            ChannelPublisher::attach(&session, "up", PublisherOptions::DEFAULT).unwrap();
        // A stream of another device (another software device: another context) is
        // refused, and the loan's slot goes back. (A stream of another CUDA context is
        // tests/cuda_context.rs's.)
        if device.backend_kind() == BackendKind::Software {
            let other = holo_runtime::device::SoftwareDevice::new();
            let foreign = other.create_stream().unwrap();
            let free = session.pool_free_slots("topic:up");
            let loan = p
                .allocate_tensor(TensorLoanRequest {
                    shape: &[64],
                    dtype: DType::U8,
                })
                .unwrap();
            let e = loan.write(foreign).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
            assert_eq!(session.pool_free_slots("topic:up"), free);
            other.destroy_stream(foreign).unwrap();
        }
        let mut k = 0u64;
        // A tensor refused with Backpressured is published again, not written again (each
        // write adds its 2 ms to the publisher's stream).
        let mut pending: Option<Tensor> = None;
        while k < 20 {
            if let Some(t) = pending.take() {
                match p.try_publish(t, EmitOptions::default().with_frame(k)) {
                    Ok(()) => k += 1,
                    Err(r) if r.error.code() == ErrorCode::Backpressured => {
                        pending = Some(r.value);
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Err(r) => panic!("{}: {}", name(&device), r.error),
                }
                continue;
            }
            let loan = match p.allocate_tensor(TensorLoanRequest {
                shape: &[frame_len(k)],
                dtype: DType::U8,
            }) {
                Ok(l) => l,
                Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                Err(e) => panic!("{}: {e}", name(&device)),
            };
            #[allow(clippy::cast_possible_truncation)]
            let value = k as u8;
            // The fill waits 2 ms on the publisher's stream: an importer that did not
            // wait on the readiness event would see stale bytes.
            let t = loan
                .write_and_commit(stream, |d, ptr, n, s| {
                    d.enqueue_delay(s, Duration::from_millis(2))?;
                    // SAFETY: the loan owns the slot, the fill stays inside it.
                    unsafe { d.memset_async(ptr, value, n, s) }
                })
                .unwrap();
            pending = Some(t.into_tensor());
        }
        assert!(session.wait_idle(WAIT), "{}", name(&device));
        let got = got.lock().unwrap().clone();
        assert_eq!(got.len(), 20, "{}", name(&device));
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, &(f, ok))| f == i as u64 && ok),
            "{}: {got:?}",
            name(&device)
        );
        drop(p);
        let report = session
            .join()
            .unwrap_or_else(|e| panic!("{}: {e}", name(&device)));
        let pool = report.pools.iter().find(|r| r.pool == "topic:up").unwrap();
        assert_eq!(pool.free_at_end, pool.slot_count);
        device.destroy_stream(stream).unwrap();
    }
}
