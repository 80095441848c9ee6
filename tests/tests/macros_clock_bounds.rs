//! `#[operator(trigger = clock(hz = …))]` and `#[output(bounds = …)]` take more than an
//! integer literal: `hz` reads a parameter when the plan is compiled
//! (`hz = param_ref!(P::fps)`, with the checks a rate attribute's parameter read gets),
//! and both take any `u64` const expression (`hz = TICK_HZ`, `bounds = 64 * 1024`). The
//! plan records the resolved clock period and per-slot bytes, and the parameter a clock
//! reads.

use holo_runtime::plan::ExecutionPlan;
use holo_runtime::{
    CompileOptions, Diagnostics, ExecutionContext, Graph, NoParams, Operator, OperatorPorts,
    Output, ParamSchema, ParamSet, Result, Tensor, codes, compile, operator,
};

/// Bytes of one 640 × 480 grayscale frame.
const FRAME_BYTES: u64 = 640 * 480;

/// A clock rate declared once and shared.
const TICK_HZ: u64 = 50;

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.MacrosClockBounds.Camera", version = 1)]
struct CameraParams {
    /// Frames per second, fixed for the life of a plan.
    #[param(min = 1, max = 240, recompile_required, default = 60)]
    fps: u32,
    /// A rate the compiler may read: fixed when the graph is built.
    #[param(compile_time, default = 25)]
    build_fps: u16,
    /// A signed rate, so that a non-positive value can be written.
    #[param(recompile_required, default = 10)]
    signed_fps: i64,
    /// A rate the compiler may not read: sensitive.
    #[param(sensitive, recompile_required, default = 60)]
    secret_fps: u32,
    /// A rate the compiler may not read: it may change while the session runs.
    #[param(default = 60)]
    live_fps: u32,
}

/// `source!(Name, Params, trigger)`: a source operator with that trigger and one
/// runtime-pool output bounded by `FRAME_BYTES`, whose `compute` does nothing.
macro_rules! source {
    ($name:ident, $params:ty, $($trigger:tt)*) => {
        #[operator(params = $params, trigger = $($trigger)*)]
        struct $name {
            #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = FRAME_BYTES)]
            frames: Output<Tensor>,
        }

        impl Operator for $name {
            fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
                Ok(())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self {
                    frames: Output::default(),
                }
            }
        }
    };
}

source!(
    Camera,
    CameraParams,
    clock(hz = param_ref!(CameraParams::fps))
);
source!(
    BuildCamera,
    CameraParams,
    clock(hz = param_ref!(CameraParams::build_fps))
);
source!(
    SignedCamera,
    CameraParams,
    clock(hz = param_ref!(CameraParams::signed_fps))
);
source!(
    SecretCamera,
    CameraParams,
    clock(hz = param_ref!(CameraParams::secret_fps))
);
source!(
    LiveCamera,
    CameraParams,
    clock(hz = param_ref!(CameraParams::live_fps))
);
source!(ConstTick, NoParams, clock(hz = TICK_HZ));
source!(ProductTick, NoParams, clock(hz = 30 * 2));
source!(LiteralTick, NoParams, clock(hz = 60));

// A clock given through the rate form, `clock(rate = parameter_rate(...))`.
source!(
    RateCamera,
    CameraParams,
    clock(rate = parameter_rate(param_ref!(CameraParams::fps)))
);

/// Bounds from const expressions: a product and a `const` item of another module.
#[operator]
struct Bounded {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 64 * 1024)]
    product: Output<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = sizes::SLOT)]
    item: Output<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 256)]
    literal: Output<Tensor>,
}

mod sizes {
    /// Four frames of 1 KiB.
    pub(crate) const SLOT: u64 = 4 * super::KIB;
}

const KIB: u64 = 1024;

impl Operator for Bounded {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

fn camera_params(toml: &str) -> ParamSet<CameraParams> {
    ParamSet::from_toml_str(toml).unwrap()
}

/// Compiles a graph of the one operator `O`, named `op`.
fn compile_one<O>(params: ParamSet<O::Params>) -> std::result::Result<ExecutionPlan, Diagnostics>
where
    O: Operator + Default,
{
    let mut g = Graph::new();
    g.add_operator("op", O::default(), params).unwrap();
    compile(&g, CompileOptions::default())
}

/// The compiled clock of the graph's one operator: (hz, period in ns, parameter).
fn clock_of(plan: &ExecutionPlan) -> (Option<&str>, Option<u64>, Option<&str>) {
    let t = &plan.operator_triggers()[0];
    assert_eq!(t.trigger.to_string(), "clock");
    (
        t.clock_hz.as_deref(),
        t.clock_period_ns,
        t.clock_parameter.as_deref(),
    )
}

#[test]
fn a_parameter_clock_reads_its_field_when_the_plan_is_compiled() {
    let plan = compile_one::<Camera>(camera_params("")).unwrap();
    assert_eq!(
        clock_of(&plan),
        (Some("60"), Some(16_666_667), Some("fps")),
        "the default 60 Hz, rounded up to whole nanoseconds, and the field it came from"
    );
    let plan = compile_one::<Camera>(camera_params("fps = 30")).unwrap();
    assert_eq!(
        clock_of(&plan),
        (Some("30"), Some(33_333_334), Some("fps")),
        "another value, another period"
    );
    let plan = compile_one::<BuildCamera>(camera_params("build_fps = 200")).unwrap();
    assert_eq!(
        clock_of(&plan),
        (Some("200"), Some(5_000_000), Some("build_fps")),
        "a `compile_time` field of another integer type"
    );
}

#[test]
fn the_hz_and_rate_forms_of_a_parameter_clock_compile_alike() {
    let hz = compile_one::<Camera>(camera_params("fps = 120")).unwrap();
    let rate = compile_one::<RateCamera>(camera_params("fps = 120")).unwrap();
    assert_eq!(clock_of(&hz), clock_of(&rate));
    assert_eq!(clock_of(&hz), (Some("120"), Some(8_333_334), Some("fps")));
}

#[test]
fn the_plan_json_names_the_clocks_parameter() {
    let plan = compile_one::<Camera>(camera_params("fps = 30")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    let trigger = &json["operator_triggers"][0];
    assert_eq!(trigger["clock_hz"], "30");
    assert_eq!(trigger["clock_period_ns"], 33_333_334);
    assert_eq!(trigger["clock_parameter"], "fps");
    let plan = compile_one::<LiteralTick>(ParamSet::defaults().unwrap()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    assert_eq!(
        json["operator_triggers"][0]["clock_parameter"],
        serde_json::Value::Null
    );
}

#[test]
fn const_expression_clocks_resolve_like_literals() {
    let defaults = || ParamSet::defaults().unwrap();
    let literal = compile_one::<LiteralTick>(defaults()).unwrap();
    assert_eq!(clock_of(&literal), (Some("60"), Some(16_666_667), None));
    let product = compile_one::<ProductTick>(defaults()).unwrap();
    assert_eq!(clock_of(&product), clock_of(&literal), "30 * 2 is 60 Hz");
    let item = compile_one::<ConstTick>(defaults()).unwrap();
    assert_eq!(clock_of(&item), (Some("50"), Some(20_000_000), None));
}

#[test]
fn an_unreadable_clock_parameter_is_a_compile_diagnostic() {
    for (diagnostics, field) in [
        (
            compile_one::<SecretCamera>(camera_params("")).unwrap_err(),
            "secret_fps",
        ),
        (
            compile_one::<LiveCamera>(camera_params("")).unwrap_err(),
            "live_fps",
        ),
    ] {
        assert_eq!(
            diagnostics.codes(),
            vec![codes::RATE_UNREADABLE_PARAMETER],
            "{diagnostics}"
        );
        let d = &diagnostics.items[0];
        assert_eq!(d.field_path.as_deref(), Some(field));
        assert_eq!(d.operator.as_deref(), Some("op"));
        assert_eq!(d.port, None, "a clock is the operator's, not a port's");
    }
}

#[test]
fn a_non_positive_clock_parameter_is_a_compile_diagnostic() {
    for value in ["0", "-5"] {
        let diagnostics =
            compile_one::<SignedCamera>(camera_params(&format!("signed_fps = {value}")))
                .unwrap_err();
        assert_eq!(
            diagnostics.codes(),
            vec![codes::RATE_INVALID],
            "{diagnostics}"
        );
        assert_eq!(
            diagnostics.items[0].field_path.as_deref(),
            Some("signed_fps")
        );
    }
}

#[test]
fn const_expression_bounds_size_each_slot() {
    let mut g = Graph::new();
    g.add_operator(
        "bounded",
        Bounded {
            product: Output::default(),
            item: Output::default(),
            literal: Output::default(),
        },
        ParamSet::defaults().unwrap(),
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let bytes = |pool: &str| plan.tensor_allocation(pool).unwrap().per_slot_bytes;
    assert_eq!(bytes("bounded.product"), 64 * 1024);
    assert_eq!(bytes("bounded.item"), 4096);
    assert_eq!(bytes("bounded.literal"), 256);
    let expressions: Vec<(&str, &str)> = plan
        .tensor_byte_span_derivations()
        .iter()
        .map(|d| (d.pool.as_str(), d.expression.as_str()))
        .collect();
    assert_eq!(
        expressions,
        [
            ("bounded.product", "tensor_bounds(65536)"),
            ("bounded.item", "tensor_bounds(4096)"),
            ("bounded.literal", "tensor_bounds(256)"),
        ],
        "a const bound shows as its value, exactly as a literal does"
    );
    let camera = compile_one::<Camera>(camera_params("")).unwrap();
    assert_eq!(
        camera
            .tensor_allocation("op.frames")
            .unwrap()
            .per_slot_bytes,
        FRAME_BYTES
    );
}

#[test]
fn the_spec_holds_the_const_values() {
    let spec = Bounded::operator_spec();
    let bounds: Vec<u64> = spec
        .ports
        .iter()
        .map(|p| match &p.payload {
            holo_runtime::spec::PortPayload::Tensor(t) => t.bounds.unwrap().max_byte_span,
            _ => unreachable!("every port of `Bounded` is a tensor output"),
        })
        .collect();
    assert_eq!(bounds, [65_536, 4096, 256]);
    let holo_runtime::Trigger::Clock(rate) = ConstTick::operator_spec().trigger else {
        panic!("`ConstTick` has a clock trigger");
    };
    assert!(
        matches!(rate, holo_runtime::RateExpr::Fixed(r) if r == holo_runtime::Rate::hz(TICK_HZ))
    );
}
