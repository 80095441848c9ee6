//! `param_ref!(Schema::field.nested)`: parsed into the schema type and the field segments,
//! expanded to a field access so a misspelled segment is a rustc error on that segment.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::parse::{Parse, ParseStream};
use syn::{Ident, Path, Token};

use super::expand::private;
use crate::symbol;

/// The parsed invocation: `[crate = path;] Schema::first.second...`.
pub(crate) struct ParamRefInput {
    krate: Option<Path>,
    pub(crate) schema: Path,
    pub(crate) segments: Vec<Ident>,
}

impl ParamRefInput {
    /// The invocation a `param_ref!(...)` macro call holds; `None` for any other macro
    /// or for one that does not parse (rustc reports that when it expands the call).
    pub(crate) fn of_macro(mac: &syn::Macro) -> Option<Self> {
        if mac
            .path
            .segments
            .last()
            .is_none_or(|s| s.ident != symbol::PARAM_REF.0)
        {
            return None;
        }
        mac.parse_body().ok()
    }

    /// `geometry.width`.
    pub(crate) fn text(&self) -> String {
        field_text(&self.segments)
    }
}

/// `geometry.width`.
pub(crate) fn field_text(segments: &[Ident]) -> String {
    segments
        .iter()
        .map(|s| s.unraw().to_string())
        .collect::<Vec<_>>()
        .join(".")
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
    let names = segments.iter().map(|s| s.unraw().to_string());
    quote! {
        #p::ParamRef::__new(&[#(#names),*], |params: &#schema| &(*params) #(.#segments)*)
    }
}

/// `<<S as Field<{h(a)}>>::Type as Field<{h(b)}>>`: the compile-time facts of `schema`'s
/// field at `segments`, each step spanned on its segment, so a field the schema lacks is
/// an error there.
pub(crate) fn field_facts(p: &TokenStream, schema: TokenStream, segments: &[Ident]) -> TokenStream {
    let mut ty = schema;
    let mut last = TokenStream::new();
    for segment in segments {
        let name = segment.unraw().to_string();
        let step = quote_spanned!(segment.span()=> <#ty as #p::Field<{ #p::field_hash(#name) }>>);
        last = step.clone();
        ty = quote!(#step::Type);
    }
    last
}

/// `const` checks, spanned on the field's last segment, that the field is not sensitive
/// and is fixed for the life of a plan (`compile_time` or `recompile_required`): what the
/// compiler may read when it sizes pools. The messages say who is reading.
pub(crate) fn fixed_field_checks(
    p: &TokenStream,
    schema: TokenStream,
    segments: &[Ident],
    sensitive: &str,
    not_fixed: &str,
) -> TokenStream {
    let field = field_facts(p, schema, segments);
    let span = segments.last().map_or_else(Span::call_site, Ident::span);
    quote_spanned! {span=>
        const _: () = ::core::assert!(!#field::SENSITIVE, #sensitive);
        const _: () = ::core::assert!(#field::SENSITIVE || #field::COMPILE_READABLE, #not_fixed);
    }
}
