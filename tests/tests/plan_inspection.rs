//! Plan inspection: partitions, allocations term by term, derivations, and the three
//! renderings (human text, canonical JSON, DOT).
#![allow(
    clippy::many_single_char_names,
    reason = "test fixtures: short names for graph handles"
)]

mod common;

use common::{ByteSink, ByteSource, Forward};
use holo_runtime::plan::CudaComputeStreamPolicy;
use holo_runtime::plan::PLAN_JSON_SCHEMA;
use holo_runtime::{
    CompileOptions, ConnectionOptions, CudaExecutionOptions, Graph, ParamSet, compile,
};

fn chain_and_fork() -> Graph {
    // src → fwd → { left, right }: the chain src → fwd stays together, the fork splits.
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    let (left, _) = ByteSink::new(1, 0);
    let (right, _) = ByteSink::new(1, 0);
    let a = g
        .add_operator("src", src, ParamSet::defaults().unwrap())
        .unwrap();
    let f = g
        .add_operator("fwd", Forward::new(), ParamSet::defaults().unwrap())
        .unwrap();
    let l = g
        .add_operator("left", left, ParamSet::defaults().unwrap())
        .unwrap();
    let r = g
        .add_operator("right", right, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(
        a.frames,
        f.input,
        ConnectionOptions::default().with_queue_depth(3),
    );
    g.add_flow(f.output, l.frames, ConnectionOptions::default());
    g.add_flow(f.output, r.frames, ConnectionOptions::default());
    g
}

#[test]
fn a_linear_chain_stays_together_and_a_fork_splits_its_legs() {
    let plan = compile(&chain_and_fork(), CompileOptions::default()).unwrap();
    let parts: Vec<(Vec<u32>, &str, bool)> = plan
        .partitions()
        .iter()
        .map(|p| (p.operators.clone(), p.reason.as_str(), p.host_only))
        .collect();
    assert_eq!(
        parts,
        vec![
            (vec![0, 1], "source", true),
            (vec![2], "fork", true),
            (vec![3], "fork", true)
        ]
    );
    assert!(
        plan.cuda_compute_streams().is_empty(),
        "host-only partitions get no stream"
    );
    let edges: Vec<(u32, &str, bool)> = plan
        .edges()
        .iter()
        .map(|e| (e.queue_depth, &*e.depth_source, e.cross_partition))
        .collect();
    assert_eq!(
        edges,
        vec![
            (3, "explicit", false),
            (1, "default", true),
            (1, "default", true)
        ]
    );
}

#[test]
fn every_term_of_a_pool_is_in_the_plan() {
    let plan = compile(&chain_and_fork(), CompileOptions::default()).unwrap();
    let a = plan.tensor_allocation("src.frames").unwrap();
    // 3 queued (the explicit depth) + 1 held by fwd + 1 loan + 1 retirement + 0 history,
    // + 4 forwarded by fwd (each leg's queue of 1 and its consumer's hold).
    assert_eq!(
        (
            a.slot_terms.queue_entries,
            a.slot_terms.consumer_holds,
            a.slot_terms.producer_loans,
            a.slot_terms.retirement,
            a.slot_terms.history,
            a.slot_terms.forwarded
        ),
        (3, 1, 1, 1, 0, 4)
    );
    assert_eq!(a.slot_count, 10);
    assert_eq!(a.per_slot_bytes, 256);
    assert_eq!(a.aggregate_bytes, 10 * 256);
    let d = &plan.tensor_byte_span_derivations()[0];
    assert_eq!(
        (
            d.pool.as_str(),
            d.per_slot_bytes,
            d.slot_count,
            d.aggregate_bytes
        ),
        ("src.frames", 256, Some(10), Some(2560))
    );
    let human = plan.render_human();
    assert!(
        human.contains(
            "slots = 3 queued + 1 held + 1 loan + 1 retirement + 0 history + 4 forwarded = 10\n      forwarded through fwd.output → left.frames: queue depth 1\n      forwarded through fwd.output → left.frames: held 1\n      forwarded through fwd.output → right.frames: queue depth 1\n      forwarded through fwd.output → right.frames: held 1\n"
        ),
        "{human}"
    );
    assert!(human.contains("bytes = 10 × 256 = 2560"), "{human}");
}

#[test]
fn the_json_is_canonical_deterministic_and_marked() {
    let a = compile(&chain_and_fork(), CompileOptions::default())
        .unwrap()
        .json();
    let b = compile(&chain_and_fork(), CompileOptions::default())
        .unwrap()
        .json();
    assert_eq!(a, b, "the same graph gives the same bytes");
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["schema"], PLAN_JSON_SCHEMA);
    assert_eq!(v["tensor_allocations"][0]["memory_kind"], "host");
    assert_eq!(v["tensor_allocations"][0]["slot_count"], 10);
    assert!(v["tensor_byte_span_derivations"][0]["slot_count"].is_number());
    // A changed graph changes the plan.
    let mut g = chain_and_fork();
    let (extra, _) = ByteSource::new(8, 1);
    g.add_operator("extra", extra, ParamSet::defaults().unwrap())
        .unwrap();
    assert_ne!(compile(&g, CompileOptions::default()).unwrap().json(), a);
}

#[test]
fn the_dot_picture_shows_partitions_edges_and_pools() {
    let dot = compile(&chain_and_fork(), CompileOptions::default())
        .unwrap()
        .dot();
    assert!(dot.starts_with("digraph holo_plan {"));
    for needle in [
        "subgraph cluster_p0",
        "subgraph cluster_p2",
        "host-only",
        "op0 -> op1",
        "pool_src.frames",
        "10 × 256 B",
    ] {
        assert!(dot.contains(needle), "missing {needle:?} in\n{dot}");
    }
}

#[test]
fn the_stream_policy_is_frozen_into_the_plan() {
    let options = CompileOptions::default().with_cuda_execution(
        CudaExecutionOptions::default()
            .with_compute_stream_policy(CudaComputeStreamPolicy::SharedProcessDevice),
    );
    let plan = compile(&chain_and_fork(), options).unwrap();
    assert_eq!(
        plan.cuda_compute_stream_policy(),
        CudaComputeStreamPolicy::SharedProcessDevice
    );
    let v: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    assert_eq!(v["cuda_compute_stream_policy"], "shared_process_device");
    // A host-only graph has no stream to share: every partition keeps its own thread.
    let threads: Vec<&serde_json::Value> = v["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["thread"])
        .collect();
    assert_eq!(threads, [0, 1, 2]);
}

/// A source and a sink whose port names hold a quote and a backslash (which `#[operator]`
/// admits: a port name only has no whitespace or control character).
#[holo_runtime::operator]
struct QuotedSource {
    #[output(name = "out\"put\\", storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 8)]
    out: holo_runtime::Output<holo_runtime::Tensor>,
}

impl holo_runtime::Operator for QuotedSource {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        Ok(())
    }
}

#[holo_runtime::operator]
struct QuotedSink {
    #[input(name = "in\"put", memory = host)]
    input: holo_runtime::Input<holo_runtime::Tensor>,
}

impl holo_runtime::Operator for QuotedSink {
    fn compute(
        &mut self,
        _ctx: &mut holo_runtime::ExecutionContext<'_>,
    ) -> holo_runtime::Result<()> {
        Ok(())
    }
}

/// Whether every `"` of `line` that opens or closes a string is matched: a quote or
/// backslash in a name left unescaped ends its label early.
fn quotes_balance(line: &str) -> bool {
    let (mut open, mut escaped) = (false, false);
    for c in line.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => open = !open,
            _ => {}
        }
    }
    !open
}

#[test]
fn dot_escapes_port_names() {
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "src",
            QuotedSource {
                out: holo_runtime::Output::default(),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            QuotedSink {
                input: holo_runtime::Input::default(),
            },
        )
        .unwrap();
    g.add_flow(s.out, k.input, holo_runtime::ConnectionOptions::default());
    let i = g
        .add_operator_with_defaults(
            "importer",
            QuotedSink {
                input: holo_runtime::Input::default(),
            },
        )
        .unwrap();
    g.import_topic(
        i.input,
        "cam",
        holo_runtime::TopicOptions::DEFAULT.with_max_bytes(8),
    );
    let dot = compile(&g, CompileOptions::default()).unwrap().dot();
    assert!(
        dot.contains("[label=\"out\\\"put\\\\→in\\\"put depth 1\"]"),
        "{dot}"
    );
    assert!(dot.contains("[label=\"in\\\"put\", style=dashed]"), "{dot}");
    for line in dot.lines() {
        assert!(quotes_balance(line), "{line}");
    }
}

#[test]
fn dot_escapes_names() {
    let mut g = Graph::new();
    let (src, _) = ByteSource::new(8, 1);
    g.add_operator("cam \"left\"", src, ParamSet::defaults().unwrap())
        .unwrap();
    let dot = compile(&g, CompileOptions::default()).unwrap().dot();
    assert!(
        dot.contains("label=\"cam \\\"left\\\"\\nByteSource\""),
        "{dot}"
    );
}
