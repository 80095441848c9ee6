//! One joined explanation of an edge: the immutable plan recipe with a session's rate
//! generation. It imports, mutates and resizes nothing.

use std::fmt::Write as _;

use serde::Serialize;

use super::rates::{
    AccumulationHorizonRecord, HardFloorContributorRecord, PoolCapacityDependencyRecord,
    PortRateRecord, ProviderAllocationPlanRecord, QueueSizingRecipeRecord,
};
use super::{EdgeRecord, ExecutionPlan};
use crate::graph::EdgeId;
use crate::session::{GenerationPortRate, RateGenerationSnapshot};
use crate::{Error, ErrorCode, Result};

/// The schema marker of the canonical JSON inspection.
pub const RATE_QUEUE_INSPECTION_SCHEMA: &str = "holo.rate-queue-inspection.v1";

/// How [`render_rate_queue_inspection`] renders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateQueueInspectionFormat {
    /// Line-oriented, review-friendly text.
    HumanText,
    /// Deterministic machine-readable JSON (starts with the schema marker).
    CanonicalJson,
}

#[derive(Serialize)]
struct Joined<'a> {
    schema: &'static str,
    plan_fingerprint: &'a str,
    rate_generation: u64,
    generation_status: &'static str,
    edge: &'a EdgeRecord,
    producer_rate: Option<&'a PortRateRecord>,
    consumer_rate: Option<&'a PortRateRecord>,
    generation_producer_rate_hz: Option<&'a str>,
    generation_consumer_rate_hz: Option<&'a str>,
    accumulation_horizon: Option<&'a AccumulationHorizonRecord>,
    hard_floor_contributors: Vec<&'a HardFloorContributorRecord>,
    queue_sizing_recipe: &'a QueueSizingRecipeRecord,
    pool_capacity_dependency: Option<&'a PoolCapacityDependencyRecord>,
    provider_allocation_plan: Option<&'a ProviderAllocationPlanRecord>,
    /// Only where automatic sizing chose the depth.
    paste_ready_connection_options: Option<String>,
}

/// Renders one edge's rate and queue explanation: the plan's recipe joined with rate
/// generation `generation` of `snapshot` (published or latest rejected). Fails with
/// `InvalidArgument` when the edge is not in the plan or the generation is not in the
/// snapshot.
///
/// A paste-ready `ConnectionOptions::default().with_queue_depth(N)` is printed only when
/// automatic rate-and-contract sizing chose the depth; an explicit depth is authoritative
/// and gets no replacement pin. Logical payload capacity is reported separately from the
/// provider's physical reservation, which stays `null` / "unavailable" where not known.
pub fn render_rate_queue_inspection(
    plan: &ExecutionPlan,
    snapshot: &RateGenerationSnapshot,
    generation: u64,
    edge: EdgeId,
    format: RateQueueInspectionFormat,
) -> Result<String> {
    let e = plan.edges().get(edge.index()).ok_or_else(|| {
        Error::new(
            ErrorCode::InvalidArgument,
            format!("edge e{} is not in the plan", edge.index()),
        )
    })?;
    let (status, ports) = snapshot.ports_of(generation).ok_or_else(|| {
        Error::new(
            ErrorCode::InvalidArgument,
            format!("rate generation {generation} is neither the published generation nor the latest rejected candidate of the snapshot"),
        )
    })?;
    let recipe = plan
        .queue_sizing_recipe(e.id)
        .ok_or_else(|| Error::new(ErrorCode::Internal, format!("edge e{} has no recipe", e.id)))?;
    let op_name = |id: u32| plan.operators()[id as usize].name.as_str();
    let port_rate = |op: u32, port: &str| {
        plan.port_rates()
            .iter()
            .find(|r| r.operator == op && r.port == port)
    };
    let gen_rate = |op: u32, port: &str| -> Option<&str> {
        ports
            .iter()
            .find(|p: &&GenerationPortRate| p.operator == op_name(op) && p.port == port)
            .and_then(|p| p.active_hz.as_deref())
    };
    let pool = format!("{}.{}", op_name(e.from_operator), e.from_port);
    let joined = Joined {
        schema: RATE_QUEUE_INSPECTION_SCHEMA,
        plan_fingerprint: plan.fingerprint(),
        rate_generation: generation,
        generation_status: status,
        edge: e,
        producer_rate: port_rate(e.from_operator, &e.from_port),
        consumer_rate: port_rate(e.to_operator, &e.to_port),
        generation_producer_rate_hz: gen_rate(e.from_operator, &e.from_port),
        generation_consumer_rate_hz: gen_rate(e.to_operator, &e.to_port),
        accumulation_horizon: plan.accumulation_horizons().iter().find(|h| h.edge == e.id),
        hard_floor_contributors: plan
            .hard_floor_contributors()
            .iter()
            .filter(|c| c.edge == Some(e.id))
            .collect(),
        queue_sizing_recipe: recipe,
        pool_capacity_dependency: plan.pool_capacity_dependency(&pool),
        provider_allocation_plan: plan
            .provider_allocation_plans()
            .iter()
            .find(|p| p.pool == pool),
        paste_ready_connection_options: (recipe.depth_source == "automatic").then(|| {
            format!(
                "ConnectionOptions::default().with_queue_depth({})",
                recipe.queue_depth
            )
        }),
    };
    match format {
        RateQueueInspectionFormat::CanonicalJson => serde_json::to_string_pretty(&joined)
            .map_err(|err| Error::new(ErrorCode::Internal, err.to_string())),
        RateQueueInspectionFormat::HumanText => Ok(human(plan, &joined)),
    }
}

fn or_na(v: Option<&str>) -> &str {
    v.unwrap_or("unavailable")
}

fn human(plan: &ExecutionPlan, joined: &Joined<'_>) -> String {
    let j = joined;
    let edge = j.edge;
    let r = j.queue_sizing_recipe;
    let name = |id: u32| plan.operators()[id as usize].name.as_str();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "edge e{}: {}.{} → {}.{} (plan {}, rate generation {} {})",
        edge.id,
        name(edge.from_operator),
        edge.from_port,
        name(edge.to_operator),
        edge.to_port,
        j.plan_fingerprint,
        j.rate_generation,
        j.generation_status
    );
    let _ = writeln!(
        out,
        "  rate: {} Hz ({}); generation: producer {} Hz, consumer {} Hz; admitted max {} Hz",
        or_na(r.rate_hz.as_deref()),
        r.rate_source,
        or_na(j.generation_producer_rate_hz),
        or_na(j.generation_consumer_rate_hz),
        or_na(r.admitted_max_hz.as_deref()),
    );
    if let Some(h) = j.accumulation_horizon {
        let _ = writeln!(
            out,
            "  horizon: {} s — {}",
            or_na(h.horizon_seconds.as_deref()),
            h.reason
        );
    }
    let floors: Vec<String> = j
        .hard_floor_contributors
        .iter()
        .map(|c| format!("{} {}", c.contributor, c.entries))
        .collect();
    let _ = writeln!(
        out,
        "  hard floor: {} = max({})",
        r.hard_floor,
        floors.join(", ")
    );
    match (r.nominal_arrivals, r.recommendation) {
        (Some(a), Some(rec)) => {
            let _ = writeln!(
                out,
                "  nominal arrivals: ⌈{} × {}⌉ = {a}; recommendation: ⌈{a} × {}⌉ = {rec}",
                or_na(r.rate_hz.as_deref()),
                or_na(r.horizon_seconds.as_deref()),
                r.headroom_ratio
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "  no nominal recommendation (rate or horizon not proven)"
            );
        }
    }
    let _ = writeln!(
        out,
        "  depth: {} ({}); admitted ceiling: {}",
        r.queue_depth,
        r.depth_source,
        r.admitted_ceiling
            .map_or("unavailable".to_owned(), |c| c.to_string())
    );
    if let Some(d) = j.pool_capacity_dependency {
        let _ = writeln!(
            out,
            "  pool {}: active {} entries × {} B = {} B logical payload; admitted {}",
            d.pool,
            d.active_entries,
            d.per_slot_bytes,
            d.active_logical_payload_bytes,
            match (d.admitted_entries, d.admitted_logical_payload_bytes) {
                (Some(n), Some(b)) => format!("{n} entries = {b} B logical payload"),
                _ => "unavailable".to_owned(),
            }
        );
    }
    if let Some(p) = j.provider_allocation_plan {
        let _ = writeln!(
            out,
            "  provider {}: {} logical entries; physical reservation {}",
            p.provider,
            p.logical_entries,
            p.physical_reserved_bytes
                .map_or("unavailable".to_owned(), |b| format!("{b} B"))
        );
    }
    match &j.paste_ready_connection_options {
        Some(pin) => {
            let _ = writeln!(out, "  pin this depth: {pin}");
        }
        None => {
            let _ = writeln!(
                out,
                "  the depth is not automatic ({}): no replacement pin",
                r.depth_source
            );
        }
    }
    out
}
