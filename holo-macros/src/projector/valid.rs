//! Validate: the signature's shape, the id's `.vN` suffix and the declared reads. Whether
//! the signature's types are right, and whether each read names a readable field, is
//! checked by generated code the compiler must accept.

use syn::{FnArg, Pat, ReturnType, Type};

use super::ast::{Projector, ReadPath};
use crate::ctxt::Ctxt;

const SIGNATURE: &str = "fn(params: &Params) -> holo_runtime::Result<u64>";

pub(crate) fn check(cx: &Ctxt, projector: &Projector<'_>) {
    check_signature(cx, projector);
    check_id(cx, projector);
    check_reads(cx, projector);
}

fn check_signature(cx: &Ctxt, projector: &Projector<'_>) {
    let sig = &projector.item.sig;
    if let Some(token) = &sig.constness {
        cx.error_spanned_by(
            token,
            "a `#[byte_span_projector]` function cannot be `const`",
        );
    }
    if let Some(token) = &sig.asyncness {
        cx.error_spanned_by(
            token,
            "a `#[byte_span_projector]` function cannot be `async`",
        );
    }
    if let Some(token) = &sig.unsafety {
        cx.error_spanned_by(
            token,
            "a `#[byte_span_projector]` function cannot be `unsafe`",
        );
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(
            abi,
            "a `#[byte_span_projector]` function cannot be `extern`",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned_by(
            &sig.generics,
            format!("a `#[byte_span_projector]` function has no generic parameters: `{SIGNATURE}`"),
        );
    }
    if let Some(variadic) = &sig.variadic {
        cx.error_spanned_by(
            variadic,
            format!("a `#[byte_span_projector]` function is `{SIGNATURE}`"),
        );
    }
    if sig.inputs.len() == 1 {
        match &sig.inputs[0] {
            FnArg::Receiver(receiver) => cx.error_spanned_by(
                receiver,
                format!("a `#[byte_span_projector]` is a free function: `{SIGNATURE}`"),
            ),
            FnArg::Typed(arg) => {
                match &*arg.ty {
                    Type::Reference(r) if r.mutability.is_none() => {}
                    Type::Reference(r) => cx.error_spanned_by(
                        r,
                        "a `#[byte_span_projector]` reads its parameters through a shared reference: take `&Params`, not `&mut Params`",
                    ),
                    other => cx.error_spanned_by(
                        other,
                        "a `#[byte_span_projector]` takes its parameters by reference: `params: &Params`",
                    ),
                }
                match &*arg.pat {
                    Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {}
                    other => cx.error_spanned_by(
                        other,
                        "name the `#[byte_span_projector]` parameter with a plain identifier, like `params: &Params`",
                    ),
                }
            }
        }
    } else if sig.inputs.is_empty() {
        cx.error_at(
            sig.paren_token.span.join(),
            format!("a `#[byte_span_projector]` function takes one argument: `{SIGNATURE}`"),
        );
    } else {
        cx.error_spanned_by(
            &sig.inputs,
            format!(
                "a `#[byte_span_projector]` function takes exactly one argument: `{SIGNATURE}`"
            ),
        );
    }
    if let ReturnType::Default = sig.output {
        cx.error_at(
            sig.paren_token.span.close(),
            format!("a `#[byte_span_projector]` function returns the byte span: `{SIGNATURE}`"),
        );
    }
}

/// `com.example.Name.output.v1`: a non-empty head, then `.v` and a version number.
pub(crate) fn id_is_versioned(id: &str) -> bool {
    let Some((head, version)) = id.rsplit_once(".v") else {
        return false;
    };
    !head.is_empty()
        && !version.is_empty()
        && version.chars().all(|c| c.is_ascii_digit())
        && !id.chars().any(char::is_whitespace)
}

fn check_id(cx: &Ctxt, projector: &Projector<'_>) {
    match &projector.args.id {
        Some(id) if !id_is_versioned(&id.value()) => cx.error_spanned_by(
            id,
            "`#[byte_span_projector(id)]` needs a stable id ending in a version, like `\"com.example.BatchOutput.max-byte-span.v1\"`; bump the `.vN` when the formula changes",
        ),
        Some(_) => {}
        None if projector.args.id_written => {}
        None => cx.error_at(
            projector.item.sig.ident.span(),
            "`#[byte_span_projector]` needs an id: add `id = \"com.example.Name.output.v1\"`",
        ),
    }
}

fn check_reads(cx: &Ctxt, projector: &Projector<'_>) {
    let Some((span, reads)) = &projector.args.reads else {
        cx.error_at(
            projector.item.sig.ident.span(),
            "`#[byte_span_projector]` needs the fields it reads: add `reads(field, nested.field)`",
        );
        return;
    };
    if reads.is_empty() {
        cx.error_at(
            *span,
            "`#[byte_span_projector(reads)]` needs at least one field, like `reads(width, height)`",
        );
    }
    for (i, read) in reads.iter().enumerate() {
        let text = read.text();
        for earlier in &reads[..i] {
            let earlier_text = earlier.text();
            if earlier_text == text {
                cx.error_spanned_by(
                    path_tokens(read),
                    format!("duplicate read `{text}` in `#[byte_span_projector(reads)]`"),
                );
            } else if is_prefix(earlier, read) || is_prefix(read, earlier) {
                let (outer, inner) = if earlier.segments.len() < read.segments.len() {
                    (earlier_text, text.clone())
                } else {
                    (text.clone(), earlier_text)
                };
                cx.error_spanned_by(
                    path_tokens(read),
                    format!(
                        "`#[byte_span_projector(reads)]` lists both `{outer}` and `{inner}`; keep only the fields the projector reads"
                    ),
                );
            }
        }
    }
}

fn is_prefix(short: &ReadPath, long: &ReadPath) -> bool {
    short.segments.len() < long.segments.len()
        && short
            .segments
            .iter()
            .zip(&long.segments)
            .all(|(a, b)| a == b)
}

/// A read path's segments, for an error spanning all of them.
fn path_tokens(read: &ReadPath) -> proc_macro2::TokenStream {
    let segments = &read.segments;
    quote::quote!(#(#segments).*)
}
