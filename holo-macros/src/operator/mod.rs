//! `#[operator]`: parse (`ast`) → validate (`valid`) → expand (`expand`), over
//! `proc_macro2` tokens.
//!
//! The attribute only re-emits the struct with an internal derive (pin-project's
//! technique): rustc hands a derive the struct after `cfg` and `cfg_attr` are applied,
//! so a port configured out is no port, and `#[input]` / `#[output]` are the derive's
//! inert helper attributes. The attribute's own arguments ride along in one more helper,
//! `#[__holo_operator(...)]`, and the derive does all the work.

pub(crate) mod ast;
mod expand;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, Item};

use crate::ctxt::Ctxt;
use crate::param::private;
use crate::symbol;

/// `#[operator(args)] struct …`: the struct, unchanged, under the internal derive.
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
    // Read leniently: the derive parses the arguments again and reports their mistakes.
    let forwarded = args.clone();
    let cx = Ctxt::new();
    let krate = ast::ContainerArgs::from_tokens(&cx, args).krate;
    drop(cx.check());
    let p = private(krate.as_ref());
    let helper = symbol::OPERATOR_ARGS.ident();
    quote! {
        #[derive(#p::__OperatorPorts)]
        #[#helper(#forwarded)]
        #item
    }
}

/// `#[derive(__OperatorPorts)]`: the `<Name>Ports` handles and the `OperatorPorts` impl of
/// the struct as configured.
pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let item = match syn::parse2::<Item>(input) {
        Ok(Item::Struct(item)) => item,
        Ok(other) => {
            return syn::Error::new(
                item_keyword_span(&other),
                "`#[operator]` goes on a struct with named fields, whose `Input<…>` and `Output<…>` fields are its ports",
            )
            .to_compile_error();
        }
        Err(err) => return err.to_compile_error(),
    };
    let cx = Ctxt::new();
    let args = operator_args(&cx, &item.attrs);
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

/// The arguments `#[operator(...)]` forwarded in `#[__holo_operator(...)]`; a port
/// attribute on the struct itself is an error.
fn operator_args(cx: &Ctxt, attrs: &[Attribute]) -> TokenStream {
    let mut args = TokenStream::new();
    for attr in attrs {
        if attr.path() == &symbol::OPERATOR_ARGS {
            if let syn::Meta::List(list) = &attr.meta {
                args = list.tokens.clone();
            }
        } else if ast::is_port_attr(attr) {
            let word = attr.path().get_ident().map(ToString::to_string);
            cx.error_spanned_by(
                attr.path(),
                format!(
                    "`#[{}]` goes on a port field, not on the operator struct",
                    word.unwrap_or_default()
                ),
            );
        }
    }
    args
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
