//! Deployment parameters for holo applications.
//!
//! A parameter schema is a Rust struct with `#[derive(ParamSchema)]` (re-exported by
//! `holo-runtime`). Its accepted values form a [`ParamSet`] — generation zero — read from
//! TOML or JSON and validated against the schema's bounds and domains. The plan compiler
//! reads generation zero through typed field paths ([`ParamRef`]) to size tensor pools and
//! to choose their memory kind.
#![warn(missing_docs)]

mod error;
mod kinds;
mod paramref;
mod schema;
mod set;
mod value;

pub use error::{Error, ErrorCode, Result};
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
    pub use crate::paramref::ParamRef;
    pub use crate::schema::*;
    pub use crate::value::*;
    pub use crate::{Error, ErrorCode, Result};
    pub use core;
    pub use std::string::String;
    pub use std::sync::OnceLock;
    pub use std::vec::Vec;
}
