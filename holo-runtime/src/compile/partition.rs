//! Graph checks and partitioning.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::fingerprint::Fingerprint;
use super::index::Adjacency;
use super::{Diagnostic, Partitioning, Work, codes};
use crate::plan::ExecutionPartition;
use crate::spec::{InputMode, PortDirection};

/// Builds the indexes (names, ports, edge maps) and the fingerprint, and a topological
/// order; reports fan-in, unconnected required inputs and cycles.
pub(crate) fn check_graph(work: &mut Work<'_>) {
    let graph = work.graph;
    let n = graph.operators.len();
    // The graph's operator records are read here, once and in order, its ports' and names'
    // from its dense tables (`Graph::port_facts`, `Graph::names`); later passes read the
    // indexes built from them.
    let mut fingerprint = Fingerprint::new();
    for (o, op) in graph.operators.iter().enumerate() {
        fingerprint.operator(graph.names.get(o), op, graph.port_facts_of(o));
    }
    let ports = graph.port_facts.len();
    let mut incoming = Vec::with_capacity(graph.edges.len());
    let mut outgoing = Vec::with_capacity(graph.edges.len());
    for (i, e) in graph.edges.iter().enumerate() {
        fingerprint.flow(e);
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        let (from, to) = (
            work.port_index(e.from.0.0, e.from.1),
            work.port_index(e.to.0.0, e.to.1),
        );
        if graph.port_facts[from].direction != PortDirection::Output
            || graph.port_facts[to].direction != PortDirection::Input
        {
            work.diagnostics.push(
                Diagnostic::error(
                    codes::GRAPH_INVALID_FLOW,
                    "a flow must go from an output to an input",
                )
                .operator(&graph.operators[e.from.0.index()].name)
                .port(graph.port_facts[from].name),
            );
            continue;
        }
        outgoing.push((u32::try_from(from).unwrap_or(u32::MAX), i));
        incoming.push((u32::try_from(to).unwrap_or(u32::MAX), i));
    }
    // An imported input is fed by its topic's publishers: it counts as connected. (Every
    // other check of a topic is `topics::check`'s.)
    let mut imported = vec![false; ports];
    for t in &graph.topics {
        fingerprint.topic(t);
        let (o, p) = (t.port.0.index(), t.port.1 as usize);
        if t.direction == crate::plan::TopicDirection::Import
            && let Some(count) = graph.operators.get(o).map(|op| op.ports.len())
            && p < count
        {
            imported[graph.port_base[o] + p] = true;
        }
    }
    work.fingerprint = fingerprint.finish();
    work.incoming = Adjacency::from_pairs(ports, &incoming);
    work.outgoing = Adjacency::from_pairs(ports, &outgoing);
    for (o, op) in graph.operators.iter().enumerate() {
        let ports = graph.port_facts_of(o);
        let o = u32::try_from(o).unwrap_or(u32::MAX);
        for (p, port) in ports.iter().enumerate() {
            let p = u32::try_from(p).unwrap_or(u32::MAX);
            // `#[operator]` refuses both on the user's token; an operator whose ports are
            // written by hand meets them here.
            let zero = match (port.direction, port.mode) {
                (PortDirection::Output, _) if port.burst == 0 => Some("burst"),
                (PortDirection::Input, InputMode::Window { min: 0 }) => Some("window"),
                _ => None,
            };
            if let Some(key) = zero {
                work.diagnostics.push(
                    Diagnostic::error(
                        codes::RATE_INVALID,
                        format!("`{key} = 0` admits no entry; it is at least 1"),
                    )
                    .operator(&op.name)
                    .port(port.name),
                );
            }
            if port.direction != PortDirection::Input {
                continue;
            }
            let at = work.port_index(o, p);
            match work.incoming.row(at).len() {
                0 if !port.optional && !imported[at] => work.diagnostics.push(
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
    // Kahn's algorithm over operator-level edges; ties broken by operator index (the
    // smallest ready one first) so the order (and the plan) is deterministic.
    let pairs: Vec<(u32, u32)> = graph.edges.iter().map(|e| (e.from.0.0, e.to.0.0)).collect();
    let succ = Adjacency::from_pairs(n, &pairs).into_sets();
    let reversed: Vec<(u32, u32)> = pairs.into_iter().map(|(from, to)| (to, from)).collect();
    let pred = Adjacency::from_pairs(n, &reversed).into_sets();
    let mut indegree = vec![0u32; n];
    for o in 0..n {
        for &s in succ.row(o) {
            indegree[s as usize] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..n)
        .filter(|&i| indegree[i] == 0)
        .filter_map(|i| u32::try_from(i).ok().map(Reverse))
        .collect();
    work.topo.reserve(n);
    while let Some(Reverse(v)) = ready.pop() {
        work.topo.push(v);
        for &s in succ.row(v as usize) {
            indegree[s as usize] -= 1;
            if indegree[s as usize] == 0 {
                ready.push(Reverse(s));
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
            for &op in &work.topo {
                let preds = work.producers.row(op as usize);
                let joined = match preds {
                    &[p] => (work.successors.row(p as usize).len() == 1).then_some(p),
                    _ => None,
                };
                if let Some(p) = joined {
                    let part = work.partition_of[p as usize];
                    work.partition_of[op as usize] = part;
                    parts[part as usize].operators.push(op);
                } else {
                    let reason = match preds.len() {
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
                        thread: id,
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
            let mut seen = BTreeSet::new();
            for spec in specs {
                let id = u32::try_from(parts.len()).unwrap_or(u32::MAX);
                // The name becomes the partition thread's (`holo-<name>`), which takes no
                // NUL; and two partitions of one name could not be told apart in the plan.
                if spec.name.is_empty() || spec.name.chars().any(char::is_control) {
                    work.diagnostics.push(
                        Diagnostic::error(
                            codes::PARTITION_INVALID,
                            format!(
                                "the partition name {:?} is empty or holds a control character",
                                spec.name
                            ),
                        )
                        .hint("name the partition with printable characters, e.g. `camera`"),
                    );
                } else if !seen.insert(spec.name.as_str()) {
                    work.diagnostics.push(
                        Diagnostic::error(
                            codes::PARTITION_INVALID,
                            format!("two partitions are named {:?}", spec.name),
                        )
                        .hint("give each authored partition its own name"),
                    );
                }
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
                    thread: id,
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
