//! Graphs: operators and the flows between their ports.

use std::any::Any;
use std::sync::Arc;

use holo_params::{ParamSchema, ParamSet, SchemaDescriptor};

use crate::channel::queue::{EdgeFactory, edge_factory};
use crate::operator::OperatorBox;
use crate::operator::{InPort, Operator, OperatorId, OutPort};
use crate::plan::TopicDirection;
use crate::spec::bytespan::ByteSpanNode;
use crate::spec::memkind::MemoryKindDerivation;
use crate::spec::{
    InputMode, PortDirection, PortPayload, TensorBounds, TensorInputSpec, TensorOutputStorage,
    TensorRepresentation,
};
use crate::{Error, ErrorCode, Result};

/// What a full queue does with a new entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum QueuePolicy {
    /// The queue refuses the entry: `emit` returns `Backpressured` and the producer keeps
    /// the decision (drop, degrade or retry on its next activation). Nothing is evicted.
    #[default]
    Block,
    /// The oldest queued entry is dropped (and counted) to make room.
    DropOldest,
}

impl QueuePolicy {
    /// The stable name used in plans.
    pub const fn name(self) -> &'static str {
        match self {
            QueuePolicy::Block => "block",
            QueuePolicy::DropOldest => "drop_oldest",
        }
    }
}

/// Options of one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct ConnectionOptions {
    /// Exact queue depth. `None` lets the compiler choose (the compile options' default
    /// depth, or a rate-derived depth where the contract proves a finite horizon).
    pub queue_depth: Option<u32>,
    /// What a full queue does.
    pub policy: QueuePolicy,
}

impl ConnectionOptions {
    /// The default options (`Default::default()`, usable in a `const`): the compiler
    /// chooses the depth, and a full queue blocks.
    pub const DEFAULT: Self = Self {
        queue_depth: None,
        policy: QueuePolicy::Block,
    };

    /// These options with an exact queue depth.
    #[must_use]
    pub const fn with_queue_depth(mut self, depth: u32) -> Self {
        self.queue_depth = Some(depth);
        self
    }

    /// These options with `policy` for a full queue.
    #[must_use]
    pub const fn with_policy(mut self, policy: QueuePolicy) -> Self {
        self.policy = policy;
        self
    }
}

/// Options of one topic ([`Graph::export_topic`], [`Graph::import_topic`]).
///
/// An export reads `subscribers`, `depth` and `policy`; an import reads `publishers`,
/// `depth`, `policy`, `max_bytes` and `loans_per_publisher`.
///
/// ```
/// use holo_runtime::{QueuePolicy, TopicOptions};
///
/// // Two subscribers may attach at once, each with a 4-deep queue that drops its oldest
/// // frame rather than hold the producer back.
/// let export = TopicOptions::DEFAULT
///     .with_subscribers(2)
///     .with_depth(4)
///     .with_policy(QueuePolicy::DropOldest);
/// // One publisher, frames of at most 1 MiB.
/// let import = TopicOptions::DEFAULT.with_max_bytes(1 << 20);
/// assert_eq!((export.subscribers, import.publishers), (2, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TopicOptions {
    /// An export: the standalone subscribers that may be attached at once (each gets a
    /// queue of its own, preallocated, and the exported output's pool is sized for every
    /// one of them). Default 1; 0 or more than [`MAX_TOPIC_CLIENTS`] is a diagnostic.
    pub subscribers: u32,
    /// An import: the standalone publishers that may be attached at once. Default 1; 0 or
    /// more than [`MAX_TOPIC_CLIENTS`] is a diagnostic.
    pub publishers: u32,
    /// The queue depth: each subscriber's (an export), or the imported input's (an
    /// import). `None`: the compile options' default depth (raised to an imported window
    /// input's minimum).
    pub depth: Option<u32>,
    /// What a full queue does: `Block` refuses the new value (`Backpressured` to the
    /// exporting operator's emit, or to the publisher), `DropOldest` evicts the oldest.
    pub policy: QueuePolicy,
    /// An imported tensor input: the largest tensor, in bytes, a publisher may publish —
    /// the per-slot bound of the topic's pool. Required for a tensor import (the input
    /// declares memory kind, dtype and rank, but no bound).
    pub max_bytes: Option<u64>,
    /// An import: the loans each publisher may hold at once (default 1), counted in the
    /// topic's pool.
    pub loans_per_publisher: u32,
    /// An export: subscribers attach from other processes (docs/IPC.md). The output's
    /// pool is materialized in shared memory, the session serves the topic over iceoryx2
    /// descriptors, and the plan's endpoint catalog
    /// ([`ExecutionPlan::endpoint_catalog`](crate::plan::ExecutionPlan::endpoint_catalog))
    /// describes it to the importing process. Default `false`.
    pub across_processes: bool,
    /// An export: the tensors each subscriber may hold at once (default 1), counted in the
    /// output's pool per subscriber beside its queue. Across processes it is a window: the
    /// session sends a subscriber no more descriptors while it holds this many.
    pub holds_per_subscriber: u32,
    /// An import fed by the topic of the same name **another process's session exports**
    /// across processes (docs/IPC.md): this session attaches to it as a subscriber, through
    /// that session's endpoint catalog (`CompileOptions::with_endpoint_catalog`), and the
    /// importing input receives the other process's tensors in place — no copy, no pool of
    /// its own. Default `false`.
    pub from_other_process: bool,
}

/// The most subscribers (or publishers) one topic may declare: each is a preallocated
/// queue, and each may register a release stream on every slot it receives.
pub const MAX_TOPIC_CLIENTS: u32 = 64;

impl TopicOptions {
    /// The default options (usable in a `const`): one subscriber or publisher, the
    /// compiler's default depth, a full queue blocks, no byte bound, one loan per
    /// publisher.
    pub const DEFAULT: Self = Self {
        subscribers: 1,
        publishers: 1,
        depth: None,
        policy: QueuePolicy::Block,
        max_bytes: None,
        loans_per_publisher: 1,
        across_processes: false,
        holds_per_subscriber: 1,
        from_other_process: false,
    };

    /// These options with `n` subscribers (an export).
    #[must_use]
    pub const fn with_subscribers(mut self, n: u32) -> Self {
        self.subscribers = n;
        self
    }

    /// These options with `n` publishers (an import).
    #[must_use]
    pub const fn with_publishers(mut self, n: u32) -> Self {
        self.publishers = n;
        self
    }

    /// These options with an exact queue depth.
    #[must_use]
    pub const fn with_depth(mut self, depth: u32) -> Self {
        self.depth = Some(depth);
        self
    }

    /// These options with `policy` for a full queue.
    #[must_use]
    pub const fn with_policy(mut self, policy: QueuePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// These options with tensors of at most `bytes` bytes (an import).
    #[must_use]
    pub const fn with_max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }

    /// These options with `n` loans per publisher (an import).
    #[must_use]
    pub const fn with_loans_per_publisher(mut self, n: u32) -> Self {
        self.loans_per_publisher = n;
        self
    }

    /// These options exported across processes (an export; see
    /// [`across_processes`](Self::across_processes)).
    #[must_use]
    pub const fn across_processes(mut self) -> Self {
        self.across_processes = true;
        self
    }

    /// These options fed by another process's export (an import; see
    /// [`from_other_process`](Self::from_other_process)).
    #[must_use]
    pub const fn from_other_process(mut self) -> Self {
        self.from_other_process = true;
        self
    }

    /// These options with `n` tensors held at once per subscriber (an export).
    #[must_use]
    pub const fn with_holds_per_subscriber(mut self, n: u32) -> Self {
        self.holds_per_subscriber = n;
        self
    }
}

impl Default for TopicOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Identifies a flow inside one graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EdgeId(pub(crate) u32);

impl EdgeId {
    /// The edge's index in its graph.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A tensor output's declaration with its parameter type erased.
#[derive(Clone)]
pub(crate) struct TensorOutputDecl {
    pub(crate) representation: TensorRepresentation,
    pub(crate) bounds: Option<TensorBounds>,
    pub(crate) storage: TensorOutputStorage,
    pub(crate) byte_span: Option<Arc<ByteSpanNode>>,
    pub(crate) memory_kind: Option<MemoryKindDerivation<()>>,
    pub(crate) max_loans: u32,
    pub(crate) max_rank: Option<u32>,
    /// The input whose received tensors the output may emit (`forwards = input`).
    pub(crate) forwards: Option<&'static str>,
}

#[derive(Clone)]
pub(crate) enum PortDecl {
    TensorOutput(TensorOutputDecl),
    TensorInput(TensorInputSpec),
    Message,
}

#[derive(Clone)]
pub(crate) struct NodePort {
    pub(crate) name: &'static str,
    pub(crate) direction: PortDirection,
    pub(crate) optional: bool,
    pub(crate) decl: PortDecl,
    pub(crate) temporal: crate::spec::PortTemporalSpec<()>,
}

impl NodePort {
    pub(crate) fn is_tensor(&self) -> bool {
        !matches!(self.decl, PortDecl::Message)
    }
}

/// Every operator's name, by index, in one buffer ([`Graph::names`]), appended as
/// operators are added. The compiler reads each name in several passes and the plan repeats
/// it in several records; an operator's own `String` sits among its other allocations, so
/// each read of it cost a cache miss once the graph outgrew the cache: the compile's first
/// sweep over the operators, which copied the names into such a buffer, grew ×25 from
/// 1,000 to 10,000 operators, and ×10 reading them here (BENCHMARKS.md, thirty-eighth
/// session).
#[derive(Debug, Default)]
pub(crate) struct Names {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<usize>,
}

impl Names {
    /// Appends the name of the next operator.
    pub(crate) fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    /// The name of operator `op`.
    pub(crate) fn get(&self, op: usize) -> &str {
        let start = match op.checked_sub(1) {
            Some(before) => self.ends[before],
            None => 0,
        };
        &self.text[start..self.ends[op]]
    }
}

/// What most of compile's passes read of a port, kept by the graph in one dense table
/// ([`Graph::port_facts`]) as operators are added: a graph's port carries its rate and
/// tensor contracts (384 bytes), so each pass that read it only for its name, direction
/// or queueing cost a cache miss per port once the graph outgrew the cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortFacts {
    pub(crate) name: &'static str,
    pub(crate) direction: PortDirection,
    pub(crate) optional: bool,
    /// A tensor port, not a message port.
    pub(crate) tensor: bool,
    /// A tensor output (its declaration is in the graph's port).
    pub(crate) tensor_output: bool,
    /// What an input sees per activation, and an output's burst: an edge's hard floor.
    pub(crate) mode: InputMode,
    pub(crate) burst: u32,
    /// The port declares a rate (a nominal rate or `follows`): a connected input's rate
    /// is this output's.
    pub(crate) declares_rate: bool,
    /// The port declares any rate metadata (a nominal rate, `follows` or an expected
    /// rate): queue sizing reads its temporal contract; without, it needs nothing more of
    /// the graph's port.
    pub(crate) rated: bool,
    /// An input's policy for a missing sample, and the entries it retains.
    pub(crate) missing: crate::spec::MissingPolicy,
    pub(crate) history: u32,
    /// The input a tensor output forwards (`forwards = input`).
    pub(crate) forwards: Option<&'static str>,
}

impl PortFacts {
    /// A tensor input: the one kind of port whose declaration states requirements (its
    /// `TensorInputSpec` in the graph's port).
    pub(crate) fn tensor_input(&self) -> bool {
        self.tensor && !self.tensor_output
    }

    pub(crate) fn of(port: &NodePort) -> Self {
        Self {
            name: port.name,
            direction: port.direction,
            optional: port.optional,
            tensor: port.is_tensor(),
            tensor_output: matches!(port.decl, PortDecl::TensorOutput(_)),
            mode: port.temporal.mode,
            burst: port.temporal.burst,
            declares_rate: port.temporal.declares_rate(),
            rated: port.temporal.declares_rate() || port.temporal.expected_rate.is_some(),
            missing: port.temporal.missing,
            history: port.temporal.history,
            forwards: match &port.decl {
                PortDecl::TensorOutput(d) => d.forwards,
                _ => None,
            },
        }
    }
}

pub(crate) struct OperatorNode {
    pub(crate) name: String,
    pub(crate) type_name: &'static str,
    /// The operator's Rust type with its module path (`std::any::type_name`): what the
    /// fingerprint hashes, so that two types of one name in two modules (their ports
    /// alike, their memory kinds not) make two fingerprints.
    pub(crate) rust_type: &'static str,
    pub(crate) ports: Vec<NodePort>,
    pub(crate) trigger: crate::spec::Trigger<()>,
    pub(crate) schema: &'static SchemaDescriptor,
    pub(crate) params: Arc<dyn Any + Send + Sync>,
    pub(crate) params_json: serde_json::Value,
    pub(crate) instance: Option<OperatorBox>,
}

/// A topic declaration: an output exported or an input imported under a name.
pub(crate) struct TopicNode {
    pub(crate) name: String,
    pub(crate) direction: TopicDirection,
    /// The operator and port.
    pub(crate) port: (OperatorId, u32),
    pub(crate) options: TopicOptions,
    /// Makes the topic's queues (their payload is the port's Rust type).
    pub(crate) factory: EdgeFactory,
}

pub(crate) struct EdgeNode {
    pub(crate) from: (OperatorId, u32),
    pub(crate) to: (OperatorId, u32),
    pub(crate) options: ConnectionOptions,
    pub(crate) factory: EdgeFactory,
}

/// A graph of operators and flows. Build it, [`compile`](fn@crate::compile) it into an
/// [`ExecutionPlan`](crate::plan::ExecutionPlan), then run it with a
/// [`RunSession`](crate::RunSession).
pub struct Graph {
    pub(crate) operators: Vec<OperatorNode>,
    /// What compile's passes read of every port, dense, in operator then declaration
    /// order: at 10,000 operators the 384-byte `NodePort`s no longer stay in cache between
    /// compiles, and reading them first was most of `compile`'s superlinear time
    /// (BENCHMARKS.md, fifteenth session). Port `p` of operator `o` is
    /// `port_facts[port_base[o] + p]`.
    pub(crate) port_facts: Vec<PortFacts>,
    /// Per operator, the index of its first port in `port_facts`, and the number of ports
    /// at the end (`port_base.len() == operators.len() + 1`).
    pub(crate) port_base: Vec<usize>,
    /// Operator `o`'s name is `names.get(o)`: what compile's passes read of a name.
    pub(crate) names: Names,
    /// Per operator: whether any of its ports is a tensor port. The passes that concern
    /// only tensor ports (their pools, memory kinds, devices and forwarding) skip the
    /// other operators on this table without reading their ports' facts: at 10,000
    /// message operators their sweeps over `port_facts` (over a megabyte, past the
    /// second-level cache) took about 0.4 ms of a 6 ms compile (BENCHMARKS.md,
    /// thirty-ninth session).
    pub(crate) tensor_operators: Vec<bool>,
    pub(crate) edges: Vec<EdgeNode>,
    pub(crate) topics: Vec<TopicNode>,
    by_name: std::collections::HashMap<String, OperatorId>,
    /// This graph's identity, carried by every port handle it returns.
    id: u64,
    /// Flows refused by `add_flow` because a handle came from another graph: the
    /// operator and port names of each end (`None` where foreign), reported by `compile`.
    pub(crate) foreign_flows: Vec<ForeignFlow>,
    /// Topics refused by `export_topic` / `import_topic` because the port handle came
    /// from another graph: their names, reported by `compile`.
    pub(crate) foreign_topics: Vec<String>,
}

/// A flow whose handle came from another graph (see [`Graph::add_flow`]).
#[derive(Clone, Debug)]
pub(crate) struct ForeignFlow {
    /// The edge id `add_flow` returned.
    pub(crate) edge: u32,
    /// The end(s) whose handle is foreign: `"from"`, `"to"` or both.
    pub(crate) foreign_from: bool,
    pub(crate) foreign_to: bool,
}

impl Default for Graph {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            operators: Vec::new(),
            port_facts: Vec::new(),
            port_base: vec![0],
            names: Names::default(),
            tensor_operators: Vec::new(),
            edges: Vec::new(),
            topics: Vec::new(),
            by_name: std::collections::HashMap::new(),
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            foreign_flows: Vec::new(),
            foreign_topics: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field(
                "operators",
                &self
                    .operators
                    .iter()
                    .map(|o| o.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("edges", &self.edges.len())
            .field(
                "topics",
                &self
                    .topics
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Operator `o`'s ports' compile facts, in declaration order.
    pub(crate) fn port_facts_of(&self, o: usize) -> &[PortFacts] {
        &self.port_facts[self.port_base[o]..self.port_base[o + 1]]
    }

    /// Adds an operator under a unique name with its accepted parameters, and returns
    /// its typed port handles. An empty name, one already in the graph, or one with a
    /// control character (it reaches thread, shared-memory and trace names) is
    /// `InvalidArgument`.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "the graph takes the accepted parameter set: callers hand it over"
    )]
    pub fn add_operator<O: Operator>(
        &mut self,
        name: &str,
        operator: O,
        params: ParamSet<O::Params>,
    ) -> Result<O::Ports> {
        if name.is_empty() {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                "operator name is empty",
            ));
        }
        // The name reaches thread names, shared-memory names and trace spans, none of which
        // takes a NUL; no control character belongs in a name a person reads.
        if name.chars().any(char::is_control) {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("the operator name {name:?} holds a control character"),
            )
            .at(format!("operator {name:?}")));
        }
        if self.by_name.contains_key(name) {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("an operator named {name:?} is already in the graph"),
            )
            .at(format!("operator {name:?}")));
        }
        let id = OperatorId(
            u32::try_from(self.operators.len()).map_err(|_| {
                Error::new(
                    ErrorCode::ResourceExhausted,
                    "too many operators in one graph",
                )
            })?,
            self.id,
        );
        let spec = O::operator_spec();
        let values: &O::Params = params.values();
        let ports = spec
            .ports
            .into_iter()
            .map(|p| {
                let port = || format!("operator {name:?}, input {:?}", p.name);
                let temporal = p.temporal.erase(values as &dyn Any, &port)?;
                Ok(NodePort {
                    name: p.name,
                    direction: p.direction,
                    optional: p.optional,
                    temporal,
                    decl: match p.payload {
                        PortPayload::Tensor(t) => PortDecl::TensorOutput(TensorOutputDecl {
                            representation: t.representation,
                            bounds: t.bounds,
                            storage: t.storage,
                            byte_span: t.byte_span.map(|e| e.node),
                            memory_kind: t.memory_kind.map(MemoryKindDerivation::erase),
                            max_loans: t.max_loans,
                            max_rank: t.max_rank,
                            forwards: t.forwards,
                        }),
                        PortPayload::TensorInput(i) => PortDecl::TensorInput(i),
                        PortPayload::Message(_) => PortDecl::Message,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let params_json = params.to_json();
        let values: O::Params = params.values().clone();
        self.by_name.insert(name.to_owned(), id);
        self.port_facts.extend(ports.iter().map(PortFacts::of));
        self.port_base.push(self.port_facts.len());
        self.names.push(name);
        self.tensor_operators
            .push(ports.iter().any(NodePort::is_tensor));
        self.operators.push(OperatorNode {
            name: name.to_owned(),
            type_name: spec.type_name,
            rust_type: std::any::type_name::<O>(),
            ports,
            trigger: spec.trigger.erase(),
            schema: <O::Params as ParamSchema>::schema(),
            params: Arc::new(values),
            params_json,
            instance: Some(Box::new(operator)),
        });
        Ok(O::__ports(id))
    }

    /// Adds an operator with its schema's default parameters: for an operator without
    /// parameters (or content with its defaults), no `ParamSet::defaults()?` at the call.
    /// An error names the first field with no default.
    pub fn add_operator_with_defaults<O: Operator>(
        &mut self,
        name: &str,
        operator: O,
    ) -> Result<O::Ports> {
        let params = ParamSet::<O::Params>::defaults().map_err(|e| {
            let at = format!(
                "operator {name:?}: {}",
                e.location().unwrap_or("parameters")
            );
            e.at(at)
        })?;
        self.add_operator(name, operator, params)
    }

    /// Connects an output to an input. The payload types must match (a mismatch does not
    /// compile); every other mistake (fan-in, a cycle, incompatible tensor specs) is a
    /// diagnostic of [`compile`](fn@crate::compile), and so is a handle returned by
    /// another graph's `add_operator` (`GRAPH_FOREIGN_PORT`: such a flow is not added).
    pub fn add_flow<T: Clone + Send + 'static>(
        &mut self,
        from: OutPort<T>,
        to: InPort<T>,
        options: ConnectionOptions,
    ) -> EdgeId {
        let id =
            EdgeId(u32::try_from(self.edges.len() + self.foreign_flows.len()).unwrap_or(u32::MAX));
        let (foreign_from, foreign_to) = (from.operator.1 != self.id, to.operator.1 != self.id);
        if foreign_from || foreign_to {
            self.foreign_flows.push(ForeignFlow {
                edge: id.0,
                foreign_from,
                foreign_to,
            });
            return id;
        }
        self.edges.push(EdgeNode {
            from: (from.operator, from.port),
            to: (to.operator, to.port),
            options,
            factory: edge_factory::<T>(),
        });
        id
    }

    /// Exports output `from` under the topic `name`: standalone subscribers attach to it
    /// by name in a running session ([`ChannelSubscriber`](crate::ChannelSubscriber)),
    /// each receiving every value the output emits into a queue of its own, beside the
    /// output's flows. The plan records the topic's contract (memory kind, device, dtype,
    /// rank, bound, depth, policy) and sizes the output's pool for every declared
    /// subscriber (see [`TopicOptions`]).
    ///
    /// Every mistake is a diagnostic of [`compile`](fn@crate::compile): an empty or
    /// duplicate name (`TOPIC_NAME_INVALID`, `TOPIC_NAME_DUPLICATE`), a port already
    /// under a topic (`TOPIC_PORT_CONFLICT`), 0 or too many subscribers
    /// (`TOPIC_CLIENT_COUNT`), a handle of another graph (`GRAPH_FOREIGN_PORT`).
    pub fn export_topic<T: Clone + Send + 'static>(
        &mut self,
        from: OutPort<T>,
        name: &str,
        options: TopicOptions,
    ) {
        self.topic(
            (from.operator, from.port),
            name,
            TopicDirection::Export,
            options,
            edge_factory::<T>(),
        );
    }

    /// Imports the topic `name` into input `to`: standalone publishers attach to it by
    /// name in a running session ([`ChannelPublisher`](crate::ChannelPublisher)) and
    /// publish into the input's queue, with tensors loaned from the topic's own pool,
    /// which the plan sizes (queue depth, the operator's retention, every publisher's
    /// loans) and whose contract is the input's declared memory kind, dtype and rank with
    /// [`TopicOptions::max_bytes`] as its bound. The input counts as connected; a flow
    /// into it as well is `TOPIC_PORT_CONFLICT` (an input has one producer). A CUDA or
    /// pinned-host topic needs its device bound with
    /// [`DeploymentBinding::bind_imported_topic_device`](crate::DeploymentBinding::bind_imported_topic_device).
    pub fn import_topic<T: Clone + Send + 'static>(
        &mut self,
        to: InPort<T>,
        name: &str,
        options: TopicOptions,
    ) {
        self.topic(
            (to.operator, to.port),
            name,
            TopicDirection::Import,
            options,
            edge_factory::<T>(),
        );
    }

    fn topic(
        &mut self,
        port: (OperatorId, u32),
        name: &str,
        direction: TopicDirection,
        options: TopicOptions,
        factory: EdgeFactory,
    ) {
        if port.0.1 != self.id {
            self.foreign_topics.push(name.to_owned());
            return;
        }
        self.topics.push(TopicNode {
            name: name.to_owned(),
            direction,
            port,
            options,
            factory,
        });
    }

    /// This graph's identity (for tests that build port handles by hand).
    #[cfg(test)]
    pub(crate) fn id_for_tests(&self) -> u64 {
        self.id
    }

    /// The number of operators.
    pub fn operator_count(&self) -> usize {
        self.operators.len()
    }

    /// The id of the operator with this name.
    pub fn operator_id(&self, name: &str) -> Option<OperatorId> {
        self.by_name.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_found_by_index() {
        let mut names = super::Names::default();
        for n in ["a", "", "bc"] {
            names.push(n);
        }
        assert_eq!((names.get(0), names.get(1), names.get(2)), ("a", "", "bc"));
    }
}
