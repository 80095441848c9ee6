//! Expand: a function pointer `fn(Enum) -> MemoryKind` over an exhaustive `match`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::ast::MemoryKindMap;
use crate::param::private;

pub(crate) fn memory_kind_map(map: &MemoryKindMap) -> TokenStream {
    let p = private(map.krate.as_ref());
    let enumeration = &map.enumeration;
    let arms = map.arms.iter().filter_map(|arm| {
        let variant = arm.variant_ident()?;
        let kind = arm.kind_ident()?;
        let kind = quote_spanned!(kind.span()=> #p::MemoryKind::#kind);
        Some(quote!(#enumeration::#variant => #kind))
    });
    // No `_` arm: a variant left out is rustc's non-exhaustive `match` error, on the enum.
    let scrutinee = quote_spanned!(enumeration.span()=> variant);
    quote! {{
        fn __holo_memory_kind_map(variant: #enumeration) -> #p::MemoryKind {
            match #scrutinee {
                #(#arms,)*
            }
        }
        __holo_memory_kind_map as fn(#enumeration) -> #p::MemoryKind
    }}
}

/// After an error: a function pointer of the right type whose body never runs.
pub(crate) fn fallback(map: &MemoryKindMap) -> TokenStream {
    let p = private(map.krate.as_ref());
    let enumeration = &map.enumeration;
    quote! {{
        fn __holo_memory_kind_map(_: #enumeration) -> #p::MemoryKind {
            ::core::unreachable!()
        }
        __holo_memory_kind_map as fn(#enumeration) -> #p::MemoryKind
    }}
}
