//! Decoding and encoding: the `ParamValue` impls of the primitive types, and the helpers
//! that `#[derive(ParamSchema)]` and `#[derive(ParamEnum)]` expand to.
//!
//! Every error here is [`ErrorCode::InvalidArgument`](crate::ErrorCode::InvalidArgument)
//! with a [`ParamErrorKind`], located at the full field path, saying what was expected
//! and what was found. A sensitive field's value is never printed.

use std::collections::BTreeMap;
use std::fmt;

use crate::schema::{
    FieldDescriptor, ParamEnum, ParamSchema, ParamValue, SchemaDescriptor, TypeDescriptor,
};
use crate::value::{BoundedVec, FieldPath, Value};
use crate::{Error, ErrorCode, ParamErrorKind, Result};

/// The text used in place of a sensitive value.
pub const REDACTED: &str = "<redacted>";

/// Prints as [`REDACTED`] in `Debug` output: what a redacting `Debug` shows for a
/// sensitive field.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// How a found value is shown in a message: its text, or only its kind for a sensitive
/// field.
fn found(value: &Value, field: &FieldDescriptor) -> String {
    if field.sensitive {
        return format!("{} ({REDACTED})", value.kind_name());
    }
    match value {
        Value::Integer(i) => format!("{i}"),
        // `{:?}`: `1e300`, not 301 digits; `NaN` and `inf` as Rust spells them.
        Value::Float(f) => format!("{f:?}"),
        Value::Bool(b) => format!("{b}"),
        Value::String(s) => format!("{s:?}"),
        other => other.kind_name().to_owned(),
    }
}

/// A type mismatch error at `path`.
pub fn wrong_type(
    expected: &str,
    value: &Value,
    _field: &FieldDescriptor,
    path: &FieldPath,
) -> Error {
    Error::param(
        ParamErrorKind::WrongType,
        path.to_string(),
        format!("expected {expected}, found {}", value.kind_name()),
    )
}

/// `"a", "b"` for messages.
pub fn quote_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Decodes an integer of range `lo..=hi` and checks the field's bounds.
pub fn decode_integer(
    value: &Value,
    field: &FieldDescriptor,
    path: &FieldPath,
    type_name: &str,
    lo: i128,
    hi: i128,
) -> Result<i128> {
    let Value::Integer(i) = value else {
        return Err(wrong_type(
            &format!("an integer ({type_name})"),
            value,
            field,
            path,
        ));
    };
    let lo = field.min.map_or(lo, |m| m.max(lo));
    let hi = field.max.map_or(hi, |m| m.min(hi));
    if *i < lo || *i > hi {
        return Err(Error::param(
            ParamErrorKind::OutOfBounds,
            path.to_string(),
            format!(
                "expected an integer in {lo}..={hi}, found {}",
                found(value, field)
            ),
        ));
    }
    Ok(*i)
}

/// Decodes a float (an integer literal is accepted) and checks the field's bounds. A
/// parameter is a finite number: TOML's `nan` and `inf` are `OutOfBounds` for every float
/// field, bounded or not (a NaN compares false with every bound and reached operators).
pub fn decode_float(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<f64> {
    let f = match value {
        Value::Float(f) => *f,
        #[allow(
            clippy::cast_precision_loss,
            reason = "an integer literal for a float field; TOML and JSON users write `1` for `1.0`"
        )]
        Value::Integer(i) => *i as f64,
        other => return Err(wrong_type("a float", other, field, path)),
    };
    if !f.is_finite() {
        return Err(Error::param(
            ParamErrorKind::OutOfBounds,
            path.to_string(),
            format!("expected a finite float, found {}", found(value, field)),
        ));
    }
    #[allow(
        clippy::cast_precision_loss,
        reason = "bounds are small integers written in the schema"
    )]
    let (lo, hi) = (field.min.map(|m| m as f64), field.max.map(|m| m as f64));
    let below = lo.is_some_and(|lo| f.is_nan() || f < lo);
    let above = hi.is_some_and(|hi| f.is_nan() || f > hi);
    if below || above {
        let lo = lo.map_or_else(String::new, |v| v.to_string());
        let hi = hi.map_or_else(String::new, |v| v.to_string());
        return Err(Error::param(
            ParamErrorKind::OutOfBounds,
            path.to_string(),
            format!(
                "expected a float in {lo}..={hi}, found {}",
                found(value, field)
            ),
        ));
    }
    Ok(f)
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ParamValue for $t {
            fn type_descriptor() -> TypeDescriptor {
                TypeDescriptor::Integer {
                    name: stringify!($t),
                    min: i128::from(<$t>::MIN),
                    max: i128::from(<$t>::MAX),
                }
            }
            fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
                let i = decode_integer(
                    value, field, path, stringify!($t),
                    i128::from(<$t>::MIN), i128::from(<$t>::MAX),
                )?;
                <$t>::try_from(i).map_err(|_| Error::new(ErrorCode::Internal, "integer range check"))
            }
            fn encode(&self) -> Value {
                Value::Integer(i128::from(*self))
            }
        }
    )*};
}
int_param!(u8, u16, u32, u64, i8, i16, i32, i64);

impl ParamValue for usize {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::Integer {
            name: "usize",
            min: 0,
            max: i128::try_from(usize::MAX).unwrap_or(i128::MAX),
        }
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        let hi = i128::try_from(usize::MAX).unwrap_or(i128::MAX);
        let i = decode_integer(value, field, path, "usize", 0, hi)?;
        usize::try_from(i).map_err(|_| Error::new(ErrorCode::Internal, "integer range check"))
    }
    fn encode(&self) -> Value {
        Value::Integer(i128::try_from(*self).unwrap_or(i128::MAX))
    }
}

impl ParamValue for bool {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::Bool
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        match value {
            Value::Bool(b) => Ok(*b),
            other => Err(wrong_type("a boolean", other, field, path)),
        }
    }
    fn encode(&self) -> Value {
        Value::Bool(*self)
    }
}

impl ParamValue for f64 {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::Float { name: "f64" }
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        decode_float(value, field, path)
    }
    fn encode(&self) -> Value {
        Value::Float(*self)
    }
}

impl ParamValue for f32 {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::Float { name: "f32" }
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        let f = decode_float(value, field, path)?;
        if f.is_finite() && f.abs() > f64::from(f32::MAX) {
            return Err(Error::param(
                ParamErrorKind::OutOfBounds,
                path.to_string(),
                format!(
                    "expected a float within the range of f32, found {}",
                    found(value, field)
                ),
            ));
        }
        #[allow(
            clippy::cast_possible_truncation,
            reason = "range checked above; precision loss is what f32 means"
        )]
        Ok(f as f32)
    }
    fn encode(&self) -> Value {
        Value::Float(f64::from(*self))
    }
}

impl ParamValue for String {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::String
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        match value {
            Value::String(s) => Ok(s.clone()),
            other => Err(wrong_type("a string", other, field, path)),
        }
    }
    fn encode(&self) -> Value {
        Value::String(self.clone())
    }
}

fn decode_elements<T: ParamValue>(
    items: &[Value],
    field: &FieldDescriptor,
    path: &FieldPath,
) -> Result<Vec<T>> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| T::decode(v, field, &path.index(i)))
        .collect()
}

impl<T: ParamValue, const N: usize> ParamValue for [T; N] {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::Array {
            element: Box::new(T::type_descriptor()),
            len: N,
        }
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        let Value::Array(items) = value else {
            return Err(wrong_type(
                &format!("an array of {N} elements"),
                value,
                field,
                path,
            ));
        };
        if items.len() != N {
            return Err(Error::param(
                ParamErrorKind::WrongLength,
                path.to_string(),
                format!(
                    "expected an array of exactly {N} elements, found {}",
                    items.len()
                ),
            ));
        }
        decode_elements::<T>(items, field, path)?
            .try_into()
            .map_err(|_| Error::new(ErrorCode::Internal, "array length check"))
    }
    fn encode(&self) -> Value {
        Value::Array(self.iter().map(ParamValue::encode).collect())
    }
    fn encode_redacted(&self) -> Value {
        Value::Array(self.iter().map(ParamValue::encode_redacted).collect())
    }
}

impl<T: ParamValue, const N: usize> ParamValue for BoundedVec<T, N> {
    fn type_descriptor() -> TypeDescriptor {
        TypeDescriptor::BoundedVec {
            element: Box::new(T::type_descriptor()),
            max_len: N,
        }
    }
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self> {
        let Value::Array(items) = value else {
            return Err(wrong_type(
                &format!("an array of at most {N} elements"),
                value,
                field,
                path,
            ));
        };
        if items.len() > N {
            return Err(Error::param(
                ParamErrorKind::WrongLength,
                path.to_string(),
                format!(
                    "expected an array of at most {N} elements, found {}",
                    items.len()
                ),
            ));
        }
        BoundedVec::new(decode_elements::<T>(items, field, path)?)
    }
    fn encode(&self) -> Value {
        Value::Array(self.iter().map(ParamValue::encode).collect())
    }
    fn encode_redacted(&self) -> Value {
        Value::Array(self.iter().map(ParamValue::encode_redacted).collect())
    }
}

/// Decodes an enum by wire name, checking the field's `enum_values` domain.
pub fn decode_enum<E: ParamEnum>(
    value: &Value,
    field: &FieldDescriptor,
    path: &FieldPath,
) -> Result<E> {
    let Value::String(name) = value else {
        return Err(wrong_type(
            &format!("a {} variant name", E::NAME),
            value,
            field,
            path,
        ));
    };
    let domain: Vec<&'static str> = match &field.enum_values {
        Some(values) => values.clone(),
        None => E::VARIANTS.iter().map(|(n, _)| *n).collect(),
    };
    if !domain.contains(&name.as_str()) {
        return Err(Error::param(
            ParamErrorKind::NotInDomain,
            path.to_string(),
            format!(
                "expected one of {}, found {}",
                quote_list(&domain),
                found(value, field)
            ),
        ));
    }
    E::VARIANTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| Error::new(ErrorCode::Internal, "enum domain names an unknown variant"))
}

/// Encodes an enum as its wire name.
pub fn encode_enum<E: ParamEnum>(value: &E) -> Value {
    Value::String(value.wire_name().to_owned())
}

/// Decodes a nested schema from a table. Inside a sensitive field, an error keeps its
/// class and path but loses its message, which could quote the secret.
pub fn decode_struct<S: ParamSchema>(
    value: &Value,
    field: &FieldDescriptor,
    path: &FieldPath,
) -> Result<S> {
    let Value::Table(table) = value else {
        return Err(wrong_type(
            &format!("a table (schema {})", S::schema().id),
            value,
            field,
            path,
        ));
    };
    S::decode_table(table, path).map_err(|e| if field.sensitive { e.redacted() } else { e })
}

/// Rejects a key `schema` does not declare; the message lists the valid keys.
pub fn reject_unknown_keys(
    table: &BTreeMap<String, Value>,
    schema: &SchemaDescriptor,
    path: &FieldPath,
) -> Result<()> {
    for key in table.keys() {
        if !schema.fields.iter().any(|f| f.key == key) {
            let keys: Vec<String> = schema
                .fields
                .iter()
                .map(|f| format!("`{}`", f.key))
                .collect();
            return Err(Error::param(
                ParamErrorKind::UnknownKey,
                path.key(key).to_string(),
                format!(
                    "unknown key {key:?} in schema {}, expected one of {}",
                    schema.id,
                    keys.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Decodes the value of `field` in `table`, applying its default when the key is absent.
/// An absent nested schema decodes as an empty table, so its own defaults apply and a
/// missing nested key is reported at its full path.
pub fn decode_field<T: ParamValue>(
    table: &BTreeMap<String, Value>,
    field: &FieldDescriptor,
    path: &FieldPath,
) -> Result<T> {
    let path = path.key(field.key);
    match (table.get(field.key), &field.default, &field.ty) {
        (Some(value), _, _) | (None, Some(value), _) => T::decode(value, field, &path),
        (None, None, TypeDescriptor::Struct(_)) => {
            T::decode(&Value::Table(BTreeMap::new()), field, &path)
        }
        (None, None, ty) => Err(Error::param(
            ParamErrorKind::MissingKey,
            path.to_string(),
            format!(
                "missing required key {:?} (expected {})",
                field.key,
                ty.type_name()
            ),
        )),
    }
}

/// Encodes `value` into `table` under the field's key; with `redact`, a sensitive field
/// becomes [`REDACTED`] and nested schemas redact theirs.
pub fn encode_field<T: ParamValue>(
    table: &mut BTreeMap<String, Value>,
    field: &FieldDescriptor,
    value: &T,
    redact: bool,
) {
    let encoded = if redact && field.sensitive {
        Value::String(REDACTED.to_owned())
    } else if redact {
        value.encode_redacted()
    } else {
        value.encode()
    };
    table.insert(field.key.to_owned(), encoded);
}

/// Encodes a field's `#[param(default = ...)]`; the argument's type is the field's, so a
/// default of another type is an error on the user's expression.
#[allow(
    clippy::needless_pass_by_value,
    reason = "taking `T` by value makes a default of another type an error on the user's expression"
)]
pub fn encode_default<T: ParamValue>(value: T) -> Value {
    value.encode()
}

/// The typed operations of one field, resolved once per field in a generated `const`, so
/// that a field type that is not a [`ParamValue`] is one error on that type.
pub struct FieldOps<T> {
    /// [`ParamValue::type_descriptor`].
    pub type_descriptor: fn() -> TypeDescriptor,
    /// [`decode_field`].
    pub decode: fn(&BTreeMap<String, Value>, &FieldDescriptor, &FieldPath) -> Result<T>,
    /// [`encode_field`].
    pub encode: fn(&mut BTreeMap<String, Value>, &FieldDescriptor, &T, bool),
    /// [`encode_default`].
    pub encode_default: fn(T) -> Value,
}

/// The [`FieldOps`] of a parameter type.
pub const fn field_ops<T: ParamValue>() -> FieldOps<T> {
    FieldOps {
        type_descriptor: T::type_descriptor,
        decode: decode_field::<T>,
        encode: encode_field::<T>,
        encode_default: encode_default::<T>,
    }
}
