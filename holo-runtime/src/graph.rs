//! Graphs: operators and the flows between their ports.

use std::any::Any;
use std::sync::Arc;

use holo_params::{ParamSchema, ParamSet, SchemaDescriptor};

use crate::channel::queue::{EdgeFactory, edge_factory};
use crate::operator::OperatorBox;
use crate::operator::{InPort, Operator, OperatorId, OutPort};
use crate::spec::bytespan::ByteSpanNode;
use crate::spec::memkind::MemoryKindDerivation;
use crate::spec::{
    PortDirection, PortPayload, TensorBounds, TensorInputSpec, TensorOutputStorage,
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

pub(crate) struct OperatorNode {
    pub(crate) name: String,
    pub(crate) type_name: &'static str,
    pub(crate) ports: Vec<NodePort>,
    pub(crate) trigger: crate::spec::Trigger<()>,
    pub(crate) schema: &'static SchemaDescriptor,
    pub(crate) params: Arc<dyn Any + Send + Sync>,
    pub(crate) params_json: serde_json::Value,
    pub(crate) instance: Option<OperatorBox>,
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
    pub(crate) edges: Vec<EdgeNode>,
    by_name: std::collections::HashMap<String, OperatorId>,
    /// This graph's identity, carried by every port handle it returns.
    id: u64,
    /// Flows refused by `add_flow` because a handle came from another graph: the
    /// operator and port names of each end (`None` where foreign), reported by `compile`.
    pub(crate) foreign_flows: Vec<ForeignFlow>,
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
            edges: Vec::new(),
            by_name: std::collections::HashMap::new(),
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            foreign_flows: Vec::new(),
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
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an operator under a unique name with its accepted parameters, and returns
    /// its typed port handles.
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
            .map(|p| NodePort {
                name: p.name,
                direction: p.direction,
                optional: p.optional,
                temporal: p.temporal.erase(values as &dyn Any),
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
            .collect();
        let params_json = params.to_json();
        let values: O::Params = params.values().clone();
        self.by_name.insert(name.to_owned(), id);
        self.operators.push(OperatorNode {
            name: name.to_owned(),
            type_name: spec.type_name,
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

    /// The number of operators.
    pub fn operator_count(&self) -> usize {
        self.operators.len()
    }

    /// The id of the operator with this name.
    pub fn operator_id(&self, name: &str) -> Option<OperatorId> {
        self.by_name.get(name).copied()
    }
}
