//! Validate: the rules that depend only on tokens, checked here so the message is ours.
//! What depends on types (a field type implements `ParamValue`, an `enum_values` entry
//! is a variant) is checked by generated code the compiler must accept.

use std::collections::BTreeMap;

use syn::spanned::Spanned;
use syn::{GenericArgument, PathArguments, Type};

use super::ast::{Enum, Field, Schema};
use crate::ctxt::Ctxt;

pub(crate) fn check_schema(cx: &Ctxt, schema: &Schema<'_>) {
    let input = schema.input;
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(
            &input.generics,
            "`#[derive(ParamSchema)]` does not support generic parameters; a schema has one stable id",
        );
    }
    match &schema.id {
        None if schema.id_written => {}
        None => cx.error_spanned_by(
            &input.ident,
            "`#[derive(ParamSchema)]` needs a schema id: add `#[param(schema = \"com.example.Name\", version = 1)]`",
        ),
        Some(id) => {
            let text = id.value();
            if text.is_empty() || text.chars().any(char::is_whitespace) {
                cx.error_spanned_by(
                    id,
                    "`#[param(schema)]` needs a non-empty id without whitespace, like `com.example.ResizeParams`",
                );
            }
        }
    }
    if schema.version.is_none() && !schema.version_written {
        cx.error_spanned_by(
            &input.ident,
            "`#[derive(ParamSchema)]` needs a schema version: add `#[param(version = 1)]`",
        );
    }
    let mut keys: BTreeMap<String, &Field<'_>> = BTreeMap::new();
    for field in &schema.fields {
        check_field(cx, field);
        let key = field.key();
        if keys.insert(key.clone(), field).is_some() {
            cx.error_at(
                field.key_span(),
                format!("duplicate parameter key `{key}`; give one field another `#[param(name = \"...\")]`"),
            );
        }
    }
}

/// An integer literal default outside `min`/`max`, or an enum default outside
/// `enum_values`, is an error on the default: it was accepted, and every config that
/// left the key out (and `ParamSet::defaults()`) failed at run time with `OutOfBounds`.
fn check_default(cx: &Ctxt, field: &Field<'_>) {
    let Some(super::ast::Default::Expr(expr)) = &field.default else {
        return;
    };
    if let Some(value) = int_literal(expr) {
        let below = field.min.filter(|&(min, _)| value < min);
        let above = field.max.filter(|&(max, _)| value > max);
        if let Some((min, _)) = below {
            cx.error_spanned_by(
                expr,
                format!("`default = {value}` is below `#[param(min = {min})]`"),
            );
        }
        if let Some((max, _)) = above {
            cx.error_spanned_by(
                expr,
                format!("`default = {value}` is above `#[param(max = {max})]`"),
            );
        }
    }
    // `Type::Variant` only (a type's name, then a variant's): a constant (`DEFAULT_KIND`,
    // `Kinds::DEFAULT`) is left to rustc and the decode.
    let segments: Vec<&syn::PathSegment> = match expr {
        syn::Expr::Path(p) => p.path.segments.iter().collect(),
        _ => Vec::new(),
    };
    let variant = match segments.as_slice() {
        [.., ty, last]
            if ty
                .ident
                .to_string()
                .starts_with(|c: char| c.is_ascii_uppercase())
                && last
                    .ident
                    .to_string()
                    .chars()
                    .any(|c| c.is_ascii_lowercase()) =>
        {
            Some(&last.ident)
        }
        _ => None,
    };
    if let (Some((_, values)), Some(variant), syn::Expr::Path(path)) =
        (&field.enum_values, variant, expr)
        && !values.iter().any(|v| v == variant)
    {
        cx.error_spanned_by(
            expr,
            format!(
                "`default = {}` is not one of `#[param(enum_values)]`",
                quote::ToTokens::to_token_stream(path)
                    .to_string()
                    .replace(' ', "")
            ),
        );
    }
}

/// An integer literal, negated or not, without a suffix.
fn int_literal(expr: &syn::Expr) -> Option<i128> {
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) if i.suffix().is_empty() => i.base10_parse::<i128>().ok(),
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => int_literal(expr).and_then(i128::checked_neg),
        syn::Expr::Group(g) => int_literal(&g.expr),
        syn::Expr::Paren(p) => int_literal(&p.expr),
        _ => None,
    }
}

fn check_field(cx: &Ctxt, field: &Field<'_>) {
    if let Some(name) = &field.name {
        let key = name.value();
        if key.is_empty()
            || key
                .chars()
                .any(|c| c.is_whitespace() || matches!(c, '.' | '[' | ']' | '"'))
        {
            cx.error_spanned_by(
                name,
                "`#[param(name)]` needs a non-empty key without whitespace, `.`, `[`, `]` or `\"`",
            );
        }
    }
    if let (Some((min, min_span)), Some((max, _))) = (field.min, field.max)
        && min > max
    {
        cx.error_at(
            min_span,
            format!("`#[param(min = {min})]` is greater than `#[param(max = {max})]`"),
        );
    }
    check_default(cx, field);
    check_type(cx, field.ty);
    match &field.enum_values {
        Some((span, values)) => {
            if values.is_empty() {
                cx.error_at(
                    *span,
                    "`#[param(enum_values)]` needs at least one value, like `enum_values(Host, PinnedHost)`",
                );
            }
            let mut seen = Vec::new();
            for value in values {
                if seen.contains(&value) {
                    cx.error_spanned_by(
                        value,
                        format!("duplicate value `{value}` in `#[param(enum_values)]`"),
                    );
                } else {
                    seen.push(value);
                }
            }
            if !matches!(field.ty, Type::Path(p) if p.qself.is_none()) {
                cx.error_at(
                    *span,
                    "`#[param(enum_values)]` needs a field whose type is a `#[derive(ParamEnum)]` enum or `MemoryKind`",
                );
            }
        }
        None if is_memory_kind(field.ty) => cx.error_spanned_by(
            field.ty,
            "a `MemoryKind` field needs `#[param(enum_values(...))]` naming exactly the kinds the operator supports, like `enum_values(Host, PinnedHost)`",
        ),
        None => {}
    }
}

fn is_memory_kind(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "MemoryKind"))
}

/// Rejects the types that can never be parameters, with a message saying what to use.
fn check_type(cx: &Ctxt, ty: &Type) {
    match ty {
        Type::Array(array) => check_type(cx, &array.elem),
        Type::Group(group) => check_type(cx, &group.elem),
        Type::Paren(paren) => check_type(cx, &paren.elem),
        Type::Path(path) => {
            let Some(last) = path.path.segments.last() else {
                return;
            };
            let hint = match last.ident.to_string().as_str() {
                "Vec" | "VecDeque" => Some("use `BoundedVec<T, N>` for a list, or `[T; N]` for a fixed length"),
                "Option" => Some("give the field a `#[param(default = ...)]` instead"),
                "Box" | "Rc" | "Arc" | "Cow" => Some("use the inner type directly"),
                "HashMap" | "BTreeMap" | "HashSet" | "BTreeSet" => {
                    Some("use a nested `#[derive(ParamSchema)]` struct")
                }
                "str" => Some("use `String`"),
                _ => None,
            };
            if let Some(hint) = hint {
                cx.error_spanned_by(
                    ty,
                    format!("`{}` is not supported as a parameter field type; {hint}", last.ident),
                );
                return;
            }
            if let PathArguments::AngleBracketed(args) = &last.arguments {
                for arg in &args.args {
                    if let GenericArgument::Type(inner) = arg {
                        check_type(cx, inner);
                    }
                }
            }
        }
        Type::Macro(_) | Type::Verbatim(_) => {}
        other => cx.error_at(
            other.span(),
            "unsupported parameter field type; parameter fields are integers, floats, `bool`, `String`, `[T; N]`, `BoundedVec<T, N>`, a `#[derive(ParamEnum)]` enum or a `#[derive(ParamSchema)]` struct",
        ),
    }
}

pub(crate) fn check_enum(cx: &Ctxt, item: &Enum<'_>) {
    let input = item.input;
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(
            &input.generics,
            "`#[derive(ParamEnum)]` does not support generic parameters",
        );
    }
    if item.variants.is_empty() {
        cx.error_spanned_by(
            &input.ident,
            "`#[derive(ParamEnum)]` needs at least one variant",
        );
    }
    let mut seen: BTreeMap<String, &syn::Ident> = BTreeMap::new();
    for variant in &item.variants {
        let wire = variant.wire_name();
        if wire.is_empty() {
            cx.error_at(
                variant.wire_name_span(),
                "`#[param(name)]` needs a non-empty wire name",
            );
        }
        if let Some(first) = seen.get(&wire) {
            cx.error_at(
                variant.wire_name_span(),
                format!(
                    "wire name \"{wire}\" is already used by variant `{first}`; give this variant another `#[param(name = \"...\")]`"
                ),
            );
        } else {
            seen.insert(wire, variant.ident);
        }
    }
}
