//! holo: real-time pipelines of GPU tensors.
#![warn(missing_docs)]

pub use holo_params as params;
pub use holo_params::{
    BoundedVec, Error, ErrorCode, MemoryKind, ParamEnum, ParamErrorKind, ParamRef, ParamSchema,
    ParamSet, ParamValue, Result,
};

mod params_macros;
pub use params_macros::*;

pub mod device;

/// Items that generated code names. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use holo_params::__private::*;
}

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
