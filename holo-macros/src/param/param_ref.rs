//! `param_ref!(Schema::field.nested)`: parsed into the schema type and the field segments,
//! expanded to a field access so a misspelled segment is a rustc error on that segment.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Ident, Path, Token};

use super::expand::private;

/// The parsed invocation: `[crate = path;] Schema::first.second...`.
pub(crate) struct ParamRefInput {
    krate: Option<Path>,
    schema: Path,
    segments: Vec<Ident>,
}

impl Parse for ParamRefInput {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let krate = if input.peek(Token![crate]) && input.peek2(Token![=]) {
            input.parse::<Token![crate]>()?;
            input.parse::<Token![=]>()?;
            let path = input.call(Path::parse_mod_style)?;
            input.parse::<Token![;]>()?;
            Some(path)
        } else {
            None
        };
        let mut schema = input.call(Path::parse_mod_style)?;
        if schema.segments.len() < 2 {
            return Err(syn::Error::new_spanned(
                &schema,
                "`param_ref!` needs a schema type and a field, like `param_ref!(ResizeParams::output_shape)`",
            ));
        }
        let first = schema
            .segments
            .pop()
            .map(syn::punctuated::Pair::into_value)
            .map(|s| s.ident)
            .ok_or_else(|| input.error("`param_ref!` needs a field"))?;
        // Drop the `::` that separated the type from the first field.
        let last = schema.segments.pop().map(syn::punctuated::Pair::into_value);
        if let Some(last) = last {
            schema.segments.push(last);
        }
        let mut segments = vec![first];
        while input.peek(Token![.]) {
            input.parse::<Token![.]>()?;
            segments.push(input.parse()?);
        }
        if !input.is_empty() {
            return Err(input.error(
                "expected `.field` or the end of `param_ref!`, like `param_ref!(BatchParams::geometry.width)`",
            ));
        }
        Ok(Self {
            krate,
            schema,
            segments,
        })
    }
}

pub(crate) fn expand(input: &ParamRefInput) -> TokenStream {
    let p = private(input.krate.as_ref());
    param_ref_tokens(&p, &input.schema, &input.segments)
}

/// A `ParamRef` to `schema`'s field at `segments`: a field access, so a misspelled
/// segment is a rustc error on that segment. Also used by `#[byte_span_projector]`.
pub(crate) fn param_ref_tokens(
    p: &TokenStream,
    schema: &impl quote::ToTokens,
    segments: &[Ident],
) -> TokenStream {
    let names = segments.iter().map(Ident::to_string);
    quote! {
        #p::ParamRef::__new(&[#(#names),*], |params: &#schema| &(*params) #(.#segments)*)
    }
}
