//! Expand: the function, its body narrowed to a view of the declared reads; a `const`
//! check per read that the field exists and may be read when a plan is compiled; and a
//! type of the function's name implementing `ByteSpanProjector`.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::{Ident, ItemFn, Type};

use super::ast::{Projector, ReadPath};
use crate::param::{fixed_field_checks, param_ref_tokens, private};

/// The declared reads as a tree: `geometry.width` and `geometry.height` share `geometry`.
struct ReadNode {
    ident: Ident,
    children: Vec<ReadNode>,
}

fn read_tree(reads: &[ReadPath]) -> Vec<ReadNode> {
    let mut roots: Vec<ReadNode> = Vec::new();
    for read in reads {
        let mut level = &mut roots;
        for segment in &read.segments {
            let index = level
                .iter()
                .position(|n| n.ident == *segment)
                .unwrap_or_else(|| {
                    level.push(ReadNode {
                        ident: segment.clone(),
                        children: Vec::new(),
                    });
                    level.len() - 1
                });
            level = &mut level[index].children;
        }
    }
    roots
}

/// View structs (one per level of the tree) and the expression that builds the view from
/// `param`. Each field access carries the user's token, so a field the schema lacks is
/// rustc's "no field" error on the `reads(...)` entry.
fn view(
    param: &Ident,
    path: &[&Ident],
    nodes: &[ReadNode],
    structs: &mut Vec<TokenStream>,
) -> TokenStream {
    // Numbered, not named after the path: a path of raw identifiers (`r#type`) is no
    // identifier fragment, and `a.b_c` and `a_b.c` would name the same struct.
    let slot = structs.len();
    structs.push(TokenStream::new());
    let name = if path.is_empty() {
        format_ident!("__HoloReads")
    } else {
        format_ident!("__HoloReads{}", slot)
    };
    let generics: Vec<Ident> = (0..nodes.len()).map(|i| format_ident!("T{}", i)).collect();
    let fields: Vec<&Ident> = nodes.iter().map(|n| &n.ident).collect();
    let values: Vec<TokenStream> = nodes
        .iter()
        .map(|node| {
            let mut inner: Vec<&Ident> = path.to_vec();
            inner.push(&node.ident);
            if node.children.is_empty() {
                quote!(::core::clone::Clone::clone(&(*#param) #(.#inner)*))
            } else {
                view(param, &inner, &node.children, structs)
            }
        })
        .collect();
    structs[slot] = quote! {
        #[allow(non_camel_case_types, dead_code)]
        struct #name<#(#generics),*> { #(#fields: #generics),* }
    };
    quote!(#name { #(#fields: #values),* })
}

/// The function with its body narrowed to the declared reads.
fn narrowed(item: &ItemFn, param: &Ident, reads: &[ReadPath]) -> TokenStream {
    let mut structs = Vec::new();
    let value = view(param, &[], &read_tree(reads), &mut structs);
    let attrs = &item.attrs;
    let vis = &item.vis;
    let sig = &item.sig;
    let body = &item.block;
    quote! {
        #(#attrs)*
        // The `Result` return is the projector contract, even for a formula that cannot fail.
        #[allow(clippy::unnecessary_wraps)]
        #vis #sig {
            #(#structs)*
            // The body sees only the declared reads: any other field is not on the view.
            #[allow(unused_variables)]
            let #param = &#value;
            #body
        }
    }
}

/// `tokens` with every span set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                token = TokenTree::Group(inner);
            } else {
                token.set_span(span);
            }
            token
        })
        .collect()
}

fn read_checks(p: &TokenStream, params: &Type, read: &ReadPath) -> TokenStream {
    // The schema type, respanned onto the read: a field the schema lacks is an error there.
    let first = read
        .segments
        .first()
        .map_or_else(Span::call_site, Ident::span);
    let text = read.text();
    fixed_field_checks(
        p,
        respan(quote!(#params), first),
        &read.segments,
        &format!(
            "`{text}` is `sensitive`: a byte-span projector may read only non-sensitive `compile_time` or `recompile_required` fields"
        ),
        &format!(
            "`{text}` is neither `compile_time` nor `recompile_required`: a byte-span projector may read only fields fixed for the life of a plan; mark it `#[param(recompile_required)]` or remove it from `reads(...)`"
        ),
    )
}

/// The type of the function's name (braced, so only in the type namespace) and its impl.
fn projector_type(
    p: &TokenStream,
    item: &ItemFn,
    id: &str,
    impl_for: Option<(&Type, &[ReadPath])>,
) -> TokenStream {
    let name = &item.sig.ident;
    let vis = &item.vis;
    let doc = format!("The byte-span projector `{name}` (`{id}`).");
    let imp = impl_for.map(|(params, reads)| {
        let refs = reads.iter().map(|r| {
            let r = param_ref_tokens(p, params, &r.segments);
            quote!(#p::param_dependency(#r))
        });
        let checks = reads.iter().map(|r| read_checks(p, params, r));
        let output_span = match &item.sig.output {
            syn::ReturnType::Type(_, ty) => syn::spanned::Spanned::span(&**ty),
            syn::ReturnType::Default => name.span(),
        };
        let expected = quote_spanned!(output_span=> fn(&#params) -> #p::Result<u64>);
        quote! {
            #(#checks)*

            #[automatically_derived]
            impl #p::ByteSpanProjector for #name {
                type Params = #params;
                const ID: &'static str = #id;
                fn reads() -> #p::Vec<#p::ParamDependency> {
                    #p::Vec::from([#(#refs),*])
                }
                fn project(params: &#params) -> #p::Result<u64> {
                    // The one check of the signature's types, on the user's tokens.
                    let __holo_projector: #expected = #name;
                    __holo_projector(params)
                }
            }
        }
    });
    quote! {
        #[doc = #doc]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #name {
            _private: (),
        }

        #[allow(unused_qualifications, clippy::all, clippy::pedantic)]
        const _: () = {
            #imp
        };
    }
}

pub(crate) fn projector(projector: &Projector<'_>) -> TokenStream {
    let p = private(projector.args.krate.as_ref());
    let item = projector.item;
    let reads = projector
        .args
        .reads
        .as_ref()
        .map_or(&[][..], |(_, r)| r.as_slice());
    let id = projector
        .args
        .id
        .as_ref()
        .map(syn::LitStr::value)
        .unwrap_or_default();
    let Some((param, params)) = projector.param() else {
        return fallback(item, projector.args.krate.as_ref());
    };
    let function = narrowed(item, param, reads);
    let ty = projector_type(&p, item, &id, Some((params, reads)));
    quote!(#function #ty)
}

/// After an error: the function unchanged, and its name as a type without an impl.
pub(crate) fn fallback(item: &ItemFn, krate: Option<&syn::Path>) -> TokenStream {
    let p = private(krate);
    let ty = projector_type(&p, item, "", None);
    quote!(#item #ty)
}
