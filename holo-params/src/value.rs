//! The neutral value tree that TOML and JSON are both read into, field paths, and
//! bounded vectors.

use std::collections::BTreeMap;
use std::fmt;

use crate::{Error, ErrorCode, ParamErrorKind, Result};

/// A parameter value read from TOML or JSON, before it is decoded into a typed field.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `true` / `false`.
    Bool(bool),
    /// Any integer; decoding checks it fits the field's type and bounds.
    Integer(i128),
    /// A floating-point number.
    Float(f64),
    /// A string (also how enum variants are written, by wire name).
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// A table (a nested schema).
    Table(BTreeMap<String, Value>),
}

impl Value {
    /// The name of the value's kind, as error messages print it.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "a boolean",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }

    /// Converts a parsed TOML value. Dates and times are rejected: no holo field has
    /// such a type.
    pub fn from_toml(value: &toml::Value, path: &FieldPath) -> Result<Self> {
        Ok(match value {
            toml::Value::String(s) => Value::String(s.clone()),
            toml::Value::Integer(i) => Value::Integer(i128::from(*i)),
            toml::Value::Float(f) => Value::Float(*f),
            toml::Value::Boolean(b) => Value::Bool(*b),
            toml::Value::Datetime(_) => {
                return Err(Error::param(
                    ParamErrorKind::WrongType,
                    path.to_string(),
                    "a TOML date-time is not a valid parameter value",
                ));
            }
            toml::Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Value::from_toml(v, &path.index(i)))
                    .collect::<Result<_>>()?,
            ),
            toml::Value::Table(t) => Value::Table(
                t.iter()
                    .map(|(k, v)| Ok((k.clone(), Value::from_toml(v, &path.key(k))?)))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// Converts a parsed JSON value. `null` is rejected (leave the key out instead).
    pub fn from_json(value: &serde_json::Value, path: &FieldPath) -> Result<Self> {
        Ok(match value {
            serde_json::Value::Null => {
                return Err(Error::param(
                    ParamErrorKind::WrongType,
                    path.to_string(),
                    "`null` is not a valid parameter value; omit the key to use its default",
                ));
            }
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Integer(i128::from(i))
                } else if let Some(u) = n.as_u64() {
                    Value::Integer(i128::from(u))
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Value::from_json(v, &path.index(i)))
                    .collect::<Result<_>>()?,
            ),
            serde_json::Value::Object(map) => Value::Table(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), Value::from_json(v, &path.key(k))?)))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// Renders the value as TOML; `None` for an integer outside `i64`, which TOML cannot
    /// represent.
    pub fn to_toml(&self) -> Option<toml::Value> {
        Some(match self {
            Value::Bool(b) => toml::Value::Boolean(*b),
            Value::Integer(i) => toml::Value::Integer(i64::try_from(*i).ok()?),
            Value::Float(f) => toml::Value::Float(*f),
            Value::String(s) => toml::Value::String(s.clone()),
            Value::Array(items) => {
                toml::Value::Array(items.iter().map(Value::to_toml).collect::<Option<_>>()?)
            }
            Value::Table(t) => toml::Value::Table(
                t.iter()
                    .map(|(k, v)| Some((k.clone(), v.to_toml()?)))
                    .collect::<Option<_>>()?,
            ),
        })
    }

    /// Renders the value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Integer(i) => i64::try_from(*i)
                .map(serde_json::Value::from)
                .or_else(|_| u64::try_from(*i).map(serde_json::Value::from))
                .unwrap_or_else(|_| serde_json::Value::String(i.to_string())),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_json).collect())
            }
            Value::Table(t) => {
                serde_json::Value::Object(t.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }
}

/// A path to a field inside a schema, as error messages print it: `geometry.width`,
/// `output_shape[2]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath {
    text: String,
}

impl FieldPath {
    /// The schema's root (prints as `<root>`).
    pub fn root() -> Self {
        Self::default()
    }

    /// A path under a named prefix (an operator's name in a config file, say).
    pub fn under(prefix: &str) -> Self {
        Self {
            text: prefix.to_owned(),
        }
    }

    /// The path of a key below this one. A key that is not a bare TOML key (letters,
    /// digits, `_`, `-`) is written quoted, as TOML quotes it: `"geometry.width"` is one
    /// key, not the field `width` of `geometry`, and a control character in it is an
    /// escape, never raw text in a message.
    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        let key = quoted_if_needed(key);
        if self.text.is_empty() {
            Self {
                text: key.into_owned(),
            }
        } else {
            Self {
                text: format!("{}.{key}", self.text),
            }
        }
    }

    /// The path of an array element below this one.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        Self {
            text: format!("{}[{index}]", self.text),
        }
    }

    /// The path as text (empty at the root).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.text.is_empty()
    }
}

/// `key` as a TOML key: bare when it can be, else a basic string with its escapes.
fn quoted_if_needed(key: &str) -> std::borrow::Cow<'_, str> {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        return std::borrow::Cow::Borrowed(key);
    }
    let mut out = String::with_capacity(key.len() + 2);
    out.push('"');
    for c in key.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                use fmt::Write as _;
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    std::borrow::Cow::Owned(out)
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.text.is_empty() {
            f.write_str("<root>")
        } else {
            f.write_str(&self.text)
        }
    }
}

/// A vector of at most `N` elements: the parameter type for a shape whose rank is not
/// fixed by the schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct BoundedVec<T, const N: usize> {
    items: Vec<T>,
}

impl<T, const N: usize> BoundedVec<T, N> {
    /// The bound.
    pub const MAX_LEN: usize = N;

    /// A bounded vector from `items`, or `InvalidArgument` when there are more than `N`.
    pub fn new(items: Vec<T>) -> Result<Self> {
        if items.len() > N {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("expected at most {N} elements, found {}", items.len()),
            )
            .with_param_kind(ParamErrorKind::WrongLength));
        }
        Ok(Self { items })
    }

    /// A bounded vector from an array; more than `N` elements is a compile-time error.
    pub fn from_array<const M: usize>(items: [T; M]) -> Self {
        const {
            assert!(
                M <= N,
                "BoundedVec::from_array: more elements than the bound"
            );
        }
        Self {
            items: Vec::from(items),
        }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<T, const N: usize> std::ops::Deref for BoundedVec<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items
    }
}
