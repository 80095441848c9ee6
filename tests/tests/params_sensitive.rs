//! A sensitive value never appears in an error, in `Debug` output or in JSON.

use holo_runtime::params::{SchemaDescriptor, schema_json};
use holo_runtime::{ErrorCode, ParamEnum, ParamErrorKind, ParamSchema, ParamSet};

const SECRET: &str = "Zq7-SECRET-hunter2";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum Tier {
    Bronze,
    Gold,
}

#[derive(Clone, PartialEq, ParamSchema)]
#[param(schema = "com.example.Credentials", version = 1, debug)]
struct Credentials {
    user: String,
    #[param(sensitive, default = String::from("Zq7-SECRET-hunter2"))]
    password: String,
}

#[derive(Clone, PartialEq, ParamSchema)]
#[param(schema = "com.example.Sink", version = 1, debug)]
struct Sink {
    #[param(sensitive)]
    token: String,
    #[param(sensitive, min = 0, max = 10, default = 1)]
    pin: u32,
    #[param(sensitive, enum_values(Bronze), default = Tier::Bronze)]
    tier: Tier,
    #[param(sensitive)]
    nested: Credentials,
    plain: Credentials,
}

fn assert_no_secret(text: &str) {
    assert!(!text.contains(SECRET), "the secret leaked: {text}");
    assert!(!text.contains("hunter2"), "the secret leaked: {text}");
}

fn doc(token: &str) -> String {
    format!(
        "token = {token}\n[nested]\nuser = \"a\"\npassword = \"{SECRET}\"\n[plain]\nuser = \"b\"\npassword = \"{SECRET}\"\n"
    )
}

#[test]
fn debug_and_json_redact_sensitive_values() {
    let set = ParamSet::<Sink>::from_toml_str(&doc(&format!("\"{SECRET}\""))).unwrap();
    assert_eq!(set.values().token, SECRET);
    assert_eq!(set.values().nested.password, SECRET);
    let debug = format!("{set:?} {:?} {:#?}", set.values(), set.values().plain);
    assert_no_secret(&debug);
    assert!(debug.contains("<redacted>"), "{debug}");
    assert!(debug.contains("user: \"b\""), "{debug}");
    let json = set.to_json();
    assert_no_secret(&json.to_string());
    assert_eq!(json["token"], "<redacted>");
    assert_eq!(json["nested"], "<redacted>");
    assert_eq!(json["plain"]["password"], "<redacted>");
    assert_eq!(json["plain"]["user"], "b");
}

#[test]
fn schema_json_redacts_sensitive_defaults() {
    let json = schema_json::<Sink>().to_string();
    assert_no_secret(&json);
    let schema: &'static SchemaDescriptor = Sink::schema();
    let entries = schema.entries();
    let nested_password = entries
        .iter()
        .find(|e| e.path == "nested.password")
        .unwrap();
    assert!(nested_password.sensitive);
    let plain_user = entries.iter().find(|e| e.path == "plain.user").unwrap();
    assert!(!plain_user.sensitive);
    assert_no_secret(&schema_json::<Credentials>().to_string());
    assert_eq!(
        schema_json::<Credentials>()["fields"][1]["default"],
        "<redacted>"
    );
}

fn assert_redacted_err(toml: &str, kind: ParamErrorKind, location: &str) {
    let err = ParamSet::<Sink>::from_toml_str(toml).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert_eq!(err.param_kind(), Some(kind), "{err}");
    assert_eq!(err.location(), Some(location), "{err}");
    assert_no_secret(&format!("{err} {err:?} {}", err.message()));
}

#[test]
fn errors_never_quote_a_sensitive_value() {
    // Wrong type, out of bounds, outside the domain: the message has the kind, not the value.
    assert_redacted_err(
        &doc(&format!("[\"{SECRET}\"]")),
        ParamErrorKind::WrongType,
        "token",
    );
    assert_redacted_err(
        &format!("pin = 12345678\n{}", doc("\"x\"")),
        ParamErrorKind::OutOfBounds,
        "pin",
    );
    assert_redacted_err(
        &format!("tier = \"{SECRET}\"\n{}", doc("\"x\"")),
        ParamErrorKind::NotInDomain,
        "tier",
    );
    assert_redacted_err(
        &format!("tier = \"gold\"\n{}", doc("\"x\"")),
        ParamErrorKind::NotInDomain,
        "tier",
    );
    assert_eq!(Tier::Gold.wire_name(), "gold");
    // Inside a sensitive nested schema, even a non-sensitive field's message is redacted.
    let nested = format!("token = \"x\"\n[nested]\nuser = [\"{SECRET}\"]\n[plain]\nuser = \"b\"\n");
    assert_redacted_err(&nested, ParamErrorKind::WrongType, "nested.user");
    // A malformed document around a secret.
    assert_redacted_err(
        &format!("token = \"{SECRET}\nplain = 1\n"),
        ParamErrorKind::Malformed,
        "line 1, column 28",
    );
    let err =
        ParamSet::<Sink>::from_json_str(&format!("{{\"token\": \"{SECRET}\" \"x\"}}")).unwrap_err();
    assert_eq!(err.param_kind(), Some(ParamErrorKind::Malformed));
    assert_no_secret(&err.to_string());
}
