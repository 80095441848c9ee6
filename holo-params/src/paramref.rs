//! Typed field paths: `param_ref!(ResizeParams::output_shape)`.

use std::fmt;
use std::marker::PhantomData;

use crate::schema::{FieldDescriptor, ParamSchema};

/// A typed path to a field of schema `S` whose value has type `T`.
///
/// Made by `param_ref!(Schema::field)` or `param_ref!(Schema::nested.field)`; a
/// misspelled segment is a rustc error on that segment. Two paths are the same dependency
/// only when their full paths are equal, even when they end at the same reused nested
/// descriptor.
pub struct ParamRef<S, T> {
    rust_path: &'static [&'static str],
    get: fn(&S) -> &T,
    _marker: PhantomData<fn(&S) -> &T>,
}

impl<S, T> Clone for ParamRef<S, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S, T> Copy for ParamRef<S, T> {}

impl<S: ParamSchema, T> ParamRef<S, T> {
    /// Used by `param_ref!`; not a public API.
    #[doc(hidden)]
    pub const fn __new(rust_path: &'static [&'static str], get: fn(&S) -> &T) -> Self {
        Self {
            rust_path,
            get,
            _marker: PhantomData,
        }
    }

    /// The field's value in `params`.
    pub fn get<'a>(&self, params: &'a S) -> &'a T {
        (self.get)(params)
    }

    /// The path as Rust field names.
    pub fn rust_path(&self) -> &'static [&'static str] {
        self.rust_path
    }

    /// The path as keys, the way config files and errors spell it (`geometry.width`).
    pub fn path(&self) -> String {
        let mut schema = S::schema();
        let mut keys = Vec::with_capacity(self.rust_path.len());
        for (i, segment) in self.rust_path.iter().enumerate() {
            let Some(field) = schema.field(segment) else {
                keys.push((*segment).to_owned());
                continue;
            };
            keys.push(field.key.to_owned());
            if i + 1 < self.rust_path.len()
                && let crate::TypeDescriptor::Struct(nested) = &field.ty
            {
                schema = nested();
            }
        }
        keys.join(".")
    }

    /// Whether a struct the path goes through is sensitive: then the field is too, as
    /// redaction and introspection have it, whatever its own flags say.
    pub fn under_sensitive(&self) -> bool {
        (1..self.rust_path.len()).any(|n| {
            S::schema()
                .field_at(&self.rust_path[..n])
                .is_some_and(|f| f.sensitive)
        })
    }

    /// The descriptor of the field the path ends at.
    pub fn descriptor(&self) -> &'static FieldDescriptor {
        S::schema()
            .field_at(self.rust_path)
            .unwrap_or_else(|| unreachable!("param_ref! checked the path exists"))
    }

    /// The schema id the path belongs to.
    pub fn schema_id(&self) -> &'static str {
        S::schema().id
    }
}

impl<S: ParamSchema, T> fmt::Debug for ParamRef<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ParamRef({}::{})", S::schema().id, self.path())
    }
}

impl<S, T> PartialEq for ParamRef<S, T> {
    fn eq(&self, other: &Self) -> bool {
        self.rust_path == other.rust_path
    }
}
impl<S, T> Eq for ParamRef<S, T> {}
