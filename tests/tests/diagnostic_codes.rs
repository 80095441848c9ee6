//! One code vocabulary: diagnostic and rate-generation codes are typed, matchable enums
//! whose stable names round-trip and appear unchanged in text and JSON, and a rejected
//! compile converted into an [`Error`] keeps every diagnostic.

mod common;

use std::str::FromStr;

use common::{ByteSink, ByteSource, Forward};
use holo_runtime::app::{App, AppArgs};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DiagnosticCode, Diagnostics, Error, ErrorCode,
    ExecutionContext, Graph, Operator, Output, ParamSet, Result, Tensor, codes, compile, operator,
};
use holo_runtime::{RateGenerationCode, generation_codes};

fn is_screaming_snake_case(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('_')
        && !name.ends_with('_')
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Asserts the naming rules over one vocabulary: every name is SCREAMING_SNAKE_CASE and
/// names one code only, and round-trips through `from_name`, `FromStr` and `Display`.
fn check_vocabulary<C>(all: &[C], name: fn(C) -> &'static str, from_name: fn(&str) -> Option<C>)
where
    C: Copy + PartialEq + std::fmt::Debug + std::fmt::Display + FromStr<Err = Error>,
{
    let mut seen = std::collections::BTreeSet::new();
    for &code in all {
        let n = name(code);
        assert!(
            is_screaming_snake_case(n),
            "{n} is not SCREAMING_SNAKE_CASE"
        );
        assert!(seen.insert(n), "{n} names two codes");
    }
    for &code in all {
        let n = name(code);
        assert_eq!(from_name(n), Some(code), "{n} does not round-trip");
        assert_eq!(n.parse::<C>(), Ok(code), "{n} does not parse");
        assert_eq!(code.to_string(), n, "{code:?} does not display as its name");
    }
    assert_eq!(from_name("NOT_A_CODE"), None);
    let err = "graph_cycle".parse::<C>().unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
}

#[test]
fn every_diagnostic_code_name_round_trips_and_is_unique_screaming_snake_case() {
    check_vocabulary(
        DiagnosticCode::ALL,
        DiagnosticCode::name,
        DiagnosticCode::from_name,
    );
    // The constants are the enum's values, named by their stable names.
    assert_eq!(codes::GRAPH_CYCLE, DiagnosticCode::GraphCycle);
    assert_eq!(codes::GRAPH_CYCLE.name(), "GRAPH_CYCLE");
    assert_eq!(
        codes::RATE_QUEUE_DEPTH_BELOW_RECOMMENDATION.name(),
        "RATE_QUEUE_DEPTH_BELOW_RECOMMENDATION"
    );
    assert_eq!(DiagnosticCode::ALL.len(), 50);
}

#[test]
fn every_rate_generation_code_name_round_trips_and_is_unique_screaming_snake_case() {
    check_vocabulary(
        RateGenerationCode::ALL,
        RateGenerationCode::name,
        RateGenerationCode::from_name,
    );
    assert_eq!(
        generation_codes::RATE_GENERATION_EXCEEDS_PLAN.name(),
        "RATE_GENERATION_EXCEEDS_PLAN"
    );
    // A candidate with a non-positive rate is rejected under the compile diagnostic's name.
    assert_eq!(
        generation_codes::RATE_INVALID.name(),
        codes::RATE_INVALID.name()
    );
    assert_eq!(RateGenerationCode::ALL.len(), 4);
}

/// A caller branches on a code with `match`: the enums are matchable (with a wildcard
/// arm, as they are `#[non_exhaustive]`).
fn family(code: DiagnosticCode) -> &'static str {
    match code {
        DiagnosticCode::GraphUnconnectedInput
        | DiagnosticCode::GraphIllegalFanIn
        | DiagnosticCode::GraphCycle
        | DiagnosticCode::GraphInvalidFlow
        | DiagnosticCode::GraphForeignPort => "GRAPH_",
        DiagnosticCode::PlacementDeviceRequired
        | DiagnosticCode::PlacementDeviceConflict
        | DiagnosticCode::PlacementUnknownBinding => "PLACEMENT_",
        DiagnosticCode::RateInvalid | DiagnosticCode::RateHorizonMissing => "RATE_",
        _ => "",
    }
}

fn rejection(code: RateGenerationCode) -> &'static str {
    match code {
        RateGenerationCode::UnknownPort => "unknown port",
        RateGenerationCode::OutsideAdmittedDomain => "outside the admitted domain",
        RateGenerationCode::ExceedsPlan => "exceeds the plan",
        RateGenerationCode::RateInvalid => "invalid rate",
        _ => "other",
    }
}

#[test]
fn codes_are_matchable() {
    for &code in DiagnosticCode::ALL {
        assert!(code.name().starts_with(family(code)), "{code}");
    }
    assert_eq!(family(codes::GRAPH_CYCLE), "GRAPH_");
    assert_eq!(family(codes::PLACEMENT_UNKNOWN_BINDING), "PLACEMENT_");
    assert_eq!(family(codes::QUEUE_DEPTH_ZERO), "");
    assert_eq!(
        rejection(generation_codes::RATE_GENERATION_EXCEEDS_PLAN),
        "exceeds the plan"
    );
}

fn no_params<S: holo_runtime::ParamSchema>() -> ParamSet<S> {
    ParamSet::defaults().unwrap()
}

/// Two diagnostics of different codes: a fan-in into `sink.frames` and the
/// unconnected `idle.input`.
fn two_mistakes() -> Graph {
    let mut g = Graph::new();
    let (s1, _) = ByteSource::new(1, 1);
    let (s2, _) = ByteSource::new(1, 1);
    let (sink, _) = ByteSink::new(1, 0);
    let a = g.add_operator("a", s1, no_params()).unwrap();
    let b = g.add_operator("b", s2, no_params()).unwrap();
    let k = g.add_operator("sink", sink, no_params()).unwrap();
    g.add_operator("idle", Forward::new(), no_params()).unwrap();
    g.add_flow(a.frames, k.frames, ConnectionOptions::default());
    g.add_flow(b.frames, k.frames, ConnectionOptions::default());
    g
}

// The texts below were printed by the code before the codes were typed: they must not
// change by a byte.
const FAN_IN: &str = "error[GRAPH_ILLEGAL_FAN_IN]: 2 flows enter one input; an input has at most one producer (at operator \"sink\", port \"frames\"); hint: give the operator one input per producer";
const UNCONNECTED: &str = "error[GRAPH_UNCONNECTED_INPUT]: a required input has no flow (at operator \"idle\", port \"input\"); hint: connect it with `graph.add_flow`, or declare it `#[input(optional)]`";

#[test]
fn diagnostics_text_and_json_keep_the_stable_names() {
    let d = compile(&two_mistakes(), CompileOptions::default()).unwrap_err();
    assert_eq!(
        d.to_string(),
        format!("compile rejected the graph with 2 diagnostic(s):\n  {FAN_IN}\n  {UNCONNECTED}\n")
    );
    assert_eq!(
        serde_json::to_string(&d.items).unwrap(),
        concat!(
            r#"[{"code":"GRAPH_ILLEGAL_FAN_IN","severity":"error","operator":"sink","port":"frames","field_path":null,"message":"2 flows enter one input; an input has at most one producer","hint":"give the operator one input per producer"},"#,
            r#"{"code":"GRAPH_UNCONNECTED_INPUT","severity":"error","operator":"idle","port":"input","field_path":null,"message":"a required input has no flow","hint":"connect it with `graph.add_flow`, or declare it `#[input(optional)]`"}]"#,
        )
    );
    assert_eq!(
        serde_json::to_string(&codes::GRAPH_CYCLE).unwrap(),
        r#""GRAPH_CYCLE""#
    );
}

#[operator]
struct ZeroBound {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 0)]
    frames: Output<Tensor>,
}
impl Operator for ZeroBound {
    fn compute(&mut self, _: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn plan_json_and_text_keep_the_warnings_stable_name() {
    let mut g = Graph::new();
    let z = ZeroBound {
        frames: Output::default(),
    };
    g.add_operator("z", z, no_params()).unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let json = plan.json();
    let warnings = &json[json
        .find("\"warnings\"")
        .expect("the plan JSON has warnings")..];
    assert_eq!(
        warnings,
        r#""warnings": [
    {
      "code": "PHYSICAL_TENSOR_ZERO_BOUNDS",
      "severity": "warning",
      "operator": "z",
      "port": "frames",
      "field_path": null,
      "message": "literal bounds of zero reject every allocation",
      "hint": ""
    }
  ]
}"#
    );
    let human = plan.render_human();
    assert!(
        human.ends_with("warnings:\n  warning[PHYSICAL_TENSOR_ZERO_BOUNDS]: literal bounds of zero reject every allocation (at operator \"z\", port \"frames\")\n"),
        "{human}"
    );
}

fn assert_keeps_every_diagnostic(err: &Error, expected: &Diagnostics) {
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert_eq!(err.location(), Some("compile"));
    let kept = err
        .detail::<Diagnostics>()
        .expect("the error carries its diagnostics");
    assert_eq!(kept, expected);
    assert_eq!(kept.items.len(), 2);
    assert_eq!(
        kept.codes(),
        vec![codes::GRAPH_ILLEGAL_FAN_IN, codes::GRAPH_UNCONNECTED_INPUT]
    );
    // Also through the standard `source` chain.
    let source = std::error::Error::source(err).expect("the diagnostics are the source");
    assert_eq!(source.downcast_ref::<Diagnostics>(), Some(expected));
    // And every one of them is in the error's text, unchanged.
    let text = err.to_string();
    assert!(text.starts_with("InvalidArgument: "), "{text}");
    assert!(text.contains(FAN_IN), "{text}");
    assert!(text.contains(UNCONNECTED), "{text}");
}

#[test]
fn a_rejected_compile_as_an_error_keeps_every_diagnostic() {
    let d = compile(&two_mistakes(), CompileOptions::default()).unwrap_err();
    let err = Error::from(d.clone());
    assert_keeps_every_diagnostic(&err, &d);
    // Clones compare equal, detail included; a different list does not.
    assert_eq!(err.clone(), err);
    let mut fewer = d.clone();
    fewer.items.pop();
    let other = Error::new(err.code(), err.message().to_owned())
        .at("compile")
        .with_detail(fewer);
    assert_ne!(other, err);
}

#[test]
fn app_run_reports_every_diagnostic_of_a_rejected_compile() {
    let expected = compile(&two_mistakes(), CompileOptions::default()).unwrap_err();
    let app = App::new(AppArgs::default(), "").unwrap();
    let err = app
        .run(two_mistakes(), CompileOptions::default())
        .unwrap_err();
    assert_keeps_every_diagnostic(&err, &expected);
}
