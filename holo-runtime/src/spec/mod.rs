//! The operator spec records `#[operator]` generates: each operator's ports, their
//! payloads, directions and temporal contracts, and the dependencies of its byte-span,
//! memory-kind, count and rate expressions on its parameters. `compile` reads them; a
//! test or a tool can inspect them ([`OperatorPorts::spec`](crate::OperatorPorts)).
//!
//! The vocabulary an operator author writes in attributes — [`Rate`],
//! [`DType`], [`Trigger`], the tensor specs and the
//! byte-span functions — is at the crate root.

pub(crate) mod bytespan;
pub(crate) mod dtype;
pub(crate) mod memkind;
pub(crate) mod ports;
pub(crate) mod rates;

pub use bytespan::{
    InputName, MAX_EXPRESSION_DEPENDENCIES, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_NODES,
    MAX_SHAPE_EXTENTS, ParamDependency, ShapeParam,
};
pub use memkind::MemoryKindDerivation;
pub use ports::{OperatorSpec, PortDirection, PortPayload, PortSpec};
pub use rates::{ParameterCount, ParameterRate, PortTemporalSpec, QueueSizing};

pub(crate) use dtype::{DType, MAX_TENSOR_RANK, TensorBounds, TensorRepresentation};
pub(crate) use ports::{TensorInputSpec, TensorOutputStorage};
pub(crate) use rates::{InputMode, MissingPolicy, Rate, RateExpr, RateRatio, Trigger};
