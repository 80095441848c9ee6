//! Procedural macros for holo. Use them through `holo_runtime`, which re-exports them
//! and documents every attribute key.
//!
//! Each macro goes parse → validate → expand in its own modules; every authoring mistake
//! is a `syn::Error` spanned on the offending token, and all mistakes of one invocation
//! are reported together.

use proc_macro::TokenStream;

mod ctxt;
mod memory_kind_map;
mod operator;
mod param;
mod projector;
mod symbol;

/// Derives `ParamValue` and `ParamSchema` for a struct of deployment parameters.
/// Documented on `holo_runtime::ParamSchema`.
#[proc_macro_derive(ParamSchema, attributes(param))]
pub fn derive_param_schema(input: TokenStream) -> TokenStream {
    param::derive_param_schema(input.into()).into()
}

/// Derives `ParamValue` and `ParamEnum` for a fieldless enum.
/// Documented on `holo_runtime::ParamEnum`.
#[proc_macro_derive(ParamEnum, attributes(param))]
pub fn derive_param_enum(input: TokenStream) -> TokenStream {
    param::derive_param_enum(input.into()).into()
}

/// A typed field path: `param_ref!(Schema::field)`, `param_ref!(Schema::nested.field)`.
/// Documented on `holo_runtime::param_ref`.
#[proc_macro]
pub fn param_ref(input: TokenStream) -> TokenStream {
    param::param_ref(input.into()).into()
}

/// Declares an operator: a struct whose `Input<…>` and `Output<…>` fields are its ports,
/// with `#[input(...)]` / `#[output(...)]` describing tensor ports.
/// Documented on `holo_runtime::operator`.
#[proc_macro_attribute]
pub fn operator(args: TokenStream, input: TokenStream) -> TokenStream {
    operator::operator(args.into(), input.into()).into()
}

/// What `#[operator]` expands to, on the struct as configured (after `cfg`): the port
/// handles and the `OperatorPorts` impl. Not a public API; write `#[operator]`.
/// `__holo_operator` carries the attribute's arguments (`symbol::OPERATOR_ARGS`).
#[doc(hidden)]
#[proc_macro_derive(__OperatorPorts, attributes(input, output, __holo_operator))]
pub fn derive_operator_ports(input: TokenStream) -> TokenStream {
    operator::derive(input.into()).into()
}

/// Declares a named, versioned byte-span formula over declared parameter fields.
/// Documented on `holo_runtime::byte_span_projector`.
#[proc_macro_attribute]
pub fn byte_span_projector(args: TokenStream, input: TokenStream) -> TokenStream {
    projector::byte_span_projector(args.into(), input.into()).into()
}

/// An exhaustive mapping from an operator's `ParamEnum` to concrete memory kinds:
/// `memory_kind_map!(OutputStorage { Host => Host, Pinned => PinnedHost })`.
/// Documented on `holo_runtime::memory_kind_map`.
#[proc_macro]
pub fn memory_kind_map(input: TokenStream) -> TokenStream {
    memory_kind_map::memory_kind_map(input.into()).into()
}
