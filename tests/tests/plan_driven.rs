//! The plan drives the run (issue 12, item 2): a session materializes what the plan's
//! records decided, not what the graph it is given would decide again. A graph's
//! connection options are not part of its fingerprint, so a plan compiled from a graph
//! with other options starts over this one — and its queue policy and depth are the
//! plan's, not this graph's.

use std::sync::{Arc, Mutex};

use holo_runtime::{
    CompileOptions, ConnectionOptions, EmitOptions, ErrorCode, ExecutionContext, Graph, Input,
    Operator, Output, QueuePolicy, Result, RunSession, SessionOptions, compile, operator,
};

/// Emits two values per activation (`2k + 1`, `2k + 2`) and records each emit's outcome.
#[operator]
struct Twice {
    out: Output<u64>,
    next: u64,
    outcomes: Arc<Mutex<Vec<Option<ErrorCode>>>>,
}

impl Operator for Twice {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        for _ in 0..2 {
            self.next += 1;
            let r = self.out.emit(self.next, EmitOptions::default());
            self.outcomes
                .lock()
                .unwrap()
                .push(r.err().map(|e| e.code()));
        }
        Ok(())
    }
}

/// Records every value it receives.
#[operator]
struct Collect {
    input: Input<u64>,
    got: Arc<Mutex<Vec<u64>>>,
}

impl Operator for Collect {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(v) = self.input.receive() {
            self.got.lock().unwrap().push(v);
        }
        Ok(())
    }
}

type Outcomes = Arc<Mutex<Vec<Option<ErrorCode>>>>;
type Got = Arc<Mutex<Vec<u64>>>;

/// `twice → collect`, one flow with `options`.
fn graph(options: ConnectionOptions) -> (Graph, Outcomes, Got) {
    let outcomes = Outcomes::default();
    let got = Got::default();
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "twice",
            Twice {
                out: Output::default(),
                next: 0,
                outcomes: Arc::clone(&outcomes),
            },
        )
        .unwrap();
    let c = g
        .add_operator_with_defaults(
            "collect",
            Collect {
                input: Input::default(),
                got: Arc::clone(&got),
            },
        )
        .unwrap();
    g.add_flow(s.out, c.input, options);
    (g, outcomes, got)
}

/// One stepped round over `g` with `plan`: `twice` emits two values into the flow, then
/// `collect` drains it. Returns the emits' outcomes, what `collect` received and the
/// report's drops (an eviction or a refused emit: the same count either way).
fn one_round(
    (g, outcomes, got): (Graph, Outcomes, Got),
    plan: &holo_runtime::plan::ExecutionPlan,
) -> (Vec<Option<ErrorCode>>, Vec<u64>, u64) {
    let mut session = RunSession::start_stepped(g, plan, SessionOptions::frames(1)).unwrap();
    assert_eq!(
        session.step().unwrap(),
        2,
        "twice and collect each ran once"
    );
    let report = session.join().unwrap();
    let outcomes = outcomes.lock().unwrap().clone();
    let got = got.lock().unwrap().clone();
    (outcomes, got, report.drops)
}

const BLOCK_1: ConnectionOptions = ConnectionOptions::DEFAULT
    .with_queue_depth(1)
    .with_policy(QueuePolicy::Block);
const DROP_OLDEST_1: ConnectionOptions = ConnectionOptions::DEFAULT
    .with_queue_depth(1)
    .with_policy(QueuePolicy::DropOldest);

#[test]
fn each_graph_with_its_own_plan_behaves_as_its_options_say() {
    // The baseline the next test departs from: a depth-1 blocking queue refuses the
    // second emit; a drop-oldest one takes it and drops the first value.
    let g = graph(BLOCK_1);
    let plan = compile(&g.0, CompileOptions::default()).unwrap();
    assert_eq!(
        one_round(g, &plan),
        (vec![None, Some(ErrorCode::Backpressured)], vec![1], 1)
    );
    let g = graph(DROP_OLDEST_1);
    let plan = compile(&g.0, CompileOptions::default()).unwrap();
    assert_eq!(one_round(g, &plan), (vec![None, None], vec![2], 1));
}

#[test]
fn the_session_takes_the_queue_policy_from_the_plan_not_from_the_graph() {
    // Compiled from a drop-oldest flow, started over a graph whose flow blocks: the
    // fingerprints agree (options are not structure), and the queue is the plan's.
    let compiled_from = graph(DROP_OLDEST_1);
    let plan = compile(&compiled_from.0, CompileOptions::default()).unwrap();
    assert_eq!(plan.edges()[0].policy, QueuePolicy::DropOldest);
    let started_over = graph(BLOCK_1);
    assert_eq!(
        compile(&started_over.0, CompileOptions::default())
            .unwrap()
            .fingerprint(),
        plan.fingerprint()
    );
    assert_eq!(
        one_round(started_over, &plan),
        (vec![None, None], vec![2], 1)
    );

    // And the other way round: the plan's blocking queue over a drop-oldest graph.
    let plan = compile(&graph(BLOCK_1).0, CompileOptions::default()).unwrap();
    assert_eq!(
        one_round(graph(DROP_OLDEST_1), &plan),
        (vec![None, Some(ErrorCode::Backpressured)], vec![1], 1)
    );
}

#[test]
fn the_session_takes_the_queue_depth_from_the_plan_not_from_the_graph() {
    // A depth-2 plan over a graph that asks for depth 1: both emits fit.
    let plan = compile(
        &graph(
            ConnectionOptions::default()
                .with_queue_depth(2)
                .with_policy(QueuePolicy::Block),
        )
        .0,
        CompileOptions::default(),
    )
    .unwrap();
    assert_eq!(plan.edges()[0].queue_depth, 2);
    assert_eq!(
        one_round(graph(BLOCK_1), &plan),
        (vec![None, None], vec![1, 2], 0)
    );
}

#[test]
fn the_plan_records_what_the_session_binds() {
    let (g, _, _) = graph(DROP_OLDEST_1);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let e = &plan.edges()[0];
    assert_eq!(
        (e.from_port_index, e.to_port_index, e.policy),
        (0, 0, QueuePolicy::DropOldest)
    );
    assert_eq!(
        (
            e.contract.consumer_stream,
            e.contract.fused,
            e.contract.host_wait,
            e.contract.emit_check
        ),
        (None, false, false, None)
    );
    let collect = plan.operator("collect").unwrap();
    let input = &collect.ports[0];
    assert_eq!((input.index, &*input.name), (0, "input"));
    let binding = input.input.unwrap();
    assert_eq!(
        (binding.mode, binding.missing, binding.history),
        (
            holo_runtime::InputMode::Queue,
            holo_runtime::MissingPolicy::Skip,
            0
        )
    );
    assert_eq!(plan.operator("twice").unwrap().ports[0].input, None);
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    assert_eq!(json["edges"][0]["policy"], "drop_oldest");
    assert_eq!(
        json["edges"][0]["contract"],
        serde_json::json!({
            "consumer_stream": null, "fused": false, "host_wait": false, "emit_check": null
        })
    );
    assert_eq!(
        json["operators"][1]["ports"][0],
        serde_json::json!({
            "index": 0, "name": "input", "direction": "input", "optional": false,
            "input": { "mode": "queue", "window": null, "missing": "skip", "history": 0 },
            "forwards": null
        })
    );
}

/// Two operator types of one name in two modules, their ports alike, their memory kinds
/// not: the fingerprint hashed the type's name without its module, so a plan compiled for
/// one started over the other (a device operator under a host-only plan, with no stream).
mod host_kind {
    use holo_runtime::{ExecutionContext, Operator, Output, Result, Tensor, operator};

    #[operator]
    pub(crate) struct Stage {
        #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 8)]
        pub(crate) o: Output<Tensor>,
    }

    impl Operator for Stage {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            Ok(())
        }
    }
}

mod device_kind {
    use holo_runtime::{ExecutionContext, Operator, Output, Result, Tensor, operator};

    #[operator]
    pub(crate) struct Stage {
        #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 8)]
        pub(crate) o: Output<Tensor>,
    }

    impl Operator for Stage {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            Ok(())
        }
    }
}

#[test]
fn two_operator_types_of_one_name_in_two_modules_have_two_fingerprints() {
    let mut host = Graph::new();
    host.add_operator_with_defaults(
        "stage",
        host_kind::Stage {
            o: Output::default(),
        },
    )
    .unwrap();
    let mut device = Graph::new();
    device
        .add_operator_with_defaults(
            "stage",
            device_kind::Stage {
                o: Output::default(),
            },
        )
        .unwrap();
    let plan = compile(&host, CompileOptions::default()).unwrap();
    let e = RunSession::start(device, &plan, SessionOptions::frames(1)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    assert!(e.to_string().contains("fingerprint differs"), "{e}");
    // The same graph again starts.
    let mut again = Graph::new();
    again
        .add_operator_with_defaults(
            "stage",
            host_kind::Stage {
                o: Output::default(),
            },
        )
        .unwrap();
    RunSession::start(again, &plan, SessionOptions::frames(1))
        .unwrap()
        .join()
        .unwrap();
}
