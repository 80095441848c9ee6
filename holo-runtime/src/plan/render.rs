//! Plan renderings: human text, canonical JSON and Graphviz DOT.

use std::fmt::Write as _;

use super::ExecutionPlan;

fn mib(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss, reason = "display only")]
    let m = bytes as f64 / (1024.0 * 1024.0);
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{m:.3} MiB")
    }
}

/// A stream's name with its device: `S0 on cuda:0` for a CUDA stream, `S0 (queue) on
/// opencl:0` for an OpenCL command queue.
fn stream_label(s: &super::CudaComputeStreamRecord) -> String {
    match s.device.api {
        crate::device::DeviceApi::Cuda => format!("S{} on {}", s.id, s.device),
        crate::device::DeviceApi::OpenCl => format!("S{} (queue) on {}", s.id, s.device),
    }
}

impl ExecutionPlan {
    /// `"; thread T with a, b"` for a partition whose thread runs other partitions too
    /// (the shared-stream policy), else nothing.
    fn thread_note(&self, p: &super::ExecutionPartition) -> String {
        let others: Vec<&str> = self
            .partitions
            .iter()
            .filter(|q| q.thread == p.thread && q.id != p.id)
            .map(|q| q.name.as_str())
            .collect();
        if others.is_empty() {
            String::new()
        } else {
            format!("; thread {} with {}", p.thread, others.join(", "))
        }
    }

    /// One line per device: its context rule, streams or queues, and pools.
    fn device_lines(&self) -> Vec<String> {
        self.devices
            .iter()
            .map(|d| {
                let streams: Vec<String> = d.streams.iter().map(|s| format!("S{s}")).collect();
                format!(
                    "{}: context {}; {}s {}; pools {}",
                    d.device,
                    d.context.describe(),
                    d.ordering_domain,
                    if streams.is_empty() {
                        "none".to_owned()
                    } else {
                        streams.join(", ")
                    },
                    if d.pools.is_empty() {
                        "none".to_owned()
                    } else {
                        d.pools.join(", ")
                    }
                )
            })
            .collect()
    }

    /// Canonical, deterministic JSON: the same plan gives the same bytes. It starts with
    /// the schema marker [`PLAN_JSON_SCHEMA`](super::PLAN_JSON_SCHEMA). It is inspection
    /// output, not a reload format.
    pub fn json(&self) -> String {
        // Struct fields serialize in declaration order and JSON objects (parameters) in
        // key order (serde_json's default map is a BTreeMap), so the text is canonical.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":{e:?}}}"))
    }

    /// A review-friendly text rendering that explains every partition, stream, edge,
    /// topic and pool — every byte of every pool, term by term.
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        let name = |id: u32| self.operators[id as usize].name.as_str();
        let _ = writeln!(out, "execution plan {} ({})", self.fingerprint, self.schema);
        let _ = writeln!(
            out,
            "cuda compute stream policy: {:?}; release streams per slot: {}",
            self.cuda_compute_stream_policy, self.max_fanout_release_streams
        );
        if !self.devices.is_empty() {
            let _ = writeln!(out, "devices:");
            for line in self.device_lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        let _ = writeln!(out, "partitions:");
        for p in &self.partitions {
            let ops: Vec<&str> = p.operators.iter().map(|&o| name(o)).collect();
            let streams: Vec<String> = self
                .cuda_compute_streams
                .iter()
                .filter(|s| s.partitions.contains(&p.id))
                .map(stream_label)
                .collect();
            let _ = writeln!(
                out,
                "  {} [{}] ({}): {}{}{}",
                p.name,
                p.id,
                p.reason,
                ops.join(" → "),
                if p.host_only {
                    "; host-only, no stream".to_owned()
                } else {
                    format!("; streams {}", streams.join(", "))
                },
                self.thread_note(p)
            );
        }
        let _ = writeln!(out, "edges:");
        for e in &self.edges {
            let _ = writeln!(
                out,
                "  e{}: {}.{} → {}.{}  depth {} ({}), {}{}{}",
                e.id,
                name(e.from_operator),
                e.from_port,
                name(e.to_operator),
                e.to_port,
                e.queue_depth,
                e.depth_source,
                e.policy.name(),
                if e.cross_partition {
                    ", cross-partition"
                } else {
                    ""
                },
                match &e.fusion {
                    Some(f) => format!(", fused on S{}", f.stream),
                    None => String::new(),
                }
            );
            if let Some(r) = self.queue_sizing_recipe(e.id)
                && let (Some(rate), Some(h), Some(a), Some(rec)) = (
                    &r.rate_hz,
                    &r.horizon_seconds,
                    r.nominal_arrivals,
                    r.recommendation,
                )
            {
                let _ = writeln!(
                    out,
                    "    rate {rate} Hz ({}) × horizon {h} s → {a} arrivals × {} → {rec}; hard floor {}; admitted ceiling {}",
                    r.rate_source,
                    r.headroom_ratio,
                    r.hard_floor,
                    r.admitted_ceiling
                        .map_or("unavailable".to_owned(), |c| c.to_string())
                );
            }
        }
        if !self.topics.is_empty() {
            let _ = writeln!(out, "topics:");
        }
        for t in &self.topics {
            let end = format!("{}.{}", name(t.operator), t.port);
            let flow = match t.direction {
                super::TopicDirection::Export => format!("{end} → {} subscriber(s)", t.subscribers),
                super::TopicDirection::Import => format!("{} publisher(s) → {end}", t.publishers),
            };
            let _ = writeln!(
                out,
                "  {:?} ({}): {flow}, depth {} ({}), {}{}",
                t.name,
                t.direction,
                t.depth,
                t.depth_source,
                t.policy.name(),
                if let Some(r) = &t.from_export {
                    format!(
                        "; from another process (namespace {:?}, {} memory)",
                        r.namespace, r.topic.memory_kind
                    )
                } else if t.across_processes {
                    format!(
                        "; across processes, {} held per subscriber{}",
                        t.holds_per_subscriber,
                        t.boundary
                            .map(|b| format!(
                                "; boundary {} (each tensor copied once into {})",
                                b.name(),
                                t.pool.as_deref().unwrap_or("its pool")
                            ))
                            .unwrap_or_default()
                    )
                } else {
                    String::new()
                },
            );
            if t.tensor {
                let c = &t.contract;
                let _ = writeln!(
                    out,
                    "    contract: {} {}{}{}, {}; pool {}{}",
                    c.memory_kind
                        .map_or("any memory kind", crate::MemoryKind::wire_name),
                    c.dtype.map_or("any dtype", crate::spec::DType::name),
                    c.rank.map(|r| format!(" rank {r}")).unwrap_or_default(),
                    c.device.map(|d| format!(" on {d}")).unwrap_or_default(),
                    c.max_bytes
                        .map_or("no byte bound".to_owned(), |b| format!("≤ {b} B")),
                    t.pool.as_deref().unwrap_or("none (pass-through)"),
                    match (t.consumer_stream, t.host_wait) {
                        (Some(s), _) => format!("; importer waits on S{s}"),
                        (None, true) => "; importer waits on the host".to_owned(),
                        (None, false) => String::new(),
                    }
                );
            } else {
                let _ = writeln!(out, "    messages");
            }
        }
        let _ = writeln!(out, "tensor pools:");
        for a in &self.tensor_allocations {
            let t = &a.slot_terms;
            let _ = writeln!(
                out,
                "  {}: {} {}{}, {} B/slot",
                a.pool,
                a.memory_kind,
                a.dtype.map_or("any dtype", crate::spec::DType::name),
                a.device.map(|d| format!(" on {d}")).unwrap_or_default(),
                a.per_slot_bytes
            );
            let _ = writeln!(
                out,
                "    slots = {} queued + {} held + {} loan + {} retirement + {} history{}{} = {}",
                t.queue_entries,
                t.consumer_holds,
                t.producer_loans,
                t.retirement,
                t.history,
                if t.forwarded_through.is_empty() {
                    String::new()
                } else {
                    format!(" + {} forwarded", t.forwarded)
                },
                if t.subscriber_terms.is_empty() {
                    String::new()
                } else {
                    format!(" + {} subscribers", t.subscribers)
                },
                a.slot_count
            );
            if let Some(topic) = &a.topic {
                let _ = writeln!(
                    out,
                    "      the pool of imported topic {topic:?}: queued is its input's queue, loan its publishers' loans"
                );
            }
            for f in &t.forwarded_through {
                let _ = writeln!(out, "      {f}");
            }
            for term in &t.subscriber_terms {
                let _ = writeln!(out, "      {term}");
            }
            let _ = writeln!(
                out,
                "    bytes = {} × {} = {} ({}); memory kind from {}",
                a.slot_count,
                a.per_slot_bytes,
                a.aggregate_bytes,
                mib(a.aggregate_bytes),
                a.memory_kind_source
            );
        }
        let _ = writeln!(out, "byte-span derivations:");
        for d in &self.tensor_byte_span_derivations {
            let _ = writeln!(
                out,
                "  {}: {} = {} B/slot (reads: {})",
                d.pool,
                d.expression,
                d.per_slot_bytes,
                if d.dependencies.is_empty() {
                    "nothing".to_owned()
                } else {
                    d.dependencies.join(", ")
                }
            );
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "warnings:");
            for w in &self.warnings {
                let _ = writeln!(out, "  {w}");
            }
        }
        out
    }

    /// A Graphviz DOT picture: partitions as clusters (with their streams), operators,
    /// edges (with depth and fusion), pools, and topics (dashed, as notes).
    pub fn dot(&self) -> String {
        let mut out = String::from("digraph holo_plan {\n  rankdir=LR;\n  node [shape=box];\n");
        if !self.devices.is_empty() {
            let lines: Vec<String> = self.device_lines().iter().map(|l| esc(l)).collect();
            let _ = writeln!(
                out,
                "  labelloc=t;\n  label=\"devices:\\l{}\\l\";",
                lines.join("\\l")
            );
        }
        for p in &self.partitions {
            let streams: Vec<String> = self
                .cuda_compute_streams
                .iter()
                .filter(|s| s.partitions.contains(&p.id))
                .map(stream_label)
                .collect();
            let _ = writeln!(
                out,
                "  subgraph cluster_p{} {{\n    label=\"{} ({}){}\";",
                p.id,
                esc(&p.name),
                if p.host_only {
                    "host-only".to_owned()
                } else {
                    streams.join(", ")
                },
                esc(&self.thread_note(p))
            );
            for &o in &p.operators {
                let op = &self.operators[o as usize];
                let _ = writeln!(
                    out,
                    "    op{} [label=\"{}\\n{}\"];",
                    o,
                    esc(&op.name),
                    short(&op.type_name)
                );
            }
            out.push_str("  }\n");
        }
        for a in &self.tensor_allocations {
            // An imported topic's pool hangs off its topic; any other off its producer.
            let owner = match &a.topic {
                Some(t) => format!("\"topic_{}\"", esc(t)),
                None => format!("op{}", a.operator),
            };
            let _ = writeln!(
                out,
                "  \"pool_{}\" [shape=cylinder, label=\"{}\\n{} × {} B\\n{}\"];\n  {owner} -> \"pool_{}\" [style=dotted, arrowhead=none];",
                esc(&a.pool),
                esc(&a.pool),
                a.slot_count,
                a.per_slot_bytes,
                a.memory_kind,
                esc(&a.pool)
            );
        }
        for t in &self.topics {
            let node = format!("\"topic_{}\"", esc(&t.name));
            let (clients, what) = match t.direction {
                super::TopicDirection::Export => (t.subscribers, "subscriber(s)"),
                super::TopicDirection::Import => (t.publishers, "publisher(s)"),
            };
            let _ = writeln!(
                out,
                "  {node} [shape=note, label=\"topic {}\\n{}{} · {clients} {what}\\ndepth {} {}{}\"];",
                esc(&t.name),
                t.direction,
                if t.across_processes {
                    " across processes"
                } else if t.from_export.is_some() {
                    " from another process"
                } else {
                    ""
                },
                t.depth,
                t.policy.name(),
                t.boundary
                    .map(|b| format!("\\nboundary {}", b.name()))
                    .unwrap_or_default()
            );
            let _ = match t.direction {
                super::TopicDirection::Export => writeln!(
                    out,
                    "  op{} -> {node} [label=\"{}\", style=dashed];",
                    t.operator,
                    esc(&t.port)
                ),
                super::TopicDirection::Import => writeln!(
                    out,
                    "  {node} -> op{} [label=\"{}\", style=dashed];",
                    t.operator,
                    esc(&t.port)
                ),
            };
        }
        for e in &self.edges {
            let _ = writeln!(
                out,
                "  op{} -> op{} [label=\"{}→{} depth {}{}\"{}];",
                e.from_operator,
                e.to_operator,
                esc(&e.from_port),
                esc(&e.to_port),
                e.queue_depth,
                if e.fusion.is_some() { " fused" } else { "" },
                if e.fusion.is_some() {
                    ", style=bold"
                } else {
                    ""
                }
            );
        }
        out.push_str("}\n");
        out
    }
}

/// Escapes a name for a DOT quoted string (operator names are free text).
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn short(type_name: &str) -> &str {
    type_name.rsplit("::").next().unwrap_or(type_name)
}
