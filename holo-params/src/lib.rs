//! Deployment parameters for holo applications.
//!
//! A parameter schema is a Rust struct with `#[derive(ParamSchema)]` (re-exported by
//! `holo-runtime`). Its accepted values form a [`ParamSet`] — generation zero — read from
//! TOML or JSON and validated against the schema's bounds and domains. The plan compiler
//! reads generation zero through typed field paths ([`ParamRef`]) to size tensor pools and
//! to choose their memory kind.
//!
//! Every loading error is a value: [`ErrorCode::InvalidArgument`], a [`ParamErrorKind`]
//! saying which rule was broken, the full field path in [`Error::location`]
//! (`geometry.width`, `output_shape[2]`, or `line 3, column 9` for a malformed document),
//! and a message saying what was expected and what was found. The value of a
//! `sensitive` field never appears in an error, in `Debug` output or in JSON.
//!
//! # Example
//!
//! ```
//! use holo_runtime::params::schema_json;
//! use holo_runtime::{ParamErrorKind, ParamSet};
//! use holo_runtime::{BoundedVec, ErrorCode, MemoryKind, ParamSchema, param_ref};
//!
//! #[derive(Clone, Debug, PartialEq, ParamSchema)]
//! #[param(schema = "com.example.Geometry", version = 1)]
//! struct Geometry {
//!     /// Output width in pixels.
//!     #[param(min = 1, max = 8192, recompile_required)]
//!     width: u32,
//!     /// Output height in pixels.
//!     #[param(min = 1, max = 8192, recompile_required, default = 480)]
//!     height: u32,
//! }
//!
//! #[derive(Clone, Debug, PartialEq, ParamSchema)]
//! #[param(schema = "com.example.ResizeParams", version = 1)]
//! struct ResizeParams {
//!     geometry: Geometry,
//!     /// The exact output shape: height, width, channels.
//!     #[param(min = 1, recompile_required)]
//!     output_shape: [u64; 3],
//!     /// Batch dimensions, at most four.
//!     #[param(default = BoundedVec::from_array([1]))]
//!     batch: BoundedVec<u32, 4>,
//!     /// Where output slots live.
//!     #[param(name = "output_storage", enum_values(Host, PinnedHost), recompile_required)]
//!     storage: MemoryKind,
//!     /// Credentials for the telemetry sink.
//!     #[param(sensitive, default = String::new())]
//!     token: String,
//! }
//!
//! let toml = r#"
//!     output_shape = [480, 640, 3]
//!     output_storage = "pinned"
//!     token = "hunter2"
//!
//!     [geometry]
//!     width = 640
//! "#;
//! let set = ParamSet::<ResizeParams>::from_toml_str(toml)?;
//! assert_eq!(set.generation(), 0);
//! assert_eq!(set.values().geometry.height, 480); // the default
//! assert_eq!(set.values().storage, MemoryKind::PinnedHost);
//!
//! // Typed paths, as the plan compiler reads them.
//! let width = param_ref!(ResizeParams::geometry.width);
//! assert_eq!(*width.get(set.values()), 640);
//! assert_eq!(width.path(), "geometry.width");
//!
//! // Secrets are redacted in JSON and Debug.
//! assert_eq!(set.to_json()["token"], "<redacted>");
//! assert!(!format!("{set:?}").contains("hunter2"));
//!
//! // The schema is data.
//! let schema = schema_json::<ResizeParams>();
//! assert_eq!(schema["fields"][1]["path"], "geometry.width");
//!
//! // A precise error: the class, the full path, what was expected and what was found.
//! let err = ParamSet::<ResizeParams>::from_toml_str(
//!     "output_shape = [480, 0, 3]\noutput_storage = \"host\"\n[geometry]\nwidth = 640\n",
//! )
//! .unwrap_err();
//! assert_eq!(err.code(), ErrorCode::InvalidArgument);
//! assert_eq!(err.param_kind(), Some(ParamErrorKind::OutOfBounds));
//! assert_eq!(err.location(), Some("output_shape[1]"));
//! assert_eq!(err.message(), "expected an integer in 1..=18446744073709551615, found 0");
//! # Ok::<(), holo_runtime::Error>(())
//! ```
#![warn(missing_docs)]

mod decode;
mod error;
mod introspect;
mod kinds;
mod paramref;
mod schema;
mod set;
mod strict_json;
mod value;

pub use decode::{REDACTED, Redacted};
pub use error::{Error, ErrorCode, ParamErrorKind, Result};
pub use introspect::{SchemaEntry, schema_json};
pub use kinds::MemoryKind;
pub use paramref::ParamRef;
pub use schema::{
    EnumDescriptor, FieldDescriptor, ParamEnum, ParamSchema, ParamValue, SchemaDescriptor,
    TypeDescriptor,
};
pub use set::ParamSet;
pub use value::{BoundedVec, FieldPath, Value};

/// Items that generated code names. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::decode::*;
    pub use crate::paramref::ParamRef;
    pub use crate::schema::*;
    pub use crate::value::*;
    pub use crate::{Error, ErrorCode, MemoryKind, Result};
    pub use core;
    pub use std::collections::BTreeMap;
    pub use std::string::String;
    pub use std::sync::OnceLock;
    pub use std::vec::Vec;

    /// Compile-time check that a field type is a parameter enum; spanned on the type.
    pub const fn assert_param_enum<T: crate::ParamEnum>() {}

    /// A type whose decode reads a field's `min` and `max`: the integers, the floats, and
    /// arrays and `BoundedVec`s of them (each element is checked).
    #[diagnostic::on_unimplemented(
        message = "`#[param(min)]` and `#[param(max)]` bound numbers; `{Self}` is not one",
        label = "`min`/`max` would be accepted and never checked on this field",
        note = "bound an integer or float field, or an array or `BoundedVec` of them"
    )]
    pub trait BoundedParam {}
    impl BoundedParam for u8 {}
    impl BoundedParam for u16 {}
    impl BoundedParam for u32 {}
    impl BoundedParam for u64 {}
    impl BoundedParam for usize {}
    impl BoundedParam for i8 {}
    impl BoundedParam for i16 {}
    impl BoundedParam for i32 {}
    impl BoundedParam for i64 {}
    impl BoundedParam for f32 {}
    impl BoundedParam for f64 {}
    impl<T: BoundedParam, const N: usize> BoundedParam for [T; N] {}
    impl<T: BoundedParam, const N: usize> BoundedParam for crate::BoundedVec<T, N> {}

    /// Compile-time check that a field with `min` or `max` is a number (or an array of
    /// numbers); spanned on the type.
    pub const fn assert_bounded<T: BoundedParam>() {}

    /// FNV-1a 64: holo's one implementation, `const` so that generated code can key a
    /// field by its name at compile time ([`field_hash`]); the runtime's plan fingerprint
    /// uses it too.
    #[derive(Clone, Copy, Debug)]
    pub struct Fnv1a64(u64);

    impl Fnv1a64 {
        /// The offset basis.
        pub const fn new() -> Self {
            Self(0xcbf2_9ce4_8422_2325)
        }

        /// Folds `bytes` in.
        #[must_use]
        pub const fn write(mut self, bytes: &[u8]) -> Self {
            let mut i = 0;
            while i < bytes.len() {
                self.0 ^= bytes[i] as u64;
                self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
                i += 1;
            }
            self
        }

        /// The hash of everything written.
        pub const fn finish(self) -> u64 {
            self.0
        }
    }

    impl Default for Fnv1a64 {
        fn default() -> Self {
            Self::new()
        }
    }

    /// FNV-1a 64 of a Rust field name; used as a const-generic key, so generated code can
    /// name a field of a schema by its Rust name at compile time.
    pub const fn field_hash(name: &str) -> u64 {
        Fnv1a64::new().write(name.as_bytes()).finish()
    }

    /// Compile-time facts about one field of a schema, implemented by
    /// `#[derive(ParamSchema)]` for each field and keyed by `field_hash(rust_name)`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` has no parameter field with this name",
        label = "no parameter field with this name",
        note = "name a field of the `#[derive(ParamSchema)]` struct by its Rust name; nested fields are written `outer.inner`"
    )]
    pub trait Field<const H: u64> {
        /// The field's Rust type.
        type Type;
        /// The key in TOML and JSON.
        const KEY: &'static str;
        /// `#[param(sensitive)]`.
        const SENSITIVE: bool;
        /// Not sensitive, and `compile_time` or `recompile_required`: its value is fixed
        /// for the life of a plan, so plan compilation may read it.
        const COMPILE_READABLE: bool;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn assert_send_sync<T: Send + Sync>() {}
    const _: () = {
        assert_send_sync::<Error>();
        assert_send_sync::<ParamErrorKind>();
        assert_send_sync::<SchemaDescriptor>();
        assert_send_sync::<Value>();
        assert_send_sync::<BoundedVec<u32, 4>>();
    };

    #[test]
    fn field_hash_is_fnv1a_64() {
        assert_eq!(__private::field_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(__private::field_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(
            __private::field_hash("width"),
            __private::field_hash("height")
        );
    }

    #[test]
    fn fnv1a_64_folds_writes_in_sequence() {
        let parts = __private::Fnv1a64::new()
            .write(b"wid")
            .write(b"")
            .write(b"th");
        assert_eq!(parts.finish(), __private::field_hash("width"));
        assert_eq!(
            __private::Fnv1a64::default().finish(),
            __private::field_hash("")
        );
    }

    #[test]
    fn field_paths_print_keys_and_indices() {
        let root = FieldPath::root();
        assert!(root.is_root());
        assert_eq!(root.to_string(), "<root>");
        let path = root.key("geometry").key("width");
        assert_eq!(path.as_str(), "geometry.width");
        assert_eq!(
            root.key("output_shape").index(2).to_string(),
            "output_shape[2]"
        );
        assert_eq!(FieldPath::under("resize").key("x").as_str(), "resize.x");
    }

    #[test]
    fn param_errors_keep_code_class_and_location() {
        let err = Error::param(ParamErrorKind::MissingKey, "a.b", "missing");
        assert_eq!(err.code(), ErrorCode::InvalidArgument);
        assert_eq!(err.param_kind(), Some(ParamErrorKind::MissingKey));
        assert_eq!(err.location(), Some("a.b"));
        assert_eq!(err.to_string(), "InvalidArgument: missing (at a.b)");
        let redacted = err.clone().redacted();
        assert_eq!(redacted.location(), err.location());
        assert_eq!(redacted.param_kind(), err.param_kind());
        assert_ne!(redacted.message(), err.message());
        assert_eq!(Error::invalid_argument("x").param_kind(), None);
        assert_eq!(ParamErrorKind::OutOfBounds.to_string(), "OutOfBounds");
    }

    #[test]
    fn bounded_vec_rejects_more_than_its_bound() {
        let err = BoundedVec::<u8, 2>::new(vec![1, 2, 3]).unwrap_err();
        assert_eq!(err.param_kind(), Some(ParamErrorKind::WrongLength));
        assert_eq!(BoundedVec::<u8, 2>::from_array([1, 2]).as_slice(), &[1, 2]);
        assert!(BoundedVec::<u8, 2>::default().is_empty());
    }

    #[test]
    fn integers_check_type_range_and_field_bounds() {
        let mut field = FieldDescriptor::new("w", "w", u8::type_descriptor());
        let path = FieldPath::root().key("w");
        assert_eq!(u8::decode(&Value::Integer(255), &field, &path), Ok(255));
        let err = u8::decode(&Value::Integer(256), &field, &path).unwrap_err();
        assert_eq!(err.message(), "expected an integer in 0..=255, found 256");
        field.min = Some(10);
        let err = u8::decode(&Value::Integer(9), &field, &path).unwrap_err();
        assert_eq!(err.message(), "expected an integer in 10..=255, found 9");
        field.sensitive = true;
        let err = u8::decode(&Value::Integer(9), &field, &path).unwrap_err();
        assert_eq!(
            err.message(),
            "expected an integer in 10..=255, found an integer (<redacted>)"
        );
    }

    #[test]
    fn floats_check_bounds_and_f32_range() {
        let mut field = FieldDescriptor::new("g", "g", f32::type_descriptor());
        let path = FieldPath::root().key("g");
        assert_eq!(f32::decode(&Value::Integer(2), &field, &path), Ok(2.0));
        let err = f32::decode(&Value::Float(1e300), &field, &path).unwrap_err();
        assert_eq!(err.param_kind(), Some(ParamErrorKind::OutOfBounds));
        field.max = Some(1);
        let err = f64::decode(&Value::Float(1.5), &field, &path).unwrap_err();
        assert_eq!(err.message(), "expected a float in ..=1, found 1.5");
        let err = f64::decode(&Value::Float(f64::NAN), &field, &path).unwrap_err();
        assert_eq!(err.param_kind(), Some(ParamErrorKind::OutOfBounds));
    }

    #[test]
    fn memory_kind_decodes_by_wire_name_within_its_domain() {
        let mut field = FieldDescriptor::new("m", "m", MemoryKind::type_descriptor());
        field.enum_values = Some(vec!["host", "pinned"]);
        let path = FieldPath::root().key("m");
        let pinned = Value::String("pinned".to_owned());
        assert_eq!(
            MemoryKind::decode(&pinned, &field, &path),
            Ok(MemoryKind::PinnedHost)
        );
        let device = Value::String("cuda_device".to_owned());
        let err = MemoryKind::decode(&device, &field, &path).unwrap_err();
        assert_eq!(err.param_kind(), Some(ParamErrorKind::NotInDomain));
        assert_eq!(
            MemoryKind::CudaManaged.encode(),
            Value::String("cuda_managed".to_owned())
        );
    }

    #[test]
    fn values_convert_between_toml_and_json() {
        let toml: toml::Table = "a = [1, 2.5, true]\n[b]\nc = \"x\"".parse().unwrap();
        let value =
            Value::from_toml(&toml::Value::Table(toml.clone()), &FieldPath::root()).unwrap();
        assert_eq!(value.to_toml(), Some(toml::Value::Table(toml)));
        let json = value.to_json();
        assert_eq!(Value::from_json(&json, &FieldPath::root()), Ok(value));
        assert_eq!(Value::Integer(i128::from(u64::MAX)).to_toml(), None);
    }
}
