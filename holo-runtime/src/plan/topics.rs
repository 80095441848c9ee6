//! Topic records: each output a graph exports and each input it imports under a topic
//! name (`Graph::export_topic`, `Graph::import_topic`), with the contract a standalone
//! client attaches against, the queues the session creates for it and the pool that backs
//! it. `compile` decides them; `RunSession::start` materializes them and re-derives
//! nothing from the graph.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::MemoryKind;
use crate::graph::QueuePolicy;
use crate::spec::DType;

/// Which way a topic's values travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopicDirection {
    /// An operator's output publishes into the topic; standalone subscribers
    /// ([`ChannelSubscriber`](crate::ChannelSubscriber)) receive from it.
    Export,
    /// Standalone publishers ([`ChannelPublisher`](crate::ChannelPublisher)) publish into
    /// the topic; an operator's input receives from it.
    Import,
}

impl TopicDirection {
    /// The stable name used in plans: `export` or `import`.
    pub const fn name(self) -> &'static str {
        match self {
            TopicDirection::Export => "export",
            TopicDirection::Import => "import",
        }
    }
}

impl std::fmt::Display for TopicDirection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// How a topic exported across processes from a pass-through output crosses: each tensor
/// it emits is copied once into the topic's boundary pool (`boundary:<name>`), and every
/// subscriber in another process receives that copy. Never chosen silently: the plan
/// records it, `--print-plan` and `--plan-json` show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopicBoundary {
    /// `host` memory: a host tensor is copied on the host; a device tensor (a foreign
    /// DLPack import, say) is materialized with one blocking device-to-host copy.
    HostContract,
    /// `pinned` or `cuda_device` memory: one copy on the output's stream (after the
    /// tensor's readiness), fenced like any slot written there; no host thread waits.
    DeviceContract,
}

impl TopicBoundary {
    /// The stable name used in plans: `host_contract` or `device_contract`.
    pub const fn name(self) -> &'static str {
        match self {
            TopicBoundary::HostContract => "host_contract",
            TopicBoundary::DeviceContract => "device_contract",
        }
    }

    /// The boundary of a copy into `kind` memory.
    pub(crate) fn of(kind: MemoryKind) -> TopicBoundary {
        if kind == MemoryKind::Host {
            TopicBoundary::HostContract
        } else {
            TopicBoundary::DeviceContract
        }
    }
}

/// What travels on a topic: the tensor contract a client attaches against. Every field
/// that is `None` is not declared (a client that requires it is refused at attach).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicContractRecord {
    /// The memory kind of every tensor (an export: its output's resolved kind; an import:
    /// the input's declared kind, which its pool is materialized in).
    pub memory_kind: Option<MemoryKind>,
    /// The device of the tensors (`cuda:N`, `opencl:N`; an export: its output's device;
    /// an import: the device `DeploymentBinding::bind_imported_topic_device` bound).
    pub device: Option<crate::device::DeviceId>,
    /// The dtype of every tensor, when declared.
    pub dtype: Option<DType>,
    /// The exact rank of every tensor, when declared.
    pub rank: Option<u32>,
    /// The largest rank a tensor may have.
    pub max_rank: Option<u32>,
    /// Bytes per tensor at most: an export's pool bound, an import's
    /// `TopicOptions::max_bytes`. `None` for a pass-through export (its tensors come
    /// from elsewhere) and for message topics.
    pub max_bytes: Option<u64>,
}

impl Serialize for TopicContractRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut r = s.serialize_struct("TopicContractRecord", 6)?;
        r.serialize_field("memory_kind", &self.memory_kind.map(MemoryKind::wire_name))?;
        r.serialize_field("device", &self.device)?;
        r.serialize_field("dtype", &self.dtype.map(DType::name))?;
        r.serialize_field("rank", &self.rank)?;
        r.serialize_field("max_rank", &self.max_rank)?;
        r.serialize_field("max_bytes", &self.max_bytes)?;
        r.end()
    }
}

/// One topic of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicRecord {
    /// The topic's index in the plan (and the graph's topic declaration it came from).
    pub id: u32,
    /// The topic name clients attach by.
    pub name: String,
    /// Export or import.
    pub direction: TopicDirection,
    /// The operator whose port the topic is on.
    pub operator: u32,
    /// The port name.
    pub port: String,
    /// The port's index in its operator.
    pub port_index: u32,
    /// Whether it carries tensors (`false`: messages).
    pub tensor: bool,
    /// The tensor contract.
    pub contract: TopicContractRecord,
    /// The queue depth: per subscriber for an export, of the imported input for an
    /// import.
    pub depth: u32,
    /// `explicit` (`TopicOptions::depth`) or `default` (the compile options' default
    /// depth, raised to an imported window input's minimum).
    pub depth_source: String,
    /// What a full queue does (its stable name in JSON).
    pub policy: QueuePolicy,
    /// The subscribers that may be attached at once (an export; 0 for an import).
    pub subscribers: u32,
    /// The publishers that may be attached at once (an import; 0 for an export).
    pub publishers: u32,
    /// The pool the topic's tensors come from: an export's own output pool
    /// (`<operator>.<port>`; `None` for a pass-through output, whose tensors' origin
    /// pools count the subscribers through the forwarding walk — across processes its
    /// boundary pool `boundary:<name>`), an import's own pool (`topic:<name>`).
    pub pool: Option<String>,
    /// An import: the importing operator's planned stream, which a publisher registers as
    /// a release stream and which waits on the publisher's readiness in `receive` (the
    /// edge contract of a flow). `None` for an export or a stream-less importer.
    pub consumer_stream: Option<u32>,
    /// An import: the importing operator has no stream and the topic's tensors may be
    /// stream-written, so `receive` waits on the host for their readiness.
    pub host_wait: bool,
    /// An export served to other processes (`TopicOptions::across_processes`): its pool
    /// lives in shared memory and the endpoint catalog lists it.
    pub across_processes: bool,
    /// An export: the tensors each subscriber may hold at once (its pool counts them).
    pub holds_per_subscriber: u32,
    /// An import: the slots each publisher may have loaned at once (its pool counts them;
    /// a publisher in another process is granted this many). 0 for an export.
    pub loans_per_publisher: u32,
    /// An export across processes from a pass-through output: how each tensor is copied
    /// once into the topic's boundary pool ([`pool`](Self::pool) `boundary:<name>`) to
    /// cross. `None` for a topic whose output's own pool crosses (no copy) and for one in
    /// this process.
    pub boundary: Option<TopicBoundary>,
    /// An import fed by another process's export (`TopicOptions::from_other_process`): the
    /// exporting session's namespace and the topic's catalog entry, which the session
    /// attaches by. `None` otherwise.
    pub from_export: Option<RemoteExportRecord>,
}

/// Where an import fed by another process's export comes from: what the exporting
/// session's endpoint catalog says of the topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RemoteExportRecord {
    /// The exporting session's namespace.
    pub namespace: String,
    /// The topic's entry in its catalog.
    pub topic: crate::ipc::CatalogTopic,
}

impl Serialize for TopicRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut r = s.serialize_struct("TopicRecord", 21)?;
        r.serialize_field("id", &self.id)?;
        r.serialize_field("name", &self.name)?;
        r.serialize_field("direction", self.direction.name())?;
        r.serialize_field("operator", &self.operator)?;
        r.serialize_field("port", &self.port)?;
        r.serialize_field("port_index", &self.port_index)?;
        r.serialize_field("tensor", &self.tensor)?;
        r.serialize_field("contract", &self.contract)?;
        r.serialize_field("depth", &self.depth)?;
        r.serialize_field("depth_source", &self.depth_source)?;
        r.serialize_field("policy", self.policy.name())?;
        r.serialize_field("subscribers", &self.subscribers)?;
        r.serialize_field("publishers", &self.publishers)?;
        r.serialize_field("pool", &self.pool)?;
        r.serialize_field("consumer_stream", &self.consumer_stream)?;
        r.serialize_field("host_wait", &self.host_wait)?;
        r.serialize_field("across_processes", &self.across_processes)?;
        r.serialize_field("holds_per_subscriber", &self.holds_per_subscriber)?;
        r.serialize_field("loans_per_publisher", &self.loans_per_publisher)?;
        r.serialize_field("boundary", &self.boundary.map(TopicBoundary::name))?;
        r.serialize_field("from_export", &self.from_export)?;
        r.end()
    }
}

/// The id of the boundary pool of a topic exported across processes from a pass-through
/// output: `boundary:<name>`.
pub(crate) fn boundary_pool_id(topic: &str) -> String {
    format!("boundary:{topic}")
}

/// The id of an imported topic's pool: `topic:<name>`.
pub(crate) fn import_pool_id(topic: &str) -> String {
    format!("topic:{topic}")
}

/// Where a pool's tensor may wait or be held by a standalone subscriber of a topic the
/// pool's output (or an output forwarding the pool's tensors) exports.
///
/// Rendered as `subscriber 0 of topic "frames": queue depth 4`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicSlotTerm {
    /// The topic.
    pub topic: String,
    /// The subscriber's seat, `0..subscribers`.
    pub subscriber: u32,
    /// `queue_depth` (the subscriber's queue) or `subscriber_hold` (the tensor it
    /// received and still holds).
    pub contributor: String,
    /// The entries.
    pub entries: u32,
}

impl std::fmt::Display for TopicSlotTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.contributor.as_str() {
            "queue_depth" => "queue depth",
            "subscriber_hold" => "held",
            other => other,
        };
        write!(
            f,
            "subscriber {} of topic {:?}: {what} {}",
            self.subscriber, self.topic, self.entries
        )
    }
}
