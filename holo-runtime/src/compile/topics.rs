//! Topics: outputs exported and inputs imported under a name (`Graph::export_topic`,
//! `Graph::import_topic`). This pass checks the declarations, decides each topic's queue
//! depth, sizes every imported topic's own pool, and writes the topic records a session
//! binds standalone clients from. The subscribers of an export are counted in the pools
//! whose tensors reach it (`pools.rs`, through the forwarding walk).
//!
//! What conflicts with a topic (`TOPIC_PORT_CONFLICT`): a second topic on the same port
//! (one port, one topic), and a flow into an imported input (an input has one producer:
//! the topic's publishers, or one flow). A flow from an exported output does not
//! conflict: the output publishes to its flows and to its topic's subscribers alike, and
//! none of its flows is fused (a subscriber's stream is not known when the plan is made).

use std::collections::HashMap;

use super::forwards::{FloorItem, composed, floor_records, forwarded_from_input, forwarded_terms};
use super::index::Adjacency;
use super::placement::Placed;
use super::pools::{PoolRecords, Resolved};
use super::{Diagnostic, DiagnosticCode, Work, codes};
use crate::MemoryKind;
use crate::graph::{MAX_TOPIC_CLIENTS, PortDecl, TopicNode};
use crate::plan::{
    EdgeRecord, PoolCapacityDependencyRecord, ProviderAllocationPlanRecord, RemoteExportRecord,
    SlotCountTerms, TensorAllocationPlanRecord, TensorByteSpanDerivationRecord, TopicBoundary,
    TopicContractRecord, TopicDirection, TopicRecord, TopicSlotTerm, boundary_pool_id,
    import_pool_id,
};
use crate::spec::{InputMode, MAX_TENSOR_RANK, MissingPolicy, PortDirection, TensorInputSpec};

/// The longest topic name, in bytes.
pub(crate) const MAX_TOPIC_NAME: usize = 128;

/// What the checks decided of one topic.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TopicPlan {
    /// The declaration names a port of the right direction, the only topic on it (else
    /// later passes leave it out; a diagnostic says why).
    pub(crate) valid: bool,
    pub(crate) depth: u32,
    pub(crate) depth_source: &'static str,
}

/// Each topic's plan, by the graph's topic index, and the topic on each port.
#[derive(Debug, Default)]
pub(crate) struct Topics {
    pub(crate) plans: Vec<TopicPlan>,
    /// Per port ([`Work::port_index`]): the valid topic on it, or `u32::MAX` (empty when
    /// the graph declares no topic).
    of_port: Vec<u32>,
}

impl Topics {
    /// The valid topic on port `port` of operator `op`, if any.
    pub(crate) fn on(&self, work: &Work<'_>, op: u32, port: u32) -> Option<u32> {
        self.of_port
            .get(work.port_index(op, port))
            .copied()
            .filter(|&t| t != u32::MAX)
    }

    /// The valid topic exported from output `port` of operator `op`.
    pub(crate) fn exported(&self, work: &Work<'_>, op: u32, port: u32) -> Option<u32> {
        self.on(work, op, port)
            .filter(|&t| work.graph.topics[t as usize].direction == TopicDirection::Export)
    }

    /// The valid topic imported into input `port` of operator `op`.
    pub(crate) fn imported(&self, work: &Work<'_>, op: u32, port: u32) -> Option<u32> {
        self.on(work, op, port)
            .filter(|&t| work.graph.topics[t as usize].direction == TopicDirection::Import)
    }
}

/// The operator and port a topic names, when they exist and the port's direction fits.
pub(crate) fn port_of(work: &Work<'_>, t: &TopicNode) -> Option<(u32, u32)> {
    let (o, p) = (t.port.0.0, t.port.1);
    let op = work.graph.operators.get(o as usize)?;
    let want = match t.direction {
        TopicDirection::Export => PortDirection::Output,
        TopicDirection::Import => PortDirection::Input,
    };
    (op.ports.get(p as usize)?.direction == want).then_some((o, p))
}

/// An imported tensor input's declared requirements (its pool's contract with the
/// topic's bound), or `None` for a message input.
pub(crate) fn import_requirements(work: &Work<'_>, (o, p): (u32, u32)) -> Option<TensorInputSpec> {
    match &work.graph.operators[o as usize].ports[p as usize].decl {
        PortDecl::TensorInput(req) => Some(*req),
        _ => None,
    }
}

/// Checks every topic declaration and decides its depth; fills `work.topics`.
pub(crate) fn check(work: &mut Work<'_>) {
    let graph = work.graph;
    let mut topics = Topics {
        plans: vec![TopicPlan::default(); graph.topics.len()],
        // (Empty without topics: every lookup finds none, and no per-port table is written.)
        of_port: if graph.topics.is_empty() {
            Vec::new()
        } else {
            vec![u32::MAX; work.graph.port_facts.len()]
        },
    };
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, t) in graph.topics.iter().enumerate() {
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        let Some((o, p)) = port_of(work, t) else {
            work.diagnostics.push(
                Diagnostic::error(
                    codes::GRAPH_INVALID_FLOW,
                    format!(
                        "topic {:?} names a port that does not exist or is not an {}",
                        t.name,
                        match t.direction {
                            TopicDirection::Export => "output",
                            TopicDirection::Import => "input",
                        }
                    ),
                )
                .hint("export an output and import an input, with the handles `add_operator` returned"),
            );
            continue;
        };
        let (op_name, port_name) = (work.op_name(o).to_owned(), work.port_name(o, p));
        let diag = |code, message: String, hint: &str| {
            Diagnostic::error(code, message)
                .operator(&op_name)
                .port(port_name)
                .hint(hint)
        };
        let mut valid = true;
        if t.name.is_empty()
            || t.name.len() > MAX_TOPIC_NAME
            || t.name.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            work.diagnostics.push(diag(
                codes::TOPIC_NAME_INVALID,
                format!("the topic name {:?} is empty, longer than {MAX_TOPIC_NAME} bytes, or holds whitespace or control characters", t.name),
                "name the topic with 1 to 128 printable characters and no spaces, e.g. `camera/frames`",
            ));
        }
        if let Some(&first) = names.get(t.name.as_str()) {
            let other = &graph.topics[first];
            work.diagnostics.push(diag(
                codes::TOPIC_NAME_DUPLICATE,
                format!(
                    "the topic name {:?} is already taken by the {} on operator {:?}, port {:?}",
                    t.name,
                    other.direction,
                    graph.operators[other.port.0.index()].name,
                    graph.operators[other.port.0.index()]
                        .ports
                        .get(other.port.1 as usize)
                        .map_or("?", |q| q.name)
                ),
                "a topic name is unique in a graph: clients attach by it",
            ));
            valid = false;
        } else {
            names.insert(&t.name, i);
        }
        let at = work.port_index(o, p);
        if topics.of_port[at] != u32::MAX {
            let first = &graph.topics[topics.of_port[at] as usize];
            work.diagnostics.push(diag(
                codes::TOPIC_PORT_CONFLICT,
                format!(
                    "the port is already under topic {:?}; one port carries one topic",
                    first.name
                ),
                "give the port one topic; more subscribers attach with `TopicOptions::with_subscribers`",
            ));
            valid = false;
        }
        if t.direction == TopicDirection::Import && !work.incoming(o, p).is_empty() {
            work.diagnostics.push(diag(
                codes::TOPIC_PORT_CONFLICT,
                format!(
                    "the input imports topic {:?} and is also fed by a flow; an input has one producer",
                    t.name
                ),
                "import the topic into an input of its own, or remove the flow",
            ));
            valid = false;
        }
        let (clients, what) = match t.direction {
            TopicDirection::Export => (t.options.subscribers, "subscribers"),
            TopicDirection::Import => (t.options.publishers, "publishers"),
        };
        if clients == 0 || clients > MAX_TOPIC_CLIENTS {
            work.diagnostics.push(diag(
                codes::TOPIC_CLIENT_COUNT,
                format!(
                    "topic {:?} declares {clients} {what}; it must be 1 to {MAX_TOPIC_CLIENTS} (each has a preallocated queue or loans)",
                    t.name
                ),
                "declare how many clients may attach at once with `TopicOptions::with_subscribers` / `with_publishers`",
            ));
        }
        let holds = t.options.holds_per_subscriber;
        if t.direction == TopicDirection::Export && (holds == 0 || holds > MAX_TOPIC_CLIENTS) {
            work.diagnostics.push(diag(
                codes::TOPIC_CLIENT_COUNT,
                format!(
                    "topic {:?} declares {holds} holds per subscriber; it must be 1 to {MAX_TOPIC_CLIENTS} (each is a slot of the output's pool)",
                    t.name
                ),
                "declare how many tensors a subscriber keeps at once with `TopicOptions::with_holds_per_subscriber`",
            ));
        }
        if t.options.from_other_process {
            check_from_other_process(work, t, (o, p), &diag);
        }
        if t.options.across_processes || t.options.from_other_process {
            let refused = (!work.port(o, p).tensor).then_some(
                "a message topic cannot cross processes: only tensors travel as descriptors of shared slots",
            );
            if let Some(why) = refused {
                work.diagnostics.push(diag(
                    codes::TOPIC_ACROSS_PROCESSES_UNSUPPORTED,
                    format!("topic {:?}: {why}", t.name),
                    "export a tensor output across processes, or keep the topic in this process",
                ));
            }
        }
        let floor = match (t.direction, work.port(o, p).mode) {
            (TopicDirection::Import, InputMode::Window { min }) => min.max(1),
            _ => 1,
        };
        let (depth, depth_source) = match t.options.depth {
            Some(0) => {
                work.diagnostics.push(diag(
                    codes::QUEUE_DEPTH_ZERO,
                    format!(
                        "topic {:?} has an explicit queue depth of 0, which admits nothing",
                        t.name
                    ),
                    "give a depth of at least 1, or leave it out",
                ));
                (0, "explicit")
            }
            Some(d) => {
                if d < floor {
                    work.diagnostics.push(diag(
                        codes::RATE_QUEUE_DEPTH_BELOW_HARD_FLOOR,
                        format!("topic {:?}: the explicit queue depth {d} is below the imported window input's minimum {floor}", t.name),
                        "an explicit depth is exact authority: cover the window, or leave it out",
                    ));
                }
                (d, "explicit")
            }
            None => (work.options.default_queue_depth.max(floor), "default"),
        };
        if depth > super::MAX_QUEUE_DEPTH {
            work.diagnostics.push(diag(
                codes::QUEUE_DEPTH_LIMIT,
                format!(
                    "topic {:?}: the {depth_source} queue depth {depth} exceeds holo's limit of {} entries per queue (every entry is preallocated at start)",
                    t.name,
                    super::MAX_QUEUE_DEPTH
                ),
                "give a depth the clients can really hold",
            ));
        }
        if t.direction == TopicDirection::Import
            && !t.options.from_other_process
            && let Some(req) = import_requirements(work, (o, p))
        {
            if req.memory_kind.is_none() {
                work.diagnostics.push(diag(
                    codes::TOPIC_IMPORT_MEMORY_KIND_MISSING,
                    format!("the imported tensor input of topic {:?} declares no memory kind, so the topic's pool has none", t.name),
                    "declare `#[input(memory = host | pinned | cuda_device | cuda_managed | opencl_device | device)]` on the input",
                ));
            }
            match t.options.max_bytes {
                None => work.diagnostics.push(diag(
                    codes::TOPIC_IMPORT_UNBOUNDED,
                    format!("the imported tensor input of topic {:?} has no bound, so the topic's pool cannot be sized", t.name),
                    "give the largest tensor a publisher sends: `TopicOptions::with_max_bytes(n)`",
                )),
                Some(0) => work.warnings.push(
                    Diagnostic::warning(
                        codes::PHYSICAL_TENSOR_ZERO_BOUNDS,
                        format!("topic {:?} has a bound of 0 bytes: every publisher loan will be rejected", t.name),
                    )
                    .operator(&op_name)
                    .port(port_name),
                ),
                Some(_) => {}
            }
        }
        if valid {
            topics.of_port[at] = id;
        }
        topics.plans[i] = TopicPlan {
            valid,
            depth,
            depth_source,
        };
    }
    work.topics = topics;
}

/// The endpoint-catalog entry of the topic `name` another process's session exports, among
/// `catalogs`, and the catalog's namespace.
pub(crate) fn remote_export<'c>(
    catalogs: &'c [crate::ipc::EndpointCatalog],
    name: &str,
) -> Option<(&'c str, &'c crate::ipc::CatalogTopic)> {
    catalogs.iter().find_map(|c| {
        c.topics
            .iter()
            .find(|t| t.name == name && t.direction == "export")
            .map(|t| (c.namespace.as_str(), t))
    })
}

/// Checks an import fed by another process's export (`TopicOptions::from_other_process`):
/// an import, not also served to publishers (`TOPIC_ACROSS_PROCESSES_UNSUPPORTED`); a
/// topic one of the compile options' endpoint catalogs exports (`TOPIC_REMOTE_UNKNOWN`);
/// whose contract the importing input accepts (`TOPIC_REMOTE_CONTRACT_MISMATCH`).
fn check_from_other_process(
    work: &mut Work<'_>,
    t: &TopicNode,
    (o, p): (u32, u32),
    diag: &dyn Fn(DiagnosticCode, String, &str) -> Diagnostic,
) {
    if t.direction == TopicDirection::Export || t.options.across_processes {
        work.diagnostics.push(diag(
            codes::TOPIC_ACROSS_PROCESSES_UNSUPPORTED,
            format!(
                "topic {:?}: `from_other_process` is an import fed by another process's export; it cannot be an export or also take publishers of its own (`across_processes`)",
                t.name
            ),
            "import with `from_other_process()` alone, or export with `across_processes()`",
        ));
        return;
    }
    let Some((_, entry)) = remote_export(&work.options.endpoint_catalogs, &t.name) else {
        let known: Vec<&str> = work
            .options
            .endpoint_catalogs
            .iter()
            .map(|c| c.namespace.as_str())
            .collect();
        work.diagnostics.push(diag(
            codes::TOPIC_REMOTE_UNKNOWN,
            format!(
                "topic {:?} is imported from another process, and no endpoint catalog given to compile exports it (catalogs of namespaces {known:?})",
                t.name
            ),
            "give the exporting session's catalog: `CompileOptions::with_endpoint_catalog(EndpointCatalog::read(path)?)`",
        ));
        return;
    };
    if let Err(e) = entry.check_expected(import_requirements(work, (o, p)).as_ref()) {
        work.diagnostics.push(diag(
            codes::TOPIC_REMOTE_CONTRACT_MISMATCH,
            format!(
                "topic {:?}: the importing input cannot take what the other process exports: {}",
                t.name,
                e.message()
            ),
            "declare the input as the exporter's catalog describes the topic (memory kind, dtype, rank)",
        ));
    }
}

/// The subscriber terms of the topics exported by `outputs` (a pool's own output and the
/// outputs forwarding its tensors): per declared subscriber its queue and the tensor it
/// holds, as plan terms and as hard-floor contributors appended to `items` for every
/// scenario. Returns the terms and their sum (`None` on overflow).
pub(crate) fn subscriber_terms(
    work: &Work<'_>,
    outputs: impl IntoIterator<Item = (u32, u32)>,
    scenarios: &[&str],
    items: &mut Vec<FloorItem>,
) -> (Vec<TopicSlotTerm>, Option<u32>) {
    let mut terms = Vec::new();
    let mut sum = Some(0u32);
    for (o, p) in outputs {
        let Some(t) = work.topics.exported(work, o, p) else {
            continue;
        };
        let node = &work.graph.topics[t as usize];
        let depth = work.topics.plans[t as usize].depth;
        for seat in 0..node.options.subscribers.min(MAX_TOPIC_CLIENTS) {
            let holds = node.options.holds_per_subscriber;
            for (contributor, entries) in [("queue_depth", depth), ("subscriber_hold", holds)] {
                sum = sum.and_then(|s| s.checked_add(entries));
                terms.push(TopicSlotTerm {
                    topic: node.name.clone(),
                    subscriber: seat,
                    contributor: contributor.to_owned(),
                    entries,
                });
                for s in scenarios {
                    let group = if contributor == "queue_depth" {
                        format!("topic_queue:{}#{seat}", node.name)
                    } else {
                        format!("topic_retention:{}#{seat}", node.name)
                    };
                    items.push((
                        (*s).to_owned(),
                        group,
                        format!("topic_{contributor}"),
                        entries,
                    ));
                }
            }
        }
    }
    (terms, sum)
}

/// Sizes the pool of every valid imported tensor topic (`topic:<name>`): the imported
/// input's queue, its operator's retention, every publisher's loans, one retirement entry,
/// and whatever follows an output that forwards the input's tensors (flows and exported
/// topics). Appends to `records`.
pub(crate) fn import_pools(
    work: &mut Work<'_>,
    placed: &Placed,
    edges: &[EdgeRecord],
    sized: &super::queues::Sized,
    forwards: &Adjacency,
    records: &mut PoolRecords,
) {
    let mut marks = vec![0u32; edges.len()];
    let graph = work.graph;
    for (i, t) in graph.topics.iter().enumerate() {
        let plan = work.topics.plans[i];
        if t.direction != TopicDirection::Import || !plan.valid || t.options.from_other_process {
            continue;
        }
        let Some((o, p)) = port_of(work, t) else {
            continue;
        };
        let Some(req) = import_requirements(work, (o, p)) else {
            continue;
        };
        let (Some(kind), Some(bytes)) = (req.memory_kind, t.options.max_bytes) else {
            continue;
        };
        let op_name = work.op_name(o).to_owned();
        let port_name = work.port_name(o, p);
        let pool = import_pool_id(&t.name);
        let temporal = &graph.operators[o as usize].ports[p as usize].temporal;
        let scenarios: &[&str] = if temporal.missing == MissingPolicy::ReuseLast {
            &["data_present", "data_missing"]
        } else {
            &["data_present"]
        };
        let mut items: Vec<FloorItem> = Vec::new();
        let stamp = u32::try_from(i).unwrap_or(u32::MAX).wrapping_add(1).max(1);
        let mut outputs = Vec::new();
        let forwarded =
            forwarded_from_input(work, forwards, (o, p), &mut marks, stamp, &mut outputs);
        let (through, forwarded_retention) =
            forwarded_terms(work, edges, &forwarded, scenarios, &mut items);
        let (subscribed, subscribers) = subscriber_terms(work, outputs, scenarios, &mut items);
        let loans = t
            .options
            .publishers
            .min(MAX_TOPIC_CLIENTS)
            .checked_mul(t.options.loans_per_publisher.max(1));
        let forwarded_sum = through
            .iter()
            .try_fold(0u32, |acc, x| acc.checked_add(x.entries));
        let (holds, history) = if temporal.history > 0 {
            (0, temporal.history)
        } else {
            (1, 0)
        };
        for s in scenarios {
            let g = "consumer_retention:import".to_owned();
            items.push((
                (*s).to_owned(),
                "queue:import".to_owned(),
                "queue_entries".to_owned(),
                plan.depth,
            ));
            let current = if *s == "data_missing" {
                "reuse_last"
            } else {
                "consumer_hold"
            };
            items.push(((*s).to_owned(), g.clone(), current.to_owned(), 1));
            if temporal.history > 0 {
                items.push(((*s).to_owned(), g, "history".to_owned(), temporal.history));
            }
            items.push((
                (*s).to_owned(),
                "producer_loans".to_owned(),
                "publisher_loans".to_owned(),
                loans.unwrap_or(u32::MAX),
            ));
            items.push((
                (*s).to_owned(),
                "retirement".to_owned(),
                "retirement".to_owned(),
                1,
            ));
        }
        let overflow = |work: &mut Work<'_>, what: String| {
            work.diagnostics.push(
                Diagnostic::error(codes::POOL_CAPACITY_OVERFLOW, what)
                    .operator(&op_name)
                    .port(port_name)
                    .hint("lower the topic's depth, publishers or loans, or the queues after its forwarding outputs"),
            );
        };
        let (Some(loans), Some(forwarded_sum), Some(forwarded_retention), Some(subscribers)) =
            (loans, forwarded_sum, forwarded_retention, subscribers)
        else {
            overflow(
                work,
                format!(
                    "the slot count of topic {:?}'s pool overflows 2^32 entries",
                    t.name
                ),
            );
            continue;
        };
        let terms = SlotCountTerms {
            queue_entries: plan.depth,
            consumer_holds: holds,
            producer_loans: loans,
            retirement: 1,
            history,
            forwarded: forwarded_sum,
            forwarded_through: through,
            subscribers,
            subscriber_terms: subscribed,
        };
        let composed = composed(&items);
        let Some(slot_count) = terms.total().filter(|n| composed == Some(*n)) else {
            overflow(
                work,
                format!("the slot count of topic {:?}'s pool overflows", t.name),
            );
            continue;
        };
        let Some(aggregate) = bytes
            .checked_mul(u64::from(slot_count))
            .filter(|a| usize::try_from(*a).is_ok())
        else {
            overflow(
                work,
                format!(
                    "topic {:?}: {slot_count} slots × {bytes} bytes overflows this host's address space",
                    t.name
                ),
            );
            continue;
        };
        records.4.extend(floor_records(&pool, items));
        let device = placed.import_device[i];
        // A neutral `device` import is its bound device's API's kind.
        let kind = device.map_or(kind, |d| d.api.resolve(kind));
        let release_stream_capacity = release_capacity(work, kind, device);
        if release_stream_capacity > 0 {
            super::pools::check_release_streams(
                work,
                edges,
                forwarded.iter().copied(),
                placed.stream_of[o as usize],
                release_stream_capacity,
                (&op_name, port_name),
            );
        }
        records.0.push(TensorAllocationPlanRecord {
            pool: pool.clone(),
            operator: o,
            port: port_name.to_owned(),
            port_index: p,
            memory_kind: kind,
            memory_kind_source: format!("declared by the input of topic {:?}", t.name),
            device,
            dtype: req.dtype,
            rank: req.rank,
            max_rank: req.rank.unwrap_or(MAX_TENSOR_RANK),
            per_slot_bytes: bytes,
            slot_count,
            slot_terms: terms.clone(),
            aggregate_bytes: aggregate,
            release_stream_capacity,
            topic: Some(t.name.clone()),
        });
        let retention = holds.saturating_add(history);
        let admitted_queue = forwarded.iter().try_fold(plan.depth, |acc, &e| {
            sized.admitted_depth[e as usize].and_then(|d| acc.checked_add(d))
        });
        let admitted_entries = admitted_queue.and_then(|q| {
            q.checked_add(retention)?
                .checked_add(forwarded_retention)?
                .checked_add(subscribers)?
                .checked_add(loans)?
                .checked_add(1)
        });
        records.2.push(PoolCapacityDependencyRecord {
            pool: pool.clone(),
            per_slot_bytes: bytes,
            edges: Vec::new(),
            active_queue_entries: plan.depth,
            consumer_retention: retention,
            producer_loans: loans,
            retirement: 1,
            forwarded_edges: forwarded,
            forwarded_entries: forwarded_sum,
            subscriber_entries: subscribers,
            active_entries: slot_count,
            active_logical_payload_bytes: aggregate,
            admitted_queue_entries: admitted_queue,
            admitted_entries,
            admitted_logical_payload_bytes: admitted_entries
                .and_then(|n| bytes.checked_mul(u64::from(n))),
        });
        topic_pool_tail(records, pool, kind, bytes, slot_count, aggregate);
    }
}

/// The release streams each slot of a pool may register (an output's, or a topic's own):
/// the compile options' cap for device memory (or a pool on a device), none for host
/// memory.
pub(crate) fn release_capacity(
    work: &Work<'_>,
    kind: MemoryKind,
    device: Option<crate::device::DeviceId>,
) -> u32 {
    if kind.is_device() || device.is_some() {
        work.options.max_fanout_release_streams
    } else {
        0
    }
}

/// The provider and byte-span records of a topic's own pool (an import's, a boundary's):
/// `slot_count` slots of the topic's `bytes`, `aggregate` in all.
fn topic_pool_tail(
    records: &mut PoolRecords,
    pool: String,
    kind: MemoryKind,
    bytes: u64,
    slot_count: u32,
    aggregate: u64,
) {
    records.3.push(ProviderAllocationPlanRecord {
        pool: pool.clone(),
        provider: kind.wire_name().to_owned(),
        logical_entries: slot_count,
        logical_payload_bytes: aggregate,
        physical_reserved_bytes: None,
    });
    records.1.push(TensorByteSpanDerivationRecord {
        pool,
        expression: format!("topic_max_bytes({bytes})"),
        dependencies: Vec::new(),
        per_slot_bytes: bytes,
        slot_count: Some(slot_count),
        aggregate_bytes: Some(aggregate),
    });
}

/// Sizes the **boundary pool** (`boundary:<name>`) of every valid tensor topic exported
/// across processes from a pass-through output (one that allocates nothing: it forwards a
/// received tensor or emits a foreign one, a DLPack import). Those tensors live in pools no
/// other process maps, so each one emitted is copied once into a slot of the boundary
/// pool, and that copy is what every subscriber in another process receives: the
/// topic's **boundary** (`TopicRecord::boundary`), a host contract for `host` memory (one
/// blocking device-to-host copy of a device tensor) or a device contract for `pinned` and
/// `cuda_device` (one copy on the output's stream, fenced like any slot). The pool holds,
/// per declared subscriber, its queue depth and holds, plus the copy in flight and one
/// retirement entry; each slot is the topic's `max_bytes` (without it the pool cannot be
/// sized: `check_across_processes` says so). Appends to `records`.
pub(crate) fn boundary_pools(
    work: &mut Work<'_>,
    resolved: &Resolved,
    placed: &Placed,
    records: &mut PoolRecords,
) {
    let graph = work.graph;
    for (i, t) in graph.topics.iter().enumerate() {
        let plan = work.topics.plans[i];
        if t.direction != TopicDirection::Export || !t.options.across_processes || !plan.valid {
            continue;
        }
        let Some((o, p)) = port_of(work, t) else {
            continue;
        };
        let own = format!("{}.{}", work.op_name(o), work.port_name(o, p));
        if !work.port(o, p).tensor || records.0.iter().any(|a| a.pool == own) {
            continue;
        }
        let Some(r) = resolved.get(work.port_index(o, p)) else {
            continue;
        };
        let (Some(kind), Some(bytes)) = (
            r.memory_kind.map(|k| placed.concrete_kind(o, p, k)),
            t.options.max_bytes,
        ) else {
            continue;
        };
        if !matches!(
            kind,
            MemoryKind::Host | MemoryKind::PinnedHost | MemoryKind::CudaDevice
        ) {
            continue;
        }
        let pool = boundary_pool_id(&t.name);
        let scenarios = ["data_present"];
        let mut items: Vec<FloorItem> = Vec::new();
        let (subscribed, subscribers) = subscriber_terms(work, [(o, p)], &scenarios, &mut items);
        for s in scenarios {
            items.push((
                s.to_owned(),
                "producer_loans".to_owned(),
                "boundary_copy".to_owned(),
                1,
            ));
            items.push((
                s.to_owned(),
                "retirement".to_owned(),
                "retirement".to_owned(),
                1,
            ));
        }
        let terms = subscribers.map(|subscribers| SlotCountTerms {
            queue_entries: 0,
            consumer_holds: 0,
            producer_loans: 1,
            retirement: 1,
            history: 0,
            forwarded: 0,
            forwarded_through: Vec::new(),
            subscribers,
            subscriber_terms: subscribed,
        });
        let composed = composed(&items);
        let slot_count = terms
            .as_ref()
            .and_then(SlotCountTerms::total)
            .filter(|n| composed == Some(*n));
        let aggregate = slot_count.and_then(|n| {
            bytes
                .checked_mul(u64::from(n))
                .filter(|a| usize::try_from(*a).is_ok())
        });
        let (Some(terms), Some(slot_count), Some(aggregate)) = (terms, slot_count, aggregate)
        else {
            let (op_name, port_name) = (work.op_name(o).to_owned(), work.port_name(o, p));
            work.diagnostics.push(
                Diagnostic::error(
                    codes::POOL_CAPACITY_OVERFLOW,
                    format!(
                        "the boundary pool of topic {:?} ({bytes} bytes a slot, per subscriber its depth and holds) overflows",
                        t.name
                    ),
                )
                .operator(&op_name)
                .port(port_name)
                .hint("lower the topic's depth, subscribers, holds or max_bytes"),
            );
            continue;
        };
        records.4.extend(floor_records(&pool, items));
        let device = placed.output_device.get(&(o, p)).copied().or_else(|| {
            kind.is_device()
                .then_some(placed.device_of[o as usize])
                .flatten()
        });
        records.0.push(TensorAllocationPlanRecord {
            pool: pool.clone(),
            operator: o,
            port: work.port_name(o, p).to_owned(),
            port_index: p,
            memory_kind: kind,
            memory_kind_source: format!(
                "the boundary of topic {:?}: {}",
                t.name, r.memory_kind_source
            ),
            device,
            dtype: r.dtype,
            rank: r.rank,
            max_rank: r.max_rank,
            per_slot_bytes: bytes,
            slot_count,
            slot_terms: terms.clone(),
            aggregate_bytes: aggregate,
            release_stream_capacity: release_capacity(work, kind, device),
            topic: Some(t.name.clone()),
        });
        records.2.push(PoolCapacityDependencyRecord {
            pool: pool.clone(),
            per_slot_bytes: bytes,
            edges: Vec::new(),
            active_queue_entries: 0,
            consumer_retention: 0,
            producer_loans: 1,
            retirement: 1,
            forwarded_edges: Vec::new(),
            forwarded_entries: 0,
            subscriber_entries: terms.subscribers,
            active_entries: slot_count,
            active_logical_payload_bytes: aggregate,
            admitted_queue_entries: Some(0),
            admitted_entries: Some(slot_count),
            admitted_logical_payload_bytes: Some(aggregate),
        });
        topic_pool_tail(records, pool, kind, bytes, slot_count, aggregate);
    }
}

/// Refuses what a topic declared across processes cannot carry, once its memory kind and
/// pool are known: managed memory (`TOPIC_MEMORY_NOT_SHAREABLE`); a kind whose transport
/// is not built, or an output with a pool of its own that forwards received tensors
/// (`TOPIC_ACROSS_PROCESSES_UNSUPPORTED`); a pass-through output with no
/// bound for its boundary pool (`TOPIC_BOUNDARY_UNBOUNDED`). The one copy a topic ever
/// costs, its boundary's, is in the plan.
pub(crate) fn check_across_processes(work: &mut Work<'_>, records: &[TopicRecord]) {
    for r in records.iter().filter(|r| r.across_processes && r.tensor) {
        let (op_name, port) = (work.op_name(r.operator).to_owned(), r.port.clone());
        let diag = |code, message: String, hint: &str| {
            Diagnostic::error(code, message)
                .operator(&op_name)
                .port(&port)
                .hint(hint)
        };
        let kind = r.contract.memory_kind;
        let (verb, side) = match r.direction {
            TopicDirection::Export => ("exported", "output"),
            TopicDirection::Import => ("imported", "input"),
        };
        if kind == Some(MemoryKind::CudaManaged) {
            work.diagnostics.push(diag(
                codes::TOPIC_MEMORY_NOT_SHAREABLE,
                format!(
                    "topic {:?} is {verb} across processes in cuda_managed memory, which does not cross processes",
                    r.name
                ),
                &format!("declare `memory = cuda_device` (or `memory = host`) on the {side}"),
            ));
        } else if !matches!(
            kind,
            Some(MemoryKind::Host | MemoryKind::PinnedHost | MemoryKind::CudaDevice)
        ) {
            work.diagnostics.push(diag(
                codes::TOPIC_ACROSS_PROCESSES_UNSUPPORTED,
                format!(
                    "topic {:?} is {verb} across processes in {} memory; this build serves host, pinned and cuda_device memory across processes",
                    r.name,
                    kind.map_or("undeclared", MemoryKind::wire_name)
                ),
                &format!("declare `memory = host`, `pinned` or `cuda_device` on the {side} (docs/IPC.md, \"What crosses\")"),
            ));
        } else if r.direction == TopicDirection::Export
            && r.boundary.is_none()
            && let Some(input) = work.port(r.operator, r.port_index).forwards
        {
            // Its own pool crosses (no boundary copy), but what it emits is a received
            // tensor in another output's pool, which no other process maps.
            work.diagnostics.push(diag(
                codes::TOPIC_ACROSS_PROCESSES_UNSUPPORTED,
                format!(
                    "topic {:?} is exported across processes from an output with a pool of its own that forwards input {input:?}: a forwarded tensor lives in another output's pool, which no other process maps",
                    r.name
                ),
                "export a pass-through output instead (`storage = pass_through`, `TopicOptions::with_max_bytes`): each tensor is copied once into the topic's boundary pool to cross",
            ));
        } else if r.pool.is_none() {
            work.diagnostics.push(diag(
                codes::TOPIC_BOUNDARY_UNBOUNDED,
                format!(
                    "topic {:?} is exported across processes from a pass-through output with no bound: each of its tensors is copied once into a boundary pool to cross, and that pool cannot be sized",
                    r.name
                ),
                "give the largest tensor the output emits: `TopicOptions::with_max_bytes(n)` (or export an output that allocates its tensors: its own pool crosses, no copy)",
            ));
        }
    }
}

/// The topic records, once pools and streams are decided.
pub(crate) fn records(
    work: &Work<'_>,
    resolved: &Resolved,
    placed: &Placed,
    allocations: &[TensorAllocationPlanRecord],
) -> Vec<TopicRecord> {
    let needs_device = crate::plan::needs_device(!placed.streams.is_empty(), allocations);
    let mut out = Vec::with_capacity(work.graph.topics.len());
    for (i, t) in work.graph.topics.iter().enumerate() {
        let plan = work.topics.plans[i];
        let Some((o, p)) = port_of(work, t).filter(|_| plan.valid) else {
            continue;
        };
        let tensor = work.port(o, p).tensor;
        // An import fed by another process's export: its catalog entry, and namespace.
        let remote = (t.direction == TopicDirection::Import && t.options.from_other_process)
            .then(|| remote_export(&work.options.endpoint_catalogs, &t.name))
            .flatten();
        let (contract, pool, subscribers, publishers) = match t.direction {
            TopicDirection::Export => {
                let r = resolved.get(work.port_index(o, p));
                let own = format!("{}.{}", work.op_name(o), work.port_name(o, p));
                let boundary = boundary_pool_id(&t.name);
                let pool = allocations
                    .iter()
                    .find(|a| a.pool == own && a.topic.is_none())
                    .or_else(|| allocations.iter().find(|a| a.pool == boundary));
                let kind = r
                    .and_then(|r| r.memory_kind)
                    .map(|k| placed.concrete_kind(o, p, k));
                let contract = TopicContractRecord {
                    memory_kind: kind,
                    device: placed.output_device.get(&(o, p)).copied().or_else(|| {
                        kind.filter(|k| k.is_device())
                            .and(placed.device_of[o as usize])
                    }),
                    dtype: r.and_then(|r| r.dtype),
                    rank: r.and_then(|r| r.rank),
                    max_rank: r.map(|r| r.max_rank),
                    max_bytes: pool.map(|a| a.per_slot_bytes),
                };
                (
                    contract,
                    pool.map(|a| a.pool.clone()),
                    t.options.subscribers,
                    0,
                )
            }
            TopicDirection::Import => {
                let req = import_requirements(work, (o, p));
                let device = placed.import_device[i];
                let remote = remote.map(|(_, e)| e);
                let contract = TopicContractRecord {
                    memory_kind: req
                        .and_then(|r| r.memory_kind)
                        .or_else(|| remote.and_then(|e| e.memory_kind().ok()))
                        .map(|k| device.map_or(k, |d| d.api.resolve(k))),
                    device,
                    dtype: req.and_then(|r| r.dtype),
                    rank: req.and_then(|r| r.rank),
                    max_rank: req.map(|r| r.rank.unwrap_or(MAX_TENSOR_RANK)),
                    max_bytes: match remote {
                        Some(e) => e.max_bytes,
                        None => req.and(t.options.max_bytes),
                    },
                };
                let pool = import_pool_id(&t.name);
                let pool = allocations.iter().any(|a| a.pool == pool).then_some(pool);
                (contract, pool, 0, t.options.publishers)
            }
        };
        let consumer_stream = match t.direction {
            TopicDirection::Import => placed.stream_of[o as usize],
            TopicDirection::Export => None,
        };
        let boundary = pool
            .as_deref()
            .filter(|p| *p == boundary_pool_id(&t.name))
            .and(contract.memory_kind)
            .map(TopicBoundary::of);
        let from_export = remote.map(|(namespace, topic)| RemoteExportRecord {
            namespace: namespace.to_owned(),
            topic: topic.clone(),
        });
        out.push(TopicRecord {
            id: u32::try_from(out.len()).unwrap_or(u32::MAX),
            name: t.name.clone(),
            direction: t.direction,
            operator: o,
            port: work.port_name(o, p).to_owned(),
            port_index: p,
            tensor,
            depth: plan.depth,
            depth_source: plan.depth_source.to_owned(),
            policy: t.options.policy,
            subscribers,
            publishers,
            host_wait: t.direction == TopicDirection::Import
                && tensor
                && consumer_stream.is_none()
                && needs_device
                && contract.memory_kind != Some(MemoryKind::Host),
            contract,
            pool,
            consumer_stream,
            across_processes: t.options.across_processes,
            holds_per_subscriber: match t.direction {
                TopicDirection::Export => t.options.holds_per_subscriber,
                TopicDirection::Import => 0,
            },
            loans_per_publisher: match t.direction {
                TopicDirection::Export => 0,
                TopicDirection::Import => t.options.loans_per_publisher.max(1),
            },
            boundary,
            from_export,
        });
    }
    out
}
