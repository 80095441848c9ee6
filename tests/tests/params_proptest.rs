//! The loader never panics, whatever the document: random text, random TOML structure.

use holo_runtime::{BoundedVec, ErrorCode, MemoryKind, ParamEnum, ParamSchema, ParamSet};
use proptest::prelude::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug, ParamEnum)]
enum Filter {
    Box,
    Gauss,
}

#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "test.Geometry", version = 1)]
struct Geometry {
    #[param(min = 1, max = 100)]
    width: u32,
    #[param(default = -1)]
    offset: i64,
}

#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "test.Fuzz", version = 1)]
struct Fuzz {
    geometry: Geometry,
    #[param(min = 1)]
    shape: [u64; 3],
    #[param(default)]
    batch: BoundedVec<u8, 2>,
    #[param(enum_values(Host, PinnedHost), default = MemoryKind::Host)]
    memory: MemoryKind,
    #[param(default = Filter::Box)]
    filter: Filter,
    #[param(sensitive, default)]
    secret: String,
    #[param(default = 1.0)]
    gain: f32,
    #[param(default = false)]
    flag: bool,
}

fn toml_value() -> impl Strategy<Value = toml::Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        prop_oneof![Just(0i64), Just(1), Just(3), Just(100), Just(101), Just(-1)]
            .prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        "[a-z_]{0,8}".prop_map(toml::Value::String),
        prop_oneof![
            Just("host"),
            Just("pinned"),
            Just("cuda_device"),
            Just("box"),
            Just("gauss")
        ]
        .prop_map(|s| toml::Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(toml::Value::Array),
            proptest::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| toml::Value::Table(m.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop_oneof![
            Just("geometry"),
            Just("width"),
            Just("offset"),
            Just("shape"),
            Just("batch"),
            Just("memory"),
            Just("filter"),
            Just("secret"),
            Just("gain"),
            Just("flag"),
        ]
        .prop_map(str::to_owned),
        "[a-z]{1,6}",
    ]
}

fn check(result: &holo_runtime::Result<ParamSet<Fuzz>>) {
    if let Err(err) = result {
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
        assert!(err.param_kind().is_some(), "{err}");
        assert!(err.location().is_some(), "{err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}") {
        check(&ParamSet::<Fuzz>::from_toml_str(&text));
        check(&ParamSet::<Fuzz>::from_json_str(&text));
    }

    #[test]
    fn random_toml_like_text_never_panics(text in "[a-z_\\[\\]=\"{}., \\n0-9-]{0,120}") {
        check(&ParamSet::<Fuzz>::from_toml_str(&text));
    }

    #[test]
    fn random_structured_toml_never_panics(
        table in proptest::collection::btree_map(key(), toml_value(), 0..10),
    ) {
        let table: toml::Table = table.into_iter().collect();
        let text = toml::to_string(&table).unwrap_or_default();
        let from_text = ParamSet::<Fuzz>::from_toml_str(&text);
        check(&from_text);
        let json = serde_json::to_string(&table).unwrap_or_default();
        check(&ParamSet::<Fuzz>::from_json_str(&json));
        if let Ok(set) = from_text {
            // An accepted set re-encodes and reloads to itself.
            if let Some(again) = set.to_toml_string_unredacted() {
                prop_assert_eq!(ParamSet::<Fuzz>::from_toml_str(&again).ok(), Some(set));
            }
        }
    }
}

#[test]
fn a_valid_structured_document_is_accepted() {
    let set = ParamSet::<Fuzz>::from_toml_str(
        "shape = [1, 2, 3]\nfilter = \"gauss\"\n[geometry]\nwidth = 5\n",
    )
    .unwrap();
    assert_eq!(set.values().filter, Filter::Gauss);
    assert_eq!(Filter::Box.wire_name(), "box");
}
