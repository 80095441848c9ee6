//! The channel layer: what moves a value from a producer to its consumers, below any
//! session (docs/ARCHITECTURE.md, "Channels"). Today it holds the edge queues; a session's
//! partitions use them through [`queue::Endpoint`]s, and `graph.rs` builds their
//! type-erased factories without knowing of sessions.

pub(crate) mod queue;
