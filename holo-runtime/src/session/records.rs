//! The plan's records checked before a session materializes them: the session runs from
//! these records alone (plus the graph's operator instances and queue factories), so a
//! record that names something the plan does not have, or contradicts another record, is
//! refused here with `InvalidArgument` naming the record — never read past, never
//! replaced by a default.

use crate::channel::queue::EdgeFactory;
use crate::graph::Graph;
use crate::plan::{ExecutionPlan, PortRecord, TriggerKind};
use crate::spec::PortDirection;
use crate::{Error, ErrorCode, Result};

/// A record that the rest of the plan, or the graph, contradicts.
#[cold]
fn inconsistent(record: String, why: &str) -> Error {
    Error::new(
        ErrorCode::InvalidArgument,
        format!(
            "the plan's {record} is inconsistent: {why}; start a plan that `compile` made from this graph"
        ),
    )
    .at(format!("plan {record}"))
}

/// Checks every record the session binds from against the others, and the graph's shape
/// (its operators and flows, by index) against the plan's, and returns the queue factory
/// of every plan edge.
///
/// A queue's payload type is a Rust type: the factory that makes it is the one thing about
/// a flow a plan cannot record, so it comes from the graph's flow of the same index —
/// whose ends must be the plan edge's (the fingerprint check covers them too; this one
/// does not rest on a hash).
pub(super) fn check(graph: &Graph, plan: &ExecutionPlan) -> Result<Vec<EdgeFactory>> {
    let ops = plan.operators();
    if ops.len() != graph.operators.len() {
        return Err(inconsistent(
            "operator list".to_owned(),
            &format!(
                "it has {} operators and the graph {}",
                ops.len(),
                graph.operators.len()
            ),
        ));
    }
    if plan.edges().len() != graph.edges.len() {
        return Err(inconsistent(
            "edge list".to_owned(),
            &format!(
                "it has {} edges and the graph {} flows",
                plan.edges().len(),
                graph.edges.len()
            ),
        ));
    }
    let streams = plan.cuda_compute_streams().len();
    let stream_ok = |s: Option<u32>| s.is_none_or(|s| (s as usize) < streams);
    for (i, o) in ops.iter().enumerate() {
        let record = || format!("operator record {i} ({:?})", o.name);
        if o.id as usize != i {
            return Err(inconsistent(record(), &format!("its id is {}", o.id)));
        }
        if o.partition as usize >= plan.partitions().len() {
            return Err(inconsistent(
                record(),
                &format!("partition {} is not in the plan", o.partition),
            ));
        }
        if !stream_ok(o.cuda_stream) {
            return Err(inconsistent(
                record(),
                &format!("compute stream {:?} is not in the plan", o.cuda_stream),
            ));
        }
        for (k, p) in o.ports.iter().enumerate() {
            if p.index as usize != k || p.input.is_some() != (p.direction == PortDirection::Input) {
                return Err(inconsistent(
                    record(),
                    &format!(
                        "port record {k} ({:?}) has index {} and {} input binding as an {}",
                        p.name,
                        p.index,
                        if p.input.is_some() { "an" } else { "no" },
                        match p.direction {
                            PortDirection::Input => "input",
                            PortDirection::Output => "output",
                        }
                    ),
                ));
            }
        }
    }
    // The port record `port` of operator `op`, with the direction `direction`.
    let port = |op: u32, port: u32, direction: PortDirection| -> Option<&PortRecord> {
        ops.get(op as usize)?
            .ports
            .get(port as usize)
            .filter(|p| p.direction == direction)
    };
    let mut factories = Vec::with_capacity(graph.edges.len());
    for (i, (e, flow)) in plan.edges().iter().zip(&graph.edges).enumerate() {
        let record = || format!("edge record e{i}");
        if e.id as usize != i {
            return Err(inconsistent(record(), &format!("its id is {}", e.id)));
        }
        let (Some(from), Some(to)) = (
            port(e.from_operator, e.from_port_index, PortDirection::Output),
            port(e.to_operator, e.to_port_index, PortDirection::Input),
        ) else {
            return Err(inconsistent(
                record(),
                &format!(
                    "its ends (operator {} output {}, operator {} input {}) are not ports of the plan's operators",
                    e.from_operator, e.from_port_index, e.to_operator, e.to_port_index
                ),
            ));
        };
        if (flow.from.0.0, flow.from.1, flow.to.0.0, flow.to.1)
            != (
                e.from_operator,
                e.from_port_index,
                e.to_operator,
                e.to_port_index,
            )
        {
            return Err(inconsistent(
                record(),
                &format!(
                    "it connects {}.{} to {}.{}, but the graph's flow #{i} connects other ports",
                    ops[e.from_operator as usize].name,
                    from.name,
                    ops[e.to_operator as usize].name,
                    to.name
                ),
            ));
        }
        let c = &e.contract;
        if c.consumer_stream != ops[e.to_operator as usize].cuda_stream {
            return Err(inconsistent(
                record(),
                &format!(
                    "its consumer stream {:?} is not its consumer's stream {:?}",
                    c.consumer_stream, ops[e.to_operator as usize].cuda_stream
                ),
            ));
        }
        if c.fused {
            let producer = ops[e.from_operator as usize].cuda_stream;
            let proven = e
                .fusion
                .as_ref()
                .is_some_and(|f| producer == Some(f.stream) && c.consumer_stream == producer);
            if !proven {
                return Err(inconsistent(
                    record(),
                    "it is fused, but its fusion evidence does not put both ends on one stream",
                ));
            }
        }
        factories.push(flow.factory);
    }
    if plan.operator_triggers().len() != ops.len() {
        return Err(inconsistent(
            "trigger list".to_owned(),
            &format!(
                "it has {} triggers for {} operators",
                plan.operator_triggers().len(),
                ops.len()
            ),
        ));
    }
    for (i, t) in plan.operator_triggers().iter().enumerate() {
        let record = || format!("trigger record {i} ({:?})", ops[i].name);
        if t.operator as usize != i {
            return Err(inconsistent(
                record(),
                &format!("it is operator {}'s", t.operator),
            ));
        }
        if t.trigger == TriggerKind::OnArrival
            && let Some(p) = t.input_port
            && port(t.operator, p, PortDirection::Input).is_none()
        {
            return Err(inconsistent(
                record(),
                &format!("its on_arrival input {p} is not an input of the operator"),
            ));
        }
    }
    for a in plan.tensor_allocations() {
        if port(a.operator, a.port_index, PortDirection::Output).is_none() {
            return Err(inconsistent(
                format!("tensor allocation {:?}", a.pool),
                &format!("operator {} has no output {}", a.operator, a.port_index),
            ));
        }
    }
    Ok(factories)
}
