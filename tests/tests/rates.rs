//! Temporal contracts and rate-aware queue sizing: every rule, each failure with its
//! stable diagnostic code, and the session's scheduling and rate generations.
#![allow(
    clippy::many_single_char_names,
    reason = "graph-building tests name port handles by one letter"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::generation_codes;
use holo_runtime::plan::RATE_QUEUE_INSPECTION_SCHEMA;
use holo_runtime::plan::{RateQueueInspectionFormat, render_rate_queue_inspection};
use holo_runtime::{
    ArrivalEvidence, CompileOptions, ConnectionOptions, EdgeId, EmitOptions, ExecutionContext,
    Graph, Input, Operator, Output, ParamSchema, ParamSet, Rate, RateCandidate, RateRatio, Result,
    RunSession, SessionOptions, codes, compile, operator,
};
use proptest::prelude::*;

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.Rates.Source", version = 1)]
struct SrcParams {
    /// Hz.
    #[param(max = 120, recompile_required, default = 60)]
    hz: i64,
    /// A rate the compiler may not read.
    #[param(default = 60)]
    live_hz: i64,
}

/// A clock-driven source with a parameter-derived nominal rate.
#[operator(params = SrcParams, trigger = clock(rate = parameter_rate(param_ref!(SrcParams::hz))))]
struct Src {
    #[output(nominal_rate = parameter_rate(param_ref!(SrcParams::hz)))]
    out: Output<u64>,
    n: u64,
}

impl Operator for Src {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        let _ = self.out.emit(self.n, EmitOptions::default());
        Ok(())
    }
}

fn src() -> Src {
    Src {
        out: Output::default(),
        n: 0,
    }
}

fn src_params(hz: i64) -> ParamSet<SrcParams> {
    ParamSet::from_toml_str(&format!("hz = {hz}")).unwrap()
}

/// A source whose rate reads a field that is not compile-readable.
#[operator(params = SrcParams)]
struct LiveSrc {
    #[output(nominal_rate = parameter_rate(param_ref!(SrcParams::live_hz)))]
    out: Output<u64>,
}

impl Operator for LiveSrc {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// A fixed-rate source (any rate, including invalid ones).
#[operator]
struct Fixed {
    #[output(nominal_rate = Rate::hz(1000))]
    out: Output<u64>,
}

#[operator]
struct FixedNeg {
    #[output(nominal_rate = Rate::new(-5, 1))]
    out: Output<u64>,
}

#[operator]
struct FixedZero {
    #[output(nominal_rate = Rate::hz(0))]
    out: Output<u64>,
}

#[operator]
struct Huge {
    #[output(nominal_rate = Rate::new(i64::MAX, 1))]
    out: Output<u64>,
}

#[operator]
struct Slow {
    #[output(nominal_rate = Rate::new(1, i64::MAX))]
    out: Output<u64>,
}

#[operator]
struct Bursty {
    #[output(nominal_rate = Rate::hz(60), burst = 3)]
    out: Output<u64>,
}

/// A source that declares no rate.
#[operator]
struct Plain {
    out: Output<u64>,
}

macro_rules! idle_compute {
    ($($t:ty),*) => {$(
        impl Operator for $t {
            fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
                Ok(())
            }
        }
    )*};
}
idle_compute!(Fixed, FixedNeg, FixedZero, Huge, Slow, Bursty, Plain);

/// Camera-driven fusion: one activation per frame; the imu input is a window.
#[operator(trigger = on_arrival(frames))]
struct Fusion {
    frames: Input<u64>,
    #[input(window = 4, history = 4)]
    imu: Input<u64>,
}

/// The same on a default (all-inputs) trigger: no finite horizon.
#[operator]
struct Unclocked {
    #[input(window)]
    imu: Input<u64>,
}

/// A clocked consumer with an expected-rate fallback.
#[operator(trigger = clock(hz = 30))]
struct Poll {
    #[input(expected_rate = Rate::hz(200))]
    values: Input<u64>,
}

/// Follows chain: 1/1 and 1/4, and a zero ratio.
#[operator(trigger = on_arrival(frames))]
struct Chain {
    frames: Input<u64>,
    #[output(follows(frames, RateRatio::new(1, 1)))]
    same: Output<u64>,
    #[output(follows(frames, RateRatio::new(1, 4)))]
    quarter: Output<u64>,
    #[output(follows(frames, RateRatio::new(0, 1)))]
    zero: Output<u64>,
}

/// An unclocked consumer with an expected-rate fallback (no finite horizon).
#[operator]
struct Unclocked2 {
    #[input(expected_rate = Rate::hz(200))]
    values: Input<u64>,
}
idle_compute!(Unclocked2);

idle_compute!(Fusion, Unclocked, Chain);

impl Operator for Poll {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.values.receive().is_some() {}
        Ok(())
    }
}

fn add<O: Operator<Params = holo_runtime::NoParams>>(g: &mut Graph, name: &str, o: O) -> O::Ports {
    g.add_operator(name, o, ParamSet::defaults().unwrap())
        .unwrap()
}

fn fusion() -> Fusion {
    Fusion {
        frames: Input::default(),
        imu: Input::default(),
    }
}

/// camera (Src, hz) → fusion.frames; imu (Fixed 1 kHz) → fusion.imu with `depth`.
fn imu_graph(camera_hz: i64, depth: Option<u32>) -> (Graph, EdgeId) {
    let mut g = Graph::new();
    let cam = g
        .add_operator("camera", src(), src_params(camera_hz))
        .unwrap();
    let imu = add(
        &mut g,
        "imu",
        Fixed {
            out: Output::default(),
        },
    );
    let f = add(&mut g, "fusion", fusion());
    g.add_flow(cam.out, f.frames, ConnectionOptions::default());
    let mut options = ConnectionOptions::default();
    options.queue_depth = depth;
    let e = g.add_flow(imu.out, f.imu, options);
    (g, e)
}

fn recipe(
    plan: &holo_runtime::plan::ExecutionPlan,
    e: EdgeId,
) -> &holo_runtime::plan::QueueSizingRecipeRecord {
    plan.queue_sizing_recipe(u32::try_from(e.index()).unwrap())
        .unwrap()
}

#[test]
fn camera_driven_imu_is_34_entries_at_the_default_headroom() {
    let (g, e) = imu_graph(60, None);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let r = recipe(&plan, e);
    assert_eq!(r.rate_hz.as_deref(), Some("1000"));
    assert_eq!(r.horizon_seconds.as_deref(), Some("1/60"));
    assert_eq!((r.nominal_arrivals, r.recommendation), (Some(17), Some(34)));
    assert_eq!((r.queue_depth, &*r.depth_source), (34, "automatic"));
    // The window needs 4 at once: the floor is max(1, 1, 4) = 4, not a sum.
    assert_eq!(r.hard_floor, 4);
    assert_eq!(plan.edges()[e.index()].queue_depth, 34);
    // A fixed 1 kHz rate admits only itself: the ceiling is the same arithmetic.
    assert_eq!(r.admitted_ceiling, Some(34));

    // The headroom is compile-wide: 3/2 → ⌈17 × 3/2⌉ = 26.
    let (g, e) = imu_graph(60, None);
    let mut o = CompileOptions::default();
    o.automatic_queue_sizing.headroom_ratio = RateRatio::new(3, 2);
    let plan = compile(&g, o).unwrap();
    assert_eq!(recipe(&plan, e).queue_depth, 26);

    // Another camera rate changes the horizon: ⌈1000 / 90⌉ = 12 → 24.
    let (g, e) = imu_graph(90, None);
    let plan = compile(&g, CompileOptions::default()).unwrap();
    assert_eq!(recipe(&plan, e).queue_depth, 24);
}

#[test]
fn explicit_depth_below_the_hard_floor_fails() {
    let (g, _) = imu_graph(60, Some(3));
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_QUEUE_DEPTH_BELOW_HARD_FLOOR]);
    let item = &d.items[0];
    assert_eq!(
        (item.operator.as_deref(), item.port.as_deref()),
        (Some("fusion"), Some("imu"))
    );
}

#[test]
fn explicit_depth_below_the_recommendation_is_kept_with_a_warning_and_lowered_exactly() {
    let (g, e) = imu_graph(60, Some(20));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let r = recipe(&plan, e);
    assert_eq!((r.queue_depth, &*r.depth_source), (20, "explicit"));
    assert_eq!(r.recommendation, Some(34));
    assert_eq!(
        plan.warnings().iter().map(|w| w.code).collect::<Vec<_>>(),
        vec![codes::RATE_QUEUE_DEPTH_BELOW_RECOMMENDATION]
    );
    // At or above the recommendation: no warning.
    let (g, _) = imu_graph(60, Some(40));
    assert!(
        compile(&g, CompileOptions::default())
            .unwrap()
            .warnings()
            .is_empty()
    );
}

#[test]
fn missing_horizon_for_a_rated_window_is_rejected() {
    let mut g = Graph::new();
    let imu = add(
        &mut g,
        "imu",
        Fixed {
            out: Output::default(),
        },
    );
    let u = add(
        &mut g,
        "unclocked",
        Unclocked {
            imu: Input::default(),
        },
    );
    g.add_flow(imu.out, u.imu, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_HORIZON_MISSING]);
    let h = &d.items[0];
    assert_eq!(h.port.as_deref(), Some("imu"));
}

#[test]
fn bounded_evidence_profiles_reject_nominal_only_metadata() {
    let (g, _) = imu_graph(60, None);
    let mut o = CompileOptions::default();
    o.automatic_queue_sizing.arrival_evidence = ArrivalEvidence::Bounded;
    let d = compile(&g, o).unwrap_err();
    assert!(d.has(codes::RATE_NOMINAL_ONLY_EVIDENCE), "{d}");
    assert!(
        d.codes()
            .iter()
            .all(|c| *c == codes::RATE_NOMINAL_ONLY_EVIDENCE)
    );
}

fn into_poll<O: Operator<Params = holo_runtime::NoParams>>(
    o: O,
    out: impl Fn(&O::Ports) -> holo_runtime::OutPort<u64>,
) -> holo_runtime::Diagnostics {
    let mut g = Graph::new();
    let s = add(&mut g, "src", o);
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    g.add_flow(out(&s), p.values, ConnectionOptions::default());
    compile(&g, CompileOptions::default()).unwrap_err()
}

#[test]
fn zero_and_negative_rates_are_invalid() {
    let d = into_poll(
        FixedZero {
            out: Output::default(),
        },
        |p| p.out,
    );
    assert_eq!(d.codes(), vec![codes::RATE_INVALID]);
    let d = into_poll(
        FixedNeg {
            out: Output::default(),
        },
        |p| p.out,
    );
    assert_eq!(d.codes(), vec![codes::RATE_INVALID]);
    // A parameter-derived zero rate, named by its field path.
    let mut g = Graph::new();
    g.add_operator("cam", src(), src_params(0)).unwrap();
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert!(d.codes().iter().all(|c| *c == codes::RATE_INVALID), "{d}");
    assert_eq!(d.items[0].field_path.as_deref(), Some("hz"));
    // A zero headroom ratio.
    let (g, _) = imu_graph(60, None);
    let mut o = CompileOptions::default();
    o.automatic_queue_sizing.headroom_ratio = RateRatio::new(0, 1);
    assert!(compile(&g, o).unwrap_err().has(codes::RATE_INVALID));
    // A zero follows ratio.
    let mut g = Graph::new();
    let cam = g.add_operator("cam", src(), src_params(60)).unwrap();
    let c = add(
        &mut g,
        "chain",
        Chain {
            frames: Input::default(),
            same: Output::default(),
            quarter: Output::default(),
            zero: Output::default(),
        },
    );
    g.add_flow(cam.out, c.frames, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_INVALID]);
    assert_eq!(d.items[0].port.as_deref(), Some("zero"));
}

/// A source whose rate is a parameter, with no bound.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.Rates.Unbounded", version = 1)]
struct UnboundedRateParams {
    /// Hz.
    #[param(recompile_required, default = 1)]
    fps: i64,
}

#[operator(params = UnboundedRateParams)]
struct ParamHuge {
    #[output(nominal_rate = parameter_rate(param_ref!(UnboundedRateParams::fps)))]
    out: Output<u64>,
}

impl Operator for ParamHuge {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// The overflow was reported on the consumer's input with no word of where the rate came
/// from: now with its figures and the producing parameter.
#[test]
fn an_overflow_from_a_parameter_rate_names_the_parameter() {
    let mut g = Graph::new();
    let huge = g
        .add_operator(
            "huge",
            ParamHuge {
                out: Output::default(),
            },
            ParamSet::from_toml_str(&format!("fps = {}", i64::MAX)).unwrap(),
        )
        .unwrap();
    let slow = add(
        &mut g,
        "slow",
        Slow {
            out: Output::default(),
        },
    );
    let f = add(&mut g, "fusion", fusion());
    g.add_flow(slow.out, f.frames, ConnectionOptions::default());
    g.add_flow(huge.out, f.imu, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_ARITHMETIC_OVERFLOW], "{d}");
    let m = &d.items[0].message;
    assert!(m.contains(&format!("{} Hz × ", i64::MAX)), "{m}");
    assert!(
        m.ends_with("; the rate is parameter `fps` of operator \"huge\""),
        "{m}"
    );
}

#[test]
fn rational_overflow_is_reported() {
    // i64::MAX Hz over a horizon of i64::MAX s: 2^126 arrivals, × 2 overflows i128.
    let mut g = Graph::new();
    let huge = add(
        &mut g,
        "huge",
        Huge {
            out: Output::default(),
        },
    );
    let slow = add(
        &mut g,
        "slow",
        Slow {
            out: Output::default(),
        },
    );
    let f = add(&mut g, "fusion", fusion());
    g.add_flow(slow.out, f.frames, ConnectionOptions::default());
    g.add_flow(huge.out, f.imu, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_ARITHMETIC_OVERFLOW]);
}

#[test]
fn unreadable_rate_parameters_are_rejected() {
    let mut g = Graph::new();
    let s = g
        .add_operator(
            "live",
            LiveSrc {
                out: Output::default(),
            },
            src_params(60),
        )
        .unwrap();
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    g.add_flow(s.out, p.values, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_UNREADABLE_PARAMETER]);
    assert_eq!(d.items[0].field_path.as_deref(), Some("live_hz"));
}

/// A stream's settings, every field readable by the compiler on its own.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.Rates.Stream", version = 1)]
struct StreamSettings {
    /// Hz.
    #[param(recompile_required, default = 30)]
    fps: i64,
    /// Frames retained.
    #[param(recompile_required, default = 2)]
    keep: u32,
}

/// The stream's settings are sensitive as a whole (a credential's neighbours).
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.Rates.Secret", version = 1)]
struct SecretParams {
    #[param(sensitive)]
    stream: StreamSettings,
}

/// A rate and a history read from inside the sensitive struct.
#[operator(params = SecretParams)]
struct SecretSrc {
    #[output(nominal_rate = parameter_rate(param_ref!(SecretParams::stream.fps)))]
    out: Output<u64>,
}

impl Operator for SecretSrc {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[operator(params = SecretParams)]
struct SecretKeeper {
    #[input(history = parameter_count(param_ref!(SecretParams::stream.keep)))]
    values: Input<u64>,
}

impl Operator for SecretKeeper {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// The compiler read only the field's own flags: a rate inside a sensitive struct was
/// read, shown in the plan's rates and quoted in its messages.
#[test]
fn a_field_inside_a_sensitive_struct_is_never_read_by_the_compiler() {
    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "secret",
            SecretSrc {
                out: Output::default(),
            },
        )
        .unwrap();
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    g.add_flow(s.out, p.values, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_UNREADABLE_PARAMETER], "{d}");
    assert_eq!(d.items[0].field_path.as_deref(), Some("stream.fps"));
    assert!(!d.to_string().contains("30"), "{d}");
    // A history from inside it is refused when the operator is added.
    let mut g = Graph::new();
    let e = g
        .add_operator_with_defaults(
            "keeper",
            SecretKeeper {
                values: Input::default(),
            },
        )
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), holo_runtime::ErrorCode::InvalidArgument, "{e}");
    assert_eq!(e.location(), Some("stream.keep"), "{e}");
}

#[test]
fn the_fixed_one_to_one_and_quarter_chain() {
    #[operator(trigger = on_arrival(frames))]
    struct Chain2 {
        frames: Input<u64>,
        #[output(follows(frames, RateRatio::new(1, 1)))]
        same: Output<u64>,
        #[output(follows(frames, RateRatio::new(1, 4)))]
        quarter: Output<u64>,
    }
    idle_compute!(Chain2);
    let mut g = Graph::new();
    let cam = g.add_operator("cam", src(), src_params(60)).unwrap();
    let c = add(
        &mut g,
        "chain",
        Chain2 {
            frames: Input::default(),
            same: Output::default(),
            quarter: Output::default(),
        },
    );
    g.add_flow(cam.out, c.frames, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let rate = |op: &str, port: &str| {
        plan.port_rates()
            .iter()
            .find(|r| &*r.operator_name == op && r.port == port)
            .map(|r| {
                (
                    r.active_hz.clone(),
                    r.admitted_max_hz.clone(),
                    r.source.to_string(),
                )
            })
            .unwrap()
    };
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        rate("cam", "out"),
        (s("60"), s("120"), "nominal_rate".to_owned())
    );
    assert_eq!(
        rate("chain", "frames"),
        (s("60"), s("120"), "upstream".to_owned())
    );
    assert_eq!(
        rate("chain", "same"),
        (s("60"), s("120"), "follows".to_owned())
    );
    assert_eq!(
        rate("chain", "quarter"),
        (s("15"), s("30"), "follows".to_owned())
    );
}

#[test]
fn expected_rate_is_a_fallback_only_when_upstream_declares_none() {
    // Upstream positively declares no rate: the fallback sizes the edge (⌈200/30⌉ = 7 → 14).
    let mut g = Graph::new();
    let s = add(
        &mut g,
        "plain",
        Plain {
            out: Output::default(),
        },
    );
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    let e = g.add_flow(s.out, p.values, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let r = recipe(&plan, e);
    assert_eq!(
        (&*r.rate_source, r.queue_depth, &*r.depth_source),
        ("expected_rate", 14, "automatic")
    );
    // Upstream declares 1 kHz: it is authoritative (⌈1000/30⌉ = 34 → 68).
    let mut g = Graph::new();
    let s = add(
        &mut g,
        "fixed",
        Fixed {
            out: Output::default(),
        },
    );
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    let e = g.add_flow(s.out, p.values, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let r = recipe(&plan, e);
    assert_eq!((&*r.rate_source, r.queue_depth), ("upstream", 68));
    // No finite horizon (default trigger): no rate-derived depth at all.
    let mut g = Graph::new();
    let s = add(
        &mut g,
        "plain",
        Plain {
            out: Output::default(),
        },
    );
    let p = add(
        &mut g,
        "u",
        Unclocked2 {
            values: Input::default(),
        },
    );
    let e = g.add_flow(s.out, p.values, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let r = recipe(&plan, e);
    assert_eq!(
        (r.queue_depth, &*r.depth_source, r.recommendation),
        (1, "default", None)
    );
}

#[test]
fn hard_floors_compose_without_double_counting() {
    // Producer burst 3 and window retention 4 are two views of the queued entries: 4.
    let mut g = Graph::new();
    let b = add(
        &mut g,
        "bursty",
        Bursty {
            out: Output::default(),
        },
    );
    let cam = g.add_operator("cam", src(), src_params(60)).unwrap();
    let f = add(&mut g, "fusion", fusion());
    g.add_flow(cam.out, f.frames, ConnectionOptions::default());
    let e = g.add_flow(b.out, f.imu, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let contributors: Vec<(String, u32)> = plan
        .hard_floor_contributors()
        .iter()
        .filter(|c| c.edge == Some(u32::try_from(e.index()).unwrap()))
        .map(|c| (c.contributor.to_string(), c.entries))
        .collect();
    assert_eq!(
        contributors,
        vec![
            ("minimum_queue".to_owned(), 1),
            ("producer_burst".to_owned(), 3),
            ("window_retention".to_owned(), 4)
        ]
    );
    assert_eq!(recipe(&plan, e).hard_floor, 4);
    // The default depth is never below the floor either (frames edge: burst 1 → 1).
    assert_eq!(recipe(&plan, e).queue_depth, 4); // ⌈60/60⌉ = 1 → 2 < floor 4
}

#[test]
fn the_plan_json_is_byte_identical_run_to_run() {
    let a = compile(&imu_graph(60, None).0, CompileOptions::default())
        .unwrap()
        .json();
    let b = compile(&imu_graph(60, None).0, CompileOptions::default())
        .unwrap()
        .json();
    assert_eq!(a, b);
    for key in [
        "\"port_rates\"",
        "\"accumulation_horizons\"",
        "\"hard_floor_contributors\"",
        "\"queue_sizing_recipes\"",
        "\"pool_capacity_dependencies\"",
        "\"provider_allocation_plans\"",
    ] {
        assert!(a.contains(key), "{key}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn automatic_depth_never_falls_below_a_floor_and_explicit_depth_never_changes(
        camera_hz in 1i64..=120,
        headroom_n in 1u64..=8,
        headroom_d in 1u64..=8,
        explicit in 4u32..=500,
    ) {
        let mut o = CompileOptions::default();
        o.automatic_queue_sizing.headroom_ratio = RateRatio::new(headroom_n, headroom_d);
        let (g, e) = imu_graph(camera_hz, None);
        let plan = compile(&g, o.clone()).unwrap();
        let r = recipe(&plan, e);
        prop_assert_eq!(&*r.depth_source, "automatic");
        for c in plan.hard_floor_contributors().iter().filter(|c| c.edge == Some(r.edge)) {
            prop_assert!(r.queue_depth >= c.entries);
        }
        prop_assert!(r.queue_depth >= r.hard_floor);
        prop_assert_eq!(Some(r.queue_depth), r.automatic_depth);
        let (g, e) = imu_graph(camera_hz, Some(explicit));
        let plan = compile(&g, o).unwrap();
        prop_assert_eq!(recipe(&plan, e).queue_depth, explicit);
        prop_assert_eq!(plan.edges()[e.index()].queue_depth, explicit);
    }
}

// ---------------------------------------------------------------- sessions

#[derive(Default)]
struct Seen {
    activations: AtomicU64,
    last: AtomicU64,
    rate_num: AtomicU64,
    generation: AtomicU64,
    history: AtomicU64,
}

/// Triggered by frames; `other` must be present (missing = skip) and `hint` reuses its last.
#[operator(trigger = on_arrival(frames))]
struct Watch {
    frames: Input<u64>,
    other: Input<u64>,
    #[input(missing = reuse_last, history = 2)]
    hint: Input<u64>,
    seen: Arc<Seen>,
}

impl Operator for Watch {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let _ = self.frames.receive();
        let _ = self.other.receive();
        let h = self.hint.receive();
        self.seen.activations.fetch_add(1, Ordering::Relaxed);
        self.seen.last.store(h.unwrap_or(0), Ordering::Relaxed);
        let (a, b) = self.hint.history();
        self.seen
            .history
            .store((a.len() + b.len()) as u64, Ordering::Relaxed);
        let v = ctx.rate(&self.frames);
        if let Some(r) = v.rate {
            self.seen
                .rate_num
                .store(u64::try_from(r.numerator()).unwrap_or(0), Ordering::Relaxed);
        }
        self.seen
            .generation
            .store(v.generation.unwrap_or(0), Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn a_clock_driven_source_runs_at_its_rate() {
    let mut g = Graph::new();
    let cam = g.add_operator("cam", src(), src_params(100)).unwrap();
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    g.add_flow(cam.out, p.values, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let t = Instant::now();
    let s = RunSession::start(
        g,
        &plan,
        SessionOptions::default().with_max_source_activations(Some(11)),
    )
    .unwrap();
    assert!(s.wait_idle(Duration::from_secs(10)));
    // 11 ticks at 100 Hz: the first at once, the last 100 ms later.
    assert!(
        t.elapsed() >= Duration::from_millis(95),
        "{:?}",
        t.elapsed()
    );
    let r = s.join().unwrap();
    assert_eq!(r.activations[0], ("cam".to_owned(), 11));
}

#[test]
fn on_arrival_skips_when_a_skip_input_is_missing_and_reuses_the_last_sample() {
    /// Emits `value` on its first two activations only.
    #[operator]
    struct Once {
        out: Output<u64>,
        value: u64,
        sent: u64,
    }
    impl Operator for Once {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            if self.sent < 2 {
                self.sent += 1;
                let _ = self.out.emit(self.value, EmitOptions::default());
            }
            Ok(())
        }
    }
    let seen = Arc::new(Seen::default());
    let mut g = Graph::new();
    let cam = g.add_operator("cam", src(), src_params(100)).unwrap();
    let other = add(
        &mut g,
        "other",
        Once {
            out: Output::default(),
            value: 1,
            sent: 0,
        },
    );
    let hint = add(
        &mut g,
        "hint",
        Once {
            out: Output::default(),
            value: 42,
            sent: 0,
        },
    );
    let w = add(
        &mut g,
        "watch",
        Watch {
            frames: Input::default(),
            other: Input::default(),
            hint: Input::default(),
            seen: Arc::clone(&seen),
        },
    );
    g.add_flow(cam.out, w.frames, ConnectionOptions::default());
    g.add_flow(other.out, w.other, ConnectionOptions::default());
    g.add_flow(hint.out, w.hint, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    // `other` and `hint` emit twice each; `cam` ticks 10 times at 100 Hz.
    let s = RunSession::start(
        g,
        &plan,
        SessionOptions::default().with_max_source_activations(Some(10)),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.activations.load(Ordering::Relaxed) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(150));
    let r = s.join().unwrap();
    // `other` carries two entries: at most two activations ran; the rest were skipped.
    assert_eq!(seen.activations.load(Ordering::Relaxed), 2, "{r:?}");
    // The last activation saw 42: received, or reused (`missing = reuse_last`).
    assert_eq!(seen.last.load(Ordering::Relaxed), 42);
    // History retains what was received (a reused sample is not received again).
    assert!((1..=2).contains(&seen.history.load(Ordering::Relaxed)));
    // ctx.rate: the published generation 1's 100 Hz.
    assert_eq!(seen.rate_num.load(Ordering::Relaxed), 100);
    assert_eq!(seen.generation.load(Ordering::Relaxed), 1);
}

#[test]
fn follows_never_triggers() {
    // Chain's outputs follow its input, but nothing feeds the input: it never runs.
    #[operator(trigger = on_arrival(frames))]
    struct Follower {
        #[input(optional)]
        frames: Input<u64>,
        #[output(follows(frames, RateRatio::new(1, 1)))]
        out: Output<u64>,
        runs: Arc<AtomicU64>,
    }
    impl Operator for Follower {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            self.runs.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }
    let runs = Arc::new(AtomicU64::new(0));
    let mut g = Graph::new();
    let f = add(
        &mut g,
        "follower",
        Follower {
            frames: Input::default(),
            out: Output::default(),
            runs: Arc::clone(&runs),
        },
    );
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    g.add_flow(f.out, p.values, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let s = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.join().unwrap();
    assert_eq!(runs.load(Ordering::Relaxed), 0);
}

fn session_graph() -> (Graph, EdgeId) {
    let mut g = Graph::new();
    let cam = g.add_operator("camera", src(), src_params(60)).unwrap();
    let p = add(
        &mut g,
        "poll",
        Poll {
            values: Input::default(),
        },
    );
    let e = g.add_flow(cam.out, p.values, ConnectionOptions::default());
    (g, e)
}

#[test]
fn rate_generations_are_owning_and_independently_absent() {
    // The plan's compiled rates are published as generation 1.
    let (g, e) = session_graph();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    // 60 Hz into a 30 Hz clock: ⌈2⌉ = 2 → 4 entries.
    assert_eq!(recipe(&plan, e).queue_depth, 4);
    let s = RunSession::start(
        g,
        &plan,
        SessionOptions::default().with_max_source_activations(Some(0)),
    )
    .unwrap();
    let snap = s.capture_rate_generations();
    assert_eq!(snap.published().map(|p| p.rate_generation), Some(1));
    assert!(snap.last_rejected().is_none());
    // Within the admitted domain and the plan's depths: published.
    assert_eq!(
        s.propose_rates(&RateCandidate::new().set("camera", "out", Rate::hz(45))),
        Ok(2)
    );
    // Above the admitted maximum (120): rejected, the published one stays.
    let err = s
        .propose_rates(&RateCandidate::new().set("camera", "out", Rate::hz(150)))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(generation_codes::RATE_GENERATION_OUTSIDE_ADMITTED_DOMAIN.name())
    );
    // Admitted but more arrivals than the compiled depth holds: ⌈90/30⌉ × 2 = 6 > 4.
    let err = s
        .propose_rates(&RateCandidate::new().set("camera", "out", Rate::hz(90)))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(generation_codes::RATE_GENERATION_EXCEEDS_PLAN.name())
    );
    let snap = s.capture_rate_generations();
    assert_eq!(snap.published().map(|p| p.rate_generation), Some(2));
    assert_eq!(
        snap.last_rejected().map(|r| (r.rate_generation, r.code)),
        Some((4, generation_codes::RATE_GENERATION_EXCEEDS_PLAN))
    );
    // A port with no nominal rate (or none at all) cannot be given one.
    let err = s
        .propose_rates(&RateCandidate::new().set("camera", "nope", Rate::hz(30)))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(generation_codes::RATE_GENERATION_UNKNOWN_PORT.name()),
        "{err}"
    );
    assert_eq!(
        s.capture_rate_generations()
            .last_rejected()
            .map(|r| (r.rate_generation, r.code)),
        Some((5, generation_codes::RATE_GENERATION_UNKNOWN_PORT))
    );
    s.join().unwrap();

    // The first candidate fails before anything is published.
    let (g, e) = session_graph();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let s = RunSession::start_with_rates(
        g,
        &plan,
        SessionOptions::default().with_max_source_activations(Some(0)),
        RateCandidate::new().set("camera", "out", Rate::hz(0)),
    )
    .unwrap();
    let snap = s.capture_rate_generations();
    assert!(snap.published().is_none());
    let rejected = snap.last_rejected().unwrap();
    assert_eq!(
        (rejected.rate_generation, rejected.code),
        (1, generation_codes::RATE_INVALID)
    );
    // The rejected candidate can be inspected on its own.
    let json =
        render_rate_queue_inspection(&plan, &snap, 1, e, RateQueueInspectionFormat::CanonicalJson)
            .unwrap();
    assert!(json.contains(RATE_QUEUE_INSPECTION_SCHEMA));
    assert!(json.contains("\"generation_status\": \"rejected\""));
    // A generation not in the snapshot is an error, not a guess.
    assert!(
        render_rate_queue_inspection(&plan, &snap, 7, e, RateQueueInspectionFormat::HumanText)
            .is_err()
    );
    s.join().unwrap();
}

#[test]
fn inspection_pins_only_automatic_depths() {
    let (g, e) = imu_graph(60, None);
    let (gx, ex) = imu_graph(60, Some(20));
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let planx = compile(&gx, CompileOptions::default()).unwrap();
    let s = RunSession::start(
        g,
        &plan,
        SessionOptions::default().with_max_source_activations(Some(0)),
    )
    .unwrap();
    let sx = RunSession::start(
        gx,
        &planx,
        SessionOptions::default().with_max_source_activations(Some(0)),
    )
    .unwrap();
    let snap = s.capture_rate_generations();
    let snapx = sx.capture_rate_generations();
    let human =
        render_rate_queue_inspection(&plan, &snap, 1, e, RateQueueInspectionFormat::HumanText)
            .unwrap();
    assert!(
        human.contains("ConnectionOptions::default().with_queue_depth(34)"),
        "{human}"
    );
    assert!(
        human.contains("physical reservation unavailable") || !human.contains("provider"),
        "{human}"
    );
    let humanx =
        render_rate_queue_inspection(&planx, &snapx, 1, ex, RateQueueInspectionFormat::HumanText)
            .unwrap();
    assert!(!humanx.contains("ConnectionOptions::"), "{humanx}");
    let j1 =
        render_rate_queue_inspection(&plan, &snap, 1, e, RateQueueInspectionFormat::CanonicalJson)
            .unwrap();
    let j2 =
        render_rate_queue_inspection(&plan, &snap, 1, e, RateQueueInspectionFormat::CanonicalJson)
            .unwrap();
    assert_eq!(j1, j2);
    s.join().unwrap();
    sx.join().unwrap();
}

#[test]
fn reuse_last_returns_the_last_sample_once_per_activation() {
    /// Emits 7 once.
    #[operator]
    struct One {
        out: Output<u64>,
        sent: bool,
    }
    impl Operator for One {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            if !self.sent {
                self.sent = true;
                let _ = self.out.emit(7u64, EmitOptions::default());
            }
            Ok(())
        }
    }
    #[derive(Default)]
    struct Log {
        got: std::sync::Mutex<Vec<(Option<u64>, Option<u64>)>>,
    }
    /// On a 200 Hz clock: two receives per activation.
    #[operator(trigger = clock(hz = 200))]
    struct Reuse {
        #[input(missing = reuse_last)]
        v: Input<u64>,
        log: Arc<Log>,
    }
    impl Operator for Reuse {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            let a = self.v.receive();
            let b = self.v.receive();
            if a.is_some() {
                self.log.got.lock().unwrap().push((a, b));
            }
            Ok(())
        }
    }
    let log = Arc::new(Log::default());
    let mut g = Graph::new();
    let o = add(
        &mut g,
        "one",
        One {
            out: Output::default(),
            sent: false,
        },
    );
    let r = add(
        &mut g,
        "reuse",
        Reuse {
            v: Input::default(),
            log: Arc::clone(&log),
        },
    );
    g.add_flow(o.out, r.v, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let s = RunSession::start(
        g,
        &plan,
        SessionOptions::default().with_max_source_activations(Some(3)),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.join().unwrap();
    let got = log.got.lock().unwrap().clone();
    // The activation that received 7 reuses it on its second call; every later
    // activation reuses it exactly once.
    assert!(got.len() >= 3, "{got:?}");
    assert_eq!(got[0], (Some(7), Some(7)));
    for (a, b) in &got[1..] {
        assert_eq!((*a, *b), (Some(7), None), "{got:?}");
    }
}

/// A clock slower than one tick in 584 years: its period does not fit 64 bits of
/// nanoseconds, which the session ticks in.
#[operator(trigger = clock(rate = holo_runtime::Rate::new(1, 20_000_000_000)))]
struct GlacialClock {
    out: Output<u64>,
}

impl Operator for GlacialClock {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// It compiled, and every `RunSession::start` then refused the plan ("no usable period").
#[test]
fn a_clock_whose_period_does_not_fit_64_bits_of_nanoseconds_is_invalid() {
    let mut g = Graph::new();
    g.add_operator(
        "glacial",
        GlacialClock {
            out: Output::default(),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_INVALID], "{d}");
    assert_eq!(d.items[0].operator.as_deref(), Some("glacial"));
    assert!(
        d.items[0].message.contains("past 64 bits of nanoseconds"),
        "{d}"
    );
}

/// Expects its input's rate from `live_hz`, which the compiler may not read (neither
/// `compile_time` nor `recompile_required`).
#[operator(params = SrcParams, trigger = clock(hz = 30))]
struct LivePoll {
    #[input(expected_rate = parameter_rate(param_ref!(SrcParams::live_hz)))]
    values: Input<u64>,
}

impl Operator for LivePoll {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.values.receive().is_some() {}
        Ok(())
    }
}

/// An expected rate is a fallback; fed by an upstream that declares its rate, it was not
/// resolved as the input's rate, but it was read for the plan's record: an unreadable
/// parameter's value reached `expected_rate_hz` in the plan's JSON (its operator's
/// parameters are redacted there). It is refused as any unreadable rate parameter is.
#[test]
fn an_unreadable_expected_rate_is_refused_even_behind_a_declared_upstream_rate() {
    let mut g = Graph::new();
    let s = add(
        &mut g,
        "imu",
        Fixed {
            out: Output::default(),
        },
    );
    let p = g
        .add_operator(
            "poll",
            LivePoll {
                values: Input::default(),
            },
            src_params(60),
        )
        .unwrap();
    g.add_flow(s.out, p.values, ConnectionOptions::default());
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::RATE_UNREADABLE_PARAMETER], "{d}");
    assert_eq!(d.items[0].port.as_deref(), Some("values"));
    assert_eq!(d.items[0].field_path.as_deref(), Some("live_hz"));
    // Unconnected, the expected rate is the input's rate: reported once.
    let mut g = Graph::new();
    g.add_operator(
        "poll",
        LivePoll {
            values: Input::default(),
        },
        src_params(60),
    )
    .unwrap();
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(
        d.with_code(codes::RATE_UNREADABLE_PARAMETER).count(),
        1,
        "{d}"
    );
}
