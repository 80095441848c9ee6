//! Forwarding: which outputs emit the tensors an input received
//! (`#[output(forwards = input)]`), and the flows a pool's tensors can reach through them.
//! Pool sizing (`pools.rs`) adds every queue and hold on those flows to the origin pool.

use super::index::Adjacency;
use super::{Diagnostic, Work, codes};
use crate::plan::{EdgeRecord, ForwardedSlotTerm, HardFloorContributorRecord};
use crate::spec::{MissingPolicy, PortDirection};

/// Which outputs forward each tensor input (`#[output(forwards = input)]`): row
/// [`Work::port_index`] of an input lists the port numbers of its operator's outputs that
/// forward what it receives. An output whose `forwards` names no tensor input of its
/// operator is reported (`POOL_FORWARDS_INVALID`) and left out.
pub(crate) fn forwarding(work: &mut Work<'_>) -> Adjacency {
    let graph = work.graph;
    let mut pairs = Vec::new();
    // The ports' dense facts, not the graph's ports: at 10,000 operators reading each
    // 464-byte port again to find the few that forward cost a cache miss per port.
    for o in 0..graph.operators.len() {
        // Only a tensor output forwards: an operator without tensor ports is not read.
        if !graph.tensor_operators[o] {
            continue;
        }
        let facts = graph.port_facts_of(o);
        let o = u32::try_from(o).unwrap_or(u32::MAX);
        for (out, port) in facts.iter().enumerate() {
            // Only a tensor output's facts name one (`PortFacts::of`).
            let Some(input) = port.forwards else {
                continue;
            };
            let found = facts
                .iter()
                .position(|q| q.name == input && q.direction == PortDirection::Input);
            match found {
                Some(i) if facts[i].tensor_input() => {
                    let i = u32::try_from(i).unwrap_or(u32::MAX);
                    let out = u32::try_from(out).unwrap_or(u32::MAX);
                    pairs.push((
                        u32::try_from(work.port_index(o, i)).unwrap_or(u32::MAX),
                        out,
                    ));
                }
                found => {
                    let what = if found.is_some() {
                        "a message input; only a received `Tensor` can be forwarded"
                    } else {
                        "no input of this operator"
                    };
                    work.diagnostics.push(
                        Diagnostic::error(
                            codes::POOL_FORWARDS_INVALID,
                            format!("`forwards = {input}` names {what}"),
                        )
                        .operator(work.op_name(o))
                        .port(port.name)
                        .hint("name a `Tensor` input of the same operator, whose received tensors this output emits"),
                    );
                }
            }
        }
    }
    // (No table when nothing forwards: every row is then empty.)
    if pairs.is_empty() {
        return Adjacency::default();
    }
    let ports = work.graph.port_facts.len();
    Adjacency::from_pairs(ports, &pairs)
}

/// The flows a tensor of the pool of output `(o, p)` may travel on after a forwarding
/// output, breadth first: from each flow the pool reaches, through every output of its
/// consumer that forwards the consumer's input, to that output's flows. Every forwarding
/// output reached is appended to `outputs` (its exported topic's subscribers hold the
/// pool's tensors too).
///
/// `marks` (one per flow, kept across pools) and `stamp` (this pool's own, non-zero)
/// make each flow visited once, so the walk ends whatever the graph (`compile` rejects a
/// cycle before this pass; an input has one producer, so a flow is reached by one path).
pub(super) fn forwarded_flows(
    work: &Work<'_>,
    forwards: &Adjacency,
    (o, p): (u32, u32),
    marks: &mut [u32],
    stamp: u32,
    outputs: &mut Vec<(u32, u32)>,
) -> Vec<u32> {
    let frontier: Vec<u32> = work.outgoing(o, p).to_vec();
    walk(work, forwards, frontier, false, marks, stamp, outputs)
}

/// The flows a tensor received on input `(o, p)` (an imported topic's) may travel on
/// after the outputs that forward that input, and on after theirs: [`forwarded_flows`]
/// from an input instead of an output.
pub(super) fn forwarded_from_input(
    work: &Work<'_>,
    forwards: &Adjacency,
    (o, p): (u32, u32),
    marks: &mut [u32],
    stamp: u32,
    outputs: &mut Vec<(u32, u32)>,
) -> Vec<u32> {
    let mut frontier = Vec::new();
    for &out in forwards.row(work.port_index(o, p)) {
        outputs.push((o, out));
        frontier.extend_from_slice(work.outgoing(o, out));
    }
    walk(work, forwards, frontier, true, marks, stamp, outputs)
}

/// The breadth-first walk of [`forwarded_flows`] from the flows `frontier`, which count as
/// found when `found_first`.
fn walk(
    work: &Work<'_>,
    forwards: &Adjacency,
    mut frontier: Vec<u32>,
    found_first: bool,
    marks: &mut [u32],
    stamp: u32,
    outputs: &mut Vec<(u32, u32)>,
) -> Vec<u32> {
    let mut found: Vec<u32> = if found_first {
        frontier.clone()
    } else {
        Vec::new()
    };
    for &e in &frontier {
        marks[e as usize] = stamp;
    }
    let mut at = 0;
    while let Some(&e) = frontier.get(at) {
        at += 1;
        let to = work.graph.edges[e as usize].to;
        for &out in forwards.row(work.port_index(to.0.0, to.1)) {
            outputs.push((to.0.0, out));
            for &f in work.outgoing(to.0.0, out) {
                if marks[f as usize] != stamp {
                    marks[f as usize] = stamp;
                    frontier.push(f);
                    found.push(f);
                }
            }
        }
    }
    found
}

/// A pool's hard-floor contributor: `(scenario, group, contributor, entries)`.
pub(super) type FloorItem = (String, String, String, u32);

/// The slot count `items` compose to (per scenario the sum of each group's largest
/// contributor, the largest scenario): `None` on overflow.
pub(super) fn composed(items: &[FloorItem]) -> Option<u32> {
    crate::plan::rates::compose(
        items
            .iter()
            .map(|(s, g, _, n)| (s.as_str(), g.as_str(), *n)),
    )
}

/// `items` as pool `pool`'s hard-floor contributor records.
pub(super) fn floor_records(
    pool: &str,
    items: Vec<FloorItem>,
) -> impl Iterator<Item = HardFloorContributorRecord> + '_ {
    items
        .into_iter()
        .map(
            move |(scenario, group, contributor, entries)| HardFloorContributorRecord {
                scope: "pool".into(),
                edge: None,
                pool: Some(pool.to_owned()),
                scenario: scenario.into(),
                group: group.into(),
                contributor: contributor.into(),
                entries,
            },
        )
}

/// The terms of the flows `forwarded` (from [`forwarded_flows`]): per flow its final queue
/// depth and its consumer's retention (`max(1, history)`, as for a direct consumer; a
/// reused last sample is an alternative to the hold, in the `data_missing` scenario),
/// as plan terms and as hard-floor contributors appended to `items` for every scenario.
/// Returns the terms and the retention's sum (`None` on overflow).
pub(super) fn forwarded_terms(
    work: &Work<'_>,
    edges: &[EdgeRecord],
    forwarded: &[u32],
    scenarios: &[&str],
    items: &mut Vec<FloorItem>,
) -> (Vec<ForwardedSlotTerm>, Option<u32>) {
    let mut through = Vec::with_capacity(2 * forwarded.len());
    let mut retention = Some(0u32);
    for &f in forwarded {
        let ge = &work.graph.edges[f as usize];
        let t = &work.graph.operators[ge.to.0.0 as usize].ports[ge.to.1 as usize].temporal;
        let depth = edges[f as usize].queue_depth;
        let via = format!(
            "{}.{}",
            work.op_name(ge.from.0.0),
            work.port_name(ge.from.0.0, ge.from.1)
        );
        let to = format!(
            "{}.{}",
            work.op_name(ge.to.0.0),
            work.port_name(ge.to.0.0, ge.to.1)
        );
        let (held, holds_what) = if t.history > 0 {
            (t.history, "history")
        } else {
            (1, "consumer_hold")
        };
        retention = retention.and_then(|r| r.checked_add(held));
        for (contributor, entries) in [("queue_depth", depth), (holds_what, held)] {
            through.push(ForwardedSlotTerm {
                edge: f,
                through: via.clone(),
                to: to.clone(),
                contributor: contributor.to_owned(),
                entries,
            });
        }
        for s in scenarios {
            let g = format!("forwarded_retention:e{f}");
            items.push((
                (*s).to_owned(),
                format!("forwarded_queue:e{f}"),
                "forwarded_queue_entries".to_owned(),
                depth,
            ));
            let current = if *s == "data_missing" && t.missing == MissingPolicy::ReuseLast {
                "forwarded_reuse_last"
            } else {
                "forwarded_consumer_hold"
            };
            items.push(((*s).to_owned(), g.clone(), current.to_owned(), 1));
            if t.history > 0 {
                items.push((
                    (*s).to_owned(),
                    g,
                    "forwarded_history".to_owned(),
                    t.history,
                ));
            }
        }
    }
    (through, retention)
}
