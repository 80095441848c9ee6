//! The plan's records checked before a session materializes them: the session runs from
//! these records alone (plus the graph's operator instances and queue factories), so a
//! record that names something the plan does not have, or contradicts another record, is
//! refused here with `InvalidArgument` naming the record — never read past, never
//! replaced by a default.

use crate::channel::queue::EdgeFactory;
use crate::graph::Graph;
use crate::plan::{ExecutionPlan, PortRecord, TopicDirection, TriggerKind};
use crate::spec::PortDirection;
use crate::{Error, ErrorCode, Result};

/// A record that the rest of the plan, or the graph, contradicts.
#[cold]
fn inconsistent(record: &str, why: &str) -> Error {
    Error::new(
        ErrorCode::InvalidArgument,
        format!(
            "the plan's {record} is inconsistent: {why}; start a plan that `compile` made from this graph"
        ),
    )
    .at(format!("plan {record}"))
}

/// Checks every record the session binds from against the others, and the graph's shape
/// (its operators, flows and topics, by index) against the plan's, and returns the queue
/// factory of every plan edge and of every plan topic.
///
/// A queue's payload type is a Rust type: the factory that makes it is the one thing about
/// a flow a plan cannot record, so it comes from the graph's flow of the same index —
/// whose ends must be the plan edge's (the fingerprint check covers them too; this one
/// does not rest on a hash).
pub(super) fn check(
    graph: &Graph,
    plan: &ExecutionPlan,
) -> Result<(Vec<EdgeFactory>, Vec<EdgeFactory>)> {
    let ops = plan.operators();
    if ops.len() != graph.operators.len() {
        return Err(inconsistent(
            "operator list",
            &format!(
                "it has {} operators and the graph {}",
                ops.len(),
                graph.operators.len()
            ),
        ));
    }
    if plan.edges().len() != graph.edges.len() {
        return Err(inconsistent(
            "edge list",
            &format!(
                "it has {} edges and the graph {} flows",
                plan.edges().len(),
                graph.edges.len()
            ),
        ));
    }
    // Partition threads: numbered densely in order of each thread's first partition.
    let mut threads = 0u32;
    for p in plan.partitions() {
        if p.thread > threads {
            return Err(inconsistent(
                &format!("partition record {} ({:?})", p.id, p.name),
                &format!(
                    "its thread is {} where the next new thread is {threads}",
                    p.thread
                ),
            ));
        }
        threads += u32::from(p.thread == threads);
    }
    let streams = plan.cuda_compute_streams().len();
    let stream_ok = |s: Option<u32>| s.is_none_or(|s| (s as usize) < streams);
    for (i, o) in ops.iter().enumerate() {
        let record = || format!("operator record {i} ({:?})", o.name);
        if o.id as usize != i {
            return Err(inconsistent(&record(), &format!("its id is {}", o.id)));
        }
        if o.partition as usize >= plan.partitions().len() {
            return Err(inconsistent(
                &record(),
                &format!("partition {} is not in the plan", o.partition),
            ));
        }
        if !stream_ok(o.cuda_stream) {
            return Err(inconsistent(
                &record(),
                &format!("compute stream {:?} is not in the plan", o.cuda_stream),
            ));
        }
        for (k, p) in o.ports.iter().enumerate() {
            if p.index as usize != k || p.input.is_some() != (p.direction == PortDirection::Input) {
                return Err(inconsistent(
                    &record(),
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
            return Err(inconsistent(&record(), &format!("its id is {}", e.id)));
        }
        let (Some(from), Some(to)) = (
            port(e.from_operator, e.from_port_index, PortDirection::Output),
            port(e.to_operator, e.to_port_index, PortDirection::Input),
        ) else {
            return Err(inconsistent(
                &record(),
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
                &record(),
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
                &record(),
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
                    &record(),
                    "it is fused, but its fusion evidence does not put both ends on one stream",
                ));
            }
        }
        factories.push(flow.factory);
    }
    if plan.operator_triggers().len() != ops.len() {
        return Err(inconsistent(
            "trigger list",
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
                &record(),
                &format!("it is operator {}'s", t.operator),
            ));
        }
        if t.trigger == TriggerKind::OnArrival
            && let Some(p) = t.input_port
            && port(t.operator, p, PortDirection::Input).is_none()
        {
            return Err(inconsistent(
                &record(),
                &format!("its on_arrival input {p} is not an input of the operator"),
            ));
        }
    }
    let topic_factories = check_topics(graph, plan, &port)?;
    for a in plan.tensor_allocations() {
        let record = || format!("tensor allocation {:?}", a.pool);
        match &a.topic {
            // A boundary pool names the exporting output and its export record.
            Some(name)
                if plan.topic(name).is_some_and(|t| {
                    t.direction == TopicDirection::Export
                        && t.boundary.is_some()
                        && (t.operator, t.port_index) == (a.operator, a.port_index)
                        && t.pool.as_deref() == Some(a.pool.as_str())
                }) =>
            {
                if port(a.operator, a.port_index, PortDirection::Output).is_none() {
                    return Err(inconsistent(
                        &record(),
                        &format!("operator {} has no output {}", a.operator, a.port_index),
                    ));
                }
            }
            // An imported topic's pool names the importing input and its import record.
            Some(name) => {
                let imported = plan.topic(name).is_some_and(|t| {
                    t.direction == TopicDirection::Import
                        && (t.operator, t.port_index) == (a.operator, a.port_index)
                        && t.pool.as_deref() == Some(a.pool.as_str())
                });
                if port(a.operator, a.port_index, PortDirection::Input).is_none() || !imported {
                    return Err(inconsistent(
                        &record(),
                        &format!(
                            "it backs topic {name:?}, which the plan does not import into operator {} input {}",
                            a.operator, a.port_index
                        ),
                    ));
                }
            }
            None => {
                if port(a.operator, a.port_index, PortDirection::Output).is_none() {
                    return Err(inconsistent(
                        &record(),
                        &format!("operator {} has no output {}", a.operator, a.port_index),
                    ));
                }
            }
        }
    }
    Ok((factories, topic_factories))
}

/// Checks every topic record against the graph's topic of the same index (its name,
/// direction and port) and the plan's ports and streams, and returns each one's queue
/// factory (the payload type a plan cannot record).
fn check_topics<'p>(
    graph: &Graph,
    plan: &'p ExecutionPlan,
    port: &dyn Fn(u32, u32, PortDirection) -> Option<&'p PortRecord>,
) -> Result<Vec<EdgeFactory>> {
    if plan.topics().len() != graph.topics.len() {
        return Err(inconsistent(
            "topic list",
            &format!(
                "it has {} topics and the graph {}",
                plan.topics().len(),
                graph.topics.len()
            ),
        ));
    }
    let streams = plan.cuda_compute_streams().len();
    let mut out = Vec::with_capacity(graph.topics.len());
    for (i, (t, node)) in plan.topics().iter().zip(&graph.topics).enumerate() {
        let record = || format!("topic record {i} ({:?})", t.name);
        let direction = match t.direction {
            TopicDirection::Export => PortDirection::Output,
            TopicDirection::Import => PortDirection::Input,
        };
        if t.id as usize != i
            || t.name != node.name
            || t.direction != node.direction
            || (t.operator, t.port_index) != (node.port.0.0, node.port.1)
            || port(t.operator, t.port_index, direction).is_none()
        {
            return Err(inconsistent(
                &record(),
                "its id, name, direction or port is not the graph's topic of the same index",
            ));
        }
        let clients_ok = match t.direction {
            TopicDirection::Export => t.subscribers > 0 && t.publishers == 0,
            TopicDirection::Import => t.publishers > 0 && t.subscribers == 0,
        };
        if !clients_ok
            || t.subscribers > crate::MAX_TOPIC_CLIENTS
            || t.publishers > crate::MAX_TOPIC_CLIENTS
            || t.depth == 0
            || t.depth > crate::MAX_QUEUE_DEPTH
        {
            return Err(inconsistent(
                &record(),
                &format!(
                    "{} subscribers, {} publishers and depth {} do not make an {} topic",
                    t.subscribers, t.publishers, t.depth, t.direction
                ),
            ));
        }
        if t.consumer_stream.is_some_and(|s| s as usize >= streams)
            || t.consumer_stream
                != match t.direction {
                    TopicDirection::Import => plan.operators()[t.operator as usize].cuda_stream,
                    TopicDirection::Export => None,
                }
        {
            return Err(inconsistent(
                &record(),
                &format!(
                    "its consumer stream {:?} is not its importer's stream",
                    t.consumer_stream
                ),
            ));
        }
        // An import fed by another process's export has no pool: its tensors are the
        // exporter's.
        if t.direction == TopicDirection::Import
            && t.tensor
            && t.from_export.is_none()
            && t.pool
                .as_deref()
                .is_none_or(|p| plan.tensor_allocation(p).is_none())
        {
            return Err(inconsistent(
                &record(),
                "an imported tensor topic needs its pool among the plan's allocations",
            ));
        }
        out.push(node.factory);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::plan::ExecutionPlan;
    use crate::spec::InputMode;
    use crate::{
        CompileOptions, ConnectionOptions, EmitOptions, Error, ErrorCode, ExecutionContext, Graph,
        Input, Operator, Output, Result, RunSession, SessionOptions, compile,
    };

    /// Emits 1, 2 and 3 in one activation.
    #[crate::operator(crate = crate)]
    struct Three {
        out: Output<u64>,
    }
    impl Operator for Three {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            for v in 1..=3u64 {
                self.out.emit(v, EmitOptions::default())?;
            }
            Ok(())
        }
    }

    /// Receives once per activation.
    #[crate::operator(crate = crate, trigger = on_arrival(input))]
    struct Once {
        input: Input<u64>,
        got: Arc<Mutex<Vec<u64>>>,
    }
    impl Operator for Once {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            if let Some(v) = self.input.receive() {
                self.got.lock().unwrap().push(v);
            }
            Ok(())
        }
    }

    fn graph(got: &Arc<Mutex<Vec<u64>>>) -> Graph {
        let mut g = Graph::new();
        let a = g
            .add_operator_with_defaults(
                "three",
                Three {
                    out: Output::default(),
                },
            )
            .unwrap();
        let b = g
            .add_operator_with_defaults(
                "once",
                Once {
                    input: Input::default(),
                    got: Arc::clone(got),
                },
            )
            .unwrap();
        g.add_flow(
            a.out,
            b.input,
            ConnectionOptions {
                queue_depth: Some(3),
                ..ConnectionOptions::default()
            },
        );
        g
    }

    /// Starts the graph with its own plan changed by `tamper`.
    fn start(tamper: impl FnOnce(&mut ExecutionPlan)) -> Result<(RunSession, Vec<u64>)> {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = graph(&got);
        let mut plan = compile(&g, CompileOptions::default()).unwrap();
        tamper(&mut plan);
        let mut session = RunSession::start_stepped(g, &plan, SessionOptions::frames(1))?;
        session.step()?;
        let got = got.lock().unwrap().clone();
        Ok((session, got))
    }

    fn refused(tamper: impl FnOnce(&mut ExecutionPlan)) -> Error {
        match start(tamper) {
            Ok(_) => panic!("the tampered plan started"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_input_binding_is_the_plans() {
        // The port declares a queue: one entry per receive, the oldest first.
        let (s, got) = start(|_| {}).unwrap();
        s.join().unwrap();
        assert_eq!(got, [1]);
        // A plan that records `latest` for it is bound as latest: the newest entry.
        let (s, got) = start(|p| {
            p.operators[1].ports[0].input.as_mut().unwrap().mode = InputMode::Latest;
        })
        .unwrap();
        s.join().unwrap();
        assert_eq!(got, [3]);
    }

    #[test]
    fn an_edge_whose_ends_are_not_ports_is_refused() {
        let e = refused(|p| p.edges[0].to_port_index = 1);
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's edge record e0 is inconsistent: its ends (operator 0 output 0, operator 1 input 1) are not ports of the plan's operators; start a plan that `compile` made from this graph"
        );
        assert_eq!(e.location(), Some("plan edge record e0"));
    }

    #[test]
    fn an_edge_that_is_not_the_graphs_flow_is_refused() {
        // Operator 1's port 0 is an input; claim the flow enters operator 0 instead.
        let e = refused(|p| {
            let input = p.operators[1].ports[0].clone();
            p.operators[0].ports.push(input);
            p.edges[0].to_operator = 0;
            p.edges[0].to_port_index = 1;
            p.operators[0].ports[1].index = 1;
        });
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's edge record e0 is inconsistent: it connects three.out to three.input, but the graph's flow #0 connects other ports; start a plan that `compile` made from this graph"
        );
    }

    #[test]
    fn a_missing_edge_record_is_refused() {
        let e = refused(|p| {
            p.edges.clear();
        });
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's edge list is inconsistent: it has 0 edges and the graph 1 flows; start a plan that `compile` made from this graph"
        );
    }

    #[test]
    fn an_input_without_its_binding_is_refused() {
        let e = refused(|p| p.operators[1].ports[0].input = None);
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's operator record 1 (\"once\") is inconsistent: port record 0 (\"input\") has index 0 and no input binding as an input; start a plan that `compile` made from this graph"
        );
    }

    #[test]
    fn a_contract_that_contradicts_the_operators_stream_is_refused() {
        let e = refused(|p| p.edges[0].contract.consumer_stream = Some(0));
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's edge record e0 is inconsistent: its consumer stream Some(0) is not its consumer's stream None; start a plan that `compile` made from this graph"
        );
        let e = refused(|p| p.edges[0].contract.fused = true);
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's edge record e0 is inconsistent: it is fused, but its fusion evidence does not put both ends on one stream; start a plan that `compile` made from this graph"
        );
    }

    #[test]
    fn a_trigger_on_an_output_is_refused() {
        let e = refused(|p| {
            p.rates.operator_triggers[1].input_port = Some(1);
        });
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's trigger record 1 (\"once\") is inconsistent: its on_arrival input 1 is not an input of the operator; start a plan that `compile` made from this graph"
        );
        // A trigger with no input at all names the input it has.
        let e = refused(|p| p.rates.operator_triggers[1].input_port = None);
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's trigger is on_arrival(input), but the operator has no connected input \"input\""
        );
    }

    #[test]
    fn a_partition_thread_out_of_order_is_refused() {
        let e = refused(|p| p.partitions[0].thread = 1);
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's partition record 0 (\"p0\") is inconsistent: its thread is 1 where the next new thread is 0; start a plan that `compile` made from this graph"
        );
        assert_eq!(e.location(), Some("plan partition record 0 (\"p0\")"));
    }

    /// Two partitions the plan gives one thread run on one thread, as the plan says.
    #[test]
    fn partitions_that_share_a_thread_run_on_it() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = graph(&got);
        let options =
            CompileOptions::default().with_partitioning(crate::Partitioning::Authored(vec![
                crate::PartitionSpec::new("a", ["three"]),
                crate::PartitionSpec::new("b", ["once"]),
            ]));
        let mut plan = compile(&g, options).unwrap();
        assert_eq!(
            plan.partitions()
                .iter()
                .map(|p| p.thread)
                .collect::<Vec<_>>(),
            [0, 1]
        );
        plan.partitions[1].thread = 0;
        let s = RunSession::start(g, &plan, SessionOptions::frames(1)).unwrap();
        assert_eq!(s.threads.len(), 1);
        let _ = s.wait_idle(std::time::Duration::from_secs(30));
        s.join().unwrap();
        assert_eq!(*got.lock().unwrap(), [1, 2, 3]);
    }

    /// `three` → `once`, with `three.out` also exported as topic "n", started with its
    /// own plan changed by `tamper`.
    fn refused_with_topic(tamper: impl FnOnce(&mut ExecutionPlan)) -> Error {
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut g = graph(&got);
        let out = crate::OutPort::<u64>::__new(crate::OperatorId(0, g.id_for_tests()), 0);
        g.export_topic(out, "n", crate::TopicOptions::DEFAULT);
        let mut plan = compile(&g, CompileOptions::default()).unwrap();
        tamper(&mut plan);
        match RunSession::start_stepped(g, &plan, SessionOptions::frames(1)) {
            Ok(_) => panic!("the tampered plan started"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_topic_record_that_is_not_the_graphs_topic_is_refused() {
        let e = refused_with_topic(|p| p.topics[0].name = "m".to_owned());
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "the plan's topic record 0 (\"m\") is inconsistent: its id, name, direction or port is not the graph's topic of the same index; start a plan that `compile` made from this graph"
        );
        let e = refused_with_topic(|p| p.topics.clear());
        assert_eq!(
            e.message(),
            "the plan's topic list is inconsistent: it has 0 topics and the graph 1; start a plan that `compile` made from this graph"
        );
        let e = refused_with_topic(|p| p.topics[0].subscribers = 0);
        assert_eq!(
            e.message(),
            "the plan's topic record 0 (\"n\") is inconsistent: 0 subscribers, 0 publishers and depth 1 do not make an export topic; start a plan that `compile` made from this graph"
        );
        let e = refused_with_topic(|p| p.topics[0].consumer_stream = Some(0));
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(e.location(), Some("plan topic record 0 (\"n\")"));
    }
}
