//! Port declarations: what an operator's `#[operator]` attributes lower to.

use crate::MemoryKind;
use crate::spec::bytespan::ByteSpanExpr;
use crate::spec::dtype::{TensorBounds, TensorRepresentation};
use crate::spec::memkind::MemoryKindDerivation;

/// Where a tensor output's backing storage comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TensorOutputStorage {
    /// The output publishes caller-supplied backing (a forwarded or imported tensor);
    /// the runtime provisions nothing and validates values against consumers' specs.
    #[default]
    PassThrough,
    /// The runtime provisions a bounded pool, sized when the plan is compiled.
    RuntimePool,
}

impl TensorOutputStorage {
    /// The stable name used in plans.
    pub const fn name(self) -> &'static str {
        match self {
            TensorOutputStorage::PassThrough => "pass_through",
            TensorOutputStorage::RuntimePool => "runtime_pool",
        }
    }
}

/// What a tensor output produces (the seed's `TensorOutputSpec`).
#[derive(Clone, Debug)]
pub struct TensorOutputSpec<P> {
    /// Memory kind, dtype and rank.
    pub representation: TensorRepresentation,
    /// Literal bounds (`None` when a byte-span expression provides them).
    pub bounds: Option<TensorBounds>,
    /// Pool or pass-through.
    pub storage: TensorOutputStorage,
    /// A byte-span expression resolved when the plan is compiled.
    pub byte_span: Option<ByteSpanExpr<P>>,
    /// A memory kind chosen by a parameter.
    pub memory_kind: Option<MemoryKindDerivation<P>>,
    /// How many loans the producer may hold at once (default 1).
    pub max_loans: u32,
    /// The largest rank a loan may request (default: the representation's rank, else
    /// [`MAX_TENSOR_RANK`](crate::spec::MAX_TENSOR_RANK)).
    pub max_rank: Option<u32>,
    /// The tensor input (by port name) whose received tensors this output may emit
    /// unchanged (`#[output(forwards = frames)]`). The pool a forwarded tensor comes from
    /// is then sized for every queue and hold after this output too; an output without it
    /// that emits a tensor of another operator's pool is refused (`ProtocolError`).
    pub forwards: Option<&'static str>,
}

impl<P> Default for TensorOutputSpec<P> {
    fn default() -> Self {
        Self {
            representation: TensorRepresentation::default(),
            bounds: None,
            storage: TensorOutputStorage::PassThrough,
            byte_span: None,
            memory_kind: None,
            max_loans: 1,
            max_rank: None,
            forwards: None,
        }
    }
}

/// What a tensor input requires (the seed's `TensorInputSpec`): every declared field is
/// an exact requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TensorInputSpec {
    /// Exact memory kind required.
    pub memory_kind: Option<MemoryKind>,
    /// Exact dtype required.
    pub dtype: Option<crate::spec::DType>,
    /// Exact rank required.
    pub rank: Option<u32>,
}

/// The payload kind of a port.
#[derive(Clone, Debug)]
pub enum PortPayload<P> {
    /// A `Tensor` port with its spec.
    Tensor(TensorOutputSpec<P>),
    /// A `Tensor` input with its requirements.
    TensorInput(TensorInputSpec),
    /// Any other `Send + Clone` message type (named for diagnostics).
    Message(&'static str),
}

/// Direction of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortDirection {
    /// An input.
    Input,
    /// An output.
    Output,
}

/// One declared port.
#[derive(Clone, Debug)]
pub struct PortSpec<P> {
    /// The port name (the field name).
    pub name: &'static str,
    /// Input or output.
    pub direction: PortDirection,
    /// The payload and its spec.
    pub payload: PortPayload<P>,
    /// The Rust payload type name (for diagnostics).
    pub payload_type: &'static str,
    /// An input that may stay unconnected.
    pub optional: bool,
    /// Rates and what the port sees per activation (its part of the temporal contract).
    pub temporal: crate::spec::rates::PortTemporalSpec<P>,
}

/// Everything an operator declares, lowered by `#[operator]`.
#[derive(Clone, Debug)]
pub struct OperatorSpec<P> {
    /// The Rust type name.
    pub type_name: &'static str,
    /// The ports in declaration order (inputs and outputs interleaved as declared).
    pub ports: Vec<PortSpec<P>>,
    /// When `compute()` fires (the temporal contract's trigger).
    pub trigger: crate::spec::rates::Trigger<P>,
}
