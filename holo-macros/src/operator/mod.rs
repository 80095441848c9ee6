//! `#[operator]`: parse (`ast`) → validate (`valid`) → expand (`expand`), over
//! `proc_macro2` tokens.

pub(crate) mod ast;
mod expand;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;
use quote::quote;
use syn::ItemStruct;

use crate::ctxt::Ctxt;

pub(crate) fn operator(args: TokenStream, input: TokenStream) -> TokenStream {
    let item: ItemStruct = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(_) => {
            let err = syn::Error::new(
                first_span(&input),
                "`#[operator]` goes on a struct with named fields, whose `Input<…>` and `Output<…>` fields are its ports",
            )
            .to_compile_error();
            return quote!(#err #input);
        }
    };
    let cx = Ctxt::new();
    let container = ast::ContainerArgs::from_tokens(&cx, args.clone());
    let params = container.params.clone();
    let op = ast::Operator::from_ast(&cx, container, &item);
    if let Some(op) = &op {
        valid::check(&cx, op);
    }
    match (cx.check(), op) {
        (Ok(()), Some(op)) => expand::operator(&op),
        (result, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let krate = ast::crate_path_of(&args);
            let fallback = expand::fallback(&item, krate.as_ref(), params.as_ref());
            quote!(#errors #fallback)
        }
    }
}

/// The item's keyword (`enum`, `fn`, ...), for an error about what the attribute is on.
fn first_span(input: &TokenStream) -> proc_macro2::Span {
    let mut tokens = input.clone().into_iter().peekable();
    // Skip outer attributes (`#` followed by a bracket group) and a visibility.
    while let Some(token) = tokens.next() {
        match &token {
            proc_macro2::TokenTree::Punct(p) if p.as_char() == '#' => {
                tokens.next();
            }
            proc_macro2::TokenTree::Ident(i) if i == "pub" => {
                if matches!(tokens.peek(), Some(proc_macro2::TokenTree::Group(_))) {
                    tokens.next();
                }
            }
            other => return other.span(),
        }
    }
    proc_macro2::Span::call_site()
}
