//! Graph checks and partitioning.

use std::collections::{BTreeMap, BTreeSet};

use super::{Diagnostic, Partitioning, Work, codes};
use crate::plan::ExecutionPartition;
use crate::spec::PortDirection;

/// Builds the edge maps and a topological order; reports fan-in, unconnected required
/// inputs and cycles.
pub(crate) fn check_graph(work: &mut Work<'_>) {
    let graph = work.graph;
    for (i, e) in graph.edges.iter().enumerate() {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        let from = &graph.operators[e.from.0.index()].ports[e.from.1 as usize];
        let to = &graph.operators[e.to.0.index()].ports[e.to.1 as usize];
        if from.direction != PortDirection::Output || to.direction != PortDirection::Input {
            work.diagnostics.push(
                Diagnostic::error(
                    codes::GRAPH_INVALID_FLOW,
                    "a flow must go from an output to an input",
                )
                .operator(&graph.operators[e.from.0.index()].name)
                .port(from.name),
            );
            continue;
        }
        work.outgoing
            .entry((e.from.0.0, e.from.1))
            .or_default()
            .push(i);
        work.incoming.entry((e.to.0.0, e.to.1)).or_default().push(i);
    }
    for (o, op) in graph.operators.iter().enumerate() {
        let o = u32::try_from(o).unwrap_or(u32::MAX);
        for (p, port) in op.ports.iter().enumerate() {
            let p = u32::try_from(p).unwrap_or(u32::MAX);
            if port.direction != PortDirection::Input {
                continue;
            }
            match work.incoming.get(&(o, p)).map_or(0, Vec::len) {
                0 if !port.optional => work.diagnostics.push(
                    Diagnostic::error(
                        codes::GRAPH_UNCONNECTED_INPUT,
                        "a required input has no flow",
                    )
                    .operator(&op.name)
                    .port(port.name)
                    .hint("connect it with `graph.add_flow`, or declare it `#[input(optional)]`"),
                ),
                0 | 1 => {}
                n => work.diagnostics.push(
                    Diagnostic::error(
                        codes::GRAPH_ILLEGAL_FAN_IN,
                        format!("{n} flows enter one input; an input has at most one producer"),
                    )
                    .operator(&op.name)
                    .port(port.name)
                    .hint("give the operator one input per producer"),
                ),
            }
        }
    }
    // Kahn's algorithm over operator-level edges; ties broken by operator index so the
    // order (and the plan) is deterministic.
    let n = graph.operators.len();
    let mut indegree = vec![0usize; n];
    let mut succ: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); n];
    let mut pred: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); n];
    for e in &graph.edges {
        pred[e.to.0.index()].insert(e.from.0.0);
        if succ[e.from.0.index()].insert(e.to.0.0) {
            indegree[e.to.0.index()] += 1;
        }
    }
    let mut ready: BTreeSet<u32> = (0..n)
        .filter(|&i| indegree[i] == 0)
        .filter_map(|i| u32::try_from(i).ok())
        .collect();
    while let Some(v) = ready.pop_first() {
        work.topo.push(v);
        for &s in &succ[v as usize] {
            indegree[s as usize] -= 1;
            if indegree[s as usize] == 0 {
                ready.insert(s);
            }
        }
    }
    work.successors = succ;
    work.producers = pred;
    if work.topo.len() != n {
        let in_cycle: Vec<&str> = (0..n)
            .filter(|&i| indegree[i] > 0)
            .map(|i| graph.operators[i].name.as_str())
            .collect();
        work.diagnostics.push(
            Diagnostic::error(
                codes::GRAPH_CYCLE,
                format!("the flows form a cycle through {}", in_cycle.join(", ")),
            )
            .operator(in_cycle.first().copied().unwrap_or(""))
            .hint("holo graphs are acyclic; feed state back inside an operator instead"),
        );
    }
}

/// Assigns every operator a partition; the returned partitions have `host_only` unset
/// (placement decides it).
pub(crate) fn partition(work: &mut Work<'_>) -> Vec<ExecutionPartition> {
    let n = work.graph.operators.len();
    work.partition_of = vec![u32::MAX; n];
    let mut parts: Vec<ExecutionPartition> = Vec::new();
    match &work.options.partitioning {
        Partitioning::Automatic => {
            for &op in &work.topo.clone() {
                let preds = &work.producers[op as usize];
                let joined = if preds.len() == 1 {
                    let p = *preds.first().unwrap_or(&op);
                    (work.successors[p as usize].len() == 1).then_some(p)
                } else {
                    None
                };
                if let Some(p) = joined {
                    let part = work.partition_of[p as usize];
                    work.partition_of[op as usize] = part;
                    parts[part as usize].operators.push(op);
                } else {
                    let reason = match work.producers[op as usize].len() {
                        0 => "source",
                        1 => "fork",
                        _ => "join",
                    };
                    let id = u32::try_from(parts.len()).unwrap_or(u32::MAX);
                    work.partition_of[op as usize] = id;
                    parts.push(ExecutionPartition {
                        id,
                        name: format!("p{id}"),
                        operators: vec![op],
                        host_only: true,
                        reason: reason.to_owned(),
                    });
                }
            }
        }
        Partitioning::Authored(specs) => {
            let by_name: BTreeMap<&str, u32> = work
                .graph
                .operators
                .iter()
                .enumerate()
                .filter_map(|(i, o)| Some((o.name.as_str(), u32::try_from(i).ok()?)))
                .collect();
            for spec in specs {
                let id = u32::try_from(parts.len()).unwrap_or(u32::MAX);
                for name in &spec.operators {
                    match by_name.get(name.as_str()) {
                        None => work.diagnostics.push(
                            Diagnostic::error(
                                codes::PARTITION_INVALID,
                                format!("partition {:?} names an unknown operator", spec.name),
                            )
                            .operator(name),
                        ),
                        Some(&op) if work.partition_of[op as usize] != u32::MAX => {
                            work.diagnostics.push(
                                Diagnostic::error(
                                    codes::PARTITION_INVALID,
                                    format!("partition {:?} names an operator that another partition already runs", spec.name),
                                )
                                .operator(name),
                            );
                        }
                        Some(&op) => work.partition_of[op as usize] = id,
                    }
                }
                parts.push(ExecutionPartition {
                    id,
                    name: spec.name.clone(),
                    operators: Vec::new(),
                    host_only: true,
                    reason: "authored".to_owned(),
                });
            }
            for (i, op) in work.graph.operators.iter().enumerate() {
                if work.partition_of[i] == u32::MAX {
                    work.diagnostics.push(
                        Diagnostic::error(
                            codes::PARTITION_INVALID,
                            "no authored partition runs this operator",
                        )
                        .operator(&op.name)
                        .hint("name every operator in exactly one partition"),
                    );
                    work.partition_of[i] = 0;
                }
            }
            for &op in &work.topo {
                let part = work.partition_of[op as usize];
                if let Some(p) = parts.get_mut(part as usize) {
                    p.operators.push(op);
                }
            }
        }
    }
    parts
}
