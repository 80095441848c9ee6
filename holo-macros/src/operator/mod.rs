//! `#[operator]`: parse (`ast`) → validate (`valid`) → expand (`expand`), over
//! `proc_macro2` tokens.

pub(crate) mod ast;
mod expand;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;
use quote::quote;
use syn::Item;

use crate::ctxt::Ctxt;

pub(crate) fn operator(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = match syn::parse2::<Item>(input) {
        Ok(Item::Struct(item)) => item,
        Ok(other) => {
            let err = syn::Error::new(
                item_keyword_span(&other),
                "`#[operator]` goes on a struct with named fields, whose `Input<…>` and `Output<…>` fields are its ports",
            )
            .to_compile_error();
            return quote!(#err #other);
        }
        Err(err) => return err.to_compile_error(),
    };
    let cx = Ctxt::new();
    let container = ast::ContainerArgs::from_tokens(&cx, args);
    let (params, krate) = (container.params.clone(), container.krate.clone());
    let op = ast::Operator::from_ast(&cx, container, &item);
    if let Some(op) = &op {
        valid::check(&cx, op);
    }
    match (cx.check(), op) {
        (Ok(()), Some(op)) => expand::operator(&op),
        (result, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let fallback = expand::fallback(&item, krate.as_ref(), params.as_ref());
            quote!(#errors #fallback)
        }
    }
}

/// The item's keyword (`enum`, `fn`, ...), for an error about what an attribute is on.
pub(crate) fn item_keyword_span(item: &Item) -> proc_macro2::Span {
    match item {
        Item::Enum(i) => i.enum_token.span,
        Item::Fn(i) => i.sig.fn_token.span,
        Item::Union(i) => i.union_token.span,
        Item::Struct(i) => i.struct_token.span,
        Item::Impl(i) => i.impl_token.span,
        Item::Trait(i) => i.trait_token.span,
        Item::Mod(i) => i.mod_token.span,
        Item::Type(i) => i.type_token.span,
        Item::Const(i) => i.const_token.span,
        Item::Static(i) => i.static_token.span,
        other => syn::spanned::Spanned::span(other),
    }
}
