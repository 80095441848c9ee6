//! Procedural macros for holo. Use them through `holo_runtime`, which re-exports them
//! and documents every attribute key.
//!
//! Each macro goes parse → validate → expand in its own modules; every authoring mistake
//! is a `syn::Error` spanned on the offending token, and all mistakes of one invocation
//! are reported together.

use proc_macro::TokenStream;

mod ctxt;
mod param;
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
