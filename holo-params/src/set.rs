//! Accepted parameter values: a `ParamSet` is generation zero of a schema.

use std::collections::BTreeMap;
use std::fmt;

use crate::schema::ParamSchema;
use crate::value::{FieldPath, Value};
use crate::{Error, ErrorCode, Result};

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
            Error::new(
                ErrorCode::InvalidArgument,
                format!("malformed TOML: {}", e.message()),
            )
            .at(toml_location(text, &e))
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

    /// Reads a JSON document, whose top level must be an object.
    pub fn from_json_str(text: &str) -> Result<Self> {
        let json: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::new(ErrorCode::InvalidArgument, format!("malformed JSON: {e}")).at(format!(
                "line {}, column {}",
                e.line(),
                e.column()
            ))
        })?;
        let path = FieldPath::root();
        match Value::from_json(&json, &path)? {
            Value::Table(t) => Self::from_table(&t, &path),
            other => Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "expected a JSON object at the top level, found {}",
                    other.kind_name()
                ),
            )
            .at("<root>")),
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

    /// The values as JSON, sensitive fields redacted.
    pub fn to_json(&self) -> serde_json::Value {
        Value::Table(self.values.encode_table(true)).to_json()
    }
}

fn toml_location(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}")
        }
        None => "<document>".to_owned(),
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
