//! The execution plan: immutable, inspectable data produced by [`compile`](fn@crate::compile).
//!
//! Everything that can be decided before running is decided in `compile` and recorded
//! here: partitions, streams, placements, tensor allocations with every term of their
//! slot counts, byte-span derivations, queue depths, fusion evidence, every port's
//! binding and every edge's contract, every topic with its contract, and warnings. A
//! session runs from these records and the graph's operator instances, and re-derives
//! none of them.
//! Renderings: [`ExecutionPlan::render_human`], [`ExecutionPlan::json`] (canonical,
//! deterministic) and [`ExecutionPlan::dot`] (Graphviz).

mod binding;
mod inspect;
pub(crate) mod rates;
mod render;
mod topics;

pub use binding::{EdgeContractRecord, InputBindingRecord, PortRecord, TensorRequirementRecord};

pub use topics::{
    RemoteExportRecord, TopicBoundary, TopicContractRecord, TopicDirection, TopicRecord,
    TopicSlotTerm,
};

pub(crate) use topics::{boundary_pool_id, import_pool_id};

pub use inspect::{
    RATE_QUEUE_INSPECTION_SCHEMA, RateQueueInspectionFormat, render_rate_queue_inspection,
};

pub(crate) use rates::ExactPortRate;
pub use rates::{
    AccumulationHorizonRecord, HardFloorContributorRecord, PoolCapacityDependencyRecord,
    PortRateRecord, ProviderAllocationPlanRecord, QueueSizingRecipeRecord, RatePlan, TriggerKind,
    TriggerRecord,
};

use serde::Serialize;

use crate::MemoryKind;
use crate::compile::Diagnostic;
use crate::graph::QueuePolicy;

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's `serialize_with` passes a reference"
)]
fn serialize_memory_kind<S: serde::Serializer>(kind: &MemoryKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.wire_name())
}

/// The schema marker of [`ExecutionPlan::json`].
pub const PLAN_JSON_SCHEMA: &str = "holo.execution-plan.v1";

/// How CUDA compute streams are assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CudaComputeStreamPolicy {
    /// One non-blocking stream per (process group, execution partition, device).
    #[default]
    PerPartitionDevice,
    /// One stream per (process group, device), shared by every partition: a measured
    /// tuning choice for serial GPU submission.
    SharedProcessDevice,
}

/// One operator of the plan.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct OperatorRecord {
    /// The operator's index.
    pub id: u32,
    /// The operator's unique name.
    pub name: String,
    /// The Rust type.
    pub type_name: std::borrow::Cow<'static, str>,
    /// The partition that runs it.
    pub partition: u32,
    /// The device it is placed on (`cuda:N`, `opencl:N`), when it is device-active.
    pub device: Option<crate::device::DeviceId>,
    /// Its planned compute stream (a command queue on OpenCL), when it is device-active.
    pub cuda_stream: Option<u32>,
    /// Its rank in the graph's topological order (ties broken by operator index).
    pub order: u32,
    /// Its parameter schema id.
    pub params_schema: std::borrow::Cow<'static, str>,
    /// Its accepted parameters (generation zero), sensitive values redacted.
    pub params: serde_json::Value,
    /// Its ports in declaration order (`ports[i].index == i`), as the session binds them.
    pub ports: Vec<PortRecord>,
}

/// An execution partition: operators with one serial callback owner (a thread).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ExecutionPartition {
    /// The partition's index.
    pub id: u32,
    /// Its name (authored, or `p<N>` when automatic).
    pub name: String,
    /// Its operators in execution order.
    pub operators: Vec<u32>,
    /// Whether it has no CUDA-active operator (and so no stream).
    pub host_only: bool,
    /// Why it exists (`authored`, `source`, `fork`, `join`, `chain`).
    pub reason: String,
    /// The thread that runs it (an index into the session's partition threads, in order of
    /// each thread's first partition). Every partition has its own, except under
    /// `CudaComputeStreamPolicy::SharedProcessDevice`, where the partitions that submit on
    /// one shared stream are run by one thread: serial GPU submission, without several
    /// threads contending for one stream in the driver. Each partition keeps one serial
    /// callback owner either way.
    pub thread: u32,
}

/// A planned compute stream: a CUDA stream on a `cuda:N` device, an OpenCL command queue
/// on an `opencl:N` one (the session creates it in the device's context).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct CudaComputeStreamRecord {
    /// The stream's index.
    pub id: u32,
    /// The device (its API says whether this is a stream or a queue).
    pub device: crate::device::DeviceId,
    /// The partitions that submit on it.
    pub partitions: Vec<u32>,
}

/// Evidence that an edge is a proven linear same-stream device edge.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct FusionEvidence {
    /// The one stream both endpoints are bound to.
    pub stream: u32,
    /// The producer output has exactly one successor in total (the seed's linear chain);
    /// `false` for a runtime-pool output whose every successor is on the same stream (a
    /// same-stream fan-out, fused on each of its edges).
    pub sole_successor: bool,
    /// The edge is process-local.
    pub process_local: bool,
}

/// One flow of the plan.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct EdgeRecord {
    /// The edge's index.
    pub id: u32,
    /// The producer operator.
    pub from_operator: u32,
    /// The producer port name.
    pub from_port: std::borrow::Cow<'static, str>,
    /// The producer port's index in its operator.
    pub from_port_index: u32,
    /// The consumer operator.
    pub to_operator: u32,
    /// The consumer port name.
    pub to_port: std::borrow::Cow<'static, str>,
    /// The consumer port's index in its operator.
    pub to_port_index: u32,
    /// The final queue depth.
    pub queue_depth: u32,
    /// `explicit`, `default` or `automatic`.
    pub depth_source: std::borrow::Cow<'static, str>,
    /// The queue policy (its stable name in JSON).
    #[serde(serialize_with = "serialize_queue_policy")]
    pub policy: QueuePolicy,
    /// Whether it carries tensors.
    pub tensor: bool,
    /// Whether it crosses partitions.
    pub cross_partition: bool,
    /// Fusion evidence, where the compiler proved the edge.
    pub fusion: Option<FusionEvidence>,
    /// The edge's stream contract, as the session binds it.
    pub contract: EdgeContractRecord,
}

/// Every term of a pool's slot count.
///
/// `slot_count = queue_entries + consumer_holds + producer_loans + retirement + history +
/// forwarded + subscribers`:
/// - `queue_entries`: the sum of the final depths of every edge the output feeds (each
///   queued entry may be a distinct slot);
/// - `consumer_holds` + `history`: each consumer retains `max(1, history)` entries — the
///   entry it computes on is one of its retained history entries, so the two are
///   alternatives, not a sum. `consumer_holds` counts the consumers with no history (one
///   entry each); `history` sums the declared `history = N` of the others;
/// - `producer_loans`: the loans the producer may hold at once (`max_loans`, default 1);
/// - `retirement`: one entry that may still be on its way back to the free list;
/// - `forwarded`: the sum of [`forwarded_through`](Self::forwarded_through): where a
///   consumer forwards the pool's tensors (`#[output(forwards = input)]`), every queue and
///   hold after the forwarding output, through any number of forwarders, partitions and
///   fan-outs, may hold a slot of this pool too;
/// - `subscribers`: the sum of [`subscriber_terms`](Self::subscriber_terms): where the
///   output (or an output forwarding the pool's tensors) is exported under a topic, each
///   declared subscriber's queue and the one tensor it holds.
///
/// For an imported topic's pool (`topic:<name>`), `queue_entries` is the imported input's
/// queue, `consumer_holds` / `history` its operator's retention and `producer_loans` the
/// publishers' loans (`publishers × loans_per_publisher`).
///
/// With one consumer of history 4, an 8-deep edge, one loan and one retirement entry:
/// 8 + 4 + 1 + 1 = 14. Forwarded on to a consumer over a 4-deep edge: 14 + 4 + 1 = 19.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotCountTerms {
    /// Sum of queue depths of the output's edges.
    pub queue_entries: u32,
    /// In-flight entries held by consumers with no history.
    pub consumer_holds: u32,
    /// Producer loans.
    pub producer_loans: u32,
    /// Retirement entries.
    pub retirement: u32,
    /// Retained-history entries.
    pub history: u32,
    /// Entries a forwarded tensor of the pool may occupy after a forwarding output: the
    /// sum of `forwarded_through`.
    pub forwarded: u32,
    /// Each of those terms, flow by flow in the order the forwarding is followed
    /// (breadth first from the pool's output).
    pub forwarded_through: Vec<ForwardedSlotTerm>,
    /// Entries standalone subscribers of topics may occupy: the sum of
    /// `subscriber_terms`.
    pub subscribers: u32,
    /// Each of those terms, topic by topic and subscriber by subscriber.
    pub subscriber_terms: Vec<TopicSlotTerm>,
}

impl SlotCountTerms {
    /// The slot count (checked).
    pub fn total(&self) -> Option<u32> {
        self.queue_entries
            .checked_add(self.consumer_holds)?
            .checked_add(self.producer_loans)?
            .checked_add(self.retirement)?
            .checked_add(self.history)?
            .checked_add(self.forwarded)?
            .checked_add(self.subscribers)
    }
}

/// One place a pool's tensor can wait or be held after an output that forwards it.
///
/// Rendered as `forwarded through relay.out → sink.frames: queue depth 4`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForwardedSlotTerm {
    /// The flow the forwarded tensor travels on.
    pub edge: u32,
    /// The forwarding output, `<operator>.<port>`.
    pub through: String,
    /// The consumer's input, `<operator>.<port>`.
    pub to: String,
    /// What holds the entries: `queue_depth` (the flow's final depth), `consumer_hold`
    /// (the entry a consumer with no history computes on) or `history` (a consumer's
    /// declared `history = N`, which includes the entry it computes on).
    pub contributor: String,
    /// The entries.
    pub entries: u32,
}

impl ForwardedSlotTerm {
    /// The contributor as the text rendering shows it (`queue depth`, `held`,
    /// `history`).
    pub fn contributor_text(&self) -> &str {
        match self.contributor.as_str() {
            "queue_depth" => "queue depth",
            "consumer_hold" => "held",
            other => other,
        }
    }
}

impl std::fmt::Display for ForwardedSlotTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "forwarded through {} → {}: {} {}",
            self.through,
            self.to,
            self.contributor_text(),
            self.entries
        )
    }
}

/// The allocation of one runtime pool (the seed's `TensorAllocationPlanRecord`).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct TensorAllocationPlanRecord {
    /// The pool's stable id (`<operator>.<port>`).
    pub pool: String,
    /// The producing operator.
    pub operator: u32,
    /// The output port.
    pub port: String,
    /// The output port's index in its operator.
    pub port_index: u32,
    /// The concrete, frozen memory kind.
    #[serde(serialize_with = "serialize_memory_kind")]
    pub memory_kind: MemoryKind,
    /// Where the memory kind came from (`declared` or the parameter path).
    pub memory_kind_source: String,
    /// The bound device (`cuda:N`, `opencl:N`), for an output bound to one.
    pub device: Option<crate::device::DeviceId>,
    /// The dtype every loan must have, if declared (its name in JSON).
    #[serde(serialize_with = "serialize_dtype")]
    pub dtype: Option<crate::spec::DType>,
    /// The exact rank every loan must have, when the output declares `rank = N`.
    pub rank: Option<u32>,
    /// The maximum rank a loan may request.
    pub max_rank: u32,
    /// Bytes per slot.
    pub per_slot_bytes: u64,
    /// The slot count.
    pub slot_count: u32,
    /// Every term of the slot count.
    pub slot_terms: SlotCountTerms,
    /// `per_slot_bytes × slot_count`.
    pub aggregate_bytes: u64,
    /// Release streams each slot may register (preallocated events), for CUDA pools.
    pub release_stream_capacity: u32,
    /// The imported topic this pool backs (its publishers borrow from it): then
    /// `operator` and `port_index` name the importing operator's input, not an output.
    pub topic: Option<String>,
}

/// How one pool's per-slot bytes were derived.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct TensorByteSpanDerivationRecord {
    /// The pool id.
    pub pool: String,
    /// The expression as written (`literal` for literal bounds).
    pub expression: String,
    /// The parameter paths and inputs it read.
    pub dependencies: Vec<String>,
    /// The resolved per-slot bytes.
    pub per_slot_bytes: u64,
    /// The slot count from the allocation (authoritative there).
    pub slot_count: Option<u32>,
    /// The aggregate bytes from the allocation (authoritative there).
    pub aggregate_bytes: Option<u64>,
}

/// The compiled plan. Immutable; build a new one to change anything.
#[derive(Clone, Debug, Serialize)]
pub struct ExecutionPlan {
    pub(crate) schema: &'static str,
    pub(crate) fingerprint: String,
    pub(crate) cuda_compute_stream_policy: CudaComputeStreamPolicy,
    pub(crate) max_fanout_release_streams: u32,
    pub(crate) operators: Vec<OperatorRecord>,
    pub(crate) partitions: Vec<ExecutionPartition>,
    pub(crate) cuda_compute_streams: Vec<CudaComputeStreamRecord>,
    pub(crate) devices: Vec<DeviceRecord>,
    pub(crate) edges: Vec<EdgeRecord>,
    pub(crate) topics: Vec<TopicRecord>,
    pub(crate) tensor_allocations: Vec<TensorAllocationPlanRecord>,
    pub(crate) tensor_byte_span_derivations: Vec<TensorByteSpanDerivationRecord>,
    #[serde(flatten)]
    pub(crate) rates: RatePlan,
    pub(crate) warnings: Vec<Diagnostic>,
}

/// Where a device's context comes from. The plan is compiled without a device, so it names
/// the rule; `RunSession::device()` gives the context a session runs in
/// (`raw_context()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeviceContextRecord {
    /// CUDA: the device's primary context (`CudaDevice::open`), or the caller's
    /// `CUcontext` when the session's device was made with `CudaDevice::from_context`.
    #[serde(rename = "cuda_primary_unless_given")]
    CudaPrimaryUnlessGiven,
    /// OpenCL: a `cl_context` holo creates for the device (`OpenClDevice::open`), or the
    /// caller's, given with `OpenClDevice::from_context`; callers adopt it with
    /// `OpenClDevice::native_context`.
    #[serde(rename = "opencl_own_unless_given")]
    OpenClOwnUnlessGiven,
}

impl DeviceContextRecord {
    /// The rule for `api`.
    pub(crate) const fn of(api: crate::device::DeviceApi) -> Self {
        match api {
            crate::device::DeviceApi::Cuda => Self::CudaPrimaryUnlessGiven,
            crate::device::DeviceApi::OpenCl => Self::OpenClOwnUnlessGiven,
        }
    }

    /// A line for people.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::CudaPrimaryUnlessGiven => {
                "the device's primary CUcontext, or the caller's (CudaDevice::from_context)"
            }
            Self::OpenClOwnUnlessGiven => {
                "a cl_context holo creates (OpenClDevice::open), or the caller's (OpenClDevice::from_context)"
            }
        }
    }
}

/// One device the plan places work on.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct DeviceRecord {
    /// The device (`cuda:0`, `opencl:1`).
    pub device: crate::device::DeviceId,
    /// Its API (`cuda`, `opencl`).
    pub api: crate::device::DeviceApi,
    /// Where its context comes from.
    pub context: DeviceContextRecord,
    /// What its ordering domains are (`stream`, `queue`).
    pub ordering_domain: &'static str,
    /// Its planned compute streams or queues (`cuda_compute_streams` ids).
    pub streams: Vec<u32>,
    /// The operators placed on it.
    pub operators: Vec<u32>,
    /// The pools bound to it, with their concrete memory kinds.
    pub pools: Vec<String>,
}

/// The device records of a plan: every device an operator, stream, pool or topic names.
/// `used`: the devices of the operators (`device_of`), streams and pools, as compile's
/// one-device check collected them; the topics' are added here.
pub(crate) fn device_records(
    mut used: Vec<crate::device::DeviceId>,
    device_of: &[Option<crate::device::DeviceId>],
    streams: &[CudaComputeStreamRecord],
    allocations: &[TensorAllocationPlanRecord],
    topics: &[TopicRecord],
) -> Vec<DeviceRecord> {
    used.extend(topics.iter().filter_map(|t| t.contract.device));
    used.sort_unstable();
    used.dedup();
    used.into_iter()
        .map(|device| DeviceRecord {
            device,
            api: device.api,
            context: DeviceContextRecord::of(device.api),
            ordering_domain: device.api.ordering_domain(),
            streams: streams
                .iter()
                .filter(|s| s.device == device)
                .map(|s| s.id)
                .collect(),
            operators: (0u32..)
                .zip(device_of)
                .filter(|&(_, &d)| d == Some(device))
                .map(|(o, _)| o)
                .collect(),
            pools: allocations
                .iter()
                .filter(|a| a.device == Some(device))
                .map(|a| a.pool.clone())
                .collect(),
        })
        .collect()
}

/// Whether a plan with compute streams (`has_streams`) and these pools needs a device
/// backend: it has a compute stream or a pool that is not host memory. Compile decides the
/// edges' host waits by it, and a session whether it opens the device.
pub(crate) fn needs_device(has_streams: bool, allocations: &[TensorAllocationPlanRecord]) -> bool {
    has_streams
        || allocations
            .iter()
            .any(|a| a.memory_kind != MemoryKind::Host)
}

impl ExecutionPlan {
    /// The operators.
    pub fn operators(&self) -> &[OperatorRecord] {
        &self.operators
    }
    /// The execution partitions.
    pub fn partitions(&self) -> &[ExecutionPartition] {
        &self.partitions
    }
    /// The planned compute streams (CUDA streams, or OpenCL command queues), for
    /// budgeting device resources.
    pub fn cuda_compute_streams(&self) -> &[CudaComputeStreamRecord] {
        &self.cuda_compute_streams
    }
    /// Every device the plan places work on: its API, context and streams or queues.
    pub fn devices(&self) -> &[DeviceRecord] {
        &self.devices
    }
    /// The flows.
    pub fn edges(&self) -> &[EdgeRecord] {
        &self.edges
    }
    /// The topics the graph exports and imports.
    pub fn topics(&self) -> &[TopicRecord] {
        &self.topics
    }
    /// The topic named `name`.
    pub fn topic(&self, name: &str) -> Option<&TopicRecord> {
        self.topics.iter().find(|t| t.name == name)
    }
    /// Whether the plan needs a device backend: it has a compute stream or a pool that is
    /// not host memory.
    pub(crate) fn needs_device(&self) -> bool {
        needs_device(
            !self.cuda_compute_streams().is_empty(),
            self.tensor_allocations(),
        )
    }

    /// The runtime pools.
    pub fn tensor_allocations(&self) -> &[TensorAllocationPlanRecord] {
        &self.tensor_allocations
    }
    /// How each pool's per-slot bytes were derived.
    pub fn tensor_byte_span_derivations(&self) -> &[TensorByteSpanDerivationRecord] {
        &self.tensor_byte_span_derivations
    }
    /// Every port's declared and resolved rate.
    pub fn port_rates(&self) -> &[PortRateRecord] {
        &self.rates.port_rates
    }
    /// Every edge's accumulation horizon.
    pub fn accumulation_horizons(&self) -> &[AccumulationHorizonRecord] {
        &self.rates.accumulation_horizons
    }
    /// Every contributor to every edge's and pool's hard floor.
    pub fn hard_floor_contributors(&self) -> &[HardFloorContributorRecord] {
        &self.rates.hard_floor_contributors
    }
    /// Every edge's queue-sizing recipe.
    pub fn queue_sizing_recipes(&self) -> &[QueueSizingRecipeRecord] {
        &self.rates.queue_sizing_recipes
    }
    /// How every pool's logical entries depend on its edges, active and admitted.
    pub fn pool_capacity_dependencies(&self) -> &[PoolCapacityDependencyRecord] {
        &self.rates.pool_capacity_dependencies
    }
    /// What every pool's provider is asked for; physical reservation stays `None` where
    /// it is not known.
    pub fn provider_allocation_plans(&self) -> &[ProviderAllocationPlanRecord] {
        &self.rates.provider_allocation_plans
    }
    pub(crate) fn headroom(&self) -> Option<num_rational::Ratio<i128>> {
        self.rates.headroom
    }
    /// Every operator's trigger, as the session schedules it.
    pub fn operator_triggers(&self) -> &[TriggerRecord] {
        &self.rates.operator_triggers
    }
    /// The recipe of edge `edge`.
    pub fn queue_sizing_recipe(&self, edge: u32) -> Option<&QueueSizingRecipeRecord> {
        // `compile` writes one recipe per edge in edge order, so the renderings' lookup
        // per edge is not a scan per edge.
        let recipes = &self.rates.queue_sizing_recipes;
        recipes
            .get(edge as usize)
            .filter(|r| r.edge == edge)
            .or_else(|| recipes.iter().find(|r| r.edge == edge))
    }
    /// The capacity dependency of pool `<operator>.<port>`.
    pub fn pool_capacity_dependency(&self, pool: &str) -> Option<&PoolCapacityDependencyRecord> {
        self.rates
            .pool_capacity_dependencies
            .iter()
            .find(|r| r.pool == pool)
    }
    /// Warnings of the compile (for example an explicit depth below the recommendation).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }
    /// The frozen stream policy.
    pub fn cuda_compute_stream_policy(&self) -> CudaComputeStreamPolicy {
        self.cuda_compute_stream_policy
    }
    /// The release-stream cap per slot.
    pub fn max_fanout_release_streams(&self) -> u32 {
        self.max_fanout_release_streams
    }
    /// The operator with this name.
    pub fn operator(&self, name: &str) -> Option<&OperatorRecord> {
        self.operators.iter().find(|o| o.name == name)
    }
    /// The allocation of pool `<operator>.<port>`.
    pub fn tensor_allocation(&self, pool: &str) -> Option<&TensorAllocationPlanRecord> {
        self.tensor_allocations.iter().find(|a| a.pool == pool)
    }
    /// A digest of the graph the plan was compiled from; a session refuses a graph
    /// whose digest differs.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's `serialize_with` passes a reference"
)]
fn serialize_queue_policy<S: serde::Serializer>(
    policy: &QueuePolicy,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(policy.name())
}

/// A dtype as its stable name (`"u8"`), as plans have always shown it.
#[allow(
    clippy::ref_option,
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's serialize_with signature"
)]
fn serialize_dtype<S: serde::Serializer>(
    dtype: &Option<crate::spec::DType>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match dtype {
        Some(d) => s.serialize_some(d.name()),
        None => s.serialize_none(),
    }
}
