//! Parse: the derive input read into a schema or enum model, every attribute key checked
//! for spelling, duplicates and value syntax. Semantic checks are in `valid.rs`.

use proc_macro2::Span;
use syn::ext::IdentExt as _;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Expr, Fields, Ident, LitStr, Token, Type};

use super::attr::{self, Attr};
use crate::ctxt::Ctxt;
use crate::symbol;

/// A `#[derive(ParamSchema)]` struct.
pub(crate) struct Schema<'a> {
    pub(crate) input: &'a DeriveInput,
    pub(crate) id: Option<LitStr>,
    pub(crate) version: Option<(u32, Span)>,
    pub(crate) krate: Option<syn::Path>,
    pub(crate) debug: bool,
    /// `schema` and `version` keys were written (perhaps malformed, reported already).
    pub(crate) id_written: bool,
    pub(crate) version_written: bool,
    pub(crate) fields: Vec<Field<'a>>,
}

/// One field of a schema.
pub(crate) struct Field<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) ty: &'a Type,
    pub(crate) doc: String,
    pub(crate) name: Option<LitStr>,
    pub(crate) recompile_required: bool,
    pub(crate) sensitive: bool,
    pub(crate) compile_time: bool,
    pub(crate) min: Option<(i128, Span)>,
    pub(crate) max: Option<(i128, Span)>,
    pub(crate) default: Option<Default>,
    pub(crate) enum_values: Option<(Span, Vec<Ident>)>,
}

/// `#[param(default)]` or `#[param(default = EXPR)]`.
pub(crate) enum Default {
    Trait(Span),
    Expr(Expr),
}

impl Field<'_> {
    /// The key in TOML and JSON.
    pub(crate) fn key(&self) -> String {
        self.name
            .as_ref()
            .map_or_else(|| self.ident.unraw().to_string(), LitStr::value)
    }

    /// The token naming the key, for errors about it.
    pub(crate) fn key_span(&self) -> Span {
        self.name
            .as_ref()
            .map_or_else(|| self.ident.span(), LitStr::span)
    }
}

/// A `#[derive(ParamEnum)]` enum.
pub(crate) struct Enum<'a> {
    pub(crate) input: &'a DeriveInput,
    pub(crate) krate: Option<syn::Path>,
    pub(crate) variants: Vec<Variant<'a>>,
}

/// One variant and its wire name.
pub(crate) struct Variant<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) name: Option<LitStr>,
}

impl Variant<'_> {
    pub(crate) fn wire_name(&self) -> String {
        self.name
            .as_ref()
            .map_or_else(|| snake_case(&self.ident.to_string()), LitStr::value)
    }

    pub(crate) fn wire_name_span(&self) -> Span {
        self.name
            .as_ref()
            .map_or_else(|| self.ident.span(), LitStr::span)
    }
}

/// `PinnedHost` → `pinned_host`.
pub(crate) fn snake_case(ident: &str) -> String {
    let mut out = String::new();
    let mut previous_lower = false;
    for c in ident.chars() {
        if c.is_uppercase() {
            if previous_lower {
                out.push('_');
            }
            out.extend(c.to_lowercase());
            previous_lower = false;
        } else {
            out.push(c);
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
        }
    }
    out
}

/// The `#[param(crate = ...)]` of a container, read leniently, for stubs after an error.
pub(crate) fn crate_path_of(input: &DeriveInput) -> Option<syn::Path> {
    let cx = Ctxt::new();
    let mut krate = None;
    attr::for_each_param_key(&cx, &input.attrs, |meta| {
        if meta.path == symbol::CRATE {
            krate = attr::crate_path(&cx, meta, symbol::PARAM)?;
        } else {
            attr::skip_value(meta)?;
        }
        Ok(())
    });
    drop(cx.check());
    krate
}

impl<'a> Schema<'a> {
    /// `None` when the input is not a struct with named fields (the error is in `cx`).
    pub(crate) fn from_ast(cx: &Ctxt, input: &'a DeriveInput) -> Option<Self> {
        let mut id = Attr::none(symbol::SCHEMA);
        let mut version = Attr::none(symbol::VERSION);
        let mut krate = Attr::none(symbol::CRATE);
        let mut debug = Attr::none(symbol::DEBUG);
        let (mut id_written, mut version_written) = (false, false);
        attr::for_each_param_key(cx, &input.attrs, |meta| {
            if meta.path == symbol::SCHEMA {
                id_written = true;
                if let Some(s) = attr::lit_str(cx, meta, symbol::SCHEMA)? {
                    id.set(cx, &meta.path, s);
                }
            } else if meta.path == symbol::VERSION {
                version_written = true;
                if let Some((v, span)) = attr::lit_int(cx, meta, symbol::VERSION, "1")? {
                    match u32::try_from(v) {
                        Ok(v) => version.set(cx, &meta.path, (v, span)),
                        Err(_) => cx.error_at(
                            span,
                            "`#[param(version)]` needs a non-negative integer that fits `u32`",
                        ),
                    }
                }
            } else if meta.path == symbol::CRATE {
                if let Some(path) = attr::crate_path(cx, meta, symbol::PARAM)? {
                    krate.set(cx, &meta.path, path);
                }
            } else if meta.path == symbol::DEBUG {
                attr::flag(cx, meta, &mut debug)?;
            } else {
                attr::unknown_key(cx, meta, "`#[param]` struct", symbol::SCHEMA_CONTAINER_KEYS)?;
            }
            Ok(())
        });

        let named = match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => Some(named),
                Fields::Unnamed(fields) => {
                    cx.error_spanned_by(
                        fields,
                        "`#[derive(ParamSchema)]` needs a struct with named fields; every field is a key in TOML and JSON",
                    );
                    None
                }
                Fields::Unit => {
                    cx.error_spanned_by(
                        &input.ident,
                        "`#[derive(ParamSchema)]` needs a struct with named fields, found a unit struct",
                    );
                    None
                }
            },
            Data::Enum(data) => {
                cx.error_spanned_by(
                    data.enum_token,
                    "`#[derive(ParamSchema)]` needs a struct with named fields; for an enum of choices use `#[derive(ParamEnum)]`",
                );
                None
            }
            Data::Union(data) => {
                cx.error_spanned_by(
                    data.union_token,
                    "`#[derive(ParamSchema)]` needs a struct with named fields, found a union",
                );
                None
            }
        }?;

        let fields = named
            .named
            .iter()
            .filter_map(|f| Some(Field::from_ast(cx, f.ident.as_ref()?, f)))
            .collect();
        Some(Self {
            input,
            id: id.get(),
            version: version.get(),
            krate: krate.get(),
            debug: debug.get().is_some(),
            id_written,
            version_written,
            fields,
        })
    }
}

impl<'a> Field<'a> {
    fn from_ast(cx: &Ctxt, ident: &'a Ident, field: &'a syn::Field) -> Self {
        let mut name = Attr::none(symbol::NAME);
        let mut recompile_required = Attr::none(symbol::RECOMPILE_REQUIRED);
        let mut sensitive = Attr::none(symbol::SENSITIVE);
        let mut compile_time = Attr::none(symbol::COMPILE_TIME);
        let mut min = Attr::none(symbol::MIN);
        let mut max = Attr::none(symbol::MAX);
        let mut default = Attr::none(symbol::DEFAULT);
        let mut enum_values = Attr::none(symbol::ENUM_VALUES);
        attr::for_each_param_key(cx, &field.attrs, |meta| {
            let key = &meta.path;
            if *key == symbol::NAME {
                if let Some(s) = attr::lit_str(cx, meta, symbol::NAME)? {
                    name.set(cx, key, s);
                }
            } else if *key == symbol::RECOMPILE_REQUIRED {
                attr::flag(cx, meta, &mut recompile_required)?;
            } else if *key == symbol::SENSITIVE {
                attr::flag(cx, meta, &mut sensitive)?;
            } else if *key == symbol::COMPILE_TIME {
                attr::flag(cx, meta, &mut compile_time)?;
            } else if *key == symbol::MIN || *key == symbol::MAX {
                let (sym, target) = if *key == symbol::MIN {
                    (symbol::MIN, &mut min)
                } else {
                    (symbol::MAX, &mut max)
                };
                if let Some(v) = attr::lit_int(cx, meta, sym, "1")? {
                    target.set(cx, key, v);
                }
            } else if *key == symbol::DEFAULT {
                if meta.input.peek(Token![=]) {
                    let expr: Expr = meta.value()?.parse()?;
                    default.set(cx, key, Default::Expr(expr));
                } else {
                    default.set(cx, key, Default::Trait(key.span()));
                }
            } else if *key == symbol::ENUM_VALUES {
                let mut values = Vec::new();
                if meta.input.peek(syn::token::Paren) {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    let list = Punctuated::<syn::Path, Token![,]>::parse_terminated(&content)?;
                    for value in list {
                        match value.get_ident() {
                            Some(ident) => values.push(ident.clone()),
                            None => cx.error_spanned_by(
                                &value,
                                "`#[param(enum_values)]` lists variant names, like `enum_values(Host, PinnedHost)`",
                            ),
                        }
                    }
                } else {
                    cx.error_spanned_by(
                        key,
                        "`#[param(enum_values)]` needs a list of variants, like `enum_values(Host, PinnedHost)`",
                    );
                    attr::skip_value(meta)?;
                    return Ok(());
                }
                enum_values.set(cx, key, values);
            } else {
                attr::unknown_key(cx, meta, "`#[param]` field", symbol::SCHEMA_FIELD_KEYS)?;
            }
            Ok(())
        });
        Self {
            ident,
            ty: &field.ty,
            doc: attr::doc_comment(&field.attrs),
            name: name.get(),
            recompile_required: recompile_required.get().is_some(),
            sensitive: sensitive.get().is_some(),
            compile_time: compile_time.get().is_some(),
            min: min.get(),
            max: max.get(),
            default: default.get(),
            enum_values: enum_values.get_with_span(),
        }
    }
}

impl<'a> Enum<'a> {
    /// `None` when the input is not an enum (the error is in `cx`).
    pub(crate) fn from_ast(cx: &Ctxt, input: &'a DeriveInput) -> Option<Self> {
        let mut krate = Attr::none(symbol::CRATE);
        attr::for_each_param_key(cx, &input.attrs, |meta| {
            if meta.path == symbol::CRATE {
                if let Some(path) = attr::crate_path(cx, meta, symbol::PARAM)? {
                    krate.set(cx, &meta.path, path);
                }
            } else {
                attr::unknown_key(cx, meta, "`#[param]` enum", symbol::ENUM_CONTAINER_KEYS)?;
            }
            Ok(())
        });
        let data = match &input.data {
            Data::Enum(data) => data,
            Data::Struct(data) => {
                cx.error_spanned_by(
                    data.struct_token,
                    "`#[derive(ParamEnum)]` needs a fieldless enum; for a struct of parameters use `#[derive(ParamSchema)]`",
                );
                return None;
            }
            Data::Union(data) => {
                cx.error_spanned_by(
                    data.union_token,
                    "`#[derive(ParamEnum)]` needs a fieldless enum, found a union",
                );
                return None;
            }
        };
        let variants = data
            .variants
            .iter()
            .map(|v| {
                if !matches!(v.fields, Fields::Unit) {
                    cx.error_spanned_by(
                        &v.fields,
                        format!(
                            "`#[derive(ParamEnum)]` needs fieldless variants; `{}` has fields",
                            v.ident
                        ),
                    );
                }
                let mut name = Attr::none(symbol::NAME);
                attr::for_each_param_key(cx, &v.attrs, |meta| {
                    if meta.path == symbol::NAME {
                        if let Some(s) = attr::lit_str(cx, meta, symbol::NAME)? {
                            name.set(cx, &meta.path, s);
                        }
                    } else {
                        attr::unknown_key(
                            cx,
                            meta,
                            "`#[param]` variant",
                            symbol::ENUM_VARIANT_KEYS,
                        )?;
                    }
                    Ok(())
                });
                Variant {
                    ident: &v.ident,
                    name: name.get(),
                }
            })
            .collect();
        Some(Self {
            input,
            krate: krate.get(),
            variants,
        })
    }
}
