//! Schema descriptors and the traits that `#[derive(ParamSchema)]` and
//! `#[derive(ParamEnum)]` implement.

use std::collections::BTreeMap;

use crate::Result;
use crate::value::{FieldPath, Value};

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

impl TypeDescriptor {
    /// The type as introspection prints it in one phrase (`u32`, `[u32; 3]`,
    /// `BoundedVec<u64, 4>`, `enum MemoryKind`, `schema com.example.Geometry`).
    pub fn type_name(&self) -> String {
        match self {
            TypeDescriptor::Bool => "bool".to_owned(),
            TypeDescriptor::Integer { name, .. } | TypeDescriptor::Float { name } => {
                (*name).to_owned()
            }
            TypeDescriptor::String => "String".to_owned(),
            TypeDescriptor::Enum(e) => format!("enum {}", e.name),
            TypeDescriptor::Array { element, len } => format!("[{}; {len}]", element.type_name()),
            TypeDescriptor::BoundedVec { element, max_len } => {
                format!("BoundedVec<{}, {max_len}>", element.type_name())
            }
            TypeDescriptor::Struct(schema) => format!("schema {}", schema().id),
        }
    }
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

    /// Whether the key may be left out (it has a default, or it is a nested schema whose
    /// own fields may all be left out).
    pub fn is_required(&self) -> bool {
        self.default.is_none() && !matches!(self.ty, TypeDescriptor::Struct(_))
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
///
/// Implemented for `bool`, the integer types up to 64 bits and `usize`, `f32`, `f64`,
/// `String`, `[T; N]`, [`BoundedVec<T, N>`](crate::BoundedVec), [`MemoryKind`](crate::MemoryKind), and by
/// `#[derive(ParamEnum)]` and `#[derive(ParamSchema)]`.
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
    /// Encodes the value with the sensitive fields of nested schemas redacted. Only
    /// schemas and containers of schemas differ from [`ParamValue::encode`].
    fn encode_redacted(&self) -> Value {
        self.encode()
    }
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
