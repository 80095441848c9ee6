//! Compile diagnostics: every rejection has a stable code, names the operator, port or
//! field path concerned, and says what to do.

use std::fmt;

use serde::Serialize;

use crate::{Error, ErrorCode};

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The plan is rejected.
    Error,
    /// The plan is kept; the warning is recorded in it.
    Warning,
}

/// One finding of `compile`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Diagnostic {
    /// The stable code ([`codes::PHYSICAL_TENSOR_LAYOUT_MISMATCH`], [`codes::GRAPH_CYCLE`],
    /// …), serialized as its name.
    pub code: DiagnosticCode,
    /// Error or warning.
    pub severity: Severity,
    /// The operator concerned.
    pub operator: Option<String>,
    /// The port concerned.
    pub port: Option<String>,
    /// The parameter field path concerned.
    pub field_path: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: String,
}

impl Diagnostic {
    pub(crate) fn error(code: DiagnosticCode, message: impl Into<String>) -> Self {
        Self {
            code,
            severity: Severity::Error,
            operator: None,
            port: None,
            field_path: None,
            message: message.into(),
            hint: String::new(),
        }
    }

    pub(crate) fn warning(code: DiagnosticCode, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(code, message)
        }
    }

    pub(crate) fn operator(mut self, name: &str) -> Self {
        self.operator = Some(name.to_owned());
        self
    }

    pub(crate) fn port(mut self, name: &str) -> Self {
        self.port = Some(name.to_owned());
        self
    }

    pub(crate) fn field(mut self, path: &str) -> Self {
        self.field_path = Some(path.to_owned());
        self
    }

    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = hint.into();
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}[{}]: {}", self.code, self.message)?;
        let mut at = Vec::new();
        if let Some(o) = &self.operator {
            at.push(format!("operator {o:?}"));
        }
        if let Some(p) = &self.port {
            at.push(format!("port {p:?}"));
        }
        if let Some(p) = &self.field_path {
            at.push(format!("field {p}"));
        }
        if !at.is_empty() {
            write!(f, " (at {})", at.join(", "))?;
        }
        if !self.hint.is_empty() {
            write!(f, "; hint: {}", self.hint)?;
        }
        Ok(())
    }
}

/// Every error diagnostic of one compile, reported together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostics {
    /// The diagnostics, in the order the passes found them.
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Whether any diagnostic has this code.
    pub fn has(&self, code: DiagnosticCode) -> bool {
        self.items.iter().any(|d| d.code == code)
    }

    /// The diagnostics with this code.
    pub fn with_code(&self, code: DiagnosticCode) -> impl Iterator<Item = &Diagnostic> + '_ {
        self.items.iter().filter(move |d| d.code == code)
    }

    /// The codes, in order.
    pub fn codes(&self) -> Vec<DiagnosticCode> {
        self.items.iter().map(|d| d.code).collect()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "compile rejected the graph with {} diagnostic(s):",
            self.items.len()
        )?;
        for d in &self.items {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

/// A rejected compile as an [`Error`]: [`ErrorCode::InvalidArgument`] at `compile`, whose
/// message lists every diagnostic (code, operator, port, field, message, hint) and whose
/// [detail](Error::detail) is the `Diagnostics` themselves, so none is lost.
///
/// ```
/// use holo_runtime::{Diagnostics, Error, ErrorCode};
///
/// let diagnostics = Diagnostics { items: Vec::new() };
/// let error = Error::from(diagnostics.clone());
/// assert_eq!(error.code(), ErrorCode::InvalidArgument);
/// assert_eq!(error.detail::<Diagnostics>(), Some(&diagnostics));
/// ```
impl From<Diagnostics> for Error {
    fn from(diagnostics: Diagnostics) -> Self {
        Error::new(ErrorCode::InvalidArgument, diagnostics.to_string())
            .at("compile")
            .with_detail(diagnostics)
    }
}

/// Declares a stable code vocabulary from one table: a `#[non_exhaustive]` enum whose
/// [`name`](DiagnosticCode::name) is the identifier of its constant (so the two cannot
/// drift), the round trip from the name, and a module of constants of the enum type.
macro_rules! stable_codes {
    (
        $(#[$enum_attr:meta])*
        pub enum $Enum:ident, a $what:literal;
        $(#[$mod_attr:meta])*
        pub mod $codes:ident;
        $( $(#[$attr:meta])* $Variant:ident = $NAME:ident, )+
    ) => {
        $(#[$enum_attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $Enum {
            $( $(#[$attr])* $Variant, )+
        }

        impl $Enum {
            /// Every code, in declaration order.
            pub const ALL: &'static [$Enum] = &[$($Enum::$Variant),+];

            /// The stable name, as printed in diagnostics and errors and serialized in JSON.
            pub const fn name(self) -> &'static str {
                match self {
                    $($Enum::$Variant => stringify!($NAME),)+
                }
            }

            /// The code whose [`name`](Self::name) is `name`, if any.
            pub fn from_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|code| code.name() == name)
            }
        }

        impl ::std::fmt::Display for $Enum {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.name())
            }
        }

        impl ::std::str::FromStr for $Enum {
            type Err = $crate::Error;

            /// Parses a [`name`](Self::name); anything else is `InvalidArgument`.
            fn from_str(name: &str) -> $crate::Result<Self> {
                Self::from_name(name).ok_or_else(|| {
                    $crate::Error::invalid_argument(format!(
                        "`{name}` is not {}; see `{}::ALL`",
                        $what,
                        stringify!($Enum)
                    ))
                })
            }
        }

        impl ::serde::Serialize for $Enum {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: ::serde::Serializer,
            {
                serializer.serialize_str(self.name())
            }
        }

        $(#[$mod_attr])*
        pub mod $codes {
            use super::$Enum;

            $( $(#[$attr])* pub const $NAME: $Enum = $Enum::$Variant; )+
        }
    };
}
pub(crate) use stable_codes;

stable_codes! {
    /// The stable code of a [`Diagnostic`]: match on it, and print or serialize it as its
    /// [`name`](DiagnosticCode::name), which never changes.
    ///
    /// ```
    /// use holo_runtime::{DiagnosticCode, codes};
    ///
    /// assert_eq!(codes::GRAPH_CYCLE, DiagnosticCode::GraphCycle);
    /// assert_eq!(DiagnosticCode::GraphCycle.name(), "GRAPH_CYCLE");
    /// assert_eq!("GRAPH_CYCLE".parse::<DiagnosticCode>(), Ok(DiagnosticCode::GraphCycle));
    /// assert!("graph_cycle".parse::<DiagnosticCode>().is_err());
    /// ```
    pub enum DiagnosticCode, a "diagnostic code";
    /// The stable diagnostic codes, as constants of [`DiagnosticCode`]:
    /// `codes::GRAPH_CYCLE` is [`DiagnosticCode::GraphCycle`].
    pub mod codes;
    /// A required input has no flow.
    GraphUnconnectedInput = GRAPH_UNCONNECTED_INPUT,
    /// More than one flow enters one input.
    GraphIllegalFanIn = GRAPH_ILLEGAL_FAN_IN,
    /// The flows form a cycle.
    GraphCycle = GRAPH_CYCLE,
    /// A flow (or topic) names a port of the wrong direction or that does not exist.
    GraphInvalidFlow = GRAPH_INVALID_FLOW,
    /// A flow or topic was given a port handle that another graph's `add_operator`
    /// returned.
    GraphForeignPort = GRAPH_FOREIGN_PORT,
    /// An authored partition names an unknown operator, names one twice, or misses one.
    PartitionInvalid = PARTITION_INVALID,
    /// An explicit queue depth of zero.
    QueueDepthZero = QUEUE_DEPTH_ZERO,
    /// A queue depth (explicit, automatic or default) above
    /// [`MAX_QUEUE_DEPTH`](crate::compile::MAX_QUEUE_DEPTH).
    QueueDepthLimit = QUEUE_DEPTH_LIMIT,
    /// `CompileOptions::max_fanout_release_streams` is 0 or above
    /// [`MAX_FANOUT_RELEASE_STREAMS`](crate::compile::MAX_FANOUT_RELEASE_STREAMS).
    OptionFanoutReleaseStreams = OPTION_FANOUT_RELEASE_STREAMS,
    /// Checked byte-span arithmetic overflowed.
    PhysicalTensorByteSpanOverflow = PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW,
    /// A projector returned an error other than `ArithmeticOverflow`.
    PhysicalTensorByteSpanProjectionFailed = PHYSICAL_TENSOR_BYTE_SPAN_PROJECTION_FAILED,
    /// An expression evaluated to zero, or divided / aligned by zero.
    PhysicalTensorByteSpanZero = PHYSICAL_TENSOR_BYTE_SPAN_ZERO,
    /// A shape parameter's length differs from the output's exact rank (or no rank).
    PhysicalTensorByteSpanRankMismatch = PHYSICAL_TENSOR_BYTE_SPAN_RANK_MISMATCH,
    /// An expression exceeds 32 nodes, depth 16, 8 dependencies or 8 extents.
    PhysicalTensorByteSpanLimit = PHYSICAL_TENSOR_BYTE_SPAN_LIMIT,
    /// `input_max_byte_span` names an input without exactly one bounded producer.
    PhysicalTensorByteSpanInputUnbounded = PHYSICAL_TENSOR_BYTE_SPAN_INPUT_UNBOUNDED,
    /// An expression reads a sensitive field, or one that is neither compile-time nor
    /// recompile-required.
    PhysicalTensorByteSpanUnreadableParameter = PHYSICAL_TENSOR_BYTE_SPAN_UNREADABLE_PARAMETER,
    /// One projector id names two different projectors in one compile.
    PhysicalTensorByteSpanProjectorIdConflict = PHYSICAL_TENSOR_BYTE_SPAN_PROJECTOR_ID_CONFLICT,
    /// A parameter-contiguous span needs the output's dtype.
    PhysicalTensorByteSpanDtypeMissing = PHYSICAL_TENSOR_BYTE_SPAN_DTYPE_MISSING,
    /// A runtime pool has neither literal bounds nor a byte-span expression.
    PhysicalTensorUnboundedPool = PHYSICAL_TENSOR_UNBOUNDED_POOL,
    /// Literal bounds of zero: every allocation will be rejected.
    PhysicalTensorZeroBounds = PHYSICAL_TENSOR_ZERO_BOUNDS,
    /// A runtime pool has no memory kind, declared or derived.
    PhysicalTensorMemoryKindMissing = PHYSICAL_TENSOR_MEMORY_KIND_MISSING,
    /// A memory-kind derivation does not match its field's enum domain.
    PhysicalTensorMemoryKindDomain = PHYSICAL_TENSOR_MEMORY_KIND_DOMAIN,
    /// A producer's representation does not meet a consumer's exact requirement.
    PhysicalTensorLayoutMismatch = PHYSICAL_TENSOR_LAYOUT_MISMATCH,
    /// A CUDA pool, a pass-through CUDA output or an imported device-memory topic has no
    /// device binding.
    PlacementDeviceRequired = PLACEMENT_DEVICE_REQUIRED,
    /// One operator's ports resolve to more than one device.
    PlacementDeviceConflict = PLACEMENT_DEVICE_CONFLICT,
    /// A binding names an operator or port that does not exist or is not a tensor output,
    /// or a topic the graph does not import.
    PlacementUnknownBinding = PLACEMENT_UNKNOWN_BINDING,
    /// A memory kind of one API meets a device or a requirement of the other: an output
    /// in `cuda_device`, `cuda_managed` or `pinned` memory bound to an OpenCL device (or
    /// `opencl_device` to a CUDA one, or pageable `host` memory to any device); a consumer
    /// requiring one API's kind fed by a neutral `device` output bound to the other; or an
    /// imported topic in a kind its bound device does not hold. Compile never maps one
    /// API's kind to the other's and never inserts a copy.
    PlacementApiMismatch = PLACEMENT_API_MISMATCH,
    /// A slot count or aggregate byte count overflowed (forwarded terms included).
    PoolCapacityOverflow = POOL_CAPACITY_OVERFLOW,
    /// An output's `forwards` names no `Tensor` input of its operator.
    PoolForwardsInvalid = POOL_FORWARDS_INVALID,
    /// A tensor output written by hand (not by `#[operator]`) declares `max_loans = 0`.
    PoolLoansZero = POOL_LOANS_ZERO,
    /// Two pools have one id (`operator.port`, `topic:name`, `boundary:name`): an operator
    /// `topic:cam` with an output `frames` and an imported topic `cam.frames`.
    PoolNameConflict = POOL_NAME_CONFLICT,
    /// A device pool's tensors reach consumers on more distinct streams (its own flows and
    /// those after forwarding outputs, fused flows aside) than
    /// `CompileOptions::max_fanout_release_streams`: every emit would be refused.
    PoolReleaseStreamsExceeded = POOL_RELEASE_STREAMS_EXCEEDED,
    /// An explicit queue depth below the edge's semantic hard floor.
    RateQueueDepthBelowHardFloor = RATE_QUEUE_DEPTH_BELOW_HARD_FLOOR,
    /// (Warning.) An explicit queue depth at or above the hard floor but below the nominal
    /// recommendation: it is kept.
    RateQueueDepthBelowRecommendation = RATE_QUEUE_DEPTH_BELOW_RECOMMENDATION,
    /// A window input fed at a declared rate whose consumer's contract proves no finite
    /// accumulation horizon, with no explicit depth.
    RateHorizonMissing = RATE_HORIZON_MISSING,
    /// The profile requires bounded arrival evidence and an edge has only nominal rates.
    RateNominalOnlyEvidence = RATE_NOMINAL_ONLY_EVIDENCE,
    /// A rate or ratio that is zero, negative or has a zero denominator; or, on a port
    /// written by hand (not by `#[operator]`), `burst = 0` or `window = 0`.
    RateInvalid = RATE_INVALID,
    /// Checked rational rate arithmetic overflowed (or an entry count exceeds `u32`).
    RateArithmeticOverflow = RATE_ARITHMETIC_OVERFLOW,
    /// A rate reads a sensitive parameter, or one that is neither compile-time nor
    /// recompile-required.
    RateUnreadableParameter = RATE_UNREADABLE_PARAMETER,
    /// A topic name is empty, longer than 128 bytes, or holds whitespace or control
    /// characters.
    TopicNameInvalid = TOPIC_NAME_INVALID,
    /// Two topics of one graph have the same name.
    TopicNameDuplicate = TOPIC_NAME_DUPLICATE,
    /// A port carries a second topic, or an imported input is also fed by a flow.
    TopicPortConflict = TOPIC_PORT_CONFLICT,
    /// A topic declares 0 subscribers (or publishers, or holds per subscriber), or more
    /// than [`MAX_TOPIC_CLIENTS`](crate::MAX_TOPIC_CLIENTS).
    TopicClientCount = TOPIC_CLIENT_COUNT,
    /// An imported tensor input has no bound (`TopicOptions::max_bytes`), so the topic's
    /// pool cannot be sized.
    TopicImportUnbounded = TOPIC_IMPORT_UNBOUNDED,
    /// An imported tensor input declares no memory kind, so the topic's pool has none.
    TopicImportMemoryKindMissing = TOPIC_IMPORT_MEMORY_KIND_MISSING,
    /// A topic exported across processes in a memory kind that cannot cross: managed
    /// memory (the seed's "current limitations": it does not cross processes).
    TopicMemoryNotShareable = TOPIC_MEMORY_NOT_SHAREABLE,
    /// A topic declared across processes that holo cannot serve so: a message topic, or a
    /// memory kind whose cross-process transport is not built (OpenCL memory;
    /// docs/IPC.md).
    TopicAcrossProcessesUnsupported = TOPIC_ACROSS_PROCESSES_UNSUPPORTED,
    /// A topic exported across processes from a pass-through output has no bound
    /// (`TopicOptions::max_bytes`), so its boundary pool — where each tensor is copied once
    /// to cross — cannot be sized.
    TopicBoundaryUnbounded = TOPIC_BOUNDARY_UNBOUNDED,
    /// A topic imported from another process (`TopicOptions::from_other_process`) that no
    /// endpoint catalog given to compile exports.
    TopicRemoteUnknown = TOPIC_REMOTE_UNKNOWN,
    /// A topic imported from another process whose catalog contract (memory kind, dtype,
    /// rank) the importing input does not accept.
    TopicRemoteContractMismatch = TOPIC_REMOTE_CONTRACT_MISMATCH,
}
