//! holo: real-time pipelines of GPU tensors.
//!
//! Compose → compile → run:
//!
//! 1. Write operators as structs with `#[operator]`: ports are `Input<T>` / `Output<T>`
//!    fields, tensor ports carry a spec (memory kind, dtype, rank, storage, byte span),
//!    and deployment parameters are a `#[derive(ParamSchema)]` struct.
//! 2. Build a [`Graph`] with [`Graph::add_operator`] and [`Graph::add_flow`] (typed: a
//!    payload mismatch does not compile), then [`compile`](fn@compile) it into an immutable,
//!    inspectable [`ExecutionPlan`] — or get every [`Diagnostic`] at once.
//! 3. Start a [`RunSession`]: every pool is materialized before the first `compute`,
//!    each partition runs on its own thread, and tensors move through preallocated
//!    queues with no allocation on the hot path.
#![warn(missing_docs)]

pub use holo_params as params;
pub use holo_params::{
    BoundedVec, Error, ErrorCode, MemoryKind, ParamEnum, ParamErrorKind, ParamRef, ParamSchema,
    ParamSet, ParamValue, Result,
};

pub mod channel;
mod cold;
mod operator_macros;
mod params_macros;
mod trace;
pub use operator_macros::*;
pub use params_macros::*;

pub mod app;
pub mod compile;
pub mod device;
pub mod graph;
pub mod operator;
pub mod plan;
pub mod session;
pub mod spec;
pub mod tensor;

pub use compile::{
    ArrivalEvidence, AutomaticQueueSizing, CompileOptions, CudaExecutionOptions, DeploymentBinding,
    Diagnostic, DiagnosticCode, Diagnostics, PartitionSpec, Partitioning, Severity, codes, compile,
};
pub use graph::{ConnectionOptions, EdgeId, Graph, QueuePolicy};
pub use operator::{InPort, Operator, OperatorId, OperatorPorts, OutPort};
pub use plan::{
    CudaComputeStreamPolicy, ExecutionPlan, RateQueueInspectionFormat, render_rate_queue_inspection,
};
pub use session::{
    EmitOptions, ExecutionContext, Input, LifecycleContext, Output, PoolReport, PortRateView,
    RateCandidate, RateGeneration, RateGenerationSnapshot, RejectedRateGeneration, RunReport,
    RunSession, SessionOptions,
};
pub use spec::{
    ByteSpanExpr, ByteSpanProjector, DType, InputMode, MissingPolicy, Rate, RateExpr, RateRatio,
    TensorBounds, TensorInputSpec, TensorOutputSpec, TensorOutputStorage, TensorRepresentation,
    Trigger, automatic_queue_depth, input_max_byte_span, parameter_contiguous_byte_span,
    parameter_count, parameter_memory_kind, parameter_memory_kind_exact,
    parameter_projected_byte_span, parameter_rate, tensor_bounds, tensor_byte_span,
};
pub use tensor::{
    CommittedTensor, CudaStream, DeviceWriteGuard, HostWriteGuard, Tensor, TensorLoanRequest,
    TensorOutputLoan, TensorReadLease, TensorReadiness,
};

/// The parameter schema of an operator that has no deployment parameters (the default
/// of `#[operator]` without `params = ...`).
#[derive(Clone, Debug, Default, PartialEq, Eq, holo_macros::ParamSchema)]
#[param(schema = "holo.NoParams", version = 1, crate = crate)]
pub struct NoParams {}

/// Items that generated code names. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::NoParams;
    pub use crate::graph::Graph;
    pub use crate::operator::{InPort, OperatorId, OperatorPorts, OutPort};
    pub use crate::session::{Input, Output, PortBinder};
    pub use crate::spec::{
        ByteSpanExpr, ByteSpanProjector, DType, InputMode, InputName, MAX_TENSOR_RANK,
        MemoryKindDerivation, MissingPolicy, OperatorSpec, ParamDependency, ParameterCount,
        PortDirection, PortPayload, PortSpec, PortTemporalSpec, Rate, RateExpr, RateRatio,
        TensorBounds, TensorInputSpec, TensorOutputSpec, TensorOutputStorage, TensorRepresentation,
        Trigger,
    };
    pub use crate::tensor::{IsTensor, Tensor};
    pub use holo_macros::{__OperatorPorts, param_ref};
    pub use holo_params::__private::*;

    /// The dependency record of a typed field path (used by `#[byte_span_projector]`).
    pub fn param_dependency<S: crate::ParamSchema, T>(r: crate::ParamRef<S, T>) -> ParamDependency {
        ParamDependency::of(&r)
    }

    /// Compile-time check that a tensor port's payload is `Tensor`; spanned on the type.
    pub const fn assert_tensor_port<T: IsTensor>() {}

    /// Compile-time check that a message port's payload can be queued and fanned out.
    pub const fn assert_message_port<T: Clone + Send + 'static>() {}

    /// What byte-span and memory-kind expressions in `#[operator]` see.
    pub mod bytespan_prelude {
        pub use crate::MemoryKind;
        pub use crate::MemoryKind::{CudaDevice, CudaManaged, Host, PinnedHost};
        pub use crate::spec::{Rate, RateRatio};
        pub use crate::spec::{
            input_max_byte_span, parameter_contiguous_byte_span, parameter_count,
            parameter_memory_kind, parameter_memory_kind_exact, parameter_projected_byte_span,
            parameter_rate, tensor_byte_span,
        };
        pub use holo_macros::{memory_kind_map, param_ref};
    }
}

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
