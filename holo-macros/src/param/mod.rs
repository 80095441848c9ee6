//! `#[derive(ParamSchema)]`, `#[derive(ParamEnum)]` and `param_ref!`: parse (`ast`,
//! `attr`) → validate (`valid`) → expand (`expand`), over `proc_macro2` tokens.

mod ast;
pub(crate) mod attr;
mod expand;
mod param_ref;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;
use syn::DeriveInput;

use crate::ctxt::Ctxt;
pub(crate) use expand::private;
pub(crate) use param_ref::{ParamRefInput, field_text, fixed_field_checks, param_ref_tokens};

pub(crate) fn derive_param_schema(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(err) => return err.to_compile_error(),
    };
    let cx = Ctxt::new();
    let schema = ast::Schema::from_ast(&cx, &input);
    if let Some(schema) = &schema {
        valid::check_schema(&cx, schema);
    }
    match (cx.check(), schema) {
        (Ok(()), Some(schema)) => expand::schema(&schema),
        (result, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let stub = expand::schema_stub(&input, ast::crate_path_of(&input).as_ref());
            quote::quote!(#errors #stub)
        }
    }
}

pub(crate) fn derive_param_enum(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(err) => return err.to_compile_error(),
    };
    let cx = Ctxt::new();
    let item = ast::Enum::from_ast(&cx, &input);
    if let Some(item) = &item {
        valid::check_enum(&cx, item);
    }
    match (cx.check(), item) {
        (Ok(()), Some(item)) => expand::enumeration(&item),
        (result, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let stub = expand::enum_stub(&input, ast::crate_path_of(&input).as_ref());
            quote::quote!(#errors #stub)
        }
    }
}

pub(crate) fn param_ref(input: TokenStream) -> TokenStream {
    match syn::parse2::<param_ref::ParamRefInput>(input) {
        Ok(parsed) => param_ref::expand(&parsed),
        Err(err) => err.to_compile_error(),
    }
}
