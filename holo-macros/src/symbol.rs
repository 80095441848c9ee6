//! Attribute keywords, in one place (serde's `symbol.rs`).

use std::fmt;

use syn::{Ident, Path};

#[derive(Copy, Clone)]
pub(crate) struct Symbol(pub(crate) &'static str);

pub(crate) const PARAM: Symbol = Symbol("param");
pub(crate) const DOC: Symbol = Symbol("doc");

// Container keys of `#[derive(ParamSchema)]`.
pub(crate) const SCHEMA: Symbol = Symbol("schema");
pub(crate) const VERSION: Symbol = Symbol("version");
pub(crate) const CRATE: Symbol = Symbol("crate");
pub(crate) const DEBUG: Symbol = Symbol("debug");

// Field keys of `#[derive(ParamSchema)]`; `NAME` is also the variant key of
// `#[derive(ParamEnum)]`.
pub(crate) const NAME: Symbol = Symbol("name");
pub(crate) const RECOMPILE_REQUIRED: Symbol = Symbol("recompile_required");
pub(crate) const SENSITIVE: Symbol = Symbol("sensitive");
pub(crate) const COMPILE_TIME: Symbol = Symbol("compile_time");
pub(crate) const MIN: Symbol = Symbol("min");
pub(crate) const MAX: Symbol = Symbol("max");
pub(crate) const DEFAULT: Symbol = Symbol("default");
pub(crate) const ENUM_VALUES: Symbol = Symbol("enum_values");

pub(crate) const SCHEMA_CONTAINER_KEYS: &[Symbol] = &[SCHEMA, VERSION, CRATE, DEBUG];
pub(crate) const SCHEMA_FIELD_KEYS: &[Symbol] = &[
    NAME,
    RECOMPILE_REQUIRED,
    SENSITIVE,
    COMPILE_TIME,
    MIN,
    MAX,
    DEFAULT,
    ENUM_VALUES,
];
pub(crate) const ENUM_CONTAINER_KEYS: &[Symbol] = &[CRATE];
pub(crate) const ENUM_VARIANT_KEYS: &[Symbol] = &[NAME];

/// "`a`, `b` or `c`" for messages.
pub(crate) fn one_of(keys: &[Symbol]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{}`", k.0)).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
