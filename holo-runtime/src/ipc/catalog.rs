//! The endpoint catalog: the one artifact the exporting and importing processes share — a
//! TOML file listing each topic exported across processes, with its contract, depth and
//! bounds, and the namespace its socket and iceoryx2 services are named in.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::wire::{self, NONE, WireContract};
use crate::plan::ExecutionPlan;
use crate::plan::{TopicContractRecord, TopicRecord};
use crate::spec::{DType, TensorInputSpec};
use crate::{Error, ErrorCode, MemoryKind, Result};

/// The catalog format's version.
pub const CATALOG_VERSION: u32 = 1;

/// Every topic a plan exports across processes, as the importing process reads it
/// ([`ExecutionPlan::endpoint_catalog`], [`RunSession::endpoint_catalog`](crate::RunSession::endpoint_catalog)).
///
/// ```
/// use holo_runtime::ipc::EndpointCatalog;
///
/// let catalog = EndpointCatalog::from_toml(
///     r#"
/// version = 1
/// namespace = "lab"
///
/// [[topics]]
/// name = "camera/frames"
/// memory_kind = "host"
/// dtype = "u8"
/// rank = 1
/// max_rank = 1
/// max_bytes = 4096
/// depth = 4
/// policy = "block"
/// subscribers = 2
/// holds_per_subscriber = 1
/// "#,
/// )?;
/// assert_eq!(catalog.topic("camera/frames")?.max_bytes, Some(4096));
/// # Ok::<(), holo_runtime::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EndpointCatalog {
    /// [`CATALOG_VERSION`].
    pub version: u32,
    /// The namespace the exporting session serves in
    /// ([`SessionOptions::ipc_namespace`](crate::SessionOptions::ipc_namespace)).
    pub namespace: String,
    /// The topics, in plan order.
    #[serde(default)]
    pub topics: Vec<CatalogTopic>,
}

/// One topic of an [`EndpointCatalog`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CatalogTopic {
    /// The topic name.
    pub name: String,
    /// The memory kind of every tensor (its stable name: `host`, …).
    pub memory_kind: String,
    /// The dtype of every tensor, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// The exact rank, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// The largest rank.
    pub max_rank: u32,
    /// Bytes per tensor at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Each subscriber's queue depth in the exporting session.
    pub depth: u32,
    /// What a full queue does (`block`, `drop_oldest`).
    pub policy: String,
    /// The subscribers that may be attached at once.
    pub subscribers: u32,
    /// The tensors each subscriber may hold at once.
    pub holds_per_subscriber: u32,
    /// `export` (the session serves subscribers: `ProcessSubscriber`) or `import` (the
    /// session takes publishers: `ProcessPublisher`).
    #[serde(default = "export")]
    pub direction: String,
    /// An import: the publishers that may be attached at once.
    #[serde(default)]
    pub publishers: u32,
    /// An import: the slots each publisher may have loaned at once.
    #[serde(default)]
    pub loans_per_publisher: u32,
}

fn export() -> String {
    "export".to_owned()
}

impl CatalogTopic {
    fn from_record(r: &TopicRecord) -> CatalogTopic {
        CatalogTopic {
            name: r.name.clone(),
            memory_kind: r
                .contract
                .memory_kind
                .map_or("undeclared", MemoryKind::wire_name)
                .to_owned(),
            dtype: r.contract.dtype.map(|d| d.name().to_owned()),
            rank: r.contract.rank,
            max_rank: r.contract.max_rank.unwrap_or(0),
            max_bytes: r.contract.max_bytes,
            depth: r.depth,
            policy: r.policy.name().to_owned(),
            subscribers: r.subscribers,
            holds_per_subscriber: r.holds_per_subscriber,
            direction: r.direction.name().to_owned(),
            publishers: r.publishers,
            loans_per_publisher: r.loans_per_publisher,
        }
    }

    /// The topic's memory kind (`InvalidArgument` for a name holo does not know).
    pub fn memory_kind(&self) -> Result<MemoryKind> {
        wire::KINDS
            .iter()
            .copied()
            .find(|k| k.wire_name() == self.memory_kind)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "topic {:?}: the catalog's memory kind {:?} is not one holo knows",
                    self.name, self.memory_kind
                ))
            })
    }

    /// The topic's dtype, when declared (`InvalidArgument` for a name holo does not know).
    pub fn dtype(&self) -> Result<Option<DType>> {
        self.dtype
            .as_deref()
            .map(|d| {
                DType::from_name(d).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "topic {:?}: the catalog's dtype {d:?} is not one holo knows",
                        self.name
                    ))
                })
            })
            .transpose()
    }

    /// The contract as it crosses the socket: the exporter refuses a subscriber whose
    /// catalog gives another.
    pub(crate) fn wire(&self) -> Result<WireContract> {
        let small = |v: Option<u32>, what: &str| -> Result<u8> {
            match v {
                None => Ok(NONE),
                Some(v) => u8::try_from(v).ok().filter(|&v| v != NONE).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "topic {:?}: the catalog's {what} {v} is out of range",
                        self.name
                    ))
                }),
            }
        };
        Ok(WireContract {
            memory_kind: wire::kind_index(self.memory_kind()?),
            dtype: self.dtype()?.map_or(NONE, wire::dtype_index),
            rank: small(self.rank, "rank")?,
            max_rank: small(Some(self.max_rank), "max_rank")?,
            depth: self.depth,
            max_bytes: self.max_bytes.unwrap_or(u64::MAX),
            holds: self.holds_per_subscriber,
            loans: self.loans_per_publisher,
        })
    }

    /// Refuses (`ProtocolError`) a client contract the topic does not meet: every field
    /// `expected` states must be the topic's (the check of an in-process client).
    pub(crate) fn check_expected(&self, expected: Option<&TensorInputSpec>) -> Result<()> {
        let Some(want) = expected else {
            return Ok(());
        };
        let contract = TopicContractRecord {
            memory_kind: Some(self.memory_kind()?),
            device: None,
            dtype: self.dtype()?,
            rank: self.rank,
            max_rank: Some(self.max_rank),
            max_bytes: self.max_bytes,
        };
        crate::topic::check_contract(&contract, want)
            .map_err(|e| e.at(format!("topic {:?}", self.name)))
    }
}

impl EndpointCatalog {
    /// The catalog as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Reads a catalog from TOML: `InvalidArgument` naming what is malformed, or a
    /// version other than [`CATALOG_VERSION`].
    pub fn from_toml(text: &str) -> Result<EndpointCatalog> {
        let c: EndpointCatalog = toml::from_str(text).map_err(|e| {
            Error::invalid_argument(format!("the endpoint catalog is malformed: {e}"))
        })?;
        if c.version != CATALOG_VERSION {
            return Err(Error::invalid_argument(format!(
                "the endpoint catalog has version {}; this holo reads version {CATALOG_VERSION}",
                c.version
            )));
        }
        for t in &c.topics {
            t.wire()?;
        }
        Ok(c)
    }

    /// Writes the catalog to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_toml()).map_err(|e| {
            Error::invalid_argument(format!("cannot write the endpoint catalog: {e}"))
                .at(path.display().to_string())
        })
    }

    /// Reads the catalog at `path` ([`from_toml`](Self::from_toml); `NotFound` for a
    /// missing file).
    pub fn read(path: impl AsRef<Path>) -> Result<EndpointCatalog> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                ErrorCode::NotFound
            } else {
                ErrorCode::InvalidArgument
            };
            Error::new(code, format!("cannot read the endpoint catalog: {e}"))
                .at(path.display().to_string())
        })?;
        Self::from_toml(&text).map_err(|e| e.at(path.display().to_string()))
    }

    /// The topic named `name` (`NotFound`, listing the catalog's topics).
    pub fn topic(&self, name: &str) -> Result<&CatalogTopic> {
        self.topics.iter().find(|t| t.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.topics.iter().map(|t| t.name.as_str()).collect();
            Error::new(
                ErrorCode::NotFound,
                format!("the endpoint catalog has no topic {name:?}; its topics: {known:?}"),
            )
            .at(format!("topic {name:?}"))
        })
    }
}

impl ExecutionPlan {
    /// The endpoint catalog of the topics this plan exports across processes
    /// (`TopicOptions::across_processes`), served in `namespace`: write it where the
    /// importing process reads it ([`EndpointCatalog::write`]).
    pub fn endpoint_catalog(&self, namespace: &str) -> EndpointCatalog {
        EndpointCatalog {
            version: CATALOG_VERSION,
            namespace: namespace.to_owned(),
            topics: self
                .topics()
                .iter()
                .filter(|t| t.across_processes)
                .map(CatalogTopic::from_record)
                .collect(),
        }
    }
}

/// The wire contract of a served topic's record.
pub(crate) fn record_wire(r: &TopicRecord) -> Result<WireContract> {
    CatalogTopic::from_record(r).wire()
}
