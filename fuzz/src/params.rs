//! The parameter loaders (TOML, JSON) and the app's `--config` path, over a nested schema
//! with arrays, enums, bounds and a sensitive field.

use holo_runtime::app::{App, AppArgs};
use holo_runtime::{BoundedVec, ErrorCode, MemoryKind, ParamEnum, ParamSchema, ParamSet};

/// An enum parameter.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ParamEnum)]
pub enum Filter {
    /// Box filter.
    Box,
    /// Gaussian, named `gauss` in a document.
    #[param(name = "gauss")]
    Gaussian,
    /// Lanczos.
    Lanczos,
}

/// A nested table with bounds.
#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "fuzz.Geometry", version = 1)]
pub struct Geometry {
    /// Bounded both ways.
    #[param(min = 1, max = 4096)]
    pub width: u32,
    /// Negative bound and a default.
    #[param(min = -100, max = 100, default = -1)]
    pub offset: i16,
}

/// The schema every params target loads: nested tables, a fixed and a bounded array, a
/// restricted enum domain, a user enum, a sensitive string, floats and booleans.
#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "fuzz.Nested", version = 2)]
pub struct Nested {
    /// A nested table.
    pub geometry: Geometry,
    /// A second nested table, all defaults.
    #[param(default = Geometry { width: 8, offset: 0 })]
    pub inset: Geometry,
    /// A shape with a lower bound.
    #[param(min = 1, max = 65536)]
    pub shape: [u64; 3],
    /// At most four bounded entries.
    #[param(default, max = 1000)]
    pub batch: BoundedVec<u16, 4>,
    /// A memory kind from a restricted domain, under another name.
    #[param(name = "output_storage", enum_values(Host, PinnedHost), default = MemoryKind::Host)]
    pub storage: MemoryKind,
    /// A user enum from a restricted domain.
    #[param(enum_values(Box, Gaussian), default = Filter::Box)]
    pub filter: Filter,
    /// A secret: never in an error, `Debug` or JSON.
    #[param(sensitive, default)]
    pub token: String,
    /// A float.
    #[param(default = 1.0)]
    pub gain: f64,
    /// A flag.
    #[param(default = false)]
    pub flag: bool,
    /// Plain text.
    #[param(default = String::from("label"))]
    pub label: String,
}

/// A second operator's schema in the app config.
#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "fuzz.Camera", version = 1)]
pub struct Camera {
    /// Bounded rate.
    #[param(min = 1, max = 1000, default = 30)]
    pub hz: i64,
    /// A shape.
    #[param(min = 1, default = [4, 8, 3])]
    pub shape: [u32; 3],
}

fn check_param_error(err: &holo_runtime::Error, text: &str) {
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert!(err.param_kind().is_some(), "no parameter error kind: {err}");
    assert!(err.location().is_some(), "no location: {err}");
    check_no_secret(&err.to_string(), text);
}

/// A token the document gives (a line `token = "..."` or `"token": "..."`) never
/// appears in `shown`, when it is long enough to be told apart from other text.
fn check_no_secret(shown: &str, text: &str) {
    for line in text.lines() {
        let line = line.trim();
        let rest = line
            .strip_prefix("token")
            .or_else(|| line.strip_prefix("\"token\""));
        let Some(rest) = rest else { continue };
        let Some(rest) = rest.trim_start().strip_prefix([':', '=']) else {
            continue;
        };
        let value = rest.trim().trim_end_matches(',').trim_matches('"');
        if value.len() >= 8
            && value.chars().all(|c| c.is_ascii_alphanumeric())
            && !shown.contains(&format!("{value}\"")) // a key or label that happens to match
            && text.matches(value).count() == 1
        {
            assert!(!shown.contains(value), "secret {value:?} shown: {shown}");
        }
    }
}

fn check_accepted(set: &ParamSet<Nested>, text: &str) {
    let json = set.to_json();
    assert_eq!(json["token"], holo_runtime::params::REDACTED, "{json}");
    let debug = format!("{set:?}");
    if set.values().token.len() >= 4
        && !set.values().label.contains(&set.values().token)
        && !holo_runtime::params::REDACTED.contains(&set.values().token)
    {
        assert!(!debug.contains(&set.values().token), "{debug}");
    }
    let v = set.values();
    assert!((1..=4096).contains(&v.geometry.width), "{debug}");
    assert!((-100..=100).contains(&v.geometry.offset), "{debug}");
    assert!(v.shape.iter().all(|e| (1..=65536).contains(e)), "{debug}");
    assert!(v.batch.iter().all(|&b| b <= 1000), "{debug}");
    assert!(matches!(
        v.storage,
        MemoryKind::Host | MemoryKind::PinnedHost
    ));
    assert!(matches!(v.filter, Filter::Box | Filter::Gaussian));
    // An accepted set re-encodes and reloads to the same document.
    if let Some(again) = set.to_toml_string_unredacted() {
        let reloaded = ParamSet::<Nested>::from_toml_str(&again)
            .unwrap_or_else(|e| panic!("re-encoded set rejected: {e}\n{again}\nfrom {text:?}"));
        assert_eq!(reloaded.to_toml_string_unredacted(), Some(again));
    }
}

/// `params_toml`: `ParamSet::<Nested>::from_toml_str` on the input (as UTF-8).
pub fn params_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ParamSet::<Nested>::from_toml_str(text) {
        Ok(set) => check_accepted(&set, text),
        Err(e) => check_param_error(&e, text),
    }
}

/// `params_json`: `ParamSet::<Nested>::from_json_str` on the input (as UTF-8).
pub fn params_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ParamSet::<Nested>::from_json_str(text) {
        Ok(set) => check_accepted(&set, text),
        Err(e) => check_param_error(&e, text),
    }
}

/// `app_config`: the input as an app's config document (`App::new`, then the tables of
/// operators `resize` and `camera`, then the check for tables naming no operator). Bytes
/// that are not UTF-8 go through a `--config` file.
pub fn app_config(data: &[u8]) {
    let (args, text, file) = if let Ok(text) = std::str::from_utf8(data) {
        (AppArgs::default(), text.to_owned(), None)
    } else {
        let path =
            std::env::temp_dir().join(format!("holo-fuzz-app-config-{}.toml", std::process::id()));
        std::fs::write(&path, data).expect("the temporary config file is writable");
        let args = AppArgs {
            config: Some(path.clone()),
            ..AppArgs::default()
        };
        (args, String::new(), Some(path))
    };
    let app = App::new(args, &text);
    if let Some(path) = file {
        let err = app.expect_err("a config that is not UTF-8 is refused");
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
        assert!(err.to_string().contains("not UTF-8"), "{err}");
        let _ = std::fs::remove_file(path);
        return;
    }
    let mut app = match app {
        Ok(app) => app,
        Err(err) => {
            assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
            assert!(err.location().is_some(), "no location: {err}");
            return;
        }
    };
    let located = |err: &holo_runtime::Error| {
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
        let at = err
            .location()
            .unwrap_or_else(|| panic!("no location: {err}"));
        assert!(
            at.starts_with("the embedded default config"),
            "location {at:?}: {err}"
        );
        check_no_secret(&err.to_string(), &text);
    };
    match app.params::<Nested>("resize") {
        Ok(set) => check_accepted(&set, &text),
        Err(e) => located(&e),
    }
    if let Err(e) = app.params::<Camera>("camera") {
        located(&e);
    }
    if let Err(e) = app.check_unused() {
        located(&e);
    }
}
