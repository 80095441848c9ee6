//! What operators declare: ports, tensor specs, bounds, byte-span expressions and
//! memory-kind derivations.

pub mod bytespan;
pub mod dtype;
pub mod memkind;
pub mod ports;
pub mod rates;

pub use bytespan::{
    ByteSpanExpr, ByteSpanProjector, InputName, ParamDependency, ShapeParam, input_max_byte_span,
    parameter_contiguous_byte_span, parameter_projected_byte_span, tensor_byte_span,
};
pub use dtype::{DType, MAX_TENSOR_RANK, TensorBounds, TensorRepresentation, tensor_bounds};
pub use memkind::{MemoryKindDerivation, parameter_memory_kind, parameter_memory_kind_exact};
pub use ports::{
    OperatorSpec, PortDirection, PortPayload, PortSpec, TensorInputSpec, TensorOutputSpec,
    TensorOutputStorage,
};
pub use rates::{
    InputMode, MissingPolicy, ParameterCount, PortTemporalSpec, QueueSizing, Rate, RateExpr,
    RateRatio, Trigger, automatic_queue_depth, parameter_count, parameter_rate,
};
