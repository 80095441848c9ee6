//! Rates and temporal contracts: what an operator declares about *when* its `compute()`
//! fires and what each input sees, and the nominal rates its ports carry.
//!
//! Rates are exact rationals (hertz). A declaration is kept raw — `Rate::new(-5, 1)` and
//! `Rate::hz(0)` construct — and the compiler rejects a non-positive rate with
//! `RATE_INVALID`; checked arithmetic that overflows is `RATE_ARITHMETIC_OVERFLOW`.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use holo_params::{ParamRef, ParamSchema};
use num_rational::Ratio;
use num_traits::{CheckedMul, Zero};

use crate::spec::bytespan::ParamDependency;

/// An exact rate in hertz: `numerator / denominator` events per second.
///
/// Constructing never fails; the compiler rejects a rate that is zero, negative or has a
/// zero denominator (`RATE_INVALID`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    numerator: i128,
    denominator: i128,
}

impl Rate {
    /// `hz` events per second.
    pub const fn hz(hz: u64) -> Rate {
        Rate {
            numerator: hz as i128,
            denominator: 1,
        }
    }

    /// `numerator / denominator` events per second (for example `Rate::new(1, 4)`: one
    /// event every four seconds).
    pub const fn new(numerator: i64, denominator: i64) -> Rate {
        Rate {
            numerator: numerator as i128,
            denominator: denominator as i128,
        }
    }

    pub(crate) const fn from_i128(numerator: i128, denominator: i128) -> Rate {
        Rate {
            numerator,
            denominator,
        }
    }

    /// The exact value, or `None` when the rate is not a positive finite number.
    pub fn ratio(self) -> Option<Ratio<i128>> {
        if self.denominator == 0 {
            return None;
        }
        let r = Ratio::new(self.numerator, self.denominator);
        (r > Ratio::zero()).then_some(r)
    }

    /// Whether the rate is positive and finite.
    pub fn is_valid(self) -> bool {
        self.ratio().is_some()
    }

    /// The numerator as declared.
    pub fn numerator(self) -> i128 {
        self.numerator
    }

    /// The denominator as declared.
    pub fn denominator(self) -> i128 {
        self.denominator
    }
}

impl fmt::Display for Rate {
    /// Exact hertz: `60 Hz`, `1000/3 Hz`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} Hz", exact(self.numerator, self.denominator))
    }
}

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An exact ratio of two rates or counts (`RateRatio::new(1, 4)`: one output per four
/// inputs; the compile-wide headroom `RateRatio::new(2, 1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateRatio {
    /// The numerator.
    pub numerator: u64,
    /// The denominator (zero is rejected with `RATE_INVALID`).
    pub denominator: u64,
}

impl RateRatio {
    /// `numerator / denominator`.
    pub const fn new(numerator: u64, denominator: u64) -> RateRatio {
        RateRatio {
            numerator,
            denominator,
        }
    }

    /// The exact value, or `None` when it is zero or has a zero denominator.
    pub fn ratio(self) -> Option<Ratio<i128>> {
        if self.denominator == 0 || self.numerator == 0 {
            return None;
        }
        Some(Ratio::new(
            i128::from(self.numerator),
            i128::from(self.denominator),
        ))
    }
}

impl fmt::Display for RateRatio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.numerator, self.denominator)
    }
}

/// `n` or `n/d` for an exact rational.
pub(crate) fn exact(n: i128, d: i128) -> String {
    if d == 1 {
        n.to_string()
    } else {
        format!("{n}/{d}")
    }
}

/// The period of a clock of `rate` hertz in whole nanoseconds, rounded up (a positive
/// rate: the session ticks in these).
pub(crate) fn clock_period_ns(rate: &Ratio<i128>) -> i128 {
    (rate.recip() * Ratio::from_integer(1_000_000_000))
        .ceil()
        .to_integer()
}

/// `n` or `n/d` for a `Ratio`.
pub(crate) fn exact_ratio(r: &Ratio<i128>) -> String {
    exact(*r.numer(), *r.denom())
}

type ReadFn = dyn Fn(&dyn Any) -> Option<i128> + Send + Sync;

/// A rate as an operator declares it: a fixed [`Rate`], or one read from a parameter
/// when the plan is compiled (its admitted ceiling is the field's `max` bound).
#[derive(Clone)]
pub enum RateExpr<P> {
    /// A fixed rate.
    Fixed(Rate),
    /// `parameter_rate(param_ref!(Params::field))`: the field's value in hertz.
    Parameter(ParameterRate<P>),
}

/// A rate read from an integer parameter (hertz).
#[derive(Clone)]
pub struct ParameterRate<P> {
    pub(crate) dependency: ParamDependency,
    pub(crate) read: Arc<ReadFn>,
    _params: std::marker::PhantomData<fn(&P)>,
}

impl<P> fmt::Debug for RateExpr<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateExpr::Fixed(r) => write!(f, "{r}"),
            RateExpr::Parameter(p) => write!(f, "parameter_rate({})", p.dependency.path),
        }
    }
}

impl<P> From<Rate> for RateExpr<P> {
    fn from(r: Rate) -> Self {
        RateExpr::Fixed(r)
    }
}

impl<P> RateExpr<P> {
    pub(crate) fn erase(self) -> RateExpr<()> {
        match self {
            RateExpr::Fixed(r) => RateExpr::Fixed(r),
            RateExpr::Parameter(p) => RateExpr::Parameter(ParameterRate {
                dependency: p.dependency,
                read: p.read,
                _params: std::marker::PhantomData,
            }),
        }
    }
}

impl RateExpr<()> {
    /// The active rate (the accepted parameter value) and the admitted maximum (the
    /// field's `max` bound; the rate itself when fixed; `None` when unbounded), and the
    /// parameter path read.
    pub(crate) fn resolve(&self, params: &dyn Any) -> (Rate, Option<Rate>, Option<String>) {
        match self {
            RateExpr::Fixed(r) => (*r, Some(*r), None),
            RateExpr::Parameter(p) => {
                let v = (p.read)(params).unwrap_or(0);
                let max = p.dependency.descriptor.max.map(|m| Rate::from_i128(m, 1));
                (Rate::from_i128(v, 1), max, Some(p.dependency.path.clone()))
            }
        }
    }

    pub(crate) fn dependency(&self) -> Option<&ParamDependency> {
        match self {
            RateExpr::Fixed(_) => None,
            RateExpr::Parameter(p) => Some(&p.dependency),
        }
    }
}

/// A rate in hertz read from an integer parameter when the plan is compiled. The field
/// must be `recompile_required` or `compile_time` and not sensitive; its `max` bound is
/// the admitted domain's maximum nominal rate.
pub fn parameter_rate<P: ParamSchema, T>(field: ParamRef<P, T>) -> RateExpr<P>
where
    T: Copy + Into<i128> + 'static,
{
    RateExpr::Parameter(ParameterRate {
        dependency: ParamDependency::of(&field),
        read: Arc::new(move |params: &dyn Any| {
            params.downcast_ref::<P>().map(|p| (*field.get(p)).into())
        }),
        _params: std::marker::PhantomData,
    })
}

/// A count (entries) read from an integer parameter.
#[derive(Clone)]
pub struct ParameterCount<P> {
    pub(crate) path: String,
    pub(crate) read: Arc<ReadFn>,
    /// A struct on the field's path is sensitive (`#[operator]` checks the field's own
    /// flags; not its parents').
    pub(crate) under_sensitive: bool,
    _params: std::marker::PhantomData<fn(&P)>,
}

impl<P> fmt::Debug for ParameterCount<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parameter_count({})", self.path)
    }
}

/// An entry count (for `#[input(history = ...)]`) read from an integer parameter. The
/// count sizes the producer's pool, so `#[operator]` requires the field to be not
/// sensitive and `compile_time` or `recompile_required`, as a byte span's is. A value
/// below 0 or past `u32::MAX` is refused by `Graph::add_operator` (`InvalidArgument`,
/// `ParamErrorKind::OutOfBounds`, at the field); past `MAX_QUEUE_DEPTH`, by `compile`
/// (`QUEUE_DEPTH_LIMIT`).
pub fn parameter_count<P: ParamSchema, T>(field: ParamRef<P, T>) -> ParameterCount<P>
where
    T: Copy + Into<i128> + 'static,
{
    ParameterCount {
        path: field.path(),
        under_sensitive: field.under_sensitive(),
        read: Arc::new(move |params: &dyn Any| {
            params.downcast_ref::<P>().map(|p| (*field.get(p)).into())
        }),
        _params: std::marker::PhantomData,
    }
}

/// When an operator's `compute()` fires: its temporal contract's trigger. The contract
/// is the only scheduling authority; rate declarations (`follows`) never trigger.
#[derive(Clone, Debug)]
pub enum Trigger<P> {
    /// The default: an operator with inputs fires when every required input has data; a
    /// source fires whenever its outputs have room.
    AllInputs,
    /// Fires when any connected input has data.
    AnyInput,
    /// Fires on each arrival at the named input.
    OnArrival(&'static str),
    /// Fires on a clock of the given rate.
    Clock(RateExpr<P>),
}

impl<P> Trigger<P> {
    pub(crate) fn erase(self) -> Trigger<()> {
        match self {
            Trigger::AllInputs => Trigger::AllInputs,
            Trigger::AnyInput => Trigger::AnyInput,
            Trigger::OnArrival(p) => Trigger::OnArrival(p),
            Trigger::Clock(r) => Trigger::Clock(r.erase()),
        }
    }

    /// The stable name used in plans.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The trigger's kind, as the plan records it.
    pub fn kind(&self) -> crate::plan::TriggerKind {
        match self {
            Trigger::AllInputs => crate::plan::TriggerKind::AllInputs,
            Trigger::AnyInput => crate::plan::TriggerKind::AnyInput,
            Trigger::OnArrival(_) => crate::plan::TriggerKind::OnArrival,
            Trigger::Clock(_) => crate::plan::TriggerKind::Clock,
        }
    }
}

/// What an input sees per activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InputMode {
    /// One queued entry per `receive()` (the default).
    #[default]
    Queue,
    /// The latest sample: `receive()` returns the newest entry and drops older ones.
    Latest,
    /// Every sample since the last activation; `min` is the samples the window must be
    /// able to present at once (its window retention, default 1).
    Window {
        /// Samples the window must hold at once.
        min: u32,
    },
}

impl InputMode {
    /// The stable name used in plans.
    pub fn name(self) -> &'static str {
        match self {
            InputMode::Queue => "queue",
            InputMode::Latest => "latest",
            InputMode::Window { .. } => "window",
        }
    }
}

/// What an activation does when an input has no data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MissingPolicy {
    /// The activation is skipped (`compute()` is not called; an `on_arrival` trigger's
    /// entry is consumed).
    #[default]
    Skip,
    /// `compute()` runs and `receive()` returns the last sample once more.
    ReuseLast,
}

impl MissingPolicy {
    /// The stable name used in plans.
    pub fn name(self) -> &'static str {
        match self {
            MissingPolicy::Skip => "skip",
            MissingPolicy::ReuseLast => "reuse_last",
        }
    }
}

/// The temporal part of one port's declaration.
#[derive(Clone, Debug)]
pub struct PortTemporalSpec<P> {
    /// Inputs: latest, window or one entry per receive.
    pub mode: InputMode,
    /// Inputs: entries retained after they are received (`Input::history()`).
    pub history: u32,
    /// Inputs: `history = parameter_count(param_ref!(P::field))` — the retained entries
    /// read from a parameter when the operator is added to a graph (overrides `history`).
    pub history_parameter: Option<ParameterCount<P>>,
    /// Inputs: what happens when data is missing.
    pub missing: MissingPolicy,
    /// Inputs: a weaker fallback rate, used for sizing only when the upstream output
    /// positively declares no rate and the horizon is finite.
    pub expected_rate: Option<RateExpr<P>>,
    /// Outputs: the nominal rate.
    pub nominal_rate: Option<RateExpr<P>>,
    /// Outputs: the rate follows an input of the same operator by a ratio.
    pub follows: Option<(&'static str, RateRatio)>,
    /// Outputs: entries one activation may emit on each edge (default 1).
    pub burst: u32,
}

impl<P> Default for PortTemporalSpec<P> {
    fn default() -> Self {
        Self {
            mode: InputMode::Queue,
            history: 0,
            history_parameter: None,
            missing: MissingPolicy::Skip,
            expected_rate: None,
            nominal_rate: None,
            follows: None,
            burst: 1,
        }
    }
}

impl<P> PortTemporalSpec<P> {
    /// Erases the parameter type, resolving a parameter-derived history against the
    /// accepted parameters. A value below 0 or past `u32::MAX` is `OutOfBounds` at the
    /// field (it was clamped: `-3` silently meant no history).
    /// `port` names the port in that error (`operator "a", input "frames"`).
    pub(crate) fn erase(
        self,
        params: &dyn Any,
        port: &dyn Fn() -> String,
    ) -> crate::Result<PortTemporalSpec<()>> {
        let history = match self.history_parameter.as_ref() {
            None => self.history,
            Some(h) if h.under_sensitive => {
                return Err(crate::Error::invalid_argument(format!(
                    "{}: `history = parameter_count({})` reads a field inside a sensitive struct; a history sizes a pool and shows in the plan, so it is never read from a sensitive field",
                    port(),
                    h.path
                ))
                .at(h.path.clone()));
            }
            Some(h) => match (h.read)(params) {
                None => 0,
                Some(v) => u32::try_from(v).map_err(|_| {
                    crate::Error::param(
                        holo_params::ParamErrorKind::OutOfBounds,
                        h.path.clone(),
                        format!(
                            "{}: `history = parameter_count({})` is {v}, and a history is 0 to {} entries",
                            port(),
                            h.path,
                            u32::MAX
                        ),
                    )
                })?,
            },
        };
        Ok(PortTemporalSpec {
            mode: self.mode,
            history,
            history_parameter: None,
            missing: self.missing,
            expected_rate: self.expected_rate.map(RateExpr::erase),
            nominal_rate: self.nominal_rate.map(RateExpr::erase),
            follows: self.follows,
            burst: self.burst,
        })
    }

    /// Whether the port declares a rate of its own (nominal or follows).
    pub(crate) fn declares_rate(&self) -> bool {
        self.nominal_rate.is_some() || self.follows.is_some()
    }
}

/// Checked rational arithmetic; `None` on overflow.
pub(crate) fn mul(a: &Ratio<i128>, b: &Ratio<i128>) -> Option<Ratio<i128>> {
    a.checked_mul(b)
}

/// Checked `⌈r⌉` as a `u32` entry count; `None` on overflow.
///
/// Not `Ratio::ceil`: it computes `numer + denom - 1`, which overflows `i128` for an
/// exact rate whose numerator and denominator are both near 2^127 (a followed rate of
/// two near-`i64::MAX` and near-`u64::MAX` ratios).
pub(crate) fn ceil_entries(r: &Ratio<i128>) -> Option<u32> {
    // A `Ratio` keeps its denominator positive, so the Euclidean quotient is the floor.
    let (n, d) = (*r.numer(), *r.denom());
    let floor = n.checked_div_euclid(d)?;
    let c = if n.checked_rem_euclid(d)? == 0 {
        floor
    } else {
        floor.checked_add(1)?
    };
    u32::try_from(c).ok()
}

/// The result of the seed's sizing arithmetic for one edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSizing {
    /// `⌈rate × horizon⌉`.
    pub nominal_arrivals: u32,
    /// `⌈nominal_arrivals × headroom⌉`.
    pub recommendation: u32,
    /// `max(hard_floor, recommendation)`.
    pub automatic_depth: u32,
}

/// The seed's exact arithmetic: `nominal_arrivals = ⌈rate × horizon⌉`,
/// `recommendation = ⌈nominal_arrivals × headroom⌉`,
/// `automatic_depth = max(hard_floor, recommendation)`. Returns `None` when a rate or
/// ratio is not positive or the arithmetic overflows (the compiler reports these as
/// `RATE_INVALID` and `RATE_ARITHMETIC_OVERFLOW`).
pub fn automatic_queue_depth(
    rate: Rate,
    horizon_seconds: Ratio<i128>,
    headroom: RateRatio,
    hard_floor: u32,
) -> Option<QueueSizing> {
    let arrivals = ceil_entries(&mul(&rate.ratio()?, &horizon_seconds)?)?;
    let recommendation = ceil_entries(&mul(
        &Ratio::from_integer(i128::from(arrivals)),
        &headroom.ratio()?,
    )?)?;
    Some(QueueSizing {
        nominal_arrivals: arrivals,
        recommendation,
        automatic_depth: hard_floor.max(recommendation),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imu_at_camera_rate_is_34_entries() {
        let s = automatic_queue_depth(Rate::hz(1000), Ratio::new(1, 60), RateRatio::new(2, 1), 1)
            .unwrap();
        assert_eq!(
            (s.nominal_arrivals, s.recommendation, s.automatic_depth),
            (17, 34, 34)
        );
    }

    #[test]
    fn invalid_rates_and_ratios() {
        assert!(!Rate::hz(0).is_valid());
        assert!(!Rate::new(-5, 1).is_valid());
        assert!(!Rate::new(5, 0).is_valid());
        assert!(Rate::new(-5, -1).is_valid());
        assert!(RateRatio::new(0, 1).ratio().is_none());
        assert!(RateRatio::new(1, 0).ratio().is_none());
        assert_eq!(Rate::new(2, 8).to_string(), "2/8 Hz");
        assert_eq!(Rate::hz(60).to_string(), "60 Hz");
    }

    #[test]
    fn overflow_is_none() {
        let h = Ratio::new(i128::from(i64::MAX), 1);
        assert!(
            automatic_queue_depth(Rate::new(i64::MAX, 1), h, RateRatio::new(2, 1), 1).is_none()
        );
    }

    #[test]
    fn the_ceiling_of_a_ratio_near_i128_max_does_not_overflow() {
        // numer + denom - 1 (what `Ratio::ceil` computes) exceeds i128::MAX here.
        let r = Ratio::new(i128::MAX - 1, i128::MAX - 2);
        assert_eq!(ceil_entries(&r), Some(2));
        assert_eq!(ceil_entries(&Ratio::new(i128::MAX, 1)), None);
        assert_eq!(ceil_entries(&Ratio::new(7, 2)), Some(4));
        assert_eq!(ceil_entries(&Ratio::new(8, 2)), Some(4));
        assert_eq!(ceil_entries(&Ratio::new(-7, 2)), None);
        assert_eq!(ceil_entries(&Ratio::new(-1, 2)), Some(0));
    }
}
