//! Device placement, compute streams and fusion evidence.
//!
//! An operator is device-active when one of its tensor outputs resolves to device memory
//! (a CUDA kind, `opencl_device` or the neutral `device`) or is bound to a device, one of
//! its tensor inputs is fed by a device output, or it imports a topic whose memory is not
//! pageable host memory. Its device — an API and an ordinal — comes only from explicit
//! bindings (`bind_tensor_output_device`, `bind_imported_topic_device`) or, for a
//! consumer, from its producers: the compiler never guesses device zero, nor an API. Every
//! device-memory output must live on its device's API (`PLACEMENT_API_MISMATCH`
//! otherwise), and a neutral `device` output becomes that API's device kind. Streams (CUDA)
//! or command queues (OpenCL): one per (partition, device) by default, or one per device
//! under `SharedProcessDevice`; host-only partitions get none.

use std::collections::{BTreeMap, BTreeSet};

use super::pools::Resolved;
use super::{Diagnostic, Work, codes};
use crate::MemoryKind;
use crate::device::DeviceId;
use crate::graph::PortDecl;
use crate::plan::TopicDirection;
use crate::plan::{
    CudaComputeStreamPolicy, CudaComputeStreamRecord, ExecutionPartition, FusionEvidence,
};
use crate::spec::PortDirection;

pub(crate) struct Placed {
    pub(crate) partitions: Vec<ExecutionPartition>,
    pub(crate) streams: Vec<CudaComputeStreamRecord>,
    pub(crate) device_of: Vec<Option<DeviceId>>,
    pub(crate) stream_of: Vec<Option<u32>>,
    pub(crate) output_device: BTreeMap<(u32, u32), DeviceId>,
    /// Per tensor output `(operator, port)` declared in the neutral `device` kind and
    /// placed: the API's concrete kind it resolves to.
    pub(crate) output_kind: BTreeMap<(u32, u32), MemoryKind>,
    /// Per edge: the evidence of a fused edge.
    pub(crate) fusion: Vec<Option<FusionEvidence>>,
    /// Per topic (the graph's index): an imported topic's bound device.
    pub(crate) import_device: Vec<Option<DeviceId>>,
}

impl Placed {
    /// The concrete memory kind of output `(o, p)` whose resolved kind is `kind`: a
    /// placed neutral `device` becomes its API's kind; every other kind is unchanged.
    pub(crate) fn concrete_kind(&self, o: u32, p: u32, kind: MemoryKind) -> MemoryKind {
        self.output_kind.get(&(o, p)).copied().unwrap_or(kind)
    }
}

/// Whether an input requiring `want` accepts an output of `have`, before placement: equal
/// kinds, or the neutral `device` on either side of a device kind (placement then checks
/// the two resolve to one API's kind).
pub(crate) fn kinds_compatible(want: MemoryKind, have: MemoryKind) -> bool {
    want.accepts(have) || have.accepts(want)
}

/// The thread of each partition: its own, except that partitions submitting on one stream
/// share a thread (only `SharedProcessDevice` gives a stream several partitions). Several
/// threads submitting to one stream serialize inside the driver, each call 3–4× slower
/// than from one thread (`device_hop fork-diag`, BENCHMARKS.md), which made the shared
/// policy a latency trap; one thread per shared stream is the serial GPU submission the
/// policy exists for. Threads are numbered in order of their first partition.
fn assign_threads(partitions: &mut [ExecutionPartition], streams: &[CudaComputeStreamRecord]) {
    fn find(root: &mut [u32], mut x: u32) -> u32 {
        while root[x as usize] != x {
            let up = root[root[x as usize] as usize];
            root[x as usize] = up;
            x = up;
        }
        x
    }
    // Union-find over partition ids, the root of a group its smallest member.
    let mut root: Vec<u32> = (0..partitions.len())
        .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
        .collect();
    for s in streams {
        let Some(&first) = s.partitions.first() else {
            continue;
        };
        for &p in &s.partitions[1..] {
            let (a, b) = (find(&mut root, first), find(&mut root, p));
            root[a.max(b) as usize] = a.min(b);
        }
    }
    let mut thread_of_root = vec![u32::MAX; partitions.len()];
    let mut threads = 0u32;
    for (i, part) in partitions.iter_mut().enumerate() {
        let r = find(&mut root, u32::try_from(i).unwrap_or(u32::MAX)) as usize;
        if thread_of_root[r] == u32::MAX {
            thread_of_root[r] = threads;
            threads += 1;
        }
        part.thread = thread_of_root[r];
    }
}

pub(crate) fn place(
    work: &mut Work<'_>,
    resolved: &Resolved,
    mut partitions: Vec<ExecutionPartition>,
) -> Placed {
    let graph = work.graph;
    let n = graph.operators.len();
    let mut output_device = BTreeMap::new();
    // Explicit bindings first; each must name a tensor output.
    for ((op_name, port_name), &device) in &work.options.deployment.tensor_output_devices {
        let found = graph.operator_id(op_name).and_then(|id| {
            graph.operators[id.index()]
                .ports
                .iter()
                .position(|p| p.name == port_name && matches!(p.decl, PortDecl::TensorOutput(_)))
                .map(|p| (id.index(), p))
        });
        match found {
            Some((o, p)) => {
                output_device.insert(
                    (
                        u32::try_from(o).unwrap_or(u32::MAX),
                        u32::try_from(p).unwrap_or(u32::MAX),
                    ),
                    device,
                );
            }
            None => work.diagnostics.push(
                Diagnostic::error(
                    codes::PLACEMENT_UNKNOWN_BINDING,
                    "the device binding names no tensor output",
                )
                .operator(op_name)
                .port(port_name)
                .hint("bind `<operator>.<port>` of a tensor output that exists"),
            ),
        }
    }
    // Imported topics' devices: each binding must name an imported topic.
    let mut import_device = vec![None; graph.topics.len()];
    for (topic, &device) in &work.options.deployment.imported_topic_devices {
        match graph
            .topics
            .iter()
            .position(|t| t.name == *topic && t.direction == TopicDirection::Import)
        {
            Some(i) => import_device[i] = Some(device),
            None => work.diagnostics.push(
                Diagnostic::error(
                    codes::PLACEMENT_UNKNOWN_BINDING,
                    format!(
                        "the device binding names topic {topic:?}, which the graph does not import"
                    ),
                )
                .hint("bind the name given to `graph.import_topic`"),
            ),
        }
    }
    // Devices per operator: from its bound outputs, in topological order from producers.
    // (Only the operators that have one: a table of n empty sets was 240 kB at 10,000
    // operators.)
    let mut devices: BTreeMap<u32, BTreeSet<DeviceId>> = BTreeMap::new();
    for (&(o, _), &d) in &output_device {
        devices.entry(o).or_default().insert(d);
    }
    // The operators this loop can find device work in: those with a tensor port, those
    // fed by a tensor output and those importing a topic. No other is CUDA-active or
    // inherits a device, so their ports' facts are not read.
    let mut concerned = graph.tensor_operators.clone();
    for (o, p, _) in resolved.resolved_order() {
        for &e in work.outgoing(o, p) {
            concerned[graph.edges[e as usize].to.0.index()] = true;
        }
    }
    for t in &graph.topics {
        if t.direction == crate::plan::TopicDirection::Import
            && let Some(c) = concerned.get_mut(t.port.0.index())
        {
            *c = true;
        }
    }
    let mut cuda_active = vec![false; n];
    for &o in &work.topo {
        if !concerned[o as usize] {
            continue;
        }
        let op = &graph.operators[o as usize];
        let ports = graph.port_facts_of(o as usize);
        for (p, port) in ports.iter().enumerate() {
            let p = u32::try_from(p).unwrap_or(u32::MAX);
            match port.direction {
                PortDirection::Output => {
                    // CUDA memory, or an output explicitly bound to a device (a pinned
                    // output written on a stream), makes the operator CUDA-active.
                    if output_device.contains_key(&(o, p)) {
                        cuda_active[o as usize] = true;
                    }
                    let Some(r) = resolved.get(work.port_index(o, p)) else {
                        continue;
                    };
                    if r.memory_kind.is_some_and(MemoryKind::is_device) {
                        cuda_active[o as usize] = true;
                    }
                }
                PortDirection::Input => {
                    // An imported topic whose memory a publisher may write on a stream
                    // (anything but pageable host memory): the importer waits on its
                    // stream, on the topic's bound device.
                    if let Some(t) = work.topics.imported(work, o, p)
                        && let Some(kind) = super::topics::import_requirements(work, (o, p))
                            .and_then(|r| r.memory_kind)
                        && kind != MemoryKind::Host
                    {
                        match import_device[t as usize] {
                            Some(d) if !d.api.holds(kind) => work.diagnostics.push(
                                Diagnostic::error(
                                    codes::PLACEMENT_API_MISMATCH,
                                    format!(
                                        "topic {:?} is imported in {kind} memory, which its bound device {d} does not hold",
                                        graph.topics[t as usize].name
                                    ),
                                )
                                .operator(&op.name)
                                .port(port.name)
                                .hint("bind the topic to a device of the kind's API, or declare `memory = device` on the input"),
                            ),
                            Some(d) => {
                                cuda_active[o as usize] = true;
                                devices.entry(o).or_default().insert(d);
                            }
                            None => work.diagnostics.push(
                                Diagnostic::error(
                                    codes::PLACEMENT_DEVICE_REQUIRED,
                                    format!(
                                        "topic {:?} is imported in {kind} memory but no device is bound: the compiler never guesses device 0",
                                        graph.topics[t as usize].name
                                    ),
                                )
                                .operator(&op.name)
                                .port(port.name)
                                .hint("bind it with `options.deployment.bind_imported_topic_device(topic, device)`"),
                            ),
                        }
                    }
                    // A producer that declares no memory kind (a pass-through output
                    // forwarding what it received) delivers what this input declares.
                    // (Read from the graph's port only for a tensor input.)
                    let declared = if port.tensor_input() {
                        match &op.ports[p as usize].decl {
                            PortDecl::TensorInput(spec) => spec.memory_kind,
                            _ => None,
                        }
                    } else {
                        None
                    };
                    for &e in work.incoming(o, p) {
                        let edge = &graph.edges[e as usize];
                        let from = (edge.from.0.0, edge.from.1);
                        if resolved
                            .get(work.port_index(from.0, from.1))
                            .and_then(|r| r.memory_kind)
                            .or(declared)
                            .is_some_and(MemoryKind::is_device)
                        {
                            cuda_active[o as usize] = true;
                            let inherited: Vec<DeviceId> = devices
                                .get(&from.0)
                                .into_iter()
                                .flatten()
                                .copied()
                                .collect();
                            devices.entry(o).or_default().extend(inherited);
                        }
                    }
                }
            }
        }
        if cuda_active[o as usize] {
            match devices.get(&o).map_or(0, BTreeSet::len) {
                0 => work.diagnostics.push(
                    Diagnostic::error(
                        codes::PLACEMENT_DEVICE_REQUIRED,
                        "the operator uses device memory but no device is bound: the compiler never guesses device 0",
                    )
                    .operator(&op.name)
                    .hint("bind its device output with `options.deployment.bind_tensor_output_device(operator, port, DeviceId::cuda(n) or DeviceId::opencl(n))`"),
                ),
                1 => {}
                _ => work.diagnostics.push(
                    Diagnostic::error(
                        codes::PLACEMENT_DEVICE_CONFLICT,
                        format!(
                            "the operator's tensors resolve to devices {}; one operator uses one device",
                            devices.get(&o).into_iter().flatten().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                        ),
                    )
                    .operator(&op.name)
                    .hint("holo inserts no cross-device copy: move the data yourself, or bind every output to one device"),
                ),
            }
        }
    }
    // A connected pass-through CUDA output needs its own binding, or another bound output
    // of its operator: input placement does not propagate to pass-through outputs.
    for o in 0..n {
        // Only tensor outputs: their operators and ports are read, no other.
        if !graph.tensor_operators[o] {
            continue;
        }
        let facts = graph.port_facts_of(o);
        if !facts.iter().any(|f| f.tensor_output) {
            continue;
        }
        let op = &graph.operators[o];
        let o32 = u32::try_from(o).unwrap_or(u32::MAX);
        let has_bound_output = output_device
            .range((o32, 0)..=(o32, u32::MAX))
            .next()
            .is_some();
        for (p, port) in op.ports.iter().enumerate() {
            let p32 = u32::try_from(p).unwrap_or(u32::MAX);
            let PortDecl::TensorOutput(decl) = &port.decl else {
                continue;
            };
            let cuda = decl
                .representation
                .memory_kind
                .is_some_and(MemoryKind::is_device);
            let connected = !work.outgoing(o32, p32).is_empty();
            if decl.storage == crate::spec::TensorOutputStorage::PassThrough
                && cuda
                && connected
                && !has_bound_output
            {
                work.diagnostics.push(
                    Diagnostic::error(
                        codes::PLACEMENT_DEVICE_REQUIRED,
                        "a connected pass-through device output needs a device: input placement does not propagate to pass-through outputs",
                    )
                    .operator(&op.name)
                    .port(port.name)
                    .hint("bind it with `bind_tensor_output_device(operator, port, device)`, or bind another output of this operator"),
                );
            }
        }
    }
    let device_of: Vec<Option<DeviceId>> = (0..n)
        .map(|o| {
            if !cuda_active[o] {
                return None;
            }
            match devices.get(&u32::try_from(o).unwrap_or(u32::MAX)) {
                Some(set) if set.len() == 1 => set.first().copied(),
                _ => None,
            }
        })
        .collect();
    // Streams.
    let mut streams: Vec<CudaComputeStreamRecord> = Vec::new();
    let mut key_to_stream: BTreeMap<(Option<u32>, DeviceId), u32> = BTreeMap::new();
    let mut stream_of = vec![None; n];
    for part in &mut partitions {
        part.host_only = part
            .operators
            .iter()
            .all(|&o| device_of[o as usize].is_none());
        for &o in &part.operators {
            let Some(device) = device_of[o as usize] else {
                continue;
            };
            let key = match work.options.cuda_execution.compute_stream_policy {
                CudaComputeStreamPolicy::PerPartitionDevice => (Some(part.id), device),
                CudaComputeStreamPolicy::SharedProcessDevice => (None, device),
            };
            let id = *key_to_stream.entry(key).or_insert_with(|| {
                let id = u32::try_from(streams.len()).unwrap_or(u32::MAX);
                streams.push(CudaComputeStreamRecord {
                    id,
                    device,
                    partitions: Vec::new(),
                });
                id
            });
            // Partitions come in id order, so the stream has seen this one only if it
            // was the last it recorded.
            if streams[id as usize].partitions.last() != Some(&part.id) {
                streams[id as usize].partitions.push(part.id);
            }
            stream_of[o as usize] = Some(id);
        }
    }
    assign_threads(&mut partitions, &streams);
    // Fusion: a CUDA tensor edge whose output has exactly one successor in total (an
    // exported topic's subscribers are successors too: mixed fan-out gets no fusion) and
    // whose two endpoints name the same final stream — the seed's proven linear chain.
    // Beyond the seed, a runtime-pool output whose every successor is on its own stream
    // (a fan-out inside one partition, or on one shared stream) is fused on every edge:
    // stream order covers each consumer's reads, and the pool's next write into a slot is
    // on that same stream after every handle is gone, so neither a readiness event, a
    // self-wait nor a release event orders anything.
    // (Without a compute stream no flow is fused: the flows are not read.)
    let fusion = if streams.is_empty() {
        vec![None; graph.edges.len()]
    } else {
        fusion(work, resolved, &stream_of)
    };
    let output_kind = check_apis(work, resolved, &device_of, &output_device);
    Placed {
        partitions,
        streams,
        device_of,
        stream_of,
        output_device,
        output_kind,
        fusion,
        import_device,
    }
}

/// Each flow's fusion evidence (see `place`).
fn fusion(
    work: &Work<'_>,
    resolved: &Resolved,
    stream_of: &[Option<u32>],
) -> Vec<Option<FusionEvidence>> {
    let graph = work.graph;
    graph
        .edges
        .iter()
        .map(|e| {
            let (fo, fp) = (e.from.0.0, e.from.1);
            let out = resolved.get(work.port_index(fo, fp));
            let cuda = out
                .and_then(|r| r.memory_kind)
                .is_some_and(MemoryKind::is_device);
            let outgoing = work.outgoing(fo, fp);
            let local = work.topics.exported(work, fo, fp).is_none();
            let a = stream_of[e.from.0.index()];
            let fused = if outgoing.len() == 1 {
                stream_of[e.to.0.index()] == a
            } else {
                out.is_some_and(|r| r.storage == crate::spec::TensorOutputStorage::RuntimePool)
                    && outgoing
                        .iter()
                        .all(|&k| stream_of[graph.edges[k as usize].to.0.index()] == a)
            };
            (cuda && local && a.is_some() && fused).then(|| FusionEvidence {
                stream: a.unwrap_or(0),
                sole_successor: outgoing.len() == 1,
                process_local: true,
            })
        })
        .collect()
}

/// Every tensor output in device memory lives on its device's API, and every edge whose
/// one side is the neutral `device` resolves to one concrete kind: otherwise
/// `PLACEMENT_API_MISMATCH`. Returns the concrete kind of each placed neutral output.
fn check_apis(
    work: &mut Work<'_>,
    resolved: &Resolved,
    device_of: &[Option<DeviceId>],
    output_device: &BTreeMap<(u32, u32), DeviceId>,
) -> BTreeMap<(u32, u32), MemoryKind> {
    let graph = work.graph;
    let placed_on = |o: u32, p: u32| {
        output_device
            .get(&(o, p))
            .copied()
            .or(device_of[o as usize])
    };
    let mut output_kind = BTreeMap::new();
    for (o, op) in graph.operators.iter().enumerate() {
        if !graph.tensor_operators[o] {
            continue;
        }
        let o32 = u32::try_from(o).unwrap_or(u32::MAX);
        // The graph's port table, not its ports: only tensor outputs matter here.
        for (p, port) in graph.port_facts_of(o).iter().enumerate() {
            let p32 = u32::try_from(p).unwrap_or(u32::MAX);
            if !port.tensor_output {
                continue;
            }
            let Some(kind) = resolved
                .get(work.port_index(o32, p32))
                .and_then(|r| r.memory_kind)
            else {
                continue;
            };
            let Some(device) = placed_on(o32, p32) else {
                continue;
            };
            if device.api.holds(kind) {
                if kind == MemoryKind::Device {
                    output_kind.insert((o32, p32), device.api.resolve(kind));
                }
            } else if kind != MemoryKind::Host || output_device.contains_key(&(o32, p32)) {
                work.diagnostics.push(
                    Diagnostic::error(
                        codes::PLACEMENT_API_MISMATCH,
                        format!(
                            "the output is {kind} memory, which its device {device} does not hold: compile never maps one API's memory kind to the other's"
                        ),
                    )
                    .operator(&op.name)
                    .port(port.name)
                    .hint(format!(
                        "bind it to a device of the kind's API, declare `memory = device` (the bound device's memory, CUDA or OpenCL), or `memory = {}`",
                        device.api.resolve(MemoryKind::Device)
                    )),
                );
            }
        }
    }
    // A consumer requiring one API's device kind, fed by a neutral output placed on the
    // other API (with no neutral output placed, no flow has one to check).
    if output_kind.is_empty() {
        return output_kind;
    }
    for e in &graph.edges {
        let (fo, fp) = (e.from.0.0, e.from.1);
        let (to, tp) = (e.to.0.0, e.to.1);
        // Only a tensor input has a requirement (the graph's port read only then).
        if !work.port(to, tp).tensor_input() {
            continue;
        }
        let consumer = &graph.operators[to as usize];
        let PortDecl::TensorInput(req) = &consumer.ports[tp as usize].decl else {
            continue;
        };
        let (Some(want), Some(&have)) = (req.memory_kind, output_kind.get(&(fo, fp))) else {
            continue;
        };
        if !want.accepts(have) {
            let producer = &graph.operators[fo as usize];
            work.diagnostics.push(
                Diagnostic::error(
                    codes::PLACEMENT_API_MISMATCH,
                    format!(
                        "{}.{} is `device` memory placed on {}, so it delivers {have} where {want} is required",
                        producer.name,
                        producer.ports[fp as usize].name,
                        placed_on(fo, fp).map_or_else(String::new, |d| d.to_string()),
                    ),
                )
                .operator(&consumer.name)
                .port(consumer.ports[tp as usize].name)
                .hint("bind the producer to a device of the API this input requires, or declare `memory = device` on the input"),
            );
        }
    }
    output_kind
}

#[cfg(test)]
mod tests {
    use super::{CudaComputeStreamRecord, DeviceId, ExecutionPartition, assign_threads};

    fn partitions(n: u32) -> Vec<ExecutionPartition> {
        (0..n)
            .map(|id| ExecutionPartition {
                id,
                name: format!("p{id}"),
                operators: vec![id],
                host_only: false,
                reason: "authored".to_owned(),
                thread: id,
            })
            .collect()
    }

    fn threads(n: u32, streams: &[&[u32]]) -> Vec<u32> {
        let streams: Vec<CudaComputeStreamRecord> = streams
            .iter()
            .enumerate()
            .map(|(id, parts)| CudaComputeStreamRecord {
                id: u32::try_from(id).unwrap(),
                device: DeviceId::cuda(0),
                partitions: parts.to_vec(),
            })
            .collect();
        let mut parts = partitions(n);
        assign_threads(&mut parts, &streams);
        parts.iter().map(|p| p.thread).collect()
    }

    #[test]
    fn partitions_on_one_stream_share_a_thread_numbered_by_first_partition() {
        // A stream per partition (the default policy): a thread each.
        assert_eq!(threads(3, &[&[0], &[1], &[2]]), [0, 1, 2]);
        // One shared stream; partition 1 is host-only (no stream): its own thread.
        assert_eq!(threads(4, &[&[0, 2, 3]]), [0, 1, 0, 0]);
        // Two streams chained by partition 2 (on both devices): one group.
        assert_eq!(threads(5, &[&[0, 2], &[2, 4], &[3]]), [0, 1, 0, 2, 0]);
        // A group whose smallest member comes later still numbers in partition order.
        assert_eq!(threads(4, &[&[1, 3], &[0]]), [0, 1, 2, 1]);
    }
}
