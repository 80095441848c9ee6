//! Loading parameter sets from TOML and JSON: round trips and every rejection class.

use holo_runtime::params::{Value, schema_json};
use holo_runtime::{
    BoundedVec, ErrorCode, MemoryKind, ParamEnum, ParamErrorKind, ParamSchema, ParamSet, param_ref,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum Interpolation {
    Nearest,
    #[param(name = "bilinear")]
    Linear,
    Cubic,
}

#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "com.example.Geometry", version = 1)]
struct Geometry {
    /// Output width in pixels.
    #[param(min = 1, max = 4096, recompile_required)]
    width: u32,
    /// Output height in pixels.
    #[param(min = 1, max = 4096, default = 480)]
    height: u32,
}

#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "com.example.ResizeParams", version = 3)]
struct ResizeParams {
    geometry: Geometry,
    /// Height, width, channels.
    #[param(min = 1, max = 65536, recompile_required)]
    output_shape: [u64; 3],
    #[param(default = BoundedVec::from_array([1, 2]))]
    batch: BoundedVec<i32, 4>,
    #[param(
        name = "output_storage",
        enum_values(Host, PinnedHost),
        recompile_required
    )]
    storage: MemoryKind,
    #[param(enum_values(Nearest, Linear), default = Interpolation::Nearest)]
    interpolation: Interpolation,
    #[param(default = 1.5)]
    scale: f64,
    #[param(default = true, compile_time)]
    enabled: bool,
    #[param(default = String::from("resize"))]
    label: String,
    #[param(default = -3, min = -10, max = 10)]
    offset: i8,
}

const TOML: &str = r#"
output_shape = [480, 640, 3]
output_storage = "pinned"
interpolation = "bilinear"
scale = 2.0
label = "left eye"
batch = [4]

[geometry]
width = 640
height = 360
"#;

fn load_err(toml: &str) -> holo_runtime::Error {
    ParamSet::<ResizeParams>::from_toml_str(toml).expect_err("the document must be rejected")
}

fn assert_param_err(
    err: &holo_runtime::Error,
    kind: ParamErrorKind,
    location: &str,
    message_part: &str,
) {
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert_eq!(err.param_kind(), Some(kind), "{err}");
    assert_eq!(err.location(), Some(location), "{err}");
    assert!(
        err.message().contains(message_part),
        "{:?} does not contain {message_part:?}",
        err.message()
    );
}

const VALID_REST: &str = "output_storage = \"host\"\n[geometry]\nwidth = 640\n";

#[test]
fn toml_loads_with_defaults_as_generation_zero() {
    let set = ParamSet::<ResizeParams>::from_toml_str(TOML).unwrap();
    assert_eq!(set.generation(), 0);
    let v = set.values();
    assert_eq!(
        v.geometry,
        Geometry {
            width: 640,
            height: 360
        }
    );
    assert_eq!(v.output_shape, [480, 640, 3]);
    assert_eq!(v.batch.as_slice(), &[4]);
    assert_eq!(v.storage, MemoryKind::PinnedHost);
    assert_eq!(v.interpolation, Interpolation::Linear);
    assert!((v.scale - 2.0).abs() < f64::EPSILON);
    assert!(v.enabled);
    assert_eq!(v.label, "left eye");
    assert_eq!(v.offset, -3);

    let minimal =
        ParamSet::<ResizeParams>::from_toml_str(&format!("output_shape = [1, 1, 1]\n{VALID_REST}"))
            .unwrap();
    assert_eq!(minimal.values().geometry.height, 480);
    assert_eq!(minimal.values().batch.as_slice(), &[1, 2]);
    assert_eq!(minimal.values().interpolation, Interpolation::Nearest);
}

#[test]
fn toml_and_json_round_trip() {
    let set = ParamSet::<ResizeParams>::from_toml_str(TOML).unwrap();
    let toml = set.to_toml_string_unredacted().unwrap();
    let again = ParamSet::<ResizeParams>::from_toml_str(&toml).unwrap();
    assert_eq!(again, set);

    let json = Value::Table(set.values().encode_table(false))
        .to_json()
        .to_string();
    let from_json = ParamSet::<ResizeParams>::from_json_str(&json).unwrap();
    assert_eq!(from_json, set);
    assert_eq!(from_json.to_json(), set.to_json());
}

#[test]
fn unknown_keys_are_rejected_listing_the_valid_ones() {
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\nscael = 2.0\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::UnknownKey,
        "scael",
        "expected one of `geometry`, `output_shape`, `batch`, `output_storage`",
    );
    let nested = load_err(
        "output_shape = [1, 1, 1]\noutput_storage = \"host\"\n[geometry]\nwidth = 1\ndepth = 2\n",
    );
    assert_param_err(
        &nested,
        ParamErrorKind::UnknownKey,
        "geometry.depth",
        "expected one of `width`, `height`",
    );
}

#[test]
fn a_quoted_key_is_located_quoted_not_as_another_fields_path() {
    // `"geometry.width"` is one key of the root table, not `width` of `geometry`: it was
    // reported at `geometry.width`, a real field's path.
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\n\"geometry.width\" = 5\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::UnknownKey,
        "\"geometry.width\"",
        "expected one of",
    );
    // A control character in a key is an escape in the location, never raw text.
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\n\"a\\nb\" = 5\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::UnknownKey,
        "\"a\\u000Ab\"",
        "expected one of",
    );
}

#[test]
fn missing_keys_name_the_full_path() {
    let err = load_err("output_storage = \"host\"\n[geometry]\nwidth = 640\n");
    assert_param_err(
        &err,
        ParamErrorKind::MissingKey,
        "output_shape",
        "missing required key \"output_shape\" (expected [u64; 3])",
    );
    let nested = load_err("output_shape = [1, 1, 1]\noutput_storage = \"host\"\n");
    assert_param_err(
        &nested,
        ParamErrorKind::MissingKey,
        "geometry.width",
        "missing required key \"width\"",
    );
}

#[test]
fn wrong_types_are_rejected() {
    let err = load_err(&format!("output_shape = [1, \"two\", 1]\n{VALID_REST}"));
    assert_param_err(
        &err,
        ParamErrorKind::WrongType,
        "output_shape[1]",
        "expected an integer (u64), found a string",
    );
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\nenabled = 1\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::WrongType,
        "enabled",
        "expected a boolean, found an integer",
    );
    let err = load_err("output_shape = [1, 1, 1]\noutput_storage = \"host\"\ngeometry = 5\n");
    assert_param_err(
        &err,
        ParamErrorKind::WrongType,
        "geometry",
        "expected a table (schema com.example.Geometry), found an integer",
    );
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\nlabel = 1979-05-27\n{VALID_REST}"
    ));
    assert_param_err(&err, ParamErrorKind::WrongType, "label", "date-time");
    let err = ParamSet::<ResizeParams>::from_json_str("[1, 2]").unwrap_err();
    assert_param_err(
        &err,
        ParamErrorKind::WrongType,
        "<root>",
        "expected a JSON object",
    );
    let err = ParamSet::<ResizeParams>::from_json_str(r#"{"label": null}"#).unwrap_err();
    assert_param_err(&err, ParamErrorKind::WrongType, "label", "`null`");
}

#[test]
fn out_of_bounds_values_are_rejected() {
    let err =
        load_err("output_shape = [1, 1, 1]\noutput_storage = \"host\"\n[geometry]\nwidth = 5000\n");
    assert_param_err(
        &err,
        ParamErrorKind::OutOfBounds,
        "geometry.width",
        "expected an integer in 1..=4096, found 5000",
    );
    let err = load_err(&format!("output_shape = [1, 0, 1]\n{VALID_REST}"));
    assert_param_err(
        &err,
        ParamErrorKind::OutOfBounds,
        "output_shape[1]",
        "expected an integer in 1..=65536, found 0",
    );
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\noffset = -11\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::OutOfBounds,
        "offset",
        "expected an integer in -10..=10, found -11",
    );
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\nbatch = [1, 3000000000]\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::OutOfBounds,
        "batch[1]",
        "expected an integer in -2147483648..=2147483647",
    );
}

/// A parameter is a finite number: `nan` and `inf` passed every unbounded float field.
#[test]
fn non_finite_floats_are_rejected() {
    for (text, found) in [("nan", "NaN"), ("inf", "inf"), ("-inf", "-inf")] {
        let err = load_err(&format!("{TOML}\n").replace("scale = 2.0", &format!("scale = {text}")));
        assert_param_err(
            &err,
            ParamErrorKind::OutOfBounds,
            "scale",
            &format!("expected a finite float, found {found}"),
        );
    }
}

#[test]
fn values_outside_the_enum_domain_are_rejected() {
    let err = load_err(
        "output_shape = [1, 1, 1]\noutput_storage = \"cuda_device\"\n[geometry]\nwidth = 1\n",
    );
    assert_param_err(
        &err,
        ParamErrorKind::NotInDomain,
        "output_storage",
        "expected one of \"host\", \"pinned\", found \"cuda_device\"",
    );
    // `cubic` is a variant, but not in this field's domain.
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\ninterpolation = \"cubic\"\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::NotInDomain,
        "interpolation",
        "expected one of \"nearest\", \"bilinear\", found \"cubic\"",
    );
    assert_eq!(Interpolation::VARIANTS.len(), 3);
}

#[test]
fn arrays_of_the_wrong_length_are_rejected() {
    let err = load_err(&format!("output_shape = [1, 1]\n{VALID_REST}"));
    assert_param_err(
        &err,
        ParamErrorKind::WrongLength,
        "output_shape",
        "expected an array of exactly 3 elements, found 2",
    );
    let err = load_err(&format!(
        "output_shape = [1, 1, 1]\nbatch = [1, 2, 3, 4, 5]\n{VALID_REST}"
    ));
    assert_param_err(
        &err,
        ParamErrorKind::WrongLength,
        "batch",
        "expected an array of at most 4 elements, found 5",
    );
}

#[test]
fn malformed_documents_give_line_and_column() {
    let err = load_err("output_shape = [1, 1, 1]\nlabel = \"unterminated\n");
    assert_param_err(
        &err,
        ParamErrorKind::Malformed,
        "line 2, column 22",
        "malformed TOML: invalid basic string",
    );
    let err = ParamSet::<ResizeParams>::from_json_str("{\n  \"label\": [1 2]\n}").unwrap_err();
    assert_param_err(
        &err,
        ParamErrorKind::Malformed,
        "line 2, column 15",
        "malformed JSON: expected `,` or `]`",
    );
}

#[test]
fn a_json_key_given_twice_is_malformed_not_the_last_one_wins() {
    // serde_json keeps the last value of a repeated key: `width` would have been 1.
    for text in [
        "{\"label\": \"a\", \"label\": \"b\"}",
        "{\"geometry\": {\"width\": 640, \"width\": 1}}",
    ] {
        let err = ParamSet::<ResizeParams>::from_json_str(text).unwrap_err();
        assert_eq!(err.param_kind(), Some(ParamErrorKind::Malformed), "{err}");
        assert!(
            err.message().starts_with("malformed JSON: duplicate key"),
            "{err}"
        );
        assert!(
            err.location()
                .is_some_and(|l| l.starts_with("line 1, column ")),
            "{err}"
        );
    }
}

#[test]
fn param_refs_name_full_paths_and_descriptors() {
    let width = param_ref!(ResizeParams::geometry.width);
    let storage = param_ref!(ResizeParams::storage);
    let set = ParamSet::<ResizeParams>::from_toml_str(TOML).unwrap();
    assert_eq!(*width.get(set.values()), 640);
    assert_eq!(width.path(), "geometry.width");
    assert_eq!(storage.path(), "output_storage");
    assert_eq!(*storage.get(set.values()), MemoryKind::PinnedHost);
    assert!(width.descriptor().recompile_required);
    assert_eq!(width.descriptor().max, Some(4096));
    assert_eq!(
        storage.descriptor().enum_values.as_deref(),
        Some(&["host", "pinned"][..])
    );
    assert_eq!(width.schema_id(), "com.example.ResizeParams");
    assert_ne!(width, param_ref!(ResizeParams::geometry.height));
    assert_eq!(width, param_ref!(ResizeParams::geometry.width));
}

#[test]
fn schema_is_listed_as_data_and_json() {
    let entries = ResizeParams::schema().entries();
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "geometry",
            "geometry.width",
            "geometry.height",
            "output_shape",
            "batch",
            "output_storage",
            "interpolation",
            "scale",
            "enabled",
            "label",
            "offset"
        ]
    );
    assert!(
        std::ptr::eq(ResizeParams::schema(), ResizeParams::schema()),
        "the descriptor is cached"
    );
    let json = schema_json::<ResizeParams>();
    assert_eq!(json["schema"], "com.example.ResizeParams");
    assert_eq!(json["version"], 3);
    let width = &json["fields"][1];
    assert_eq!(width["path"], "geometry.width");
    assert_eq!(width["rust_path"], "geometry.width");
    assert_eq!(width["description"], "Output width in pixels.");
    assert_eq!(width["type"]["name"], "u32");
    assert_eq!(width["min"], 1);
    assert_eq!(width["max"], 4096);
    assert_eq!(width["required"], true);
    assert_eq!(width["recompile_required"], true);
    let height = &json["fields"][2];
    assert_eq!(height["default"], 480);
    assert_eq!(height["required"], false);
    let storage = &json["fields"][5];
    assert_eq!(storage["type"]["kind"], "enum");
    assert_eq!(
        storage["type"]["variants"],
        serde_json::json!([
            "host",
            "pinned",
            "cuda_device",
            "cuda_managed",
            "opencl_device",
            "device"
        ])
    );
    assert_eq!(
        storage["enum_values"],
        serde_json::json!(["host", "pinned"])
    );
    assert_eq!(json["fields"][3]["type_name"], "[u64; 3]");
    assert_eq!(json["fields"][4]["type_name"], "BoundedVec<i32, 4>");
    assert_eq!(json["fields"][4]["default"], serde_json::json!([1, 2]));
    assert_eq!(json["fields"][8]["compile_time"], true);
}
