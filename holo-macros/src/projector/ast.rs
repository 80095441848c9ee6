//! Parse: the `#[byte_span_projector(...)]` keys and the function they sit on. The
//! signature's shape is checked in `valid.rs`; its types by the compiler.

use proc_macro2::{Span, TokenStream};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Pat, Token, Type};

use crate::ctxt::Ctxt;
use crate::param::attr::{crate_path, skip_value, unknown_key};
use crate::symbol;

/// A `#[byte_span_projector]` function.
pub(crate) struct Projector<'a> {
    pub(crate) item: &'a ItemFn,
    pub(crate) args: ProjectorArgs,
}

/// The attribute's keys.
pub(crate) struct ProjectorArgs {
    pub(crate) id: Option<LitStr>,
    /// `id` was written (perhaps malformed, reported already).
    pub(crate) id_written: bool,
    /// The `reads` key token and the paths it lists.
    pub(crate) reads: Option<(Span, Vec<ReadPath>)>,
    pub(crate) krate: Option<syn::Path>,
}

/// One declared read: `width` or `geometry.width`.
pub(crate) struct ReadPath {
    pub(crate) segments: Vec<Ident>,
}

impl ReadPath {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut segments = vec![input.parse::<Ident>()?];
        while input.peek(Token![.]) {
            input.parse::<Token![.]>()?;
            segments.push(input.parse::<Ident>()?);
        }
        Ok(Self { segments })
    }

    /// `geometry.width`.
    pub(crate) fn text(&self) -> String {
        crate::param::field_text(&self.segments)
    }
}

impl ProjectorArgs {
    pub(crate) fn from_tokens(cx: &Ctxt, args: TokenStream) -> Self {
        let mut out = Self {
            id: None,
            id_written: false,
            reads: None,
            krate: None,
        };
        let parser = syn::meta::parser(|meta| {
            let key = &meta.path;
            if *key == symbol::ID {
                let duplicate = out.id_written;
                out.id_written = true;
                let expr: Expr = meta.value()?.parse()?;
                let Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) = &expr
                else {
                    cx.error_spanned_by(
                        &expr,
                        "`#[byte_span_projector(id)]` needs a string literal, like `id = \"com.example.Op.output.v1\"`",
                    );
                    return Ok(());
                };
                if duplicate {
                    cx.error_spanned_by(key, "duplicate `#[byte_span_projector(id)]` key");
                } else {
                    out.id = Some(s.clone());
                }
            } else if *key == symbol::READS {
                if !meta.input.peek(syn::token::Paren) {
                    cx.error_spanned_by(
                        key,
                        "`#[byte_span_projector(reads)]` needs a list of fields, like `reads(width, geometry.height)`",
                    );
                    return skip_value(&meta);
                }
                let content;
                syn::parenthesized!(content in meta.input);
                let list = Punctuated::<ReadPath, Token![,]>::parse_terminated_with(
                    &content,
                    ReadPath::parse,
                )?;
                if out.reads.is_some() {
                    cx.error_spanned_by(key, "duplicate `#[byte_span_projector(reads)]` key");
                } else {
                    out.reads = Some((key.span(), list.into_iter().collect()));
                }
            } else if *key == symbol::CRATE {
                let path = crate_path(cx, &meta, symbol::BYTE_SPAN_PROJECTOR)?;
                if out.krate.is_some() {
                    cx.error_spanned_by(key, "duplicate `#[byte_span_projector(crate)]` key");
                } else {
                    out.krate = path;
                }
            } else {
                unknown_key(
                    cx,
                    &meta,
                    "`#[byte_span_projector]`",
                    symbol::PROJECTOR_KEYS,
                )?;
            }
            Ok(())
        });
        if let Err(err) = parser.parse2(args) {
            cx.syn_error(err);
        }
        out
    }
}

impl Projector<'_> {
    /// The parameter's name and `P` of `&P`, when the signature has that shape.
    pub(crate) fn param(&self) -> Option<(&Ident, &Type)> {
        let sig = &self.item.sig;
        if sig.inputs.len() != 1 {
            return None;
        }
        let FnArg::Typed(arg) = &sig.inputs[0] else {
            return None;
        };
        let Type::Reference(reference) = &*arg.ty else {
            return None;
        };
        if reference.mutability.is_some() {
            return None;
        }
        let Pat::Ident(pat) = &*arg.pat else {
            return None;
        };
        if pat.by_ref.is_some() || pat.subpat.is_some() {
            return None;
        }
        Some((&pat.ident, &reference.elem))
    }
}
