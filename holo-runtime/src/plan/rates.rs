//! Rate and queue-sizing records: the cold recipe that explains every queue depth and
//! every pool's logical entry count (the seed's "Size queue entries from nominal rates").
//!
//! Exact rationals are written as strings (`"60"`, `"1/60"`), so the canonical JSON is
//! exact and byte-identical run to run.

use serde::Serialize;

/// The declared and resolved rate of one port.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortRateRecord {
    /// The operator's index.
    pub operator: u32,
    /// The operator's name (shared by the operator's records: one allocation).
    pub operator_name: std::sync::Arc<str>,
    /// The port name.
    pub port: std::borrow::Cow<'static, str>,
    /// `input` or `output`.
    pub direction: std::borrow::Cow<'static, str>,
    /// Where the rate comes from: `nominal_rate`, `follows`, `upstream`,
    /// `expected_rate` (the weaker fallback: the upstream output positively declares no
    /// rate), `unresolved` (the upstream declares a rate that could not be resolved) or
    /// `undeclared`.
    pub source: std::borrow::Cow<'static, str>,
    /// The active rate in hertz (exact), when resolved.
    pub active_hz: Option<String>,
    /// The maximum nominal rate the parameter domain admits, when bounded.
    pub admitted_max_hz: Option<String>,
    /// The parameter the rate reads, if any.
    pub parameter: Option<String>,
    /// `follows`: the input and ratio the output's rate derives from.
    pub follows: Option<String>,
    /// The input's declared `expected_rate`, if any (a comparison hint and fallback).
    pub expected_rate_hz: Option<String>,
    #[serde(skip)]
    pub(crate) port_index: u32,
    /// The exact figures the strings above show, out of line: most ports of a large graph
    /// declare no rate, and inline they were 160 of the record's 384 bytes (the plan's
    /// port records are a third of what a first compile faults in; BENCHMARKS.md,
    /// twenty-ninth session).
    #[serde(skip)]
    pub(crate) exact: Option<Box<ExactPortRate>>,
}

/// A port rate's exact figures, where it has any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExactPortRate {
    pub(crate) active: Option<num_rational::Ratio<i128>>,
    pub(crate) admitted: Option<num_rational::Ratio<i128>>,
    /// `follows`: the input and the exact ratio.
    pub(crate) follows: Option<(String, num_rational::Ratio<i128>)>,
}

impl PortRateRecord {
    /// The active rate, exact.
    pub(crate) fn active(&self) -> Option<num_rational::Ratio<i128>> {
        self.exact.as_ref().and_then(|e| e.active)
    }

    /// The maximum the parameter domain admits, exact.
    pub(crate) fn admitted(&self) -> Option<num_rational::Ratio<i128>> {
        self.exact.as_ref().and_then(|e| e.admitted)
    }

    /// `follows`: the input and the exact ratio.
    pub(crate) fn follows_exact(&self) -> Option<&(String, num_rational::Ratio<i128>)> {
        self.exact.as_ref().and_then(|e| e.follows.as_ref())
    }
}

/// Which trigger an operator's temporal contract declares (serialized as its stable name:
/// `all_inputs`, `any_input`, `on_arrival`, `clock`).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TriggerKind {
    /// Every required input has data (a source: every blocking output has room).
    AllInputs,
    /// Any connected input has data.
    AnyInput,
    /// An arrival at the record's `input`.
    OnArrival,
    /// A clock of the record's `clock_hz`.
    Clock,
}

impl TriggerKind {
    /// The stable name used in plans.
    pub const fn name(self) -> &'static str {
        match self {
            TriggerKind::AllInputs => "all_inputs",
            TriggerKind::AnyInput => "any_input",
            TriggerKind::OnArrival => "on_arrival",
            TriggerKind::Clock => "clock",
        }
    }
}

impl std::fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An operator's temporal-contract trigger as the session schedules it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct TriggerRecord {
    /// The operator.
    pub operator: u32,
    /// The trigger.
    pub trigger: TriggerKind,
    /// The input of an `on_arrival` trigger.
    pub input: Option<String>,
    /// That input's port index in its operator.
    pub input_port: Option<u32>,
    /// The clock rate in hertz (exact).
    pub clock_hz: Option<String>,
    /// The clock period in nanoseconds (rounded up).
    pub clock_period_ns: Option<u64>,
    /// The parameter the clock's rate reads (`clock(hz = param_ref!(P::fps))`), if any.
    pub clock_parameter: Option<String>,
    #[serde(skip)]
    pub(crate) clock_exact: Option<Box<num_rational::Ratio<i128>>>,
}

/// How long an input may accumulate entries between two activations of its consumer.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccumulationHorizonRecord {
    /// The edge.
    pub edge: u32,
    /// The consumer operator's name.
    pub operator: std::sync::Arc<str>,
    /// The consumer's input port.
    pub port: std::borrow::Cow<'static, str>,
    /// The consumer's trigger (`clock`, `on_arrival`, `any_input`, `all_inputs`).
    pub trigger: std::borrow::Cow<'static, str>,
    /// What the input sees (`queue`, `latest`, `window`).
    pub mode: std::borrow::Cow<'static, str>,
    /// The horizon in seconds (exact), when the contract proves one.
    pub horizon_seconds: Option<String>,
    /// Why the horizon is (or is not) finite.
    pub reason: std::borrow::Cow<'static, str>,
}

/// One contributor to a hard floor. The floor is the maximum over `scenario`s of the sum
/// over `group`s of the maximum over the contributors in the group: alternatives share a
/// group, distinct simultaneously live storage is in distinct groups, and mutually
/// exclusive scenarios are compared, never added.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct HardFloorContributorRecord {
    /// `edge` (a queue's floor) or `pool` (a provider's logical entries).
    pub scope: std::borrow::Cow<'static, str>,
    /// The edge, for an edge's floor.
    pub edge: Option<u32>,
    /// The pool, for a pool's floor.
    pub pool: Option<String>,
    /// The exclusive scenario.
    pub scenario: std::borrow::Cow<'static, str>,
    /// The group of alternatives within the scenario.
    pub group: std::borrow::Cow<'static, str>,
    /// `minimum_queue`, `producer_burst`, `selector_retention`, `window_retention`,
    /// `queue_entries`, `consumer_hold`, `history`, `reuse_last`, `producer_loans`,
    /// `retirement`, or after a forwarding output `forwarded_queue_entries`,
    /// `forwarded_consumer_hold`, `forwarded_history` or `forwarded_reuse_last` (in the
    /// groups `forwarded_queue:e<N>` and `forwarded_retention:e<N>`).
    pub contributor: std::borrow::Cow<'static, str>,
    /// Entries it needs.
    pub entries: u32,
}

/// How one edge's depth was chosen.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueSizingRecipeRecord {
    /// The edge.
    pub edge: u32,
    /// Where the edge's rate comes from (see [`PortRateRecord::source`]).
    pub rate_source: std::borrow::Cow<'static, str>,
    /// The resolved active rate in hertz.
    pub rate_hz: Option<String>,
    /// The accumulation horizon in seconds.
    pub horizon_seconds: Option<String>,
    /// The compile-wide headroom ratio.
    pub headroom_ratio: std::sync::Arc<str>,
    /// `⌈rate × horizon⌉`.
    pub nominal_arrivals: Option<u32>,
    /// `⌈nominal_arrivals × headroom⌉`.
    pub recommendation: Option<u32>,
    /// The semantic hard floor.
    pub hard_floor: u32,
    /// `max(hard_floor, recommendation)`, when automatic sizing applies.
    pub automatic_depth: Option<u32>,
    /// The maximum nominal rate the parameter domain admits.
    pub admitted_max_hz: Option<String>,
    /// `max(hard_floor, ⌈⌈max_rate × horizon⌉ × headroom⌉)`.
    pub admitted_ceiling: Option<u32>,
    /// The explicit depth, when one was given (exact authority).
    pub explicit_depth: Option<u32>,
    /// The final depth.
    pub queue_depth: u32,
    /// `automatic`, `explicit` or `default`.
    pub depth_source: std::borrow::Cow<'static, str>,
}

/// How a pool's logical entries depend on its edges' depths, for the active rate and
/// for the admitted domain: logical payload capacity = per-slot bytes × entries.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolCapacityDependencyRecord {
    /// The pool.
    pub pool: String,
    /// Bytes per slot (the byte-span result).
    pub per_slot_bytes: u64,
    /// The edges the output feeds.
    pub edges: Vec<u32>,
    /// Queue entries at the active rate (the sum of the edges' final depths).
    pub active_queue_entries: u32,
    /// Consumer retention: per consumer `max(1, history)`.
    pub consumer_retention: u32,
    /// Producer loans.
    pub producer_loans: u32,
    /// Retirement entries.
    pub retirement: u32,
    /// The flows after forwarding outputs that the pool's tensors may travel on
    /// ([`SlotCountTerms::forwarded_through`](crate::plan::SlotCountTerms::forwarded_through)).
    pub forwarded_edges: Vec<u32>,
    /// Entries on and after those flows at the active rate (their final depths and their
    /// consumers' retention).
    pub forwarded_entries: u32,
    /// Entries standalone subscribers of topics may hold (their queues and one held
    /// tensor each; [`SlotCountTerms::subscriber_terms`](crate::plan::SlotCountTerms::subscriber_terms)).
    pub subscriber_entries: u32,
    /// Logical entries at the active rate.
    pub active_entries: u32,
    /// `per_slot_bytes × active_entries`.
    pub active_logical_payload_bytes: u64,
    /// Queue entries over the admitted domain (automatic edges at their admitted ceiling;
    /// explicit and default edges at their exact depth), forwarded flows and an imported
    /// topic's queue included; `None` when a rate is unbounded.
    pub admitted_queue_entries: Option<u32>,
    /// Logical entries over the admitted domain.
    pub admitted_entries: Option<u32>,
    /// `per_slot_bytes × admitted_entries`.
    pub admitted_logical_payload_bytes: Option<u64>,
}

/// What a pool's provider is asked for.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderAllocationPlanRecord {
    /// The pool.
    pub pool: String,
    /// The provider (`host` memory, `pinned_host`, `cuda_device`, …: its memory kind).
    pub provider: String,
    /// Final logical provider entries (the slot count).
    pub logical_entries: u32,
    /// Logical payload bytes (`per_slot_bytes × logical_entries`).
    pub logical_payload_bytes: u64,
    /// Bytes the provider physically reserves, when known. The compiler does not know
    /// alignment, per-entry stride or allocator metadata, so this is `null` in a plan:
    /// unavailable, never invented as zero.
    pub physical_reserved_bytes: Option<u64>,
}

/// The plan's rate section (flattened into [`ExecutionPlan`](super::ExecutionPlan)'s
/// JSON).
#[derive(Clone, Debug, Serialize, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RatePlan {
    /// The compile-wide automatic sizing headroom.
    pub automatic_queue_sizing_headroom_ratio: String,
    /// Whether bounded arrival evidence was required.
    pub arrival_evidence: String,
    /// Every port's rate.
    pub port_rates: Vec<PortRateRecord>,
    /// Every edge's accumulation horizon.
    pub accumulation_horizons: Vec<AccumulationHorizonRecord>,
    /// Every hard-floor contributor.
    pub hard_floor_contributors: Vec<HardFloorContributorRecord>,
    /// Every edge's sizing recipe.
    pub queue_sizing_recipes: Vec<QueueSizingRecipeRecord>,
    /// Every operator's trigger.
    pub operator_triggers: Vec<TriggerRecord>,
    /// Every pool's dependency on its edges.
    pub pool_capacity_dependencies: Vec<PoolCapacityDependencyRecord>,
    /// Every pool's provider request.
    pub provider_allocation_plans: Vec<ProviderAllocationPlanRecord>,
    #[serde(skip)]
    pub(crate) headroom: Option<num_rational::Ratio<i128>>,
}

/// Composes contributors `(scenario, group, entries)`: the maximum over scenarios of the
/// sum over groups of the maximum within a group. `None` on overflow.
pub(crate) fn compose<'a>(items: impl IntoIterator<Item = (&'a str, &'a str, u32)>) -> Option<u32> {
    use std::collections::BTreeMap;
    let mut scenarios: BTreeMap<&str, BTreeMap<&str, u32>> = BTreeMap::new();
    for (s, g, n) in items {
        let slot = scenarios.entry(s).or_default().entry(g).or_insert(0);
        *slot = (*slot).max(n);
    }
    let mut best = 0u32;
    for groups in scenarios.values() {
        let mut sum = 0u32;
        for n in groups.values() {
            sum = sum.checked_add(*n)?;
        }
        best = best.max(sum);
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::compose;

    #[test]
    fn alternatives_take_the_maximum() {
        // minimum queue 1, producer burst 3, window retention 4: one set of entries.
        assert_eq!(
            compose([("s", "queued", 1), ("s", "queued", 3), ("s", "queued", 4)]),
            Some(4)
        );
    }

    #[test]
    fn distinct_live_storage_sums() {
        assert_eq!(
            compose([
                ("s", "queue", 8),
                ("s", "retention", 4),
                ("s", "loans", 1),
                ("s", "retirement", 1)
            ]),
            Some(14)
        );
    }

    #[test]
    fn exclusive_scenarios_take_the_maximum() {
        assert_eq!(
            compose([
                ("present", "queue", 2),
                ("present", "hold", 1),
                ("missing", "queue", 2),
                ("missing", "reuse", 1),
                ("missing", "extra", 2),
            ]),
            Some(5)
        );
        assert_eq!(compose([("a", "g", u32::MAX), ("a", "h", 1)]), None);
    }
}
