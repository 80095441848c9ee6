//! Schema descriptors and the traits that `#[derive(ParamSchema)]` and
//! `#[derive(ParamEnum)]` implement.

use std::collections::BTreeMap;

use crate::value::{BoundedVec, FieldPath, Value};
use crate::{Error, ErrorCode, Result};

/// The shape of a parameter type, as listed by introspection.
#[derive(Clone, Debug)]
pub enum TypeDescriptor {
    /// `bool`.
    Bool,
    /// An integer type, with the range the Rust type admits.
    Integer {
        /// The Rust type name (`u32`).
        name: &'static str,
        /// The type's minimum.
        min: i128,
        /// The type's maximum.
        max: i128,
    },
    /// `f32` / `f64`.
    Float {
        /// The Rust type name.
        name: &'static str,
    },
    /// `String`.
    String,
    /// A `#[derive(ParamEnum)]` enum.
    Enum(EnumDescriptor),
    /// `[T; N]`.
    Array {
        /// The element type.
        element: Box<TypeDescriptor>,
        /// The exact length.
        len: usize,
    },
    /// `BoundedVec<T, N>`.
    BoundedVec {
        /// The element type.
        element: Box<TypeDescriptor>,
        /// The maximum length.
        max_len: usize,
    },
    /// A nested `#[derive(ParamSchema)]` struct.
    Struct(fn() -> &'static SchemaDescriptor),
}

/// A `ParamEnum`'s name and variants' wire names.
#[derive(Clone, Debug)]
pub struct EnumDescriptor {
    /// The Rust type name.
    pub name: &'static str,
    /// The wire names, in declaration order.
    pub variants: Vec<&'static str>,
}

/// One field of a schema.
#[derive(Clone, Debug)]
pub struct FieldDescriptor {
    /// The key in TOML/JSON (`#[param(name = "...")]`, default: the field name).
    pub key: &'static str,
    /// The Rust field name, which `param_ref!` paths use.
    pub rust_name: &'static str,
    /// The doc comment.
    pub description: &'static str,
    /// The value type.
    pub ty: TypeDescriptor,
    /// Changing the value needs a new plan and session.
    pub recompile_required: bool,
    /// The value is secret: it is redacted in Debug, JSON and every error.
    pub sensitive: bool,
    /// The value is fixed when the plan is compiled.
    pub compile_time: bool,
    /// Inclusive lower bound for integers (each element, for arrays and vectors).
    pub min: Option<i128>,
    /// Inclusive upper bound for integers (each element, for arrays and vectors).
    pub max: Option<i128>,
    /// The admitted wire names of an enum field (`enum_values(...)`), narrowing the
    /// enum's variants; `None` admits every variant.
    pub enum_values: Option<Vec<&'static str>>,
    /// The default, already encoded (`None`: the key is required).
    pub default: Option<Value>,
}

impl FieldDescriptor {
    /// A field descriptor with no flags, bounds, domain or default.
    pub fn new(key: &'static str, rust_name: &'static str, ty: TypeDescriptor) -> Self {
        Self {
            key,
            rust_name,
            description: "",
            ty,
            recompile_required: false,
            sensitive: false,
            compile_time: false,
            min: None,
            max: None,
            enum_values: None,
            default: None,
        }
    }

    /// Whether the compiler may read the field (compile-time or recompile-required, and
    /// not sensitive).
    pub fn is_compile_readable(&self) -> bool {
        !self.sensitive && (self.compile_time || self.recompile_required)
    }
}

/// A schema: its stable id, version and fields.
#[derive(Clone, Debug)]
pub struct SchemaDescriptor {
    /// The stable id (`com.example.ResizeParams`).
    pub id: &'static str,
    /// The schema version.
    pub version: u32,
    /// The Rust type name.
    pub rust_name: &'static str,
    /// The fields, in declaration order.
    pub fields: Vec<FieldDescriptor>,
}

impl SchemaDescriptor {
    /// The field with this Rust name.
    pub fn field(&self, rust_name: &str) -> Option<&FieldDescriptor> {
        self.fields.iter().find(|f| f.rust_name == rust_name)
    }

    /// The field at a path of Rust names through nested schemas.
    pub fn field_at(&self, rust_path: &[&str]) -> Option<&FieldDescriptor> {
        let (first, rest) = rust_path.split_first()?;
        let field = self.field(first)?;
        if rest.is_empty() {
            return Some(field);
        }
        match &field.ty {
            TypeDescriptor::Struct(nested) => nested().field_at(rest),
            _ => None,
        }
    }
}

/// A type a parameter field can have.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a parameter type",
    note = "parameter fields are integers, floats, bool, String, `[T; N]`, `BoundedVec<T, N>`, a `#[derive(ParamEnum)]` enum or a `#[derive(ParamSchema)]` struct"
)]
pub trait ParamValue: Sized + Clone + Send + Sync + 'static {
    /// The type as introspection lists it.
    fn type_descriptor() -> TypeDescriptor;
    /// Decodes and validates a value for `field` at `path`.
    fn decode(value: &Value, field: &FieldDescriptor, path: &FieldPath) -> Result<Self>;
    /// Encodes the value (never redacted: the caller redacts sensitive fields).
    fn encode(&self) -> Value;
}

/// A struct with `#[derive(ParamSchema)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a parameter schema",
    label = "this type does not derive `ParamSchema`",
    note = "add `#[derive(ParamSchema)]` and `#[param(schema = \"...\", version = N)]` to the struct"
)]
pub trait ParamSchema: ParamValue {
    /// The schema's descriptor.
    fn schema() -> &'static SchemaDescriptor;
    /// Decodes a table: unknown keys, missing keys and bad values are errors naming the
    /// full field path.
    fn decode_table(table: &BTreeMap<String, Value>, path: &FieldPath) -> Result<Self>;
    /// Encodes to a table; with `redact`, sensitive fields become `"<redacted>"`.
    fn encode_table(&self, redact: bool) -> BTreeMap<String, Value>;
}

/// A fieldless enum with `#[derive(ParamEnum)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a parameter enum",
    note = "add `#[derive(ParamEnum)]` to the enum"
)]
pub trait ParamEnum: Copy + Eq + Send + Sync + 'static {
    /// The Rust type name.
    const NAME: &'static str;
    /// Every variant with its wire name, in declaration order.
    const VARIANTS: &'static [(&'static str, Self)];
    /// This variant's wire name.
    fn wire_name(&self) -> &'static str;
    /// The enum's descriptor.
    fn descriptor() -> EnumDescriptor {
        EnumDescriptor {
            name: Self::NAME,
            variants: Self::VARIANTS.iter().map(|(n, _)| *n).collect(),
        }
    }
}

/// The text used in place of a sensitive value.
pub const REDACTED: &str = "<redacted>";

fn found(value: &Value, field: &FieldDescriptor) -> String {
    if field.sensitive {
        format!("{} ({REDACTED})", value.kind_name())
    } else {
        match value {
            Value::Integer(i) => format!("{i}"),
            Value::Float(f) => format!("{f}"),
            Value::Bool(b) => format!("{b}"),
            Value::String(s) => format!("{s:?}"),
            other => other.kind_name().to_owned(),
        }
    }
}

/// A type mismatch error at `path`.
pub fn wrong_type(
    expected: &str,
    value: &Value,
    _field: &FieldDescriptor,
    path: &FieldPath,
) -> Error {
    Error::new(
        ErrorCode::InvalidArgument,
        format!("expected {expected}, found {}", value.kind_name()),
    )
    .at(format!("field {path}"))
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
        return Err(Error::new(
            ErrorCode::InvalidArgument,
            format!(
                "expected an integer in {lo}..={hi}, found {}",
                found(value, field)
            ),
        )
        .at(format!("field {path}")));
    }
    Ok(*i)
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
        match value {
            Value::Float(f) => Ok(*f),
            #[allow(
                clippy::cast_precision_loss,
                reason = "an integer literal for a float field"
            )]
            Value::Integer(i) => Ok(*i as f64),
            other => Err(wrong_type("a float", other, field, path)),
        }
    }
    fn encode(&self) -> Value {
        Value::Float(*self)
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
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "expected an array of exactly {N} elements, found {}",
                    items.len()
                ),
            )
            .at(format!("field {path}")));
        }
        let decoded = items
            .iter()
            .enumerate()
            .map(|(i, v)| T::decode(v, field, &path.index(i)))
            .collect::<Result<Vec<T>>>()?;
        decoded
            .try_into()
            .map_err(|_| Error::new(ErrorCode::Internal, "array length check"))
    }
    fn encode(&self) -> Value {
        Value::Array(self.iter().map(ParamValue::encode).collect())
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
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "expected an array of at most {N} elements, found {}",
                    items.len()
                ),
            )
            .at(format!("field {path}")));
        }
        let decoded = items
            .iter()
            .enumerate()
            .map(|(i, v)| T::decode(v, field, &path.index(i)))
            .collect::<Result<Vec<T>>>()?;
        BoundedVec::new(decoded)
    }
    fn encode(&self) -> Value {
        Value::Array(self.iter().map(ParamValue::encode).collect())
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
    let shown = if field.sensitive {
        REDACTED.to_owned()
    } else {
        format!("{name:?}")
    };
    if !domain.contains(&name.as_str()) {
        return Err(Error::new(
            ErrorCode::InvalidArgument,
            format!("expected one of {}, found {shown}", quote_list(&domain)),
        )
        .at(format!("field {path}")));
    }
    E::VARIANTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| Error::new(ErrorCode::Internal, "enum domain names an unknown variant"))
}

/// `"a", "b"` for messages.
pub fn quote_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Implements [`ParamValue`] for a [`ParamEnum`] type by wire name.
#[macro_export]
#[doc(hidden)]
macro_rules! impl_param_value_for_enum {
    ($t:ty) => {
        impl $crate::ParamValue for $t {
            fn type_descriptor() -> $crate::TypeDescriptor {
                $crate::TypeDescriptor::Enum(<$t as $crate::ParamEnum>::descriptor())
            }
            fn decode(
                value: &$crate::Value,
                field: &$crate::FieldDescriptor,
                path: &$crate::FieldPath,
            ) -> $crate::Result<Self> {
                $crate::__private::decode_enum::<$t>(value, field, path)
            }
            fn encode(&self) -> $crate::Value {
                $crate::Value::String(<$t as $crate::ParamEnum>::wire_name(self).to_owned())
            }
        }
    };
}
