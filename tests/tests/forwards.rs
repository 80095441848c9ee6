//! Pools cover every claim the plan admits (issue 12, item 5): an output that forwards a
//! received tensor declares it (`#[output(forwards = input)]`), and the origin pool's slot
//! count then includes every queue and hold after that output, term by term in the plan.
//! An output that emits another operator's pool tensor without declaring it is refused.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::partitioned;
use holo_runtime::__private::{
    OperatorId, OperatorSpec, PortBinder, PortDirection, PortPayload, PortSpec, TensorInputSpec,
    TensorOutputSpec,
};
use holo_runtime::Trigger;
use holo_runtime::plan::ForwardedSlotTerm;
use holo_runtime::spec::PortTemporalSpec;
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, Operator, OperatorPorts, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, codes, compile, operator,
};

/// Emits frame `k` (its index as 8 little-endian bytes) per activation from its host
/// pool, waiting for room on its flow first so that every frame is published; an
/// exhausted pool fails the activation (`ResourceExhausted`).
#[operator]
struct Source {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 64)]
    frames: Output<Tensor>,
    k: u64,
}

impl Operator for Source {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        wait_for_room(&self.frames);
        let loan = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[8],
            dtype: DType::U8,
        })?;
        let k = self.k;
        let t = loan.write_host_and_commit(|b| b.copy_from_slice(&k.to_le_bytes()))?;
        self.frames.emit(t, EmitOptions::default())?;
        self.k += 1;
        Ok(())
    }
}

/// Waits up to 5 s for room on `out` (then the emit that follows is `Backpressured` and
/// fails the session: a stalled pipeline fails the test rather than hanging it).
fn wait_for_room(out: &Output<Tensor>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !out.has_room() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Forwards what it receives, one tensor at a time, holding it until the next queue has
/// room (so no frame is dropped and every queue stays within its depth).
#[operator]
struct Relay {
    input: Input<Tensor>,
    #[output(forwards = input)]
    out: Output<Tensor>,
}

impl Operator for Relay {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(t) = self.input.receive() else {
            return Ok(());
        };
        wait_for_room(&self.out);
        self.out.emit(t, EmitOptions::default())
    }
}

/// The same relay without the declaration: its emits of the source's tensors are refused.
#[operator]
struct UndeclaredRelay {
    input: Input<Tensor>,
    #[output(storage = pass_through)]
    out: Output<Tensor>,
}

impl Operator for UndeclaredRelay {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            self.out.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// Takes one frame per activation and holds it for 2 ms (a slow consumer, so that every
/// queue before it fills), recording the frame indices in order.
#[operator]
struct SlowSink {
    #[input(memory = host, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    got: Arc<Mutex<Vec<u64>>>,
}

impl Operator for SlowSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if let Some(t) = self.frames.receive() {
            let mut k = [0u8; 8];
            k.copy_from_slice(t.data()?);
            std::thread::sleep(Duration::from_millis(2));
            self.got.lock().unwrap().push(u64::from_le_bytes(k));
        }
        Ok(())
    }
}

/// A sink with history and one that reuses its last sample, for the terms of those holds.
#[operator]
struct HistorySink {
    #[input(history = 3)]
    frames: Input<Tensor>,
}

#[operator]
struct ReuseSink {
    #[input(missing = reuse_last)]
    frames: Input<Tensor>,
}

impl Operator for HistorySink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

impl Operator for ReuseSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

const FRAMES: u64 = 40;

fn source() -> Source {
    Source {
        frames: Output::default(),
        k: 0,
    }
}

fn relay() -> Relay {
    Relay {
        input: Input::default(),
        out: Output::default(),
    }
}

fn depth(d: u32) -> ConnectionOptions {
    ConnectionOptions::default().with_queue_depth(d)
}

/// `src → fwd1 → fwd2 → sink`, every flow 2 deep, each operator in a partition of its own.
fn chain(got: &Arc<Mutex<Vec<u64>>>) -> Graph {
    let mut g = Graph::new();
    let s = g.add_operator_with_defaults("src", source()).unwrap();
    let f1 = g.add_operator_with_defaults("fwd1", relay()).unwrap();
    let f2 = g.add_operator_with_defaults("fwd2", relay()).unwrap();
    let sink = SlowSink {
        frames: Input::default(),
        got: Arc::clone(got),
    };
    let k = g.add_operator_with_defaults("sink", sink).unwrap();
    g.add_flow(s.frames, f1.input, depth(2));
    g.add_flow(f1.out, f2.input, depth(2));
    g.add_flow(f2.out, k.frames, depth(2));
    g
}

fn split() -> CompileOptions {
    partitioned(&[&["src"], &["fwd1"], &["fwd2"], &["sink"]])
}

/// The scenario: with every queue within its declared depth, the forwarded frames
/// fill the queues after the forwarders. A pool sized for its own flow only (2 queued + 1
/// held + 1 loan + 1 retirement = 5) is exhausted at the source (`ResourceExhausted`, as
/// the code before `forwards` failed); sized for the forwarded terms too, every frame
/// arrives, in order.
#[test]
#[cfg_attr(
    miri,
    ignore = "a deadline calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn a_chain_of_forwarders_split_over_partitions_gets_every_frame_through() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = chain(&got);
    let plan = compile(&g, split()).unwrap();
    assert_eq!(plan.partitions().len(), 4);
    assert_eq!(plan.tensor_allocation("src.frames").unwrap().slot_count, 11);
    let session = RunSession::start(g, &plan, SessionOptions::frames(FRAMES)).unwrap();
    let idle = session.wait_idle(Duration::from_secs(20));
    let report = session.join().expect("no pool is exhausted");
    assert!(idle);
    assert_eq!(*got.lock().unwrap(), (0..FRAMES).collect::<Vec<_>>());
    assert_eq!(report.pools.len(), 1, "forwarding allocates no pool");
}

/// The exact terms: the source's own flow, then each flow after a forwarding output with
/// its queue depth and its consumer's hold, and the slot count they add up to, in the
/// records, the JSON and the text rendering.
#[test]
fn the_plan_lists_every_forwarded_term_and_the_slot_count() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let plan = compile(&chain(&got), split()).unwrap();
    let a = plan.tensor_allocation("src.frames").unwrap();
    let t = &a.slot_terms;
    assert_eq!(
        (
            t.queue_entries,
            t.consumer_holds,
            t.producer_loans,
            t.retirement,
            t.history,
            t.forwarded
        ),
        (2, 1, 1, 1, 0, 6)
    );
    let terms: Vec<(u32, &str, &str, &str, u32)> = t
        .forwarded_through
        .iter()
        .map(|f: &ForwardedSlotTerm| {
            (
                f.edge,
                f.through.as_str(),
                f.to.as_str(),
                f.contributor.as_str(),
                f.entries,
            )
        })
        .collect();
    let term = |edge, through, to, contributor, entries| (edge, through, to, contributor, entries);
    assert_eq!(
        terms,
        vec![
            term(1, "fwd1.out", "fwd2.input", "queue_depth", 2),
            term(1, "fwd1.out", "fwd2.input", "consumer_hold", 1),
            term(2, "fwd2.out", "sink.frames", "queue_depth", 2),
            term(2, "fwd2.out", "sink.frames", "consumer_hold", 1),
        ]
    );
    assert_eq!((a.slot_count, a.aggregate_bytes), (11, 11 * 64));
    let dep = plan.pool_capacity_dependency("src.frames").unwrap();
    assert_eq!(
        (
            dep.edges.as_slice(),
            dep.forwarded_edges.as_slice(),
            dep.forwarded_entries,
            dep.active_entries,
            dep.admitted_queue_entries,
            dep.admitted_entries
        ),
        (&[0][..], &[1, 2][..], 6, 11, Some(6), Some(11))
    );
    let mut pool_terms: Vec<(&str, &str, u32)> = plan
        .hard_floor_contributors()
        .iter()
        .filter(|c| c.pool.as_deref() == Some("src.frames"))
        .map(|c| (&*c.group, &*c.contributor, c.entries))
        .collect();
    pool_terms.sort_unstable();
    assert_eq!(
        pool_terms,
        vec![
            ("consumer_retention:e0", "consumer_hold", 1),
            ("forwarded_queue:e1", "forwarded_queue_entries", 2),
            ("forwarded_queue:e2", "forwarded_queue_entries", 2),
            ("forwarded_retention:e1", "forwarded_consumer_hold", 1),
            ("forwarded_retention:e2", "forwarded_consumer_hold", 1),
            ("producer_loans", "producer_loans", 1),
            ("queue:e0", "queue_entries", 2),
            ("retirement", "retirement", 1),
        ]
    );
    let human = plan.render_human();
    for line in [
        "slots = 2 queued + 1 held + 1 loan + 1 retirement + 0 history + 6 forwarded = 11",
        "      forwarded through fwd1.out → fwd2.input: queue depth 2\n",
        "      forwarded through fwd1.out → fwd2.input: held 1\n",
        "      forwarded through fwd2.out → sink.frames: queue depth 2\n",
        "      forwarded through fwd2.out → sink.frames: held 1\n",
    ] {
        assert!(human.contains(line), "{line:?} is not in\n{human}");
    }
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    let terms = &json["tensor_allocations"][0]["slot_terms"];
    assert_eq!(terms["forwarded"], 6);
    assert_eq!(
        terms["forwarded_through"][2],
        serde_json::json!({
            "edge": 2,
            "through": "fwd2.out",
            "to": "sink.frames",
            "contributor": "queue_depth",
            "entries": 2
        })
    );
}

/// A forwarder that fans out: each leg's queue and its consumer's retention count
/// (history 3 counts 3, a reused last sample replaces the hold it is), and a consumer
/// that does not forward stops the walk.
#[test]
fn a_fan_out_after_a_forwarder_counts_every_leg_and_its_retention() {
    let mut g = Graph::new();
    let s = g.add_operator_with_defaults("src", source()).unwrap();
    let f = g.add_operator_with_defaults("fwd", relay()).unwrap();
    let hist = g
        .add_operator_with_defaults(
            "hist",
            HistorySink {
                frames: Input::default(),
            },
        )
        .unwrap();
    let reuse = g
        .add_operator_with_defaults(
            "reuse",
            ReuseSink {
                frames: Input::default(),
            },
        )
        .unwrap();
    g.add_flow(s.frames, f.input, depth(1));
    g.add_flow(f.out, hist.frames, depth(4));
    g.add_flow(f.out, reuse.frames, depth(5));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let pool = plan.tensor_allocation("src.frames").unwrap();
    let terms: Vec<(u32, &str, u32)> = pool
        .slot_terms
        .forwarded_through
        .iter()
        .map(|t| (t.edge, t.contributor.as_str(), t.entries))
        .collect();
    assert_eq!(
        terms,
        vec![
            (1, "queue_depth", 4),
            (1, "history", 3),
            (2, "queue_depth", 5),
            (2, "consumer_hold", 1),
        ]
    );
    // 1 queued + 1 held + 1 loan + 1 retirement + (4 + 3) + (5 + 1) forwarded.
    assert_eq!((pool.slot_terms.forwarded, pool.slot_count), (13, 17));
    // The reused sample is an alternative to the hold in the `data_missing` scenario.
    assert!(plan.hard_floor_contributors().iter().any(|c| {
        c.pool.as_deref() == Some("src.frames")
            && c.scenario == "data_missing"
            && c.group == "forwarded_retention:e2"
            && c.contributor == "forwarded_reuse_last"
    }));
}

/// An output that emits a received tensor without declaring `forwards` is refused with
/// `ProtocolError` naming the port and the origin pool; nothing reaches the consumer.
#[test]
fn an_undeclared_forward_of_a_pool_tensor_is_a_protocol_error() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let s = g.add_operator_with_defaults("src", source()).unwrap();
    let f = g
        .add_operator_with_defaults(
            "leak",
            UndeclaredRelay {
                input: Input::default(),
                out: Output::default(),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            SlowSink {
                frames: Input::default(),
                got: Arc::clone(&got),
            },
        )
        .unwrap();
    g.add_flow(s.frames, f.input, ConnectionOptions::default());
    g.add_flow(f.out, k.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert!(
        plan.tensor_allocation("src.frames")
            .unwrap()
            .slot_terms
            .forwarded_through
            .is_empty()
    );
    let session = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(20));
    let err = session
        .join()
        .expect_err("the undeclared forward is refused");
    assert_eq!(err.code(), ErrorCode::ProtocolError, "{err}");
    assert_eq!(err.location(), Some("operator \"leak\", port \"out\""));
    assert!(
        err.to_string()
            .contains("a tensor of the runtime pool of operator \"src\", port \"frames\""),
        "{err}"
    );
    assert!(got.lock().unwrap().is_empty());
}

/// Forwards what it receives through an output with a pool of its own that declares
/// `f32` tensors of rank 2.
#[operator]
struct PooledRelay {
    input: Input<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = f32, rank = 2, bounds = 64, forwards = input)]
    out: Output<Tensor>,
}

impl Operator for PooledRelay {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            self.out.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// Wants host `f32` tensors of rank 2.
#[operator]
struct F32Sink {
    #[input(memory = host, dtype = f32, rank = 2)]
    frames: Input<Tensor>,
    got: Arc<Mutex<Vec<(DType, u32)>>>,
}

impl Operator for F32Sink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            self.got.lock().unwrap().push((t.dtype(), t.rank()));
        }
        Ok(())
    }
}

/// An output with a pool of its own was checked against its consumers at compile by what
/// it declares; the received tensors it forwards (here `u8` of rank 1) are another pool's
/// and reached an `f32` rank-2 consumer unchecked. They are checked on emit, as a
/// pass-through output's are.
#[test]
fn a_forwarded_tensor_is_checked_against_the_consumer_even_through_a_pooled_output() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let s = g.add_operator_with_defaults("src", source()).unwrap();
    let f = g
        .add_operator_with_defaults(
            "relay",
            PooledRelay {
                input: Input::default(),
                out: Output::default(),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            F32Sink {
                frames: Input::default(),
                got: Arc::clone(&got),
            },
        )
        .unwrap();
    g.add_flow(s.frames, f.input, ConnectionOptions::default());
    g.add_flow(f.out, k.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(20));
    let err = session
        .join()
        .expect_err("the forwarded u8 tensor is refused");
    assert_eq!(err.code(), ErrorCode::ProtocolError, "{err}");
    assert!(err.to_string().contains("TensorInputSpec"), "{err}");
    assert!(got.lock().unwrap().is_empty(), "{:?}", got.lock().unwrap());
}

/// Per input, the first emit's result.
type FirstEmits = Arc<Mutex<Vec<(&'static str, Option<ErrorCode>)>>>;

/// Declares that it forwards `a`, and forwards what `b` receives too: the first emit of
/// each is noted.
#[operator]
struct Pick {
    a: Input<Tensor>,
    b: Input<Tensor>,
    #[output(forwards = a)]
    out: Output<Tensor>,
    codes: FirstEmits,
}

impl Operator for Pick {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        for (name, t) in [("a", self.a.receive()), ("b", self.b.receive())] {
            let Some(t) = t else { continue };
            // No wait for room: the sink may run on this thread. The refusal of `b`'s
            // comes before the room check; `a`'s first emit finds the queue empty.
            let code = self
                .out
                .emit(t, EmitOptions::default())
                .err()
                .map(|e| e.code());
            let mut codes = self.codes.lock().unwrap();
            if !codes.iter().any(|(n, _)| *n == name) {
                codes.push((name, code));
            }
        }
        Ok(())
    }
}

/// `forwards = a` sizes `a`'s origin pool for the queues and holds after the output; a
/// tensor of `b`'s was emitted all the same, held downstream where no pool counted it,
/// until `b`'s source found its pool empty with every queue legal. It is refused now.
#[test]
fn a_tensor_of_another_inputs_pool_is_refused_by_a_forwarding_output() {
    let codes = Arc::new(Mutex::new(Vec::new()));
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let cam_a = g.add_operator_with_defaults("cam_a", source()).unwrap();
    let cam_b = g.add_operator_with_defaults("cam_b", source()).unwrap();
    let pick = g
        .add_operator_with_defaults(
            "pick",
            Pick {
                a: Input::default(),
                b: Input::default(),
                out: Output::default(),
                codes: Arc::clone(&codes),
            },
        )
        .unwrap();
    let sink = g
        .add_operator_with_defaults(
            "sink",
            SlowSink {
                frames: Input::default(),
                got: Arc::clone(&got),
            },
        )
        .unwrap();
    g.add_flow(cam_a.frames, pick.a, ConnectionOptions::default());
    g.add_flow(cam_b.frames, pick.b, ConnectionOptions::default());
    g.add_flow(pick.out, sink.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(2)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.stop();
    let _ = session.join();
    let mut codes = codes.lock().unwrap().clone();
    codes.sort_unstable();
    assert_eq!(
        codes,
        vec![("a", None), ("b", Some(ErrorCode::ProtocolError))],
        "a's tensors pass, b's are refused"
    );
}

/// Forwarded terms are counted with checked arithmetic: a fan-out whose forwarded queues
/// add up past `u32::MAX` is `POOL_CAPACITY_OVERFLOW` on the origin pool, not a wrap.
#[test]
fn forwarded_terms_that_overflow_are_a_diagnostic() {
    let mut g = Graph::new();
    let s = g.add_operator_with_defaults("src", source()).unwrap();
    let f = g.add_operator_with_defaults("fwd", relay()).unwrap();
    g.add_flow(s.frames, f.input, ConnectionOptions::default());
    // 4,096 legs of the deepest queue holo admits: 2^32 forwarded queue entries.
    let legs = 4096;
    for i in 0..legs {
        let leg = g
            .add_operator_with_defaults(
                &format!("leg{i}"),
                ReuseSink {
                    frames: Input::default(),
                },
            )
            .unwrap();
        g.add_flow(f.out, leg.frames, depth(holo_runtime::MAX_QUEUE_DEPTH));
    }
    let diags = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(
        diags.codes(),
        vec![codes::POOL_CAPACITY_OVERFLOW],
        "{diags}"
    );
    let item = &diags.items[0];
    assert_eq!(
        (item.operator.as_deref(), item.port.as_deref()),
        (Some("src"), Some("frames"))
    );
    assert!(
        item.message
            .contains(&format!("forwarded over {legs} flows")),
        "{item}"
    );
}

/// A cycle of forwarders is the graph's cycle diagnostic, reported before pools are
/// sized: the forwarding walk never runs on it.
#[test]
fn a_cycle_of_forwarders_is_a_diagnostic_not_a_hang() {
    let mut g = Graph::new();
    let relay = || Relay {
        input: Input::default(),
        out: Output::default(),
    };
    let a = g.add_operator_with_defaults("a", relay()).unwrap();
    let b = g.add_operator_with_defaults("b", relay()).unwrap();
    g.add_flow(a.out, b.input, ConnectionOptions::default());
    g.add_flow(b.out, a.input, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::GRAPH_CYCLE], "{d}");
}

/// A hand-written operator (what `#[operator]` refuses at build time, a generator can
/// still declare): `forwards` naming no input, and naming a message input.
struct Hand;

#[derive(Clone, Copy)]
struct HandPorts;

fn hand_output(name: &'static str, forwards: &'static str) -> PortSpec<holo_runtime::NoParams> {
    PortSpec {
        name,
        direction: PortDirection::Output,
        payload: PortPayload::Tensor(TensorOutputSpec {
            forwards: Some(forwards),
            ..TensorOutputSpec::default()
        }),
        payload_type: "Tensor",
        optional: false,
        temporal: PortTemporalSpec::default(),
    }
}

impl OperatorPorts for Hand {
    type Params = holo_runtime::NoParams;
    type Ports = HandPorts;

    fn operator_spec() -> OperatorSpec<holo_runtime::NoParams> {
        OperatorSpec {
            type_name: "Hand",
            ports: vec![
                PortSpec {
                    name: "frames",
                    direction: PortDirection::Input,
                    payload: PortPayload::TensorInput(TensorInputSpec::default()),
                    payload_type: "Tensor",
                    optional: true,
                    temporal: PortTemporalSpec::default(),
                },
                PortSpec {
                    name: "counts",
                    direction: PortDirection::Input,
                    payload: PortPayload::Message("u64"),
                    payload_type: "u64",
                    optional: true,
                    temporal: PortTemporalSpec::default(),
                },
                hand_output("typo", "frame"),
                hand_output("message", "counts"),
                hand_output("fine", "frames"),
            ],
            trigger: Trigger::AllInputs,
        }
    }

    fn __ports(_id: OperatorId) -> HandPorts {
        HandPorts
    }

    fn __bind(&mut self, binder: &mut PortBinder<'_>) -> Result<()> {
        let _ = binder;
        Ok(())
    }
}

impl Operator for Hand {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_forwards_that_names_no_tensor_input_is_a_diagnostic() {
    let mut g = Graph::new();
    g.add_operator("hand", Hand, ParamSet::defaults().unwrap())
        .unwrap();
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    let found: Vec<_> = d
        .items
        .iter()
        .map(|i| {
            (
                i.code,
                i.operator.as_deref(),
                i.port.as_deref(),
                i.message.as_str(),
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (
                codes::POOL_FORWARDS_INVALID,
                Some("hand"),
                Some("typo"),
                "`forwards = frame` names no input of this operator"
            ),
            (
                codes::POOL_FORWARDS_INVALID,
                Some("hand"),
                Some("message"),
                "`forwards = counts` names a message input; only a received `Tensor` can be forwarded"
            ),
        ],
        "{d}"
    );
}
