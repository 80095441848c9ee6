//! Large graphs compile to the plan their shape implies: a 2,000-operator chain (tensor and
//! rate-sized), a 2,000-operator fan-out and a fork of two long legs. The compiler indexes
//! flows and ports by position (issue 12: compile scales linearly); these check that what
//! it records at this size is still exactly right, so a future regression in its scaling
//! at least stays correct. (`host_hop --bench compile` measures the time.)
#![allow(
    clippy::cast_possible_truncation,
    reason = "operator and flow counts of a few thousand"
)]

mod common;

use common::{ByteSink, ByteSource, Forward};
use holo_runtime::plan::ExecutionPlan;
use holo_runtime::{
    CompileOptions, ConnectionOptions, ExecutionContext, Graph, Input, Operator, Output, Result,
    compile, operator,
};

const N: usize = 2_000;

/// A 30 Hz clocked source.
#[operator(trigger = clock(hz = 30))]
struct Tick {
    #[output(nominal_rate = Rate::hz(30))]
    out: Output<u64>,
}
impl Operator for Tick {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// Forwards at its input's rate, activated per arrival.
#[operator(trigger = on_arrival(input))]
struct Relay {
    input: Input<u64>,
    #[output(follows(input, RateRatio::new(1, 1)))]
    out: Output<u64>,
}
impl Operator for Relay {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// `src → fwd1 → … → fwd1998 → sink`: one pool (the source's), pass-through after it.
fn tensor_chain() -> Graph {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    let mut prev = g.add_operator_with_defaults("src", src).unwrap().frames;
    for i in 1..N - 1 {
        let f = g
            .add_operator_with_defaults(&format!("fwd{i}"), Forward::new())
            .unwrap();
        g.add_flow(prev, f.input, ConnectionOptions::default());
        prev = f.output;
    }
    let (sink, _) = ByteSink::new(1, 0);
    let s = g.add_operator_with_defaults("sink", sink).unwrap();
    g.add_flow(prev, s.frames, ConnectionOptions::default());
    g
}

fn all_one_partition(plan: &ExecutionPlan, reason: &str) {
    let parts = plan.partitions();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].reason, reason);
    assert!(parts[0].host_only);
    assert_eq!(parts[0].operators, (0..N as u32).collect::<Vec<_>>());
    for (i, op) in plan.operators().iter().enumerate() {
        assert_eq!((op.id, op.order, op.partition), (i as u32, i as u32, 0));
    }
}

#[test]
fn a_2000_operator_tensor_chain_is_one_partition_with_one_pool() {
    let g = tensor_chain();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    all_one_partition(&plan, "source");
    assert_eq!(plan.operators()[N - 1].name, "sink");
    assert_eq!(plan.edges().len(), N - 1);
    for (i, e) in plan.edges().iter().enumerate() {
        let i = i as u32;
        assert_eq!(
            (e.id, e.from_operator, e.to_operator, e.queue_depth),
            (i, i, i + 1, 1)
        );
        assert_eq!(e.depth_source, "default");
        assert!(e.tensor && !e.cross_partition && e.fusion.is_none());
    }
    // Only the source's runtime pool: one queued + one held + one loan + one retirement,
    // and each of the 1,998 forwarded flows' queue and hold.
    let pools: Vec<(&str, u32)> = plan
        .tensor_allocations()
        .iter()
        .map(|a| (a.pool.as_str(), a.slot_count))
        .collect();
    assert_eq!(pools, [("src.frames", 4 + 2 * (N as u32 - 2))]);
    let dep = &plan.pool_capacity_dependencies()[0];
    assert_eq!(dep.edges, [0]);
    assert_eq!(dep.forwarded_edges, (1..N as u32 - 1).collect::<Vec<_>>());
    // Two rate records per forwarding operator, sorted by (operator, port).
    let rates = plan.port_rates();
    assert_eq!(rates.len(), 2 * N - 2);
    assert!(
        rates
            .windows(2)
            .all(|w| (w[0].operator, &w[0].port) < (w[1].operator, &w[1].port))
    );
    // Every edge: minimum_queue and producer_burst; then the pool's terms: its own four and
    // two per forwarded flow.
    let floors = plan.hard_floor_contributors();
    assert_eq!(floors.len(), 2 * (N - 1) + 4 + 2 * (N - 2));
    assert!(floors[..2 * (N - 1)].iter().all(|c| c.scope == "edge"));
    assert!(
        floors[2 * (N - 1)..]
            .iter()
            .all(|c| c.pool.as_deref() == Some("src.frames"))
    );
    assert_eq!(plan.queue_sizing_recipes().len(), N - 1);
    assert_eq!(plan.queue_sizing_recipe(1_234).unwrap().edge, 1_234);
    // Deterministic, and the human rendering names the last flow.
    assert_eq!(
        plan.json(),
        compile(&g, CompileOptions::default()).unwrap().json()
    );
    assert!(
        plan.render_human()
            .contains("e1998: fwd1998.output → sink.frames  depth 1 (default)")
    );
}

#[test]
fn a_2000_operator_rate_chain_sizes_every_queue_from_its_rate() {
    let mut g = Graph::new();
    let mut prev = g
        .add_operator_with_defaults(
            "tick",
            Tick {
                out: Output::default(),
            },
        )
        .unwrap()
        .out;
    for i in 1..N {
        let r = g
            .add_operator_with_defaults(
                &format!("relay{i}"),
                Relay {
                    input: Input::default(),
                    out: Output::default(),
                },
            )
            .unwrap();
        g.add_flow(prev, r.input, ConnectionOptions::default());
        prev = r.out;
    }
    let plan = compile(&g, CompileOptions::default()).unwrap();
    all_one_partition(&plan, "source");
    // 30 Hz all the way down: one arrival per activation, × headroom 2 = depth 2.
    for (i, r) in plan.queue_sizing_recipes().iter().enumerate() {
        assert_eq!(r.edge, i as u32);
        assert_eq!(r.rate_source, "upstream");
        assert_eq!(r.rate_hz.as_deref(), Some("30"));
        assert_eq!(r.horizon_seconds.as_deref(), Some("1/30"));
        assert_eq!(
            (r.nominal_arrivals, r.recommendation, r.queue_depth),
            (Some(1), Some(2), 2)
        );
        assert_eq!(r.depth_source, "automatic");
    }
    let outputs: Vec<&str> = plan
        .port_rates()
        .iter()
        .filter(|r| r.direction == "output")
        .map(|r| &*r.source)
        .collect();
    assert_eq!(outputs.len(), N);
    assert_eq!(outputs[0], "nominal_rate");
    assert!(outputs[1..].iter().all(|s| *s == "follows"));
    let triggers = plan.operator_triggers();
    assert_eq!(triggers[0].clock_period_ns, Some(33_333_334));
    assert!(
        triggers[1..]
            .iter()
            .all(|t| t.input.as_deref() == Some("input"))
    );
}

#[test]
fn a_2000_operator_fan_out_gives_every_consumer_a_partition_and_one_pool_all_edges() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    let out = g.add_operator_with_defaults("src", src).unwrap().frames;
    for i in 1..N {
        let (sink, _) = ByteSink::new(1, 0);
        let s = g
            .add_operator_with_defaults(&format!("sink{i}"), sink)
            .unwrap();
        g.add_flow(out, s.frames, ConnectionOptions::default());
    }
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let parts = plan.partitions();
    assert_eq!(parts.len(), N);
    assert_eq!(
        (parts[0].operators.as_slice(), parts[0].reason.as_str()),
        (&[0][..], "source")
    );
    for (i, p) in parts.iter().enumerate().skip(1) {
        assert_eq!(p.operators, [i as u32]);
        assert_eq!(
            (p.name.as_str(), p.reason.as_str()),
            (format!("p{i}").as_str(), "fork")
        );
    }
    assert!(plan.edges().iter().all(|e| e.cross_partition));
    // 1,999 queued + 1,999 held + one loan + one retirement.
    let a = plan.tensor_allocation("src.frames").unwrap();
    assert_eq!(
        (
            a.slot_terms.queue_entries,
            a.slot_terms.consumer_holds,
            a.slot_count
        ),
        (N as u32 - 1, N as u32 - 1, 2 * N as u32)
    );
    assert_eq!(a.aggregate_bytes, 2 * N as u64 * 256);
    let dep = plan.pool_capacity_dependency("src.frames").unwrap();
    assert_eq!(dep.edges, (0..N as u32 - 1).collect::<Vec<_>>());
    // Per edge two floor terms of its own and two of the pool's (its queue and its hold).
    let pool_terms = plan
        .hard_floor_contributors()
        .iter()
        .filter(|c| c.scope == "pool")
        .count();
    assert_eq!(pool_terms, 2 * (N - 1) + 2);
}

#[test]
fn a_fork_into_two_1000_operator_legs_gives_each_leg_a_partition() {
    // src → fork → { left leg of 999, right leg of 999 }: 2,000 operators, three partitions.
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    let a = g.add_operator_with_defaults("src", src).unwrap().frames;
    let fork = g
        .add_operator_with_defaults("fork", Forward::new())
        .unwrap();
    g.add_flow(a, fork.input, ConnectionOptions::default());
    for leg in ["left", "right"] {
        let mut prev = fork.output;
        for i in 0..(N - 2) / 2 {
            let f = g
                .add_operator_with_defaults(&format!("{leg}{i}"), Forward::new())
                .unwrap();
            g.add_flow(prev, f.input, ConnectionOptions::default());
            prev = f.output;
        }
    }
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let parts = plan.partitions();
    let legs = (N - 2) / 2;
    let left: Vec<u32> = (2..2 + legs as u32).collect();
    let right: Vec<u32> = (2 + legs as u32..N as u32).collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(
        (parts[0].operators.as_slice(), parts[0].reason.as_str()),
        (&[0, 1][..], "source")
    );
    assert_eq!(
        (&parts[1].operators, parts[1].reason.as_str()),
        (&left, "fork")
    );
    assert_eq!(
        (&parts[2].operators, parts[2].reason.as_str()),
        (&right, "fork")
    );
    let crossing: Vec<u32> = plan
        .edges()
        .iter()
        .filter(|e| e.cross_partition)
        .map(|e| e.id)
        .collect();
    assert_eq!(crossing, [1, 1 + legs as u32]);
    // Kahn's order with ties broken by index: the legs' operators in index order.
    let order: Vec<u32> = plan.operators().iter().map(|o| o.order).collect();
    assert_eq!(order, (0..N as u32).collect::<Vec<_>>());
}

/// `src → mid → sink` with its flows added last first (edge 0 is `mid → sink`, edge 1
/// `src → mid`), each with the explicit depth `depths[edge]`. The compiler sizes an edge
/// when it reaches the edge's consumer, so here edge 1 before edge 0.
fn flows_added_out_of_order(depths: [u32; 2]) -> Graph {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    let src = g.add_operator_with_defaults("src", src).unwrap();
    let mid = g.add_operator_with_defaults("mid", Forward::new()).unwrap();
    let (sink, _) = ByteSink::new(1, 0);
    let sink = g.add_operator_with_defaults("sink", sink).unwrap();
    let mut options = ConnectionOptions::default();
    options.queue_depth = Some(depths[0]);
    g.add_flow(mid.output, sink.frames, options);
    options.queue_depth = Some(depths[1]);
    g.add_flow(src.frames, mid.input, options);
    g
}

#[test]
fn flows_added_out_of_topological_order_keep_their_records_and_diagnostics_in_edge_order() {
    let plan = compile(&flows_added_out_of_order([3, 5]), CompileOptions::default()).unwrap();
    let edges: Vec<(u32, u32, u32, u32)> = plan
        .edges()
        .iter()
        .map(|e| (e.id, e.from_operator, e.to_operator, e.queue_depth))
        .collect();
    assert_eq!(edges, [(0, 1, 2, 3), (1, 0, 1, 5)]);
    let recipes: Vec<(u32, u32)> = plan
        .queue_sizing_recipes()
        .iter()
        .map(|r| (r.edge, r.queue_depth))
        .collect();
    assert_eq!(recipes, [(0, 3), (1, 5)]);
    let horizons: Vec<(u32, &str)> = plan
        .accumulation_horizons()
        .iter()
        .map(|h| (h.edge, &*h.operator))
        .collect();
    assert_eq!(horizons, [(0, "sink"), (1, "mid")]);
    let floors: Vec<(Option<u32>, &str)> = plan
        .hard_floor_contributors()
        .iter()
        .filter(|c| c.scope == "edge")
        .map(|c| (c.edge, &*c.contributor))
        .collect();
    assert_eq!(
        floors,
        [
            (Some(0), "minimum_queue"),
            (Some(0), "producer_burst"),
            (Some(1), "minimum_queue"),
            (Some(1), "producer_burst"),
        ]
    );

    // Two refusals, one per edge: reported in edge order (edge 0's consumer `sink` first),
    // though edge 1 was sized first.
    let refused = compile(&flows_added_out_of_order([0, 0]), CompileOptions::default())
        .unwrap_err()
        .items;
    let found: Vec<(&str, Option<&str>)> = refused
        .iter()
        .map(|d| (d.code.name(), d.operator.as_deref()))
        .collect();
    assert_eq!(
        found,
        [
            ("QUEUE_DEPTH_ZERO", Some("sink")),
            ("QUEUE_DEPTH_ZERO", Some("mid")),
        ]
    );
}
