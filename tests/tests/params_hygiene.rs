//! The derives expand to code that names nothing from the user's scope: prelude names
//! are shadowed here, and warnings are denied on the expansions.
#![deny(warnings)]
#![allow(dead_code, reason = "the shadowing types exist only to be in scope")]
#![allow(non_camel_case_types, reason = "shadows lower-case prelude items")]

struct Option;
struct Result;
struct Ok;
struct Err;
struct Some;
struct None;
struct Box;
struct Vec;
struct String;
struct Default;
struct Clone;
struct core;
struct std;
struct holo_params;
mod __private {}

mod inner {
    pub(crate) struct Value;
    pub(crate) struct FieldDescriptor;
}
#[allow(
    unused_imports,
    reason = "shadows names the expansion must not pick up"
)]
use inner::{FieldDescriptor, Value};

use holo_runtime::{BoundedVec, MemoryKind, ParamEnum, ParamSchema, ParamSet, param_ref};

#[derive(
    ::core::clone::Clone, ::core::marker::Copy, PartialEq, Eq, ::core::fmt::Debug, ParamEnum,
)]
enum Mode {
    Fast,
    #[param(name = "safe")]
    Careful,
}

#[derive(::core::clone::Clone, ParamSchema)]
#[param(schema = "test.Inner", version = 1, debug)]
struct Inner {
    #[param(min = 1, max = 9)]
    width: u32,
}

#[derive(::core::clone::Clone, ParamSchema)]
#[param(schema = "test.Outer", version = 7, debug)]
struct Outer {
    inner: Inner,
    /// A documented field.
    #[param(name = "shape", recompile_required, compile_time)]
    dims: [u16; 2],
    #[param(default)]
    ranks: BoundedVec<u8, 3>,
    #[param(enum_values(Host, PinnedHost), default = MemoryKind::Host)]
    memory: MemoryKind,
    #[param(enum_values(Fast), default = Mode::Fast)]
    mode: Mode,
    #[param(sensitive, default)]
    key: ::std::string::String,
    #[param(default = 0.5)]
    ratio: f32,
}

#[derive(::core::clone::Clone, ParamSchema)]
#[param(schema = "test.Empty", version = 1)]
struct Empty {}

#[test]
fn expansions_compile_with_prelude_names_shadowed() {
    let set = ParamSet::<Outer>::from_toml_str("shape = [2, 3]\n[inner]\nwidth = 4\n").unwrap();
    ::core::assert_eq!(set.values().dims, [2, 3]);
    ::core::assert_eq!(set.values().mode, Mode::Fast);
    ::core::assert_eq!(Mode::Careful.wire_name(), "safe");
    ::core::assert_eq!(*param_ref!(Outer::inner.width).get(set.values()), 4);
    ::core::assert!(ParamSet::<Empty>::from_toml_str("").is_ok());
    ::core::assert!(::std::format!("{:?}", set.values()).contains("<redacted>"));
}
