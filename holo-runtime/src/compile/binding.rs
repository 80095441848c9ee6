//! What a session binds from: every operator's port records and every edge's contract,
//! decided here once so that `RunSession::start` reads them instead of the graph's port
//! declarations (issue 12: the plan drives the run).

use super::Work;
use super::placement::Placed;
use crate::MemoryKind;
use crate::graph::{PortDecl, PortFacts};
use crate::plan::{
    EdgeContractRecord, EdgeRecord, InputBindingRecord, PortRecord, TensorAllocationPlanRecord,
};
use crate::spec::{PortDirection, TensorInputSpec, TensorOutputStorage};

/// An operator's ports in declaration order (its facts in the graph's table), with each
/// input's binding.
pub(crate) fn port_records(ports: &[PortFacts]) -> Vec<PortRecord> {
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| PortRecord {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            name: p.name.into(),
            direction: p.direction,
            optional: p.optional,
            input: (p.direction == PortDirection::Input).then_some(InputBindingRecord {
                mode: p.mode,
                missing: p.missing,
                history: p.history,
            }),
            forwards: p.forwards.map(str::to_owned),
        })
        .collect()
}

/// Flow `i`'s contract, but for its host wait (which needs every pool: see
/// [`host_waits`]). `to` is the consumer, `fp` / `tp` the ports.
pub(crate) fn edge_contract(
    work: &Work<'_>,
    placed: &Placed,
    i: usize,
    (fo, fp): (u32, u32),
    (to, tp): (u32, u32),
) -> EdgeContractRecord {
    // A pool output's own tensors were checked against its consumers' requirements here; a
    // pass-through output's values, and the received tensors an output forwards (of
    // another pool, whatever its own declares), are checked on emit. The graph's ports are
    // read only for a tensor output feeding a tensor input: every other edge's facts
    // answer, and reading two 464-byte ports per edge cost a cache miss each once the
    // graph outgrew the cache (BENCHMARKS.md, thirty-eighth session).
    let emit_check = if work.port(fo, fp).tensor_output && work.port(to, tp).tensor_input() {
        let ops = &work.graph.operators;
        match (
            &ops[fo as usize].ports[fp as usize].decl,
            &ops[to as usize].ports[tp as usize].decl,
        ) {
            (PortDecl::TensorOutput(d), PortDecl::TensorInput(req))
                if (d.storage == TensorOutputStorage::PassThrough || d.forwards.is_some())
                    && *req != TensorInputSpec::default() =>
            {
                Some((*req).into())
            }
            _ => None,
        }
    } else {
        None
    };
    EdgeContractRecord {
        consumer_stream: placed.stream_of[to as usize],
        fused: placed.fusion[i].is_some(),
        host_wait: false,
        emit_check,
    }
}

/// Sets every edge's host wait: its consumer has no stream, the plan needs a device (it
/// has compute streams or a pool that is not host memory), and its producer's output is
/// not a host-memory pool (never stream-written).
pub(crate) fn host_waits(
    edges: &mut [EdgeRecord],
    allocations: &[TensorAllocationPlanRecord],
    placed: &Placed,
) {
    if !crate::plan::needs_device(!placed.streams.is_empty(), allocations) {
        return;
    }
    let host_pools: std::collections::HashSet<(u32, u32)> = allocations
        .iter()
        .filter(|a| a.memory_kind == MemoryKind::Host)
        .map(|a| (a.operator, a.port_index))
        .collect();
    for e in edges {
        e.contract.host_wait = e.contract.consumer_stream.is_none()
            && !host_pools.contains(&(e.from_operator, e.from_port_index));
    }
}
