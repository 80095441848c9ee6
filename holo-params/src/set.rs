//! Accepted parameter values: a `ParamSet` is generation zero of a schema.

use std::collections::BTreeMap;
use std::fmt;

use crate::schema::ParamSchema;
use crate::value::{FieldPath, Value};
use crate::{Error, ErrorCode, ParamErrorKind, Result};

/// A validated set of values for schema `S`. The accepted set is generation zero.
#[derive(Clone)]
pub struct ParamSet<S> {
    values: S,
    generation: u64,
}

impl<S: ParamSchema> ParamSet<S> {
    /// The schema's defaults (an error names the first field with no default).
    pub fn defaults() -> Result<Self> {
        Self::from_table(&BTreeMap::new(), &FieldPath::root())
    }

    /// Accepts already-typed values as generation zero.
    pub fn from_values(values: S) -> Self {
        Self {
            values,
            generation: 0,
        }
    }

    /// Reads a TOML document.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            Error::param(
                ParamErrorKind::Malformed,
                toml_location(text, &e),
                format!("malformed TOML: {}", e.message().trim_end()),
            )
        })?;
        Self::from_toml_table(&table, &FieldPath::root())
    }

    /// Reads an already parsed TOML table (an operator's table in an app config).
    pub fn from_toml_table(table: &toml::Table, path: &FieldPath) -> Result<Self> {
        let value = Value::from_toml(&toml::Value::Table(table.clone()), path)?;
        let Value::Table(t) = value else {
            return Err(Error::new(
                ErrorCode::Internal,
                "a TOML table became a non-table",
            ));
        };
        Self::from_table(&t, path)
    }

    /// Reads a JSON document, whose top level must be an object. A key repeated in one
    /// object is `Malformed` (serde_json alone keeps the last one).
    pub fn from_json_str(text: &str) -> Result<Self> {
        let json: serde_json::Value = crate::strict_json::from_str(text).map_err(|e| {
            Error::param(
                ParamErrorKind::Malformed,
                format!("line {}, column {}", e.line(), e.column()),
                format!("malformed JSON: {}", json_reason(&e)),
            )
        })?;
        let path = FieldPath::root();
        match Value::from_json(&json, &path)? {
            Value::Table(t) => Self::from_table(&t, &path),
            other => Err(Error::param(
                ParamErrorKind::WrongType,
                "<root>",
                format!(
                    "expected a JSON object at the top level, found {}",
                    other.kind_name()
                ),
            )),
        }
    }

    /// Decodes and validates a neutral table.
    pub fn from_table(table: &BTreeMap<String, Value>, path: &FieldPath) -> Result<Self> {
        Ok(Self {
            values: S::decode_table(table, path)?,
            generation: 0,
        })
    }

    /// The typed values.
    pub fn values(&self) -> &S {
        &self.values
    }

    /// The generation (zero for an accepted set).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The values as a TOML document (sensitive values included, so that it reloads);
    /// `None` when an integer is outside `i64`, which TOML cannot represent.
    pub fn to_toml_string_unredacted(&self) -> Option<String> {
        let value = Value::Table(self.values.encode_table(false)).to_toml()?;
        toml::to_string(&value).ok()
    }

    /// The values as JSON, sensitive fields redacted.
    pub fn to_json(&self) -> serde_json::Value {
        Value::Table(self.values.encode_table(true)).to_json()
    }
}

/// `line L, column C` (both from 1, the column in characters) of a TOML error.
fn toml_location(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return "<document>".to_owned();
    };
    let (mut line, mut column) = (1, 1);
    for (offset, c) in text.char_indices() {
        if offset >= span.start {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    format!("line {line}, column {column}")
}

/// serde_json's message without its trailing position (the location carries it).
fn json_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

impl<S: PartialEq> PartialEq for ParamSet<S> {
    fn eq(&self, other: &Self) -> bool {
        self.generation == other.generation && self.values == other.values
    }
}

impl<S: ParamSchema> fmt::Debug for ParamSet<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ParamSet<{}>(generation {}, {})",
            S::schema().id,
            self.generation,
            self.to_json()
        )
    }
}
