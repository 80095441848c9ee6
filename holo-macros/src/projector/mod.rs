//! `#[byte_span_projector]`: parse (`ast`) → validate (`valid`) → expand (`expand`), over
//! `proc_macro2` tokens.

mod ast;
mod expand;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;
use quote::quote;
use syn::Item;

use crate::ctxt::Ctxt;

pub(crate) fn byte_span_projector(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = match syn::parse2::<Item>(input) {
        Ok(Item::Fn(item)) => item,
        Ok(other) => {
            let err = syn::Error::new(
                crate::operator::item_keyword_span(&other),
                "`#[byte_span_projector]` goes on a free function `fn(params: &Params) -> holo_runtime::Result<u64>`",
            )
            .to_compile_error();
            return quote!(#err #other);
        }
        Err(err) => return err.to_compile_error(),
    };
    let cx = Ctxt::new();
    let args = ast::ProjectorArgs::from_tokens(&cx, args);
    let krate = args.krate.clone();
    let projector = ast::Projector { item: &item, args };
    valid::check(&cx, &projector);
    match cx.check() {
        Ok(()) => expand::projector(&projector),
        Err(err) => {
            let errors = err.to_compile_error();
            let fallback = expand::fallback(&item, krate.as_ref());
            quote!(#errors #fallback)
        }
    }
}
