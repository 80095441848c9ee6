//! Compile diagnostics: every rejection has a stable code, names the operator, port or
//! field path concerned, and says what to do.

use std::fmt;

use serde::Serialize;

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
pub struct Diagnostic {
    /// The stable code (`PHYSICAL_TENSOR_LAYOUT_MISMATCH`, `GRAPH_CYCLE`, …).
    pub code: &'static str,
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
    pub(crate) fn error(code: &'static str, message: impl Into<String>) -> Self {
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

    pub(crate) fn warning(code: &'static str, message: impl Into<String>) -> Self {
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
    pub fn has(&self, code: &str) -> bool {
        self.items.iter().any(|d| d.code == code)
    }

    /// The diagnostics with this code.
    pub fn with_code<'a>(&'a self, code: &'a str) -> impl Iterator<Item = &'a Diagnostic> + 'a {
        self.items.iter().filter(move |d| d.code == code)
    }

    /// The codes, in order.
    pub fn codes(&self) -> Vec<&'static str> {
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

/// The stable diagnostic codes.
pub mod codes {
    /// A required input has no flow.
    pub const GRAPH_UNCONNECTED_INPUT: &str = "GRAPH_UNCONNECTED_INPUT";
    /// More than one flow enters one input.
    pub const GRAPH_ILLEGAL_FAN_IN: &str = "GRAPH_ILLEGAL_FAN_IN";
    /// The flows form a cycle.
    pub const GRAPH_CYCLE: &str = "GRAPH_CYCLE";
    /// A flow names a port of the wrong direction or that does not exist.
    pub const GRAPH_INVALID_FLOW: &str = "GRAPH_INVALID_FLOW";
    /// A flow was given a port handle that another graph's `add_operator` returned.
    pub const GRAPH_FOREIGN_PORT: &str = "GRAPH_FOREIGN_PORT";
    /// An authored partition names an unknown operator, names one twice, or misses one.
    pub const PARTITION_INVALID: &str = "PARTITION_INVALID";
    /// An explicit queue depth of zero.
    pub const QUEUE_DEPTH_ZERO: &str = "QUEUE_DEPTH_ZERO";
    /// A queue depth (explicit, automatic or default) above
    /// [`MAX_QUEUE_DEPTH`](crate::compile::MAX_QUEUE_DEPTH).
    pub const QUEUE_DEPTH_LIMIT: &str = "QUEUE_DEPTH_LIMIT";
    /// `CompileOptions::max_fanout_release_streams` is 0 or above
    /// [`MAX_FANOUT_RELEASE_STREAMS`](crate::compile::MAX_FANOUT_RELEASE_STREAMS).
    pub const OPTION_FANOUT_RELEASE_STREAMS: &str = "OPTION_FANOUT_RELEASE_STREAMS";
    /// Checked byte-span arithmetic overflowed.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW: &str = "PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW";
    /// A projector returned an error other than `ArithmeticOverflow`.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_PROJECTION_FAILED: &str =
        "PHYSICAL_TENSOR_BYTE_SPAN_PROJECTION_FAILED";
    /// An expression evaluated to zero, or divided / aligned by zero.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_ZERO: &str = "PHYSICAL_TENSOR_BYTE_SPAN_ZERO";
    /// A shape parameter's length differs from the output's exact rank (or no rank).
    pub const PHYSICAL_TENSOR_BYTE_SPAN_RANK_MISMATCH: &str =
        "PHYSICAL_TENSOR_BYTE_SPAN_RANK_MISMATCH";
    /// An expression exceeds 32 nodes, depth 16, 8 dependencies or 8 extents.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_LIMIT: &str = "PHYSICAL_TENSOR_BYTE_SPAN_LIMIT";
    /// `input_max_byte_span` names an input without exactly one bounded producer.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_INPUT_UNBOUNDED: &str =
        "PHYSICAL_TENSOR_BYTE_SPAN_INPUT_UNBOUNDED";
    /// An expression reads a sensitive field, or one that is neither compile-time nor
    /// recompile-required.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_UNREADABLE_PARAMETER: &str =
        "PHYSICAL_TENSOR_BYTE_SPAN_UNREADABLE_PARAMETER";
    /// One projector id names two different projectors in one compile.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_PROJECTOR_ID_CONFLICT: &str =
        "PHYSICAL_TENSOR_BYTE_SPAN_PROJECTOR_ID_CONFLICT";
    /// A parameter-contiguous span needs the output's dtype.
    pub const PHYSICAL_TENSOR_BYTE_SPAN_DTYPE_MISSING: &str =
        "PHYSICAL_TENSOR_BYTE_SPAN_DTYPE_MISSING";
    /// A runtime pool has neither literal bounds nor a byte-span expression.
    pub const PHYSICAL_TENSOR_UNBOUNDED_POOL: &str = "PHYSICAL_TENSOR_UNBOUNDED_POOL";
    /// Literal bounds of zero: every allocation will be rejected.
    pub const PHYSICAL_TENSOR_ZERO_BOUNDS: &str = "PHYSICAL_TENSOR_ZERO_BOUNDS";
    /// A runtime pool has no memory kind, declared or derived.
    pub const PHYSICAL_TENSOR_MEMORY_KIND_MISSING: &str = "PHYSICAL_TENSOR_MEMORY_KIND_MISSING";
    /// A memory-kind derivation does not match its field's enum domain.
    pub const PHYSICAL_TENSOR_MEMORY_KIND_DOMAIN: &str = "PHYSICAL_TENSOR_MEMORY_KIND_DOMAIN";
    /// A producer's representation does not meet a consumer's exact requirement.
    pub const PHYSICAL_TENSOR_LAYOUT_MISMATCH: &str = "PHYSICAL_TENSOR_LAYOUT_MISMATCH";
    /// A CUDA pool or pass-through CUDA output has no device binding.
    pub const PLACEMENT_DEVICE_REQUIRED: &str = "PLACEMENT_DEVICE_REQUIRED";
    /// One operator's ports resolve to more than one device.
    pub const PLACEMENT_DEVICE_CONFLICT: &str = "PLACEMENT_DEVICE_CONFLICT";
    /// A binding names an operator or port that does not exist or is not a tensor output.
    pub const PLACEMENT_UNKNOWN_BINDING: &str = "PLACEMENT_UNKNOWN_BINDING";
    /// A slot count or aggregate byte count overflowed.
    pub const POOL_CAPACITY_OVERFLOW: &str = "POOL_CAPACITY_OVERFLOW";
    /// An explicit queue depth below the edge's semantic hard floor.
    pub const RATE_QUEUE_DEPTH_BELOW_HARD_FLOOR: &str = "RATE_QUEUE_DEPTH_BELOW_HARD_FLOOR";
    /// (Warning.) An explicit queue depth at or above the hard floor but below the nominal
    /// recommendation: it is kept.
    pub const RATE_QUEUE_DEPTH_BELOW_RECOMMENDATION: &str = "RATE_QUEUE_DEPTH_BELOW_RECOMMENDATION";
    /// A window input fed at a declared rate whose consumer's contract proves no finite
    /// accumulation horizon, with no explicit depth.
    pub const RATE_HORIZON_MISSING: &str = "RATE_HORIZON_MISSING";
    /// The profile requires bounded arrival evidence and an edge has only nominal rates.
    pub const RATE_NOMINAL_ONLY_EVIDENCE: &str = "RATE_NOMINAL_ONLY_EVIDENCE";
    /// A rate or ratio that is zero, negative or has a zero denominator.
    pub const RATE_INVALID: &str = "RATE_INVALID";
    /// Checked rational rate arithmetic overflowed (or an entry count exceeds `u32`).
    pub const RATE_ARITHMETIC_OVERFLOW: &str = "RATE_ARITHMETIC_OVERFLOW";
    /// A rate reads a sensitive parameter, or one that is neither compile-time nor
    /// recompile-required.
    pub const RATE_UNREADABLE_PARAMETER: &str = "RATE_UNREADABLE_PARAMETER";
}
