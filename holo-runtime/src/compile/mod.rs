//! The plan compiler: `compile(&graph, CompileOptions) -> Result<ExecutionPlan, Diagnostics>`.
//!
//! Passes, each from the plan-so-far to the plan: graph checks (fan-in, unconnected
//! inputs, cycles) → topic checks and depths → partitioning → memory kinds and byte spans
//! → placement and layout checks → queue depths → pools (each followed through the
//! outputs that forward its tensors, to flows and topic subscribers; imported topics'
//! own pools) → streams and fusion → topic records. Every pass reports all it finds;
//! one compile returns every diagnostic together.

mod binding;
mod diagnostics;
mod fingerprint;
mod forwards;
mod index;
mod partition;
mod placement;
mod pools;
mod queues;
mod topics;

use std::collections::BTreeMap;

pub(crate) use diagnostics::stable_codes;
pub use diagnostics::{Diagnostic, DiagnosticCode, Diagnostics, Severity, codes};
pub(crate) use fingerprint::fingerprint;

use index::Adjacency;

use crate::graph::{Graph, PortFacts};
use crate::plan::{CudaComputeStreamPolicy, EdgeRecord, ExecutionPlan, OperatorRecord};

/// An authored partition: a name and the operators it runs, by name. The name names the
/// partition's thread (`holo-<name>`): an empty one, one with a control character, or one
/// that two partitions share is `PARTITION_INVALID`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionSpec {
    /// The partition's name.
    pub name: String,
    /// Operator names.
    pub operators: Vec<String>,
}

impl PartitionSpec {
    /// A partition named `name` running `operators` (by name).
    pub fn new<S: Into<String>>(
        name: impl Into<String>,
        operators: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            name: name.into(),
            operators: operators.into_iter().map(Into::into).collect(),
        }
    }
}

/// How operators are grouped into execution partitions.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Partitioning {
    /// A linear chain stays in one partition; a fork puts each successor leg, and a join,
    /// in a partition of its own.
    #[default]
    Automatic,
    /// Exactly these partitions; every operator must be named once.
    Authored(Vec<PartitionSpec>),
}

/// CUDA execution options, frozen into the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CudaExecutionOptions {
    /// The compute-stream policy.
    pub compute_stream_policy: CudaComputeStreamPolicy,
}

impl CudaExecutionOptions {
    /// These options with `policy`.
    #[must_use]
    pub const fn with_compute_stream_policy(mut self, policy: CudaComputeStreamPolicy) -> Self {
        self.compute_stream_policy = policy;
        self
    }
}

/// Explicit placement decisions. The compiler never guesses device zero, nor an API: a
/// device is named as a [`DeviceId`](crate::device::DeviceId) — `DeviceId::cuda(n)` (or a
/// bare `n`, which is a CUDA ordinal) or `DeviceId::opencl(n)`.
///
/// An output's memory kind must live on its bound device's API: `cuda_device`,
/// `cuda_managed` and `pinned` on CUDA, `opencl_device` on OpenCL, and the neutral
/// `device` on either (it becomes `cuda_device` or `opencl_device` in the plan). Anything
/// else is `PLACEMENT_API_MISMATCH`: compile never maps one API's kind to the other's and
/// never inserts a copy.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DeploymentBinding {
    pub(crate) tensor_output_devices: BTreeMap<(String, String), crate::device::DeviceId>,
    pub(crate) imported_topic_devices: BTreeMap<String, crate::device::DeviceId>,
}

impl DeploymentBinding {
    /// Binds operator `operator`'s tensor output `port` to `device` (`DeviceId::cuda(n)`,
    /// a bare CUDA ordinal `n`, or `DeviceId::opencl(n)`). Required for device-memory and
    /// CUDA-managed runtime pools; a pinned output bound to a CUDA device is written on a
    /// stream.
    pub fn bind_tensor_output_device(
        &mut self,
        operator: &str,
        port: &str,
        device: impl Into<crate::device::DeviceId>,
    ) -> &mut Self {
        self.tensor_output_devices
            .insert((operator.to_owned(), port.to_owned()), device.into());
        self
    }

    /// Binds the imported topic `topic` to `device`: its pool is allocated there and its
    /// importing operator runs a stream on it. Required for an imported topic in device,
    /// CUDA-managed or pinned-host memory (a publisher may write it on a stream); a binding
    /// that names no imported topic is `PLACEMENT_UNKNOWN_BINDING`.
    pub fn bind_imported_topic_device(
        &mut self,
        topic: &str,
        device: impl Into<crate::device::DeviceId>,
    ) -> &mut Self {
        self.imported_topic_devices
            .insert(topic.to_owned(), device.into());
        self
    }
}

/// What evidence of arrivals a compile profile requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ArrivalEvidence {
    /// Nominal rate metadata may size queues (the default).
    #[default]
    Nominal,
    /// Bounded arrival evidence is required: an edge sized from nominal-only metadata is
    /// rejected with `RATE_NOMINAL_ONLY_EVIDENCE`, because a larger queue does not prove
    /// a maximum arrival process.
    Bounded,
}

/// The compile-wide automatic queue-sizing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutomaticQueueSizing {
    /// The headroom over nominal arrivals (default 2/1). It changes only the soft
    /// recommendation: it is not a jitter envelope, a burst bound or a safety guarantee.
    pub headroom_ratio: crate::spec::RateRatio,
    /// The arrival evidence the profile requires.
    pub arrival_evidence: ArrivalEvidence,
}

impl AutomaticQueueSizing {
    /// This policy with `ratio` of headroom.
    #[must_use]
    pub const fn with_headroom_ratio(mut self, ratio: crate::spec::RateRatio) -> Self {
        self.headroom_ratio = ratio;
        self
    }

    /// This policy requiring `evidence`.
    #[must_use]
    pub const fn with_arrival_evidence(mut self, evidence: ArrivalEvidence) -> Self {
        self.arrival_evidence = evidence;
        self
    }
}

impl Default for AutomaticQueueSizing {
    fn default() -> Self {
        Self {
            headroom_ratio: crate::spec::RateRatio::new(2, 1),
            arrival_evidence: ArrivalEvidence::Nominal,
        }
    }
}

/// The deepest queue one flow may have, and the longest history one input may retain:
/// every entry is preallocated when the session starts, so a deeper one is refused by
/// `compile` (`QUEUE_DEPTH_LIMIT`).
pub const MAX_QUEUE_DEPTH: u32 = 1 << 20;

/// The most release streams one pool slot may register
/// ([`CompileOptions::max_fanout_release_streams`]): each is a preallocated event per
/// slot; more is refused by `compile` (`OPTION_FANOUT_RELEASE_STREAMS`).
pub const MAX_FANOUT_RELEASE_STREAMS: u32 = 64;

/// Options of one compile.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Partitioning.
    pub partitioning: Partitioning,
    /// CUDA execution options.
    pub cuda_execution: CudaExecutionOptions,
    /// Device placement.
    pub deployment: DeploymentBinding,
    /// The depth of an edge with no explicit depth whose rate or horizon is not proven
    /// (default 1; raised to the edge's hard floor).
    pub default_queue_depth: u32,
    /// Automatic, rate-aware sizing of edges with no explicit depth and a proven finite
    /// horizon.
    pub automatic_queue_sizing: AutomaticQueueSizing,
    /// Release streams each CUDA pool slot may register (default 8; 1 to
    /// [`MAX_FANOUT_RELEASE_STREAMS`]).
    pub max_fanout_release_streams: u32,
    /// The endpoint catalogs of the sessions in other processes whose exports this graph
    /// imports (`TopicOptions::from_other_process`): compile checks each such import against
    /// its catalog entry, and the plan keeps the entry to attach by.
    pub endpoint_catalogs: Vec<crate::ipc::EndpointCatalog>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            partitioning: Partitioning::Automatic,
            cuda_execution: CudaExecutionOptions::default(),
            deployment: DeploymentBinding::default(),
            default_queue_depth: 1,
            automatic_queue_sizing: AutomaticQueueSizing::default(),
            max_fanout_release_streams: 8,
            endpoint_catalogs: Vec::new(),
        }
    }
}

impl CompileOptions {
    /// These options with `catalog`, the endpoint catalog of a session in another process
    /// whose exports the graph imports (`TopicOptions::from_other_process`).
    #[must_use]
    pub fn with_endpoint_catalog(mut self, catalog: crate::ipc::EndpointCatalog) -> Self {
        self.endpoint_catalogs.push(catalog);
        self
    }

    /// These options with `partitioning`.
    #[must_use]
    pub fn with_partitioning(mut self, partitioning: Partitioning) -> Self {
        self.partitioning = partitioning;
        self
    }

    /// These options with `cuda_execution`.
    #[must_use]
    pub fn with_cuda_execution(mut self, cuda_execution: CudaExecutionOptions) -> Self {
        self.cuda_execution = cuda_execution;
        self
    }

    /// These options with the compute-stream policy `policy`.
    #[must_use]
    pub fn with_compute_stream_policy(mut self, policy: CudaComputeStreamPolicy) -> Self {
        self.cuda_execution.compute_stream_policy = policy;
        self
    }

    /// These options with `deployment`.
    #[must_use]
    pub fn with_deployment(mut self, deployment: DeploymentBinding) -> Self {
        self.deployment = deployment;
        self
    }

    /// These options with `depth` for edges with no explicit or proven depth.
    #[must_use]
    pub fn with_default_queue_depth(mut self, depth: u32) -> Self {
        self.default_queue_depth = depth;
        self
    }

    /// These options with the automatic queue-sizing policy `sizing`.
    #[must_use]
    pub fn with_automatic_queue_sizing(mut self, sizing: AutomaticQueueSizing) -> Self {
        self.automatic_queue_sizing = sizing;
        self
    }

    /// These options with `n` release streams per CUDA pool slot.
    #[must_use]
    pub fn with_max_fanout_release_streams(mut self, n: u32) -> Self {
        self.max_fanout_release_streams = n;
        self
    }
}

/// The working state passes read and extend.
pub(crate) struct Work<'g> {
    pub(crate) graph: &'g Graph,
    pub(crate) options: &'g CompileOptions,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) warnings: Vec<Diagnostic>,
    /// The graph's fingerprint (computed as the graph is first read).
    pub(crate) fingerprint: String,
    /// Operators in a topological order.
    pub(crate) topo: Vec<u32>,
    /// Incoming flows per port (by [`Work::port_index`]), in flow order.
    pub(crate) incoming: Adjacency,
    /// Outgoing flows per port (by [`Work::port_index`]), in flow order.
    pub(crate) outgoing: Adjacency,
    pub(crate) partition_of: Vec<u32>,
    /// Successor and producer operators of each operator, ascending and deduplicated.
    pub(crate) successors: Adjacency,
    pub(crate) producers: Adjacency,
    /// The topics' checks and depths, and the topic on each port.
    pub(crate) topics: topics::Topics,
}

impl Work<'_> {
    /// The index of port `port` of operator `op` among all the graph's ports.
    pub(crate) fn port_index(&self, op: u32, port: u32) -> usize {
        self.graph.port_base[op as usize] + port as usize
    }
    /// The flows entering port `port` of operator `op`.
    pub(crate) fn incoming(&self, op: u32, port: u32) -> &[u32] {
        self.incoming.row(self.port_index(op, port))
    }
    /// The flows leaving port `port` of operator `op`.
    pub(crate) fn outgoing(&self, op: u32, port: u32) -> &[u32] {
        self.outgoing.row(self.port_index(op, port))
    }
    pub(crate) fn op_name(&self, op: u32) -> &str {
        self.graph.names.get(op as usize)
    }
    pub(crate) fn port_name(&self, op: u32, port: u32) -> &'static str {
        self.port(op, port).name
    }
    /// What passes read of port `port` of operator `op`.
    pub(crate) fn port(&self, op: u32, port: u32) -> &PortFacts {
        &self.graph.port_facts[self.port_index(op, port)]
    }
}

/// Runs one compile pass inside its span (`compile.pass`, field `pass`; feature
/// `tracing`).
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
fn pass<T>(name: &'static str, run: impl FnOnce() -> T) -> T {
    let _span = crate::trace::span!("compile.pass", pass = name);
    run()
}

/// Compiles a graph into an immutable plan, or returns every diagnostic found.
#[allow(
    clippy::needless_pass_by_value,
    reason = "the seed's `compile(graph, std::move(options))`: the options are the plan's"
)]
pub fn compile(graph: &Graph, options: CompileOptions) -> Result<ExecutionPlan, Diagnostics> {
    let _span = crate::trace::span!(
        "compile",
        operators = graph.operators.len(),
        flows = graph.edges.len()
    );
    let mut work = Work {
        graph,
        options: &options,
        diagnostics: Vec::new(),
        warnings: Vec::new(),
        fingerprint: String::new(),
        topo: Vec::new(),
        incoming: Adjacency::default(),
        outgoing: Adjacency::default(),
        partition_of: Vec::new(),
        successors: Adjacency::default(),
        producers: Adjacency::default(),
        topics: topics::Topics::default(),
    };
    if !(1..=MAX_FANOUT_RELEASE_STREAMS).contains(&options.max_fanout_release_streams) {
        work.diagnostics.push(
            Diagnostic::error(
                codes::OPTION_FANOUT_RELEASE_STREAMS,
                format!(
                    "CompileOptions::max_fanout_release_streams is {}; it must be 1 to {MAX_FANOUT_RELEASE_STREAMS} (each is a preallocated event per device pool slot)",
                    options.max_fanout_release_streams
                ),
            )
            .hint("the default, 8, covers a fan-out to 8 consumer streams"),
        );
    }
    if !graph.foreign_flows.is_empty() || !graph.foreign_topics.is_empty() {
        // Later passes index operators by the handles' indices: stop here.
        let mut items = graph
            .foreign_flows
            .iter()
            .map(|f| {
                let end = match (f.foreign_from, f.foreign_to) {
                    (true, true) => "both ports",
                    (true, false) => "the output port",
                    _ => "the input port",
                };
                Diagnostic::error(
                    codes::GRAPH_FOREIGN_PORT,
                    format!(
                        "flow #{} was given a port handle of another graph ({end}); it was not added",
                        f.edge
                    ),
                )
                .hint("connect the handles that this graph's `add_operator` returned")
            })
            .collect::<Vec<_>>();
        items.extend(graph.foreign_topics.iter().map(|name| {
            Diagnostic::error(
                codes::GRAPH_FOREIGN_PORT,
                format!(
                    "topic {name:?} was given a port handle of another graph; it was not declared"
                ),
            )
            .hint("export or import the handles that this graph's `add_operator` returned")
        }));
        work.diagnostics.extend(items);
        return Err(Diagnostics {
            items: work.diagnostics,
        });
    }
    pass("check_graph", || partition::check_graph(&mut work));
    if work.topo.len() != graph.operators.len() {
        // A cycle: later passes need a topological order.
        return Err(Diagnostics {
            items: work.diagnostics,
        });
    }
    pass("check_topics", || topics::check(&mut work));
    let partitions = pass("partition", || partition::partition(&mut work));
    let resolved = pass("resolve_tensors", || pools::resolve_tensors(&mut work));
    let placed = pass("place", || {
        placement::place(&mut work, &resolved, partitions)
    });
    let sized = pass("size_queues", || queues::size_queues(&mut work));
    let edges = pass("edge_records", || edge_records(&mut work, &placed, &sized));
    let (allocations, derivations, dependencies, providers, pool_floors) = pass("pools", || {
        let forwards = forwards::forwarding(&mut work);
        let mut records =
            pools::allocations(&mut work, &resolved, &placed, &edges, &sized, &forwards);
        topics::import_pools(&mut work, &placed, &edges, &sized, &forwards, &mut records);
        topics::boundary_pools(&mut work, &resolved, &placed, &mut records);
        records
    });
    let mut edges = edges;
    binding::host_waits(&mut edges, &allocations, &placed);
    let topics = topics::records(&work, &resolved, &placed, &allocations);
    topics::check_across_processes(&mut work, &topics);
    let used_devices = one_device(&mut work, &placed, &allocations);
    unique_pools(&mut work, &allocations);
    if !work.diagnostics.is_empty() {
        return Err(Diagnostics {
            items: work.diagnostics,
        });
    }
    let mut rank = vec![0u32; graph.operators.len()];
    for (r, &o) in work.topo.iter().enumerate() {
        rank[o as usize] = u32::try_from(r).unwrap_or(u32::MAX);
    }
    // Each operator's record and its trigger's, from one read of its graph record.
    let mut operators = Vec::with_capacity(graph.operators.len());
    let mut triggers = Vec::with_capacity(graph.operators.len());
    for (i, op) in graph.operators.iter().enumerate() {
        let facts = graph.port_facts_of(i);
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        operators.push(OperatorRecord {
            id: i,
            name: work.op_name(i).to_owned(),
            type_name: op.type_name.into(),
            partition: work.partition_of[i as usize],
            device: placed.device_of[i as usize],
            cuda_stream: placed.stream_of[i as usize],
            order: rank[i as usize],
            params_schema: op.schema.id.into(),
            params: op.params_json.clone(),
            ports: binding::port_records(facts),
        });
        let clock = queues::clock_of(&sized.clocks, i);
        triggers.push(crate::plan::TriggerRecord {
            operator: i,
            trigger: op.trigger.kind(),
            input: match &op.trigger {
                crate::spec::Trigger::OnArrival(x) => Some((*x).to_owned()),
                _ => None,
            },
            input_port: match &op.trigger {
                crate::spec::Trigger::OnArrival(x) => facts
                    .iter()
                    .position(|p| p.name == *x && p.direction == crate::spec::PortDirection::Input)
                    .and_then(|p| u32::try_from(p).ok()),
                _ => None,
            },
            clock_hz: clock.map(crate::spec::rates::exact_ratio),
            clock_exact: clock.copied().map(Box::new),
            clock_period_ns: clock
                .and_then(|c| u64::try_from(crate::spec::rates::clock_period_ns(c)).ok()),
            clock_parameter: match &op.trigger {
                crate::spec::Trigger::Clock(rate) => rate.dependency().map(|d| d.path.clone()),
                _ => None,
            },
        });
    }
    let devices = crate::plan::device_records(
        used_devices,
        &placed.device_of,
        &placed.streams,
        &allocations,
        &topics,
    );
    let mut plan = ExecutionPlan {
        schema: crate::plan::PLAN_JSON_SCHEMA,
        fingerprint: work.fingerprint,
        cuda_compute_stream_policy: options.cuda_execution.compute_stream_policy,
        max_fanout_release_streams: options.max_fanout_release_streams,
        operators,
        partitions: placed.partitions,
        cuda_compute_streams: placed.streams,
        devices,
        edges,
        topics,
        tensor_allocations: allocations,
        tensor_byte_span_derivations: derivations,
        rates: crate::plan::RatePlan {
            automatic_queue_sizing_headroom_ratio: options
                .automatic_queue_sizing
                .headroom_ratio
                .to_string(),
            arrival_evidence: match options.automatic_queue_sizing.arrival_evidence {
                ArrivalEvidence::Nominal => "nominal",
                ArrivalEvidence::Bounded => "bounded",
            }
            .to_owned(),
            port_rates: sized.port_rates,
            accumulation_horizons: sized.horizons,
            hard_floor_contributors: {
                let mut floors = sized.contributors;
                floors.extend(pool_floors);
                floors
            },
            queue_sizing_recipes: sized.recipes,
            operator_triggers: triggers,
            headroom: options.automatic_queue_sizing.headroom_ratio.ratio(),
            pool_capacity_dependencies: dependencies,
            provider_allocation_plans: providers,
        },
        warnings: work.warnings,
    };
    plan.warnings
        .sort_by(|a, b| (a.code.name(), &a.message).cmp(&(b.code.name(), &b.message)));
    Ok(plan)
}

/// A session drives one device (`RunSession::start` refuses a plan with work on another):
/// work placed on two — unconnected subgraphs bound to `cuda:0` and `cuda:1`, say —
/// compiled, and then no session could start it. `PLACEMENT_DEVICE_CONFLICT`.
/// Reports two pools of one id. Ids are `operator.port`, `topic:name` and
/// `boundary:name`, and operator, port and topic names may hold `.` and `:`: an operator
/// `topic:cam` with an output `frames` and an imported topic `cam.frames` both name
/// `topic:cam.frames`. The session finds a pool by its id, so one of the two would be
/// handed the other's slots.
fn unique_pools(work: &mut Work<'_>, allocations: &[crate::plan::TensorAllocationPlanRecord]) {
    let owner = |work: &Work<'_>, a: &crate::plan::TensorAllocationPlanRecord| match &a.topic {
        Some(t) if a.pool.starts_with("boundary:") => format!("the boundary pool of topic {t:?}"),
        Some(t) => format!("the pool of imported topic {t:?}"),
        None => format!(
            "output {:?} of operator {:?}",
            a.port,
            work.op_name(a.operator)
        ),
    };
    let mut first: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(allocations.len());
    for (i, a) in allocations.iter().enumerate() {
        if let Some(&j) = first.get(a.pool.as_str()) {
            let message = format!(
                "pool id {:?} names two pools: {} and {}",
                a.pool,
                owner(work, &allocations[j]),
                owner(work, a)
            );
            let at = work.op_name(a.operator).to_owned();
            work.diagnostics.push(
                Diagnostic::error(codes::POOL_NAME_CONFLICT, message)
                    .operator(&at)
                    .port(&a.port)
                    .hint("rename the operator, port or topic: pool ids are `operator.port`, `topic:name` and `boundary:name`"),
            );
        } else {
            first.insert(a.pool.as_str(), i);
        }
    }
}

/// Returns the devices the plan's operators, streams and pools use, sorted (the device
/// records start from them).
fn one_device(
    work: &mut Work<'_>,
    placed: &placement::Placed,
    allocations: &[crate::plan::TensorAllocationPlanRecord],
) -> Vec<crate::device::DeviceId> {
    let mut used: Vec<crate::device::DeviceId> = placed
        .device_of
        .iter()
        .flatten()
        .copied()
        .chain(placed.streams.iter().map(|s| s.device))
        .chain(allocations.iter().filter_map(|a| a.device))
        .collect();
    used.sort_unstable();
    used.dedup();
    // An operator whose own tensors span two devices was reported already, by name.
    let reported = work
        .diagnostics
        .iter()
        .any(|d| d.code == codes::PLACEMENT_DEVICE_CONFLICT);
    if used.len() > 1 && !reported {
        work.diagnostics.push(
            Diagnostic::error(
                codes::PLACEMENT_DEVICE_CONFLICT,
                format!(
                    "the plan places work on {}: one session drives one device",
                    used.iter().map(ToString::to_string).collect::<Vec<_>>().join(" and ")
                ),
            )
            .hint("bind every device output of the graph to one device, or run one session per device"),
        );
    }
    used
}

fn edge_records(
    work: &mut Work<'_>,
    placed: &placement::Placed,
    sized: &queues::Sized,
) -> Vec<EdgeRecord> {
    let graph = work.graph;
    let mut out = Vec::with_capacity(graph.edges.len());
    for (i, e) in graph.edges.iter().enumerate() {
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        let (fo, fp) = (e.from.0.0, e.from.1);
        let (to, tp) = (e.to.0.0, e.to.1);
        let (depth, source) = sized.depth[i];
        out.push(EdgeRecord {
            id,
            from_operator: fo,
            from_port: work.port_name(fo, fp).into(),
            from_port_index: fp,
            to_operator: to,
            to_port: work.port_name(to, tp).into(),
            to_port_index: tp,
            queue_depth: depth,
            depth_source: source.into(),
            policy: e.options.policy,
            tensor: work.port(fo, fp).tensor,
            cross_partition: work.partition_of[fo as usize] != work.partition_of[to as usize],
            fusion: placed.fusion[i].clone(),
            contract: binding::edge_contract(work, placed, i, (fo, fp), (to, tp)),
        });
    }
    out
}
