//! Introspection: a schema listed as data, and rendered as JSON.

use crate::decode::REDACTED;
use crate::schema::{FieldDescriptor, ParamSchema, SchemaDescriptor, TypeDescriptor};
use crate::value::Value;

/// One field of a schema, at its full key path, as [`SchemaDescriptor::entries`] lists it.
#[derive(Clone, Debug)]
pub struct SchemaEntry {
    /// The key path (`geometry.width`; `tiles[].width` below an array of schemas).
    pub path: String,
    /// The Rust field names from the schema's root (what `param_ref!` spells).
    pub rust_path: Vec<&'static str>,
    /// The field's descriptor.
    pub field: &'static FieldDescriptor,
    /// Whether this field or one it is nested in is sensitive.
    pub sensitive: bool,
}

impl SchemaDescriptor {
    /// Every field, depth first in declaration order, nested schemas' fields included
    /// right after the field that holds them.
    pub fn entries(&'static self) -> Vec<SchemaEntry> {
        let mut out = Vec::new();
        collect(self, "", &[], false, &mut out);
        out
    }

    /// The schema as JSON: id, version, and every entry with its path, type, flags,
    /// bounds, domain, description and default. Sensitive defaults are redacted.
    pub fn to_json(&'static self) -> serde_json::Value {
        let fields: Vec<serde_json::Value> = self.entries().iter().map(entry_json).collect();
        serde_json::json!({
            "schema": self.id,
            "version": self.version,
            "rust_name": self.rust_name,
            "fields": fields,
        })
    }
}

/// The schema of `S` rendered as JSON ([`SchemaDescriptor::to_json`]).
pub fn schema_json<S: ParamSchema>() -> serde_json::Value {
    S::schema().to_json()
}

fn nested_schema(ty: &TypeDescriptor) -> Option<(&'static SchemaDescriptor, &'static str)> {
    match ty {
        TypeDescriptor::Struct(schema) => Some((schema(), "")),
        TypeDescriptor::Array { element, .. } | TypeDescriptor::BoundedVec { element, .. } => {
            nested_schema(element).map(|(s, _)| (s, "[]"))
        }
        _ => None,
    }
}

fn collect(
    schema: &'static SchemaDescriptor,
    prefix: &str,
    rust_prefix: &[&'static str],
    sensitive: bool,
    out: &mut Vec<SchemaEntry>,
) {
    for field in &schema.fields {
        let path = if prefix.is_empty() {
            field.key.to_owned()
        } else {
            format!("{prefix}.{}", field.key)
        };
        let mut rust_path = rust_prefix.to_vec();
        rust_path.push(field.rust_name);
        let sensitive = sensitive || field.sensitive;
        out.push(SchemaEntry {
            path: path.clone(),
            rust_path: rust_path.clone(),
            field,
            sensitive,
        });
        if let Some((nested, suffix)) = nested_schema(&field.ty) {
            collect(
                nested,
                &format!("{path}{suffix}"),
                &rust_path,
                sensitive,
                out,
            );
        }
    }
}

fn type_json(ty: &TypeDescriptor) -> serde_json::Value {
    match ty {
        TypeDescriptor::Bool => serde_json::json!({ "kind": "bool" }),
        TypeDescriptor::Integer { name, min, max } => serde_json::json!({
            "kind": "integer",
            "name": name,
            "min": Value::Integer(*min).to_json(),
            "max": Value::Integer(*max).to_json(),
        }),
        TypeDescriptor::Float { name } => serde_json::json!({ "kind": "float", "name": name }),
        TypeDescriptor::String => serde_json::json!({ "kind": "string" }),
        TypeDescriptor::Enum(e) => {
            serde_json::json!({ "kind": "enum", "name": e.name, "variants": e.variants })
        }
        TypeDescriptor::Array { element, len } => {
            serde_json::json!({ "kind": "array", "element": type_json(element), "len": len })
        }
        TypeDescriptor::BoundedVec { element, max_len } => serde_json::json!({
            "kind": "bounded_vec",
            "element": type_json(element),
            "max_len": max_len,
        }),
        TypeDescriptor::Struct(schema) => {
            let schema = schema();
            serde_json::json!({ "kind": "schema", "schema": schema.id, "version": schema.version })
        }
    }
}

fn entry_json(entry: &SchemaEntry) -> serde_json::Value {
    let field = entry.field;
    let default = match &field.default {
        Some(_) if entry.sensitive => serde_json::Value::String(REDACTED.to_owned()),
        Some(value) => value.to_json(),
        None => serde_json::Value::Null,
    };
    serde_json::json!({
        "path": entry.path,
        "rust_path": entry.rust_path.join("."),
        "type": type_json(&field.ty),
        "type_name": field.ty.type_name(),
        "description": field.description,
        "required": field.is_required(),
        "recompile_required": field.recompile_required,
        "compile_time": field.compile_time,
        "sensitive": entry.sensitive,
        "min": field.min.map(|m| Value::Integer(m).to_json()),
        "max": field.max.map(|m| Value::Integer(m).to_json()),
        "enum_values": field.enum_values,
        "default": default,
    })
}
