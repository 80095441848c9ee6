//! The records a session binds from: every operator's ports with their input bindings,
//! and every edge's contract (the consumer's stream, fusion, host wait, the requirement a
//! pass-through emit is checked against). `compile` decides them; `RunSession::start`
//! materializes them and re-derives nothing from the graph (issue 12: the plan drives the
//! run).

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::MemoryKind;
use crate::spec::{DType, InputMode, MissingPolicy, PortDirection, TensorInputSpec};

/// One port of an operator, as the session binds it: the operator's `bind` names it by
/// `index`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortRecord {
    /// The port's index in its operator (its field's position among the ports).
    pub index: u32,
    /// The port name (the field name).
    pub name: std::borrow::Cow<'static, str>,
    /// Input or output.
    pub direction: PortDirection,
    /// An optional input: it may have no flow, and an `all_inputs` trigger does not wait
    /// for it.
    pub optional: bool,
    /// An input's binding; `None` for an output.
    pub input: Option<InputBindingRecord>,
    /// The input a tensor output forwards (`#[output(forwards = input)]`): it may emit
    /// tensors of other operators' pools, which the plan counted in their origin pools.
    pub forwards: Option<String>,
}

impl Serialize for PortRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut r = s.serialize_struct("PortRecord", 6)?;
        r.serialize_field("index", &self.index)?;
        r.serialize_field("name", &self.name)?;
        r.serialize_field(
            "direction",
            match self.direction {
                PortDirection::Input => "input",
                PortDirection::Output => "output",
            },
        )?;
        r.serialize_field("optional", &self.optional)?;
        r.serialize_field("input", &self.input)?;
        r.serialize_field("forwards", &self.forwards)?;
        r.end()
    }
}

/// How an input is bound: what it sees per activation, what it does with a missing
/// sample, and the entries it retains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InputBindingRecord {
    /// Queue, latest or window (with its minimum).
    pub mode: InputMode,
    /// Skip the activation or reuse the last sample.
    pub missing: MissingPolicy,
    /// Entries retained after they are received (`Input::history()`), parameter-derived
    /// histories resolved.
    pub history: u32,
}

impl Serialize for InputBindingRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut r = s.serialize_struct("InputBindingRecord", 4)?;
        r.serialize_field("mode", self.mode.name())?;
        r.serialize_field(
            "window",
            &match self.mode {
                InputMode::Window { min } => Some(min),
                InputMode::Queue | InputMode::Latest => None,
            },
        )?;
        r.serialize_field("missing", self.missing.name())?;
        r.serialize_field("history", &self.history)?;
        r.end()
    }
}

/// The stream contract of one edge, as `compile` decided it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct EdgeContractRecord {
    /// The consumer's planned compute stream (its operator's `cuda_stream`).
    pub consumer_stream: Option<u32>,
    /// The edge is fused (see its `FusionEvidence`): no readiness wait, no release
    /// registration. The session checks that both ends really got the evidence's stream.
    pub fused: bool,
    /// The consumer has no stream, the plan needs a device and the producer's output is
    /// not a host-memory pool: a received tensor is waited for on the host.
    pub host_wait: bool,
    /// The consumer's exact requirement, checked when a pass-through output emits (a pool
    /// output was checked against it by `compile`); `None` when there is nothing to
    /// check.
    pub emit_check: Option<TensorRequirementRecord>,
}

/// A consumer's exact tensor requirement (its `TensorInputSpec`): every declared field
/// must match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorRequirementRecord {
    /// The memory kind, if required.
    pub memory_kind: Option<MemoryKind>,
    /// The dtype, if required.
    pub dtype: Option<DType>,
    /// The rank, if required.
    pub rank: Option<u32>,
}

impl TensorRequirementRecord {
    /// The requirement as the port declared it.
    pub(crate) fn spec(self) -> TensorInputSpec {
        TensorInputSpec {
            memory_kind: self.memory_kind,
            dtype: self.dtype,
            rank: self.rank,
        }
    }
}

impl From<TensorInputSpec> for TensorRequirementRecord {
    fn from(s: TensorInputSpec) -> Self {
        Self {
            memory_kind: s.memory_kind,
            dtype: s.dtype,
            rank: s.rank,
        }
    }
}

impl Serialize for TensorRequirementRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut r = s.serialize_struct("TensorRequirementRecord", 3)?;
        r.serialize_field("memory_kind", &self.memory_kind.map(MemoryKind::wire_name))?;
        r.serialize_field("dtype", &self.dtype.map(DType::name))?;
        r.serialize_field("rank", &self.rank)?;
        r.end()
    }
}
