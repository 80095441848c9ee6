//! Memory kinds, byte spans, layout checks and pool sizing.

use std::collections::BTreeMap;

use holo_params::TypeDescriptor;

use super::forwards::{composed, floor_records, forwarded_flows, forwarded_terms};
use super::index::Adjacency;
use super::placement::Placed;
use super::{Diagnostic, DiagnosticCode, MAX_FANOUT_RELEASE_STREAMS, Work, codes};
use crate::graph::{OperatorNode, PortDecl, TensorOutputDecl};
use crate::plan::{
    EdgeRecord, HardFloorContributorRecord, PoolCapacityDependencyRecord,
    ProviderAllocationPlanRecord, SlotCountTerms, TensorAllocationPlanRecord,
    TensorByteSpanDerivationRecord,
};
use crate::spec::MissingPolicy;
use crate::spec::bytespan::{
    ByteSpanNode, ByteSpanOp, MAX_EXPRESSION_DEPENDENCIES, MAX_EXPRESSION_DEPTH,
    MAX_EXPRESSION_NODES, MAX_SHAPE_EXTENTS, ParamDependency, render,
};
use crate::spec::{DType, PortDirection, TensorOutputStorage};
use crate::{ErrorCode, MemoryKind};

/// A tensor output after memory-kind and byte-span resolution.
#[derive(Clone, Debug)]
pub(crate) struct ResolvedOutput {
    pub(crate) storage: TensorOutputStorage,
    pub(crate) memory_kind: Option<MemoryKind>,
    pub(crate) memory_kind_source: String,
    pub(crate) dtype: Option<DType>,
    pub(crate) rank: Option<u32>,
    pub(crate) max_rank: u32,
    pub(crate) per_slot_bytes: Option<u64>,
    pub(crate) expression: String,
    pub(crate) dependencies: Vec<String>,
    pub(crate) max_loans: u32,
}

/// The resolved tensor outputs, found by port index ([`Work::port_index`]) in constant
/// time and listed in port order, that is by (operator, port).
pub(crate) struct Resolved {
    /// Per port: the position of its output in `outputs`, or `u32::MAX` (empty when no
    /// output resolved).
    at: Vec<u32>,
    outputs: Vec<(u32, u32, ResolvedOutput)>,
}

impl Resolved {
    pub(crate) fn get(&self, port: usize) -> Option<&ResolvedOutput> {
        let &at = self.at.get(port)?;
        self.outputs.get(at as usize).map(|(_, _, out)| out)
    }

    /// `(operator, port, output)` in the order they were resolved (topological): no
    /// sweep over the per-port table.
    pub(crate) fn resolved_order(&self) -> impl Iterator<Item = (u32, u32, &ResolvedOutput)> {
        self.outputs.iter().map(|(o, p, out)| (*o, *p, out))
    }

    /// `(operator, port, output)` by (operator, port): the resolved outputs sorted, not
    /// a sweep over the per-port table (a graph's tensor outputs may be few of its ports).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u32, &ResolvedOutput)> {
        let mut sorted: Vec<(u32, u32, &ResolvedOutput)> = self.resolved_order().collect();
        sorted.sort_unstable_by_key(|&(o, p, _)| (o, p));
        sorted.into_iter()
    }
}

fn readable(work: &mut Work<'_>, op: &OperatorNode, port: &str, dep: &ParamDependency) -> bool {
    if dep.is_compile_readable() {
        return true;
    }
    let why = if dep.sensitive {
        "is sensitive"
    } else {
        "is neither `compile_time` nor `recompile_required`"
    };
    work.diagnostics.push(
        Diagnostic::error(
            codes::PHYSICAL_TENSOR_BYTE_SPAN_UNREADABLE_PARAMETER,
            format!("the compiler may not read this parameter: it {why}"),
        )
        .operator(&op.name)
        .port(port)
        .field(&dep.path)
        .hint("mark the field `#[param(recompile_required)]` or `#[param(compile_time)]`, and never derive capacity from a sensitive field"),
    );
    false
}

struct Shape {
    nodes: usize,
    depth: usize,
    deps: Vec<String>,
}

fn measure(node: &ByteSpanNode, depth: usize, shape: &mut Shape) {
    shape.nodes += 1;
    shape.depth = shape.depth.max(depth);
    match node {
        ByteSpanNode::Literal(_) => {}
        ByteSpanNode::ParameterContiguous { dep, .. } => shape.deps.push(dep.path.clone()),
        ByteSpanNode::InputMax { input } => shape.deps.push(format!("input:{input}")),
        ByteSpanNode::Projected { reads, .. } => {
            shape.deps.extend(reads.iter().map(|r| r.path.clone()));
        }
        ByteSpanNode::Binary { lhs, rhs, .. } => {
            measure(lhs, depth + 1, shape);
            measure(rhs, depth + 1, shape);
        }
    }
}

struct Eval<'a, 'w, 'g> {
    work: &'w mut Work<'g>,
    op: u32,
    port: &'a str,
    decl: &'a TensorOutputDecl,
    resolved: &'a Resolved,
    projectors: &'w mut BTreeMap<&'static str, &'static str>,
}

impl Eval<'_, '_, '_> {
    fn fail(
        &mut self,
        code: DiagnosticCode,
        message: impl Into<String>,
        hint: &str,
    ) -> Option<u64> {
        let op = &self.work.graph.operators[self.op as usize];
        let d = Diagnostic::error(code, message)
            .operator(&op.name)
            .port(self.port)
            .hint(hint);
        self.work.diagnostics.push(d);
        None
    }

    fn eval(&mut self, node: &ByteSpanNode) -> Option<u64> {
        let op = &self.work.graph.operators[self.op as usize];
        match node {
            ByteSpanNode::Literal(v) => Some(*v),
            ByteSpanNode::ParameterContiguous { dep, extents } => {
                if !readable(self.work, op, self.port, dep) {
                    return None;
                }
                let Some(dtype) = self.decl.representation.dtype else {
                    return self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_DTYPE_MISSING,
                        "a parameter-contiguous byte span needs the output's dtype",
                        "declare `dtype = ...` on the output",
                    );
                };
                let extents = extents(op.params.as_ref())?;
                if extents.len() > MAX_SHAPE_EXTENTS {
                    return self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_LIMIT,
                        format!(
                            "the shape {} has {} extents; at most {MAX_SHAPE_EXTENTS} are admitted",
                            dep.path,
                            extents.len()
                        ),
                        "use a shape of at most 8 extents",
                    );
                }
                let rank = self.decl.representation.rank;
                if rank != Some(u32::try_from(extents.len()).unwrap_or(u32::MAX)) {
                    let shown = rank.map_or("no rank".to_owned(), |r| format!("rank {r}"));
                    let path = dep.path.clone();
                    self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_RANK_MISMATCH,
                        format!("the shape parameter {path} has {} extents but the output declares {shown}", extents.len()),
                        "the shape's length must equal the output's exact `rank`",
                    );
                    if let Some(last) = self.work.diagnostics.last_mut() {
                        last.field_path = Some(path);
                    }
                    return None;
                }
                let mut bytes = dtype.size_bytes();
                for e in extents {
                    let Some(b) = bytes.checked_mul(e) else {
                        let path = dep.path.clone();
                        self.fail(
                            codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW,
                            format!("the byte span of shape {path} overflows 64 bits"),
                            "reduce the shape",
                        );
                        if let Some(last) = self.work.diagnostics.last_mut() {
                            last.field_path = Some(path);
                        }
                        return None;
                    };
                    bytes = b;
                }
                Some(bytes)
            }
            ByteSpanNode::InputMax { input } => {
                let Some(p) = op
                    .ports
                    .iter()
                    .position(|p| p.name == *input && p.direction == PortDirection::Input)
                else {
                    return self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_INPUT_UNBOUNDED,
                        format!("`input_max_byte_span({input})` names no input of this operator"),
                        "name one of the operator's inputs",
                    );
                };
                let p = u32::try_from(p).unwrap_or(u32::MAX);
                let &[flow] = self.work.incoming(self.op, p) else {
                    let flows = self.work.incoming(self.op, p).len();
                    return self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_INPUT_UNBOUNDED,
                        format!(
                            "`input_max_byte_span({input})` needs exactly one concrete producer; the input has {flows}"
                        ),
                        "connect exactly one bounded producer, or use a literal bound",
                    );
                };
                let e = &self.work.graph.edges[flow as usize];
                let bound = self
                    .resolved
                    .get(self.work.port_index(e.from.0.0, e.from.1))
                    .and_then(|r| r.per_slot_bytes);
                match bound {
                    Some(b) => Some(b),
                    None => self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_INPUT_UNBOUNDED,
                        format!("the producer connected to `{input}` has no finite byte bound"),
                        "give the producer a runtime pool or literal bounds",
                    ),
                }
            }
            ByteSpanNode::Projected {
                id,
                implementation,
                reads,
                project,
            } => {
                if !is_versioned_id(id) {
                    return self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_PROJECTION_FAILED,
                        format!("projector id {id:?} does not end in `.vN`"),
                        "version the id, e.g. `com.example.Op.output-max-byte-span.v1`",
                    );
                }
                if let Some(prev) = self.projectors.insert(id, implementation)
                    && prev != *implementation
                {
                    return self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_PROJECTOR_ID_CONFLICT,
                        format!("projector id {id:?} names two different projectors: `{prev}` and `{implementation}`"),
                        "give each projector its own id; bump `.vN` when a formula changes",
                    );
                }
                let mut ok = true;
                for r in reads {
                    ok &= readable(self.work, op, self.port, r);
                }
                if !ok {
                    return None;
                }
                match project(op.params.as_ref())? {
                    Ok(v) => Some(v),
                    Err(e) if e.code() == ErrorCode::ArithmeticOverflow => self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW,
                        format!("projector {id:?} reported ArithmeticOverflow"),
                        "reduce the parameters the projector reads",
                    ),
                    Err(e) => self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_PROJECTION_FAILED,
                        format!("projector {id:?} failed with {}", e.code().name()),
                        "check the parameters the projector reads",
                    ),
                }
            }
            ByteSpanNode::Binary { op: bop, lhs, rhs } => {
                let a = self.eval(lhs);
                let b = self.eval(rhs);
                let (a, b) = (a?, b?);
                let r = match bop {
                    ByteSpanOp::Multiply => a.checked_mul(b),
                    ByteSpanOp::Maximum => Some(a.max(b)),
                    ByteSpanOp::CeilingDivide | ByteSpanOp::AlignTo if b == 0 => {
                        return self.fail(
                            codes::PHYSICAL_TENSOR_BYTE_SPAN_ZERO,
                            format!("`{}` by zero", bop.name()),
                            "divide or align by a positive byte span",
                        );
                    }
                    ByteSpanOp::CeilingDivide => Some(a.div_ceil(b)),
                    ByteSpanOp::AlignTo => a.div_ceil(b).checked_mul(b),
                };
                match r {
                    Some(v) => Some(v),
                    None => self.fail(
                        codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW,
                        format!("`{}` overflows 64 bits", bop.name()),
                        "reduce the operands",
                    ),
                }
            }
        }
    }
}

/// Whether a projector id ends in `.v<digits>`.
pub(crate) fn is_versioned_id(id: &str) -> bool {
    id.rsplit_once(".v").is_some_and(|(head, n)| {
        !head.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Resolves every tensor output's memory kind and per-slot bytes, in topological order
/// (an `input_max_byte_span` reads its producer's result), and checks every tensor
/// edge's layout against the consumer's exact requirements.
pub(crate) fn resolve_tensors(work: &mut Work<'_>) -> Resolved {
    // (The per-port table is made with the first resolved output: a graph without tensor
    // outputs keeps none.)
    let mut resolved = Resolved {
        at: Vec::new(),
        outputs: Vec::new(),
    };
    let mut projectors = BTreeMap::new();
    let graph = work.graph;
    for &o in &work.topo.clone() {
        // An operator without tensor ports has no tensor output: its facts are not read.
        if !graph.tensor_operators[o as usize] {
            continue;
        }
        let op = &graph.operators[o as usize];
        let ports = work.graph.port_facts_of(o as usize).len();
        for p in 0..ports {
            let p = u32::try_from(p).unwrap_or(u32::MAX);
            // Only tensor outputs: their ports are read, no other.
            if !work.port(o, p).tensor_output {
                continue;
            }
            let port = &op.ports[p as usize];
            let PortDecl::TensorOutput(decl) = &port.decl else {
                continue;
            };
            let (memory_kind, memory_kind_source) = resolve_kind(work, op, port.name, decl);
            let mut out = ResolvedOutput {
                storage: decl.storage,
                memory_kind,
                memory_kind_source,
                dtype: decl.representation.dtype,
                rank: decl.representation.rank,
                max_rank: decl.max_rank.or(decl.bounds.map(|b| b.max_rank)).unwrap_or(
                    decl.representation
                        .rank
                        .unwrap_or(crate::spec::MAX_TENSOR_RANK),
                ),
                per_slot_bytes: None,
                expression: String::new(),
                dependencies: Vec::new(),
                max_loans: decl.max_loans.max(1),
            };
            // `#[operator]` refuses it on the user's token; a hand-written port meets it
            // here.
            if decl.max_loans == 0 {
                work.diagnostics.push(
                    Diagnostic::error(
                        codes::POOL_LOANS_ZERO,
                        "`max_loans = 0` would never let the producer allocate; it is at least 1",
                    )
                    .operator(&op.name)
                    .port(port.name),
                );
            }
            if let Some(expr) = &decl.byte_span {
                let mut shape = Shape {
                    nodes: 0,
                    depth: 0,
                    deps: Vec::new(),
                };
                measure(expr, 1, &mut shape);
                shape.deps.sort();
                shape.deps.dedup();
                out.expression = render(expr);
                out.dependencies.clone_from(&shape.deps);
                if shape.nodes > MAX_EXPRESSION_NODES
                    || shape.depth > MAX_EXPRESSION_DEPTH
                    || shape.deps.len() > MAX_EXPRESSION_DEPENDENCIES
                {
                    work.diagnostics.push(
                        Diagnostic::error(
                            codes::PHYSICAL_TENSOR_BYTE_SPAN_LIMIT,
                            format!(
                                "the byte-span expression has {} nodes, depth {} and {} dependencies; at most {MAX_EXPRESSION_NODES} nodes, depth {MAX_EXPRESSION_DEPTH} and {MAX_EXPRESSION_DEPENDENCIES} dependencies are admitted",
                                shape.nodes, shape.depth, shape.deps.len()
                            ),
                        )
                        .operator(&op.name)
                        .port(port.name)
                        .hint("simplify the expression, or move irreducible logic into a `#[byte_span_projector]`"),
                    );
                } else {
                    let mut ev = Eval {
                        work,
                        op: o,
                        port: port.name,
                        decl,
                        resolved: &resolved,
                        projectors: &mut projectors,
                    };
                    let before = ev.work.diagnostics.len();
                    match ev.eval(expr) {
                        Some(0) => {
                            ev.fail(
                                codes::PHYSICAL_TENSOR_BYTE_SPAN_ZERO,
                                "the byte-span expression evaluated to 0, which admits no allocation",
                                "check the parameters the expression reads",
                            );
                        }
                        Some(v) if usize::try_from(v).is_err() => {
                            ev.fail(
                                codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW,
                                "the byte span does not fit this host's address space",
                                "reduce the byte span",
                            );
                        }
                        v => out.per_slot_bytes = v,
                    }
                    // What a zero or an overflow came from: the one parameter read (the
                    // diagnostic's field), or every dependency, named in the message.
                    for d in &mut work.diagnostics[before..] {
                        if !matches!(
                            d.code,
                            codes::PHYSICAL_TENSOR_BYTE_SPAN_ZERO
                                | codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW
                        ) || d.field_path.is_some()
                        {
                            continue;
                        }
                        match out.dependencies.as_slice() {
                            [] => {}
                            [one] if !one.starts_with("input:") => {
                                d.field_path = Some(one.clone());
                            }
                            all => {
                                d.message = format!("{} (it reads {})", d.message, all.join(", "));
                            }
                        }
                    }
                }
            } else if let Some(b) = decl.bounds {
                out.expression = format!("tensor_bounds({})", b.max_byte_span);
                out.per_slot_bytes = Some(b.max_byte_span);
                if b.max_byte_span == 0 || b.max_rank == 0 {
                    work.warnings.push(
                        Diagnostic::warning(
                            codes::PHYSICAL_TENSOR_ZERO_BOUNDS,
                            "literal bounds of zero reject every allocation",
                        )
                        .operator(&op.name)
                        .port(port.name),
                    );
                }
            } else if decl.storage == TensorOutputStorage::RuntimePool {
                work.diagnostics.push(
                    Diagnostic::error(
                        codes::PHYSICAL_TENSOR_UNBOUNDED_POOL,
                        "a runtime-pool output needs a finite slot bound",
                    )
                    .operator(&op.name)
                    .port(port.name)
                    .hint("give `bounds = N` or a `byte_span = ...` expression"),
                );
            }
            // Slots are `per_slot_bytes` apart: a bound that is no multiple of the declared
            // dtype's size left every other slot misaligned for it (`f32` slots 1002 bytes
            // apart: a kernel's typed loads fault, CUDA_ERROR_MISALIGNED_ADDRESS). It is
            // rounded up to one, as the derivation shows; no tensor of the dtype fits the
            // bound but not the rounded one, but for the elements the padding adds.
            if let (Some(bytes), Some(dtype)) = (out.per_slot_bytes, out.dtype) {
                let size = dtype.size_bytes();
                if size > 1 && bytes % size != 0 {
                    if let Some(aligned) = bytes.checked_next_multiple_of(size) {
                        out.per_slot_bytes = Some(aligned);
                        out.expression = format!("align({}, {size})", out.expression);
                    } else {
                        work.diagnostics.push(
                            Diagnostic::error(
                                codes::PHYSICAL_TENSOR_BYTE_SPAN_OVERFLOW,
                                format!("the slot bound {bytes}, aligned to {dtype}, overflows"),
                            )
                            .operator(&op.name)
                            .port(port.name),
                        );
                        out.per_slot_bytes = None;
                    }
                }
            }
            // A derivation that failed already reported why; don't report it twice.
            if decl.storage == TensorOutputStorage::RuntimePool
                && out.memory_kind.is_none()
                && decl.memory_kind.is_none()
            {
                work.diagnostics.push(
                    Diagnostic::error(
                        codes::PHYSICAL_TENSOR_MEMORY_KIND_MISSING,
                        "a runtime-pool output needs a memory kind",
                    )
                    .operator(&op.name)
                    .port(port.name)
                    .hint("declare `memory = host | pinned | cuda_device | cuda_managed | opencl_device | device`, or derive it with `memory_kind = parameter_memory_kind(...)`"),
                );
            }
            let at = work.port_index(o, p);
            if resolved.at.is_empty() {
                resolved.at = vec![u32::MAX; work.graph.port_facts.len()];
            }
            resolved.at[at] = u32::try_from(resolved.outputs.len()).unwrap_or(u32::MAX);
            resolved.outputs.push((o, p, out));
        }
    }
    check_layouts(work, &resolved);
    resolved
}

fn resolve_kind(
    work: &mut Work<'_>,
    op: &OperatorNode,
    port: &str,
    decl: &TensorOutputDecl,
) -> (Option<MemoryKind>, String) {
    let Some(derivation) = &decl.memory_kind else {
        return (decl.representation.memory_kind, "declared".to_owned());
    };
    let dep = &derivation.dependency;
    if !readable(work, op, port, dep) {
        return (None, dep.path.clone());
    }
    let domain = dep.descriptor.enum_values.clone();
    if derivation.exact {
        match &domain {
            Some(d) if !d.is_empty() => {}
            _ => {
                work.diagnostics.push(
                    Diagnostic::error(
                        codes::PHYSICAL_TENSOR_MEMORY_KIND_DOMAIN,
                        "a direct `MemoryKind` parameter must declare a non-empty `enum_values(...)` domain",
                    )
                    .operator(&op.name)
                    .port(port)
                    .field(&dep.path)
                    .hint("list exactly the kinds the operator supports: `#[param(enum_values(Host, PinnedHost))]`"),
                );
                return (None, dep.path.clone());
            }
        }
    }
    if !matches!(dep.descriptor.ty, TypeDescriptor::Enum(_)) {
        work.diagnostics.push(
            Diagnostic::error(
                codes::PHYSICAL_TENSOR_MEMORY_KIND_DOMAIN,
                "the memory-kind parameter is not an enum",
            )
            .operator(&op.name)
            .port(port)
            .field(&dep.path),
        );
        return (None, dep.path.clone());
    }
    match (derivation.resolve)(op.params.as_ref()) {
        Some((_, kind)) => (Some(kind), format!("parameter {}", dep.path)),
        None => (None, dep.path.clone()),
    }
}

fn check_layouts(work: &mut Work<'_>, resolved: &Resolved) {
    let graph = work.graph;
    // The flows out of resolved outputs, in flow order (no other flow has a producer to
    // check): found from the outputs, not by a sweep over every flow.
    // Each flow carries its producer's output.
    let mut flows: Vec<(u32, &ResolvedOutput)> = resolved
        .resolved_order()
        .flat_map(|(o, p, out)| work.outgoing(o, p).iter().map(move |&e| (e, out)))
        .collect();
    flows.sort_unstable_by_key(|&(e, _)| e);
    for (e, out) in flows {
        let e = &graph.edges[e as usize];
        let (fo, fp) = (e.from.0.0, e.from.1);
        let (to, tp) = (e.to.0.0, e.to.1);
        let consumer = &graph.operators[to as usize];
        let PortDecl::TensorInput(req) = &consumer.ports[tp as usize].decl else {
            continue;
        };
        let mut mismatches = Vec::new();
        if let (Some(want), Some(have)) = (req.memory_kind, out.memory_kind)
            && !super::placement::kinds_compatible(want, have)
        {
            mismatches.push(format!("memory kind {have} where {want} is required"));
        }
        if let (Some(want), Some(have)) = (req.dtype, out.dtype)
            && want != have
        {
            mismatches.push(format!("dtype {have} where {want} is required"));
        }
        if let (Some(want), Some(have)) = (req.rank, out.rank)
            && want != have
        {
            mismatches.push(format!("rank {have} where rank {want} is required"));
        }
        if !mismatches.is_empty() {
            let producer = format!(
                "{}.{}",
                graph.operators[fo as usize].name,
                graph.operators[fo as usize].ports[fp as usize].name
            );
            work.diagnostics.push(
                Diagnostic::error(
                    codes::PHYSICAL_TENSOR_LAYOUT_MISMATCH,
                    format!("{producer} produces {}", mismatches.join(", ")),
                )
                .operator(&consumer.name)
                .port(consumer.ports[tp as usize].name)
                .hint("holo never inserts a hidden copy: change the producer's declaration or parameter, or add an explicit conversion operator"),
            );
        }
    }
}

/// Reports a device pool whose slots every frame would register on more distinct consumer
/// streams than a slot has release positions (`capacity`): the pool's own flows and every
/// flow after a forwarding output, less the fused ones (which register nothing), and
/// `importer`, the stream of an imported topic's input. Such a graph could never emit:
/// its first emit would be refused (`ResourceExhausted`) at run time.
pub(crate) fn check_release_streams(
    work: &mut Work<'_>,
    edges: &[EdgeRecord],
    flows: impl Iterator<Item = u32>,
    importer: Option<u32>,
    capacity: u32,
    (op_name, port): (&str, &str),
) {
    let mut streams: Vec<u32> = flows
        .filter_map(|e| {
            let c = &edges[e as usize].contract;
            c.consumer_stream.filter(|_| !c.fused)
        })
        .chain(importer)
        .collect();
    streams.sort_unstable();
    streams.dedup();
    if streams.len() > capacity as usize {
        work.diagnostics.push(
            Diagnostic::error(
                codes::POOL_RELEASE_STREAMS_EXCEEDED,
                format!(
                    "each tensor of this pool reaches consumers on {} distinct device streams ({}), and a slot registers at most {capacity} release streams: every emit would be refused",
                    streams.len(),
                    streams
                        .iter()
                        .map(|s| format!("stream {s}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .operator(op_name)
            .port(port)
            .hint(format!(
                "raise CompileOptions::max_fanout_release_streams to {} or more (at most {MAX_FANOUT_RELEASE_STREAMS}), or put consumers in fewer partitions or on a shared stream",
                streams.len()
            )),
        );
    }
}

/// Allocations, derivations, capacity dependencies, provider plans and pool floors.
pub(crate) type PoolRecords = (
    Vec<TensorAllocationPlanRecord>,
    Vec<TensorByteSpanDerivationRecord>,
    Vec<PoolCapacityDependencyRecord>,
    Vec<ProviderAllocationPlanRecord>,
    Vec<HardFloorContributorRecord>,
);

/// Sizes every runtime pool: slot counts term by term, aggregate bytes, and the
/// byte-span derivation records.
pub(crate) fn allocations(
    work: &mut Work<'_>,
    resolved: &Resolved,
    placed: &Placed,
    edges: &[EdgeRecord],
    sized: &super::queues::Sized,
    forwards: &Adjacency,
) -> PoolRecords {
    let mut marks = vec![0u32; edges.len()];
    let mut stamp = 0u32;
    let mut allocations = Vec::new();
    let mut derivations = Vec::new();
    let mut dependencies = Vec::new();
    let mut providers = Vec::new();
    let mut floors = Vec::new();
    for (o, p, out) in resolved.iter() {
        if out.storage != TensorOutputStorage::RuntimePool {
            continue;
        }
        let (Some(kind), Some(bytes)) = (out.memory_kind, out.per_slot_bytes) else {
            continue;
        };
        // A neutral `device` output is its device API's kind from here on.
        let kind = placed.concrete_kind(o, p, kind);
        let op_name = work.op_name(o).to_owned();
        let port = work.port_name(o, p);
        let out_edges: Vec<&EdgeRecord> = work
            .outgoing(o, p)
            .iter()
            .map(|&i| &edges[i as usize])
            .collect();
        // Each consumer retains max(1, history): the entry it computes on is one of its
        // history entries (alternatives), and a reused last sample replaces the current
        // one (an exclusive scenario), so none of them is counted twice.
        let mut holds = 0u32;
        let mut history = 0u32;
        let pool_id = format!("{}.{}", work.op_name(o), work.port_name(o, p));
        let mut items: Vec<super::forwards::FloorItem> = Vec::new();
        stamp = stamp.wrapping_add(1).max(1);
        let mut forwarding_outputs = vec![(o, p)];
        let forwarded = forwarded_flows(
            work,
            forwards,
            (o, p),
            &mut marks,
            stamp,
            &mut forwarding_outputs,
        );
        let reuses = |e: u32| {
            let ge = &work.graph.edges[e as usize];
            work.graph.operators[ge.to.0.0 as usize].ports[ge.to.1 as usize]
                .temporal
                .missing
                == MissingPolicy::ReuseLast
        };
        let any_reuse =
            out_edges.iter().any(|e| reuses(e.id)) || forwarded.iter().any(|&e| reuses(e));
        let scenarios: &[&str] = if any_reuse {
            &["data_present", "data_missing"]
        } else {
            &["data_present"]
        };
        for e in &out_edges {
            let ge = &work.graph.edges[e.id as usize];
            let t = &work.graph.operators[ge.to.0.0 as usize].ports[ge.to.1 as usize].temporal;
            if t.history > 0 {
                history = history.saturating_add(t.history);
            } else {
                holds = holds.saturating_add(1);
            }
            for s in scenarios {
                let g = format!("consumer_retention:e{}", e.id);
                items.push((
                    (*s).to_owned(),
                    format!("queue:e{}", e.id),
                    "queue_entries".to_owned(),
                    e.queue_depth,
                ));
                let current = if *s == "data_missing" && t.missing == MissingPolicy::ReuseLast {
                    "reuse_last"
                } else {
                    "consumer_hold"
                };
                items.push(((*s).to_owned(), g.clone(), current.to_owned(), 1));
                if t.history > 0 {
                    items.push(((*s).to_owned(), g, "history".to_owned(), t.history));
                }
            }
        }
        // After a forwarding output: each flow's queue, and its consumer's retention.
        let (through, forwarded_retention) =
            forwarded_terms(work, edges, &forwarded, scenarios, &mut items);
        // The subscribers of the topics this output, or a forwarding one, exports.
        let (subscribed, subscribers) =
            super::topics::subscriber_terms(work, forwarding_outputs, scenarios, &mut items);
        let forwarded_sum = through
            .iter()
            .try_fold(0u32, |acc, t| acc.checked_add(t.entries));
        let (Some(forwarded_sum), Some(forwarded_retention), Some(subscribers)) =
            (forwarded_sum, forwarded_retention, subscribers)
        else {
            work.diagnostics.push(
                Diagnostic::error(
                    codes::POOL_CAPACITY_OVERFLOW,
                    format!(
                        "the slot count overflows: the pool's tensors are forwarded over {} flows (or to topic subscribers) whose queues and holds exceed 2^32 entries",
                        forwarded.len()
                    ),
                )
                .operator(&op_name)
                .port(port)
                .hint("lower the queue depths or histories after the forwarding outputs"),
            );
            continue;
        };
        for s in scenarios {
            items.push((
                (*s).to_owned(),
                "producer_loans".to_owned(),
                "producer_loans".to_owned(),
                out.max_loans,
            ));
            items.push((
                (*s).to_owned(),
                "retirement".to_owned(),
                "retirement".to_owned(),
                1,
            ));
        }
        let terms = SlotCountTerms {
            queue_entries: out_edges
                .iter()
                .map(|e| e.queue_depth)
                .fold(0u32, u32::saturating_add),
            consumer_holds: holds,
            producer_loans: out.max_loans,
            retirement: 1,
            history,
            forwarded: forwarded_sum,
            forwarded_through: through,
            subscribers,
            subscriber_terms: subscribed,
        };
        let composed = composed(&items);
        floors.extend(floor_records(&pool_id, items));
        let Some(slot_count) = terms.total().filter(|t| composed == Some(*t)) else {
            work.diagnostics.push(
                Diagnostic::error(codes::POOL_CAPACITY_OVERFLOW, "the slot count overflows")
                    .operator(&op_name)
                    .port(port),
            );
            continue;
        };
        let Some(aggregate) = bytes
            .checked_mul(u64::from(slot_count))
            .filter(|a| usize::try_from(*a).is_ok())
        else {
            work.diagnostics.push(
                Diagnostic::error(
                    codes::POOL_CAPACITY_OVERFLOW,
                    format!(
                        "{slot_count} slots × {bytes} bytes overflows this host's address space"
                    ),
                )
                .operator(&op_name)
                .port(port),
            );
            continue;
        };
        let pool = format!("{op_name}.{port}");
        let device = placed.output_device.get(&(o, p)).copied();
        let release_stream_capacity = super::topics::release_capacity(work, kind, device);
        if release_stream_capacity > 0 {
            check_release_streams(
                work,
                edges,
                out_edges
                    .iter()
                    .map(|e| e.id)
                    .chain(forwarded.iter().copied()),
                None,
                release_stream_capacity,
                (&op_name, port),
            );
        }
        allocations.push(TensorAllocationPlanRecord {
            pool: pool.clone(),
            operator: o,
            port: port.to_owned(),
            port_index: p,
            memory_kind: kind,
            memory_kind_source: out.memory_kind_source.clone(),
            device,
            dtype: out.dtype,
            rank: out.rank,
            max_rank: out.max_rank,
            per_slot_bytes: bytes,
            slot_count,
            slot_terms: terms.clone(),
            aggregate_bytes: aggregate,
            release_stream_capacity,
            topic: None,
        });
        let retention = holds.saturating_add(history);
        let admitted_queue = out_edges
            .iter()
            .map(|e| e.id)
            .chain(forwarded.iter().copied())
            .try_fold(0u32, |acc, e| {
                sized.admitted_depth[e as usize].and_then(|d| acc.checked_add(d))
            });
        let admitted_entries = admitted_queue.and_then(|q| {
            q.checked_add(retention)?
                .checked_add(forwarded_retention)?
                .checked_add(subscribers)?
                .checked_add(out.max_loans)?
                .checked_add(1)
        });
        dependencies.push(PoolCapacityDependencyRecord {
            pool: pool.clone(),
            per_slot_bytes: bytes,
            edges: out_edges.iter().map(|e| e.id).collect(),
            active_queue_entries: terms.queue_entries,
            consumer_retention: retention,
            producer_loans: out.max_loans,
            retirement: 1,
            forwarded_edges: forwarded,
            forwarded_entries: forwarded_sum,
            subscriber_entries: subscribers,
            active_entries: slot_count,
            active_logical_payload_bytes: aggregate,
            admitted_queue_entries: admitted_queue,
            admitted_entries,
            admitted_logical_payload_bytes: admitted_entries
                .and_then(|n| bytes.checked_mul(u64::from(n))),
        });
        providers.push(ProviderAllocationPlanRecord {
            pool: pool.clone(),
            provider: kind.wire_name().to_owned(),
            logical_entries: slot_count,
            logical_payload_bytes: aggregate,
            physical_reserved_bytes: None,
        });
        derivations.push(TensorByteSpanDerivationRecord {
            pool,
            expression: out.expression.clone(),
            dependencies: out.dependencies.clone(),
            per_slot_bytes: bytes,
            slot_count: Some(slot_count),
            aggregate_bytes: Some(aggregate),
        });
    }
    (allocations, derivations, dependencies, providers, floors)
}
