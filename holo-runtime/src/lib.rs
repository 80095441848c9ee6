//! holo: real-time pipelines of GPU tensors.
//!
//! Compose → compile → run:
//!
//! 1. Write operators as structs with `#[operator]`: ports are `Input<T>` / `Output<T>`
//!    fields, tensor ports carry a spec (memory kind, dtype, rank, storage, byte span),
//!    and deployment parameters are a `#[derive(ParamSchema)]` struct.
//! 2. Build a [`Graph`] with [`Graph::add_operator`] and [`Graph::add_flow`] (typed: a
//!    payload mismatch does not compile), then [`compile`](fn@compile) it into an immutable,
//!    inspectable [`ExecutionPlan`](plan::ExecutionPlan) — or get every [`Diagnostic`] at
//!    once.
//! 3. Start a [`RunSession`]: every pool is materialized before the first `compute`,
//!    each partition runs on its own thread, and tensors move through preallocated
//!    queues with no allocation on the hot path.
//!
//! # Where things are
//!
//! Every item has one path. The crate root holds what an operator, a graph or a session
//! is written with: ports, contexts, tensors, options, `compile`, errors, the rate and
//! tensor-spec vocabulary of `#[operator]` attributes. The modules hold the rest:
//! - [`plan`]: the [`ExecutionPlan`](plan::ExecutionPlan) and its records;
//! - [`spec`]: the operator spec records `#[operator]` generates (what `compile` reads);
//! - [`channel`]: the channel layer — slots, buffers, ordering domains;
//! - [`device`]: device backends (CUDA, OpenCL, software) and their handles;
//! - [`dlpack`]: DLPack export and import (`Tensor::to_dlpack`, `Tensor::from_dlpack`);
//! - [`app`]: the standard command line of a holo application;
//! - [`params`]: parameter-schema introspection;
//! - [`codes`] and [`generation_codes`]: the stable names of diagnostic codes.
#![warn(missing_docs)]

pub use holo_params::{
    BoundedVec, Error, ErrorCode, MemoryKind, ParamEnum, ParamErrorKind, ParamRef, ParamSchema,
    ParamSet, ParamValue, Result,
};

/// Parameter-schema introspection: the descriptors `#[derive(ParamSchema)]` generates,
/// parameter values and paths, and the redaction of sensitive fields. (The everyday
/// parameter items — [`ParamSet`], [`ParamSchema`], [`ParamRef`], [`Error`] — are at the
/// crate root.)
pub mod params {
    pub use holo_params::{
        EnumDescriptor, FieldDescriptor, FieldPath, REDACTED, Redacted, SchemaDescriptor,
        SchemaEntry, TypeDescriptor, Value, schema_json,
    };
}

pub mod channel;
mod cold;
pub mod cpus;
mod fork;
mod operator_macros;
mod params_macros;
mod trace;
pub use operator_macros::*;
pub use params_macros::*;

pub mod app;
mod compile;
pub mod device;
mod graph;
pub mod ipc;
mod operator;
pub mod plan;
mod session;
pub mod spec;
mod tensor;
mod topic;

pub use compile::{
    ArrivalEvidence, AutomaticQueueSizing, CompileOptions, CudaExecutionOptions, DeploymentBinding,
    Diagnostic, DiagnosticCode, Diagnostics, MAX_FANOUT_RELEASE_STREAMS, MAX_QUEUE_DEPTH,
    PartitionSpec, Partitioning, Severity, codes, compile,
};
pub use graph::{ConnectionOptions, EdgeId, Graph, MAX_TOPIC_CLIENTS, QueuePolicy, TopicOptions};
pub use operator::{InPort, Operator, OperatorId, OperatorPorts, OutPort};
pub use session::{
    DeviceAccess, EmitOptions, ExecutionContext, FrameInfo, GenerationPortRate, Input,
    IpcImportReport, LifecycleContext, Output, PoolReport, PortRateView, RateCandidate,
    RateGeneration, RateGenerationCode, RateGenerationSnapshot, RatePort, Refused,
    RejectedRateGeneration, RunReport, RunSession, SessionOptions, generation_codes,
};
pub use spec::bytespan::{
    ByteSpanExpr, ByteSpanProjector, input_max_byte_span, parameter_contiguous_byte_span,
    parameter_projected_byte_span, tensor_byte_span,
};
pub use spec::dtype::{DType, MAX_TENSOR_RANK, TensorBounds, TensorRepresentation, tensor_bounds};
pub use spec::memkind::{parameter_memory_kind, parameter_memory_kind_exact};
pub use spec::ports::{TensorInputSpec, TensorOutputSpec, TensorOutputStorage};
pub use spec::rates::{
    InputMode, MissingPolicy, Rate, RateExpr, RateRatio, Trigger, automatic_queue_depth,
    parameter_count, parameter_rate,
};
pub use tensor::dlpack;
pub use tensor::{
    CommittedTensor, CudaStream, DeviceArray, DeviceWriteGuard, HostCopy, HostWriteGuard, Tensor,
    TensorLoanRequest, TensorOutputLoan, TensorReadLease, TensorReadiness,
};
pub use topic::{
    ChannelPublisher, ChannelSubscriber, PublisherLoan, PublisherOptions, PublisherWriteGuard,
    SubscriberOptions,
};

/// Test support for holo's own test suites: fault injection and the list of device
/// backends to run device tests on. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __test_support {
    /// The backends the device-contract suites run on: always a software device, plus
    /// CUDA device 0 when it opens, plus the first OpenCL device of each platform when one
    /// opens (PoCL in CI).
    ///
    /// # Panics
    /// With `HOLO_REQUIRE_DEVICE=cuda` (or `opencl`) set, panics (failing the test rather
    /// than skipping that run) when CUDA device 0 (or no OpenCL device) opens, or when the
    /// variable is malformed.
    pub fn test_backends() -> Vec<std::sync::Arc<dyn crate::device::DeviceBackend>> {
        crate::device::backends_for_tests()
    }
    pub use crate::session::fault::fail_partition_spawn;
    /// The readiness event and `stream`'s release event of `tensor`'s slot: what a
    /// hand-off on `stream` waits on and records (`None` before a first hand-off on it).
    /// The hand-off bench times the raw driver pair on these same events.
    pub fn hand_off_events(
        tensor: &crate::Tensor,
        stream: &crate::device::AdoptedStream,
    ) -> Option<(crate::device::EventHandle, crate::device::EventHandle)> {
        tensor.hand_off_events(stream)
    }
}

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
        InputName, MemoryKindDerivation, OperatorSpec, ParamDependency, ParameterCount,
        PortDirection, PortPayload, PortSpec, PortTemporalSpec,
    };
    pub use crate::tensor::{IsTensor, Tensor};
    pub use crate::{
        ByteSpanExpr, ByteSpanProjector, DType, InputMode, MAX_TENSOR_RANK, MissingPolicy, Rate,
        RateExpr, RateRatio, TensorBounds, TensorInputSpec, TensorOutputSpec, TensorOutputStorage,
        TensorRepresentation, Trigger,
    };
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
        pub use crate::{Rate, RateRatio};
        pub use crate::{
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
