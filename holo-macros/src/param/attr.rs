//! `#[param(...)]` attributes: parsed key by key into the context, so that an unknown key,
//! a duplicate and a malformed value are all reported, each on its own token.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, ExprUnary, Ident, Lit, LitStr, Token, UnOp};

use crate::ctxt::Ctxt;
use crate::symbol::{self, Symbol};

/// A value set at most once, remembering the key token that set it.
pub(crate) struct Attr<T> {
    name: Symbol,
    value: Option<(Span, T)>,
}

impl<T> Attr<T> {
    pub(crate) fn none(name: Symbol) -> Self {
        Self { name, value: None }
    }

    /// Sets the value; a second occurrence is an error on its key.
    pub(crate) fn set(&mut self, cx: &Ctxt, key: &syn::Path, value: T) {
        if self.value.is_some() {
            cx.error_spanned_by(key, format!("duplicate `#[param({})]` key", self.name));
        } else {
            self.value = Some((key.span(), value));
        }
    }

    pub(crate) fn get(self) -> Option<T> {
        self.value.map(|(_, v)| v)
    }

    pub(crate) fn get_with_span(self) -> Option<(Span, T)> {
        self.value
    }
}

/// A flag (`sensitive`), set at most once and taking no value.
pub(crate) fn flag(cx: &Ctxt, meta: &ParseNestedMeta<'_>, attr: &mut Attr<()>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        cx.error_spanned_by(
            &meta.path,
            format!("`#[param({})]` takes no value", attr.name),
        );
        skip_value(meta)?;
        return Ok(());
    }
    attr.set(cx, &meta.path, ());
    Ok(())
}

/// Consumes whatever value a key has, so parsing can go on after an error.
pub(crate) fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<proc_macro2::Group>()?;
    }
    Ok(())
}

/// Reports an unknown key, listing the valid ones, and skips its value.
pub(crate) fn unknown_key(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    what: &str,
    keys: &[Symbol],
) -> syn::Result<()> {
    let path = &meta.path;
    let name = path
        .get_ident()
        .map_or_else(|| quote::quote!(#path).to_string(), Ident::to_string);
    cx.error_spanned_by(
        &meta.path,
        format!(
            "unknown {what} key `{name}`, expected one of {}",
            symbol::one_of(keys)
        ),
    );
    skip_value(meta)
}

/// `key = "text"`.
pub(crate) fn lit_str(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    key: Symbol,
) -> syn::Result<Option<LitStr>> {
    let expr: Expr = meta.value()?.parse()?;
    if let Expr::Lit(ExprLit {
        lit: Lit::Str(s), ..
    }) = &expr
    {
        return Ok(Some(s.clone()));
    }
    cx.error_spanned_by(
        &expr,
        format!("`#[param({key})]` needs a string literal, like `{key} = \"...\"`"),
    );
    Ok(None)
}

/// `key = 42` or `key = -42`, as an `i128`.
pub(crate) fn lit_int(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    key: Symbol,
    example: &str,
) -> syn::Result<Option<(i128, Span)>> {
    let expr: Expr = meta.value()?.parse()?;
    let unsuffixed = |i: &syn::LitInt| i.suffix().is_empty();
    let parsed = match &expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) if unsuffixed(i) => i.base10_parse::<i128>().ok(),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr: inner,
            ..
        }) => match &**inner {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) if unsuffixed(i) => i.base10_parse::<i128>().ok().and_then(i128::checked_neg),
            _ => None,
        },
        _ => None,
    };
    if parsed.is_none() {
        // A suffix (`300u8` on a `u16`) would be dropped unchecked.
        cx.error_spanned_by(
            &expr,
            format!(
                "`#[param({key})]` needs an integer literal without a type suffix, like `{key} = {example}`"
            ),
        );
    }
    Ok(parsed.map(|v| (v, expr.span())))
}

/// `crate = path` or `crate = "path"`, the `crate` key of every holo attribute
/// (`attribute` is its name, for the message).
pub(crate) fn crate_path(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attribute: Symbol,
) -> syn::Result<Option<syn::Path>> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        let s: LitStr = value.parse()?;
        let path = s.parse::<syn::Path>().ok();
        if path.is_none() {
            cx.error_spanned_by(
                &s,
                format!("`#[{attribute}(crate)]` needs a path, like `crate = holo_runtime`"),
            );
        }
        return Ok(path);
    }
    Ok(Some(value.call(syn::Path::parse_mod_style)?))
}

/// Runs `each` on every key of every `#[param(...)]` attribute in `attrs`.
pub(crate) fn for_each_param_key(
    cx: &Ctxt,
    attrs: &[Attribute],
    mut each: impl FnMut(&ParseNestedMeta<'_>) -> syn::Result<()>,
) {
    for attr in attrs {
        if attr.path() != &symbol::PARAM {
            continue;
        }
        if let Err(err) = attr.parse_nested_meta(|meta| each(&meta)) {
            cx.syn_error(err);
        }
    }
}

/// The doc comment, its lines joined, each without the one leading space `///` leaves.
pub(crate) fn doc_comment(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if attr.path() != &symbol::DOC {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
        {
            let line = s.value();
            lines.push(
                line.strip_prefix(' ')
                    .map_or_else(|| line.clone(), str::to_owned),
            );
        }
    }
    lines.join("\n").trim().to_owned()
}
