//! Rate generations: live rate evidence a session publishes within its plan's admitted
//! domain, and the O(1), allocation-free `ctx.rate(port)` view of the published one.
//!
//! The plan is the immutable recipe; a generation only says which rates are active now.
//! A candidate that would need more entries than the plan provisioned is rejected (the
//! session never resizes a queue or pool): changing beyond it needs a new plan.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use num_rational::Ratio;

use crate::plan::ExecutionPlan;
use crate::spec::Rate;
use crate::spec::rates::{ceil_entries, exact_ratio, mul};
use crate::{Error, ErrorCode, Result};

type Q = Ratio<i128>;

/// A port's rate as `compute()` sees it: a copy, read in O(1) without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortRateView {
    /// The published rate generation this view belongs to (`None`: nothing is
    /// published, and `rate` is the plan's compiled nominal rate).
    pub generation: Option<u64>,
    /// The active rate, when the port has one.
    pub rate: Option<Rate>,
    /// The maximum nominal rate the plan's parameter domain admits.
    pub admitted_max: Option<Rate>,
}

/// One port's rate in a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GenerationPortRate {
    /// The operator's name.
    pub operator: String,
    /// The port name.
    pub port: String,
    /// The active rate (exact hertz), when resolved.
    pub active_hz: Option<String>,
}

/// A published rate generation (owning evidence: it outlives the session).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateGeneration {
    /// The generation number (1 is the plan's compiled rates).
    pub rate_generation: u64,
    /// Every port's rate.
    pub ports: Vec<GenerationPortRate>,
}

/// The latest rejected candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RejectedRateGeneration {
    /// The number the candidate would have had.
    pub rate_generation: u64,
    /// The stable code of the rejection (one of [`generation_codes`]).
    pub code: RateGenerationCode,
    /// What is wrong.
    pub reason: String,
    /// The candidate's rates (as far as they were derived).
    pub ports: Vec<GenerationPortRate>,
}

/// Owning evidence of a session's rate generations. The two are independently absent:
/// the first candidate can be rejected before anything is published.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RateGenerationSnapshot {
    pub(crate) published: Option<RateGeneration>,
    pub(crate) last_rejected: Option<RejectedRateGeneration>,
}

impl RateGenerationSnapshot {
    /// The published generation, if any.
    pub fn published(&self) -> Option<&RateGeneration> {
        self.published.as_ref()
    }
    /// The latest rejected candidate, if any.
    pub fn last_rejected(&self) -> Option<&RejectedRateGeneration> {
        self.last_rejected.as_ref()
    }
    /// The generation numbered `g`, published or rejected, with its port rates.
    pub(crate) fn ports_of(&self, g: u64) -> Option<(&'static str, &[GenerationPortRate])> {
        if let Some(p) = self.published.as_ref().filter(|p| p.rate_generation == g) {
            return Some(("published", &p.ports));
        }
        self.last_rejected
            .as_ref()
            .filter(|r| r.rate_generation == g)
            .map(|r| ("rejected", r.ports.as_slice()))
    }
}

/// A candidate: new active nominal rates for outputs that declare `nominal_rate`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateCandidate {
    overrides: Vec<(String, String, Rate)>,
}

impl RateCandidate {
    /// An empty candidate (the plan's compiled rates).
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets `operator.port`'s active nominal rate.
    pub fn set(mut self, operator: &str, port: &str, rate: Rate) -> Self {
        self.overrides
            .push((operator.to_owned(), port.to_owned(), rate));
        self
    }
}

crate::compile::stable_codes! {
    /// The stable code of a rejected rate candidate: match on it, and print it as its
    /// [`name`](RateGenerationCode::name), which never changes.
    ///
    /// ```
    /// use holo_runtime::{RateGenerationCode, generation_codes};
    ///
    /// let code = generation_codes::RATE_GENERATION_EXCEEDS_PLAN;
    /// assert_eq!(code, RateGenerationCode::ExceedsPlan);
    /// assert_eq!(code.to_string(), "RATE_GENERATION_EXCEEDS_PLAN");
    /// assert_eq!(RateGenerationCode::from_name(code.name()), Some(code));
    /// ```
    pub enum RateGenerationCode, a "rate-generation code";
    /// The stable codes of candidate rejections, as constants of [`RateGenerationCode`].
    pub mod generation_codes;
    /// The candidate names no output with a `nominal_rate`.
    UnknownPort = RATE_GENERATION_UNKNOWN_PORT,
    /// The candidate's rate is above the port's admitted maximum (or the port admits
    /// only its fixed rate).
    OutsideAdmittedDomain = RATE_GENERATION_OUTSIDE_ADMITTED_DOMAIN,
    /// The candidate's arrivals need more entries than an edge's compiled depth.
    ExceedsPlan = RATE_GENERATION_EXCEEDS_PLAN,
    /// A candidate's rate is zero or negative: the rate-generation spelling of the
    /// compile diagnostic [`RATE_INVALID`](crate::codes::RATE_INVALID).
    RateInvalid = RATE_INVALID,
}

struct Slot {
    num: AtomicU64,
    den: AtomicU64,
    admitted_num: u64,
    admitted_den: u64,
}

/// Every port's rate, written under a sequence lock: readers never block or allocate.
pub(crate) struct RateTable {
    seq: AtomicU64,
    generation: AtomicU64,
    slots: Box<[Slot]>,
    /// Per operator: the index of its first port's slot.
    pub(crate) offsets: Box<[usize]>,
    state: Mutex<Generations>,
}

struct Generations {
    snapshot: RateGenerationSnapshot,
    next: u64,
    /// The published active rate per slot.
    active: Vec<Option<Q>>,
}

fn parts(q: Option<&Q>) -> (u64, u64) {
    q.and_then(|q| {
        Some((
            u64::try_from(*q.numer()).ok()?,
            u64::try_from(*q.denom()).ok()?,
        ))
    })
    .unwrap_or((0, 0))
}

fn rate_of(num: u64, den: u64) -> Option<Rate> {
    (den != 0).then(|| Rate::from_i128(i128::from(num), i128::from(den)))
}

impl RateTable {
    /// The plan's compiled rates, unpublished.
    pub(crate) fn new(plan: &ExecutionPlan, ports_per_op: &[usize]) -> RateTable {
        let mut offsets = Vec::with_capacity(ports_per_op.len());
        let mut n = 0;
        for &k in ports_per_op {
            offsets.push(n);
            n += k;
        }
        let mut slots: Vec<Slot> = (0..n)
            .map(|_| Slot {
                num: AtomicU64::new(0),
                den: AtomicU64::new(0),
                admitted_num: 0,
                admitted_den: 0,
            })
            .collect();
        let mut active = vec![None; n];
        for r in plan.port_rates() {
            if let Some(i) = slot_index(plan, &offsets, r.operator, &r.port) {
                let (an, ad) = parts(r.admitted().as_ref());
                let (num, den) = parts(r.active().as_ref());
                slots[i] = Slot {
                    num: AtomicU64::new(num),
                    den: AtomicU64::new(den),
                    admitted_num: an,
                    admitted_den: ad,
                };
                active[i] = r.active();
            }
        }
        RateTable {
            seq: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            slots: slots.into(),
            offsets: offsets.into(),
            state: Mutex::new(Generations {
                snapshot: RateGenerationSnapshot::default(),
                next: 1,
                active,
            }),
        }
    }

    /// O(1), allocation-free: a consistent copy of one slot.
    pub(crate) fn view(&self, slot: usize) -> PortRateView {
        let Some(s) = self.slots.get(slot) else {
            return PortRateView {
                generation: None,
                rate: None,
                admitted_max: None,
            };
        };
        loop {
            let a = self.seq.load(Ordering::Acquire);
            if a % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let num = s.num.load(Ordering::Acquire);
            let den = s.den.load(Ordering::Acquire);
            let g = self.generation.load(Ordering::Acquire);
            if self.seq.load(Ordering::Acquire) == a {
                return PortRateView {
                    generation: (g != 0).then_some(g),
                    rate: rate_of(num, den),
                    admitted_max: rate_of(s.admitted_num, s.admitted_den),
                };
            }
        }
    }

    pub(crate) fn snapshot(&self) -> RateGenerationSnapshot {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .snapshot
            .clone()
    }

    /// Validates `candidate` against the plan and publishes it, or records it as the
    /// latest rejection. Cold path.
    pub(crate) fn propose(&self, plan: &ExecutionPlan, candidate: &RateCandidate) -> Result<u64> {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let g = st.next;
        st.next += 1;
        let mut active = st.active.clone();
        let outcome = derive(plan, &self.offsets, candidate, &mut active);
        let ports = describe(plan, &self.offsets, &active);
        match outcome {
            Ok(()) => {
                self.seq.fetch_add(1, Ordering::AcqRel);
                for (i, a) in active.iter().enumerate() {
                    let (n, d) = parts(a.as_ref());
                    self.slots[i].num.store(n, Ordering::Release);
                    self.slots[i].den.store(d, Ordering::Release);
                }
                self.generation.store(g, Ordering::Release);
                self.seq.fetch_add(1, Ordering::AcqRel);
                st.active = active;
                st.snapshot.published = Some(RateGeneration {
                    rate_generation: g,
                    ports,
                });
                Ok(g)
            }
            Err((code, reason)) => {
                st.snapshot.last_rejected = Some(RejectedRateGeneration {
                    rate_generation: g,
                    code,
                    reason: reason.clone(),
                    ports,
                });
                Err(Error::new(
                    ErrorCode::InvalidArgument,
                    format!("{code}: {reason}"),
                ))
            }
        }
    }
}

fn slot_index(plan: &ExecutionPlan, offsets: &[usize], op: u32, port: &str) -> Option<usize> {
    let base = *offsets.get(op as usize)?;
    let k = plan
        .port_rates()
        .iter()
        .find(|r| r.operator == op && r.port == port)?
        .port_index;
    Some(base + k as usize)
}

fn describe(
    plan: &ExecutionPlan,
    offsets: &[usize],
    active: &[Option<Q>],
) -> Vec<GenerationPortRate> {
    plan.port_rates()
        .iter()
        .map(|r| GenerationPortRate {
            operator: r.operator_name.to_string(),
            port: r.port.to_string(),
            active_hz: slot_index(plan, offsets, r.operator, &r.port)
                .and_then(|i| active[i].as_ref())
                .map(exact_ratio),
        })
        .collect()
}

type Rejection = (RateGenerationCode, String);

/// Applies the candidate's overrides and re-derives every dependent rate (follows and
/// upstream, in topological order), then checks every rate-sized edge still fits.
fn derive(
    plan: &ExecutionPlan,
    offsets: &[usize],
    candidate: &RateCandidate,
    active: &mut [Option<Q>],
) -> std::result::Result<(), Rejection> {
    use generation_codes::{
        RATE_GENERATION_EXCEEDS_PLAN, RATE_GENERATION_OUTSIDE_ADMITTED_DOMAIN,
        RATE_GENERATION_UNKNOWN_PORT, RATE_INVALID,
    };
    let slot = |op: u32, port: &str| slot_index(plan, offsets, op, port);
    for (op, port, rate) in &candidate.overrides {
        let rec = plan
            .operator(op)
            .and_then(|o| {
                plan.port_rates()
                    .iter()
                    .find(|r| r.operator == o.id && r.port == *port)
            })
            .filter(|r| r.source == "nominal_rate" && r.direction == "output");
        let Some(rec) = rec else {
            return Err((
                RATE_GENERATION_UNKNOWN_PORT,
                format!("{op}.{port} is not an output with a `nominal_rate`"),
            ));
        };
        let Some(q) = rate.ratio() else {
            return Err((
                RATE_INVALID,
                format!("{op}.{port}: {rate} is not a positive rate"),
            ));
        };
        let fixed = rec.parameter.is_none();
        let above = rec.admitted().is_none_or(|m| q > m);
        if (fixed && Some(q) != rec.active()) || above {
            return Err((
                RATE_GENERATION_OUTSIDE_ADMITTED_DOMAIN,
                format!(
                    "{op}.{port}: {rate} is outside the admitted domain (maximum {})",
                    rec.admitted_max_hz.as_deref().unwrap_or("unbounded")
                ),
            ));
        }
        if let Some(i) = slot(rec.operator, port) {
            active[i] = Some(q);
        }
    }
    // Re-derive in topological order.
    let mut order: Vec<&crate::plan::OperatorRecord> = plan.operators().iter().collect();
    order.sort_by_key(|o| o.order);
    for o in order {
        for dir in ["input", "output"] {
            for r in plan
                .port_rates()
                .iter()
                .filter(|r| r.operator == o.id && r.direction == dir)
            {
                let Some(i) = slot(o.id, &r.port) else {
                    continue;
                };
                match &*r.source {
                    "upstream" => {
                        if let Some(e) = plan
                            .edges()
                            .iter()
                            .find(|e| e.to_operator == o.id && e.to_port == r.port)
                        {
                            active[i] = slot(e.from_operator, &e.from_port).and_then(|k| active[k]);
                        }
                    }
                    "follows" => {
                        if let Some((input, ratio)) = r.follows_exact() {
                            active[i] = slot(o.id, input)
                                .and_then(|k| active[k])
                                .and_then(|a| mul(&a, ratio));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    for recipe in plan.queue_sizing_recipes() {
        let Some(edge) = plan.edges().get(recipe.edge as usize) else {
            continue;
        };
        let Some(h) = horizon(plan, offsets, edge.to_operator, active) else {
            continue;
        };
        if recipe.rate_source == "expected_rate" {
            continue;
        }
        let Some(rate) = slot(edge.to_operator, &edge.to_port).and_then(|k| active[k]) else {
            continue;
        };
        let arrivals = mul(&rate, &h).and_then(|x| ceil_entries(&x));
        let need = match &*recipe.depth_source {
            "automatic" => arrivals.and_then(|a| {
                let hr = plan.headroom()?;
                ceil_entries(&mul(&Q::from_integer(i128::from(a)), &hr)?)
            }),
            _ => arrivals,
        };
        if need.is_none_or(|n| n > recipe.queue_depth) {
            return Err((
                RATE_GENERATION_EXCEEDS_PLAN,
                format!(
                    "edge e{} would need {} entries at {} Hz but its compiled depth is {}; compile a new plan",
                    recipe.edge,
                    need.map_or("more than u32".to_owned(), |n| n.to_string()),
                    exact_ratio(&rate),
                    recipe.queue_depth
                ),
            ));
        }
    }
    Ok(())
}

/// The horizon of an edge into `to` under the generation's rates.
fn horizon(plan: &ExecutionPlan, offsets: &[usize], to: u32, active: &[Option<Q>]) -> Option<Q> {
    let t = plan.operator_triggers().iter().find(|t| t.operator == to)?;
    match t.trigger {
        crate::plan::TriggerKind::Clock => t.clock_exact.as_deref().map(num_rational::Ratio::recip),
        crate::plan::TriggerKind::OnArrival => {
            let i = slot_index(plan, offsets, to, t.input.as_deref()?)?;
            active[i].map(|r| r.recip())
        }
        crate::plan::TriggerKind::AllInputs | crate::plan::TriggerKind::AnyInput => None,
    }
}

/// One operator's window onto the session's rate table.
#[derive(Clone, Copy)]
pub(crate) struct OperatorRates<'a> {
    pub(crate) table: &'a RateTable,
    pub(crate) offset: usize,
}

impl OperatorRates<'_> {
    pub(crate) fn view(&self, port: Option<u32>) -> PortRateView {
        match port {
            Some(p) => self.table.view(self.offset + p as usize),
            None => PortRateView {
                generation: None,
                rate: None,
                admitted_max: None,
            },
        }
    }
}

/// A port field whose rate `ctx.rate(&port)` can read: `Input<T>` and `Output<T>`.
pub trait RatePort: sealed::Sealed {
    /// The bound port's index in its operator (`None` before binding).
    #[doc(hidden)]
    fn rate_port_index(&self) -> Option<u32>;
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for crate::session::Input<T> {}
    impl<T> Sealed for crate::session::Output<T> {}
}

impl<T: Clone + Send + 'static> RatePort for crate::session::Input<T> {
    fn rate_port_index(&self) -> Option<u32> {
        self.port_index()
    }
}

impl<T: Clone + Send + 'static> RatePort for crate::session::Output<T> {
    fn rate_port_index(&self) -> Option<u32> {
        self.port_index()
    }
}
