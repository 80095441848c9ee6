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
//! use holo_runtime::params::{ParamErrorKind, ParamSet, schema_json};
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
    pub use crate::{Error, ErrorCode, Result};
    pub use core;
    pub use std::collections::BTreeMap;
    pub use std::string::String;
    pub use std::sync::OnceLock;
    pub use std::vec::Vec;

    /// Compile-time check that a field type is a parameter enum; spanned on the type.
    pub const fn assert_param_enum<T: crate::ParamEnum>() {}
}
