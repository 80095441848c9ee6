//! Parse: the `#[operator]` struct read into a model of its ports. Every key of every
//! `#[operator]`, `#[input]` and `#[output]` attribute is checked here for spelling,
//! duplicates and value syntax; which keys fit which port is checked in `valid.rs`.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt as _;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, ExprPath, Fields, GenericArgument, Ident, ItemStruct, Lit, LitStr,
    PathArguments, Token, Type,
};

use crate::ctxt::Ctxt;
use crate::param::ParamRefInput;
use crate::symbol::{self, Symbol};

/// An `#[operator]` struct.
pub(crate) struct Operator<'a> {
    pub(crate) item: &'a ItemStruct,
    /// `params = Type`; `None` means `NoParams`.
    pub(crate) params: Option<Type>,
    pub(crate) krate: Option<syn::Path>,
    pub(crate) trigger: Option<Keyed<TriggerArg>>,
    pub(crate) fields: Vec<OpField<'a>>,
}

/// `trigger = ...` as written.
pub(crate) enum TriggerArg {
    AllInputs,
    AnyInput,
    /// `on_arrival(field)`.
    OnArrival(Ident),
    /// `clock(hz = ...)`.
    ClockHz(ClockHz),
    /// `clock(rate = expr)`.
    ClockRate(Expr),
}

/// The value of `clock(hz = ...)`.
pub(crate) enum ClockHz {
    /// `hz = 60`: an integer literal.
    Literal(u64),
    /// `hz = param_ref!(P::fps)` or `hz = parameter_rate(param_ref!(P::fps))`: the
    /// field's value in hertz, read when the plan is compiled, as a rate attribute's
    /// `parameter_rate(...)` is. Holds the `parameter_rate(...)` expression.
    Parameter(Expr),
    /// Any other expression: a `u64` const expression (`hz = TICK_HZ`, `hz = 30 * 2`),
    /// which rustc evaluates and type-checks on the user's tokens.
    Const(Expr),
}

impl ClockHz {
    fn of(expr: &Expr) -> Self {
        if let Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) = expr
            && i.suffix().is_empty()
            && let Ok(v) = i.base10_parse::<u64>()
        {
            return Self::Literal(v);
        }
        if is_param_ref(expr) {
            // `parameter_rate` resolves through the prelude the rate expression is
            // expanded with; spanned on the user's token, so that a field of a type it
            // cannot convert is an error there.
            let func = Ident::new(symbol::PARAMETER_RATE.0, expr.span());
            return Self::Parameter(syn::parse_quote_spanned!(expr.span()=> #func(#expr)));
        }
        if let Expr::Call(call) = expr
            && let Expr::Path(func) = &*call.func
            && func
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == symbol::PARAMETER_RATE.0)
        {
            return Self::Parameter(expr.clone());
        }
        Self::Const(expr.clone())
    }
}

/// A `param_ref!(...)` call, however its path is qualified.
fn is_param_ref(expr: &Expr) -> bool {
    matches!(expr, Expr::Macro(m)
        if m.mac.path.segments.last().is_some_and(|s| s.ident == symbol::PARAM_REF.0))
}

/// `param_ref!(...)`, or a call of one of the prelude's `parameter_*` functions.
fn reads_parameter(expr: &Expr) -> bool {
    is_param_ref(expr)
        || matches!(expr, Expr::Call(call) if matches!(&*call.func, Expr::Path(f)
            if f.path.segments.last().is_some_and(|s| s.ident.to_string().starts_with("parameter_"))))
}

/// One named field: a port, or plain state.
pub(crate) struct OpField<'a> {
    pub(crate) ident: &'a Ident,
    /// `Some` when the type is `Input<T>` or `Output<T>`.
    pub(crate) port: Option<PortType<'a>>,
    /// The `#[input]` or `#[output]` attribute, if any.
    pub(crate) attr: Option<PortAttr>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Direction {
    Input,
    Output,
}

impl Direction {
    /// The attribute word (`input`, `output`).
    pub(crate) fn word(self) -> Symbol {
        match self {
            Direction::Input => symbol::INPUT,
            Direction::Output => symbol::OUTPUT,
        }
    }

    /// The field type's last segment (`Input`, `Output`).
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            Direction::Input => "Input",
            Direction::Output => "Output",
        }
    }
}

/// The shape of a port field's type: `Input<T>` / `Output<T>`.
pub(crate) struct PortType<'a> {
    pub(crate) direction: Direction,
    pub(crate) payload: &'a Type,
    /// The payload's last segment is `Tensor`.
    pub(crate) tensor: bool,
}

/// `history = parameter_count(param_ref!(Params::field))`: the expression, and the field
/// it reads (checked at compile time to be neither sensitive nor changeable).
pub(crate) struct HistoryCount {
    pub(crate) expr: Expr,
    pub(crate) field: ParamRefInput,
}

impl HistoryCount {
    /// `Some` when `expr` is `parameter_count(param_ref!(...))` (the function's path may
    /// be qualified).
    fn of(expr: &Expr) -> Option<Self> {
        let Expr::Call(call) = expr else { return None };
        let Expr::Path(func) = &*call.func else {
            return None;
        };
        if func.qself.is_some()
            || func
                .path
                .segments
                .last()
                .is_none_or(|s| s.ident != symbol::PARAMETER_COUNT.0)
            || call.args.len() != 1
        {
            return None;
        }
        let Expr::Macro(mac) = &call.args[0] else {
            return None;
        };
        Some(Self {
            expr: expr.clone(),
            field: ParamRefInput::of_macro(&mac.mac)?,
        })
    }
}

/// A key as written, with the span of the key token and of its value.
pub(crate) struct Keyed<T> {
    pub(crate) key: Span,
    pub(crate) value_span: Span,
    pub(crate) value: T,
}

impl<T> Keyed<T> {
    fn new(key: Span, value_span: Span, value: T) -> Self {
        Self {
            key,
            value_span,
            value,
        }
    }
}

/// One `#[input(...)]` or `#[output(...)]` attribute.
pub(crate) struct PortAttr {
    pub(crate) direction: Direction,
    /// The attribute's path (`input` / `output`), for errors about the attribute itself.
    pub(crate) span: Span,
    /// Every key written, in order, with its key token.
    pub(crate) keys: Vec<(Symbol, Span)>,
    pub(crate) name: Option<LitStr>,
    pub(crate) storage: Option<Keyed<Symbol>>,
    /// The `MemoryKind` variant.
    pub(crate) memory: Option<Keyed<&'static str>>,
    /// The `DType` variant.
    pub(crate) dtype: Option<Keyed<&'static str>>,
    pub(crate) rank: Option<Keyed<u64>>,
    pub(crate) max_rank: Option<Keyed<u64>>,
    pub(crate) bounds: Option<Keyed<Expr>>,
    pub(crate) byte_span: Option<Keyed<Expr>>,
    pub(crate) memory_kind: Option<Keyed<Expr>>,
    pub(crate) max_loans: Option<Keyed<u64>>,
    pub(crate) optional: Option<Span>,
    /// `window` (min 1) or `window = N`.
    pub(crate) window: Option<Keyed<u64>>,
    pub(crate) latest: Option<Span>,
    pub(crate) history: Option<Keyed<u64>>,
    /// `history = parameter_count(param_ref!(...))`.
    pub(crate) history_count: Option<Keyed<HistoryCount>>,
    pub(crate) missing: Option<Keyed<Symbol>>,
    pub(crate) expected_rate: Option<Keyed<Expr>>,
    pub(crate) nominal_rate: Option<Keyed<Expr>>,
    /// `follows(input_field, ratio)`.
    pub(crate) follows: Option<Keyed<(Ident, Expr)>>,
    pub(crate) burst: Option<Keyed<u64>>,
    /// `forwards = input_field`: the output emits tensors received on that input.
    pub(crate) forwards: Option<Keyed<Ident>>,
}

impl PortAttr {
    fn new(direction: Direction, span: Span) -> Self {
        Self {
            direction,
            span,
            keys: Vec::new(),
            name: None,
            storage: None,
            memory: None,
            dtype: None,
            rank: None,
            max_rank: None,
            bounds: None,
            byte_span: None,
            memory_kind: None,
            max_loans: None,
            optional: None,
            window: None,
            latest: None,
            history: None,
            history_count: None,
            missing: None,
            expected_rate: None,
            nominal_rate: None,
            follows: None,
            burst: None,
            forwards: None,
        }
    }

    /// `storage = runtime_pool` was written.
    pub(crate) fn runtime_pool(&self) -> bool {
        self.storage
            .as_ref()
            .is_some_and(|s| s.value.0 == symbol::RUNTIME_POOL.0)
    }
}

impl OpField<'_> {
    /// The port name: `name = "..."` or the field name.
    pub(crate) fn port_name(&self) -> String {
        self.attr
            .as_ref()
            .and_then(|a| a.name.as_ref())
            .map_or_else(|| self.ident.unraw().to_string(), LitStr::value)
    }

    pub(crate) fn port_name_span(&self) -> Span {
        self.attr
            .as_ref()
            .and_then(|a| a.name.as_ref())
            .map_or_else(|| self.ident.span(), LitStr::span)
    }
}

/// Whether an attribute is one of the port attributes.
pub(crate) fn is_port_attr(attr: &Attribute) -> bool {
    attr.path() == &symbol::INPUT || attr.path() == &symbol::OUTPUT
}

/// `#[operator(params = Type, crate = path)]`.
pub(crate) struct ContainerArgs {
    pub(crate) params: Option<Type>,
    pub(crate) krate: Option<syn::Path>,
    pub(crate) trigger: Option<Keyed<TriggerArg>>,
}

impl ContainerArgs {
    pub(crate) fn from_tokens(cx: &Ctxt, args: TokenStream) -> Self {
        let mut params: Option<Type> = None;
        let mut krate: Option<syn::Path> = None;
        let mut trigger: Option<Keyed<TriggerArg>> = None;
        let parser = syn::meta::parser(|meta| {
            if meta.path == symbol::PARAMS {
                if !meta.input.peek(Token![=]) {
                    cx.error_spanned_by(
                        &meta.path,
                        "`#[operator(params)]` needs a type, like `#[operator(params = ResizeParams)]`",
                    );
                    return skip_value(&meta);
                }
                let ty: Type = meta.value()?.parse()?;
                if params.is_some() {
                    cx.error_spanned_by(&meta.path, "duplicate `#[operator(params)]` key");
                } else {
                    params = Some(ty);
                }
            } else if meta.path == symbol::TRIGGER {
                let span = meta.path.span();
                let parsed = parse_trigger(cx, &meta)?;
                if trigger.is_some() {
                    cx.error_at(span, "duplicate `#[operator(trigger)]` key");
                } else if let Some((value_span, t)) = parsed {
                    trigger = Some(Keyed::new(span, value_span, t));
                }
            } else if meta.path == symbol::CRATE {
                let path = crate_path(cx, &meta, symbol::OPERATOR)?;
                if krate.is_some() {
                    cx.error_spanned_by(&meta.path, "duplicate `#[operator(crate)]` key");
                } else {
                    krate = path;
                }
            } else {
                unknown_key(cx, &meta, "`#[operator]`", symbol::OPERATOR_CONTAINER_KEYS)?;
            }
            Ok(())
        });
        if let Err(err) = parser.parse2(args) {
            cx.syn_error(err);
        }
        Self {
            params,
            krate,
            trigger,
        }
    }
}

const TRIGGER_EXAMPLE: &str = "`trigger = on_arrival(frames)`, `trigger = clock(hz = 60)`, `trigger = clock(hz = param_ref!(Params::fps))`, `trigger = clock(rate = Rate::new(1, 4))`, `trigger = any_input` or `trigger = all_inputs`";

/// `trigger = all_inputs | any_input | on_arrival(field) | clock(hz = N) | clock(rate = expr)`,
/// where `N` is an integer literal, a `u64` const expression or `param_ref!(P::field)`.
fn parse_trigger(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<Option<(Span, TriggerArg)>> {
    if !meta.input.peek(Token![=]) {
        cx.error_spanned_by(
            &meta.path,
            format!("`#[operator(trigger)]` needs a value, like {TRIGGER_EXAMPLE}"),
        );
        return skip_value(meta).map(|()| None);
    }
    let expr: Expr = meta.value()?.parse()?;
    let span = expr.span();
    let (word, args) = match &expr {
        Expr::Path(p) if p.qself.is_none() => (p.path.get_ident().cloned(), None),
        Expr::Call(c) => match &*c.func {
            Expr::Path(p) if p.qself.is_none() => (p.path.get_ident().cloned(), Some(&c.args)),
            _ => (None, None),
        },
        _ => (None, None),
    };
    let Some(word) = word else {
        cx.error_spanned_by(
            &expr,
            format!("`#[operator(trigger)]` needs one of {TRIGGER_EXAMPLE}"),
        );
        return Ok(None);
    };
    let t = match (word.to_string().as_str(), args) {
        ("all_inputs", None) => TriggerArg::AllInputs,
        ("any_input", None) => TriggerArg::AnyInput,
        ("on_arrival", Some(args)) if args.len() == 1 => match &args[0] {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                TriggerArg::OnArrival(p.path.get_ident().cloned().unwrap_or_else(|| word.clone()))
            }
            other => {
                cx.error_spanned_by(
                    other,
                    "`on_arrival(...)` names one input field, like `on_arrival(frames)`",
                );
                return Ok(None);
            }
        },
        ("clock", Some(args)) if args.len() == 1 => {
            let Expr::Assign(a) = &args[0] else {
                cx.error_spanned_by(
                    &args[0],
                    "`clock(...)` takes `hz = N` (a `u64` const expression, or `param_ref!(Params::fps)`) or `rate = <expression>`",
                );
                return Ok(None);
            };
            let key = match &*a.left {
                Expr::Path(p) => p.path.get_ident().cloned(),
                _ => None,
            };
            match key {
                Some(k) if k == symbol::HZ => TriggerArg::ClockHz(ClockHz::of(&a.right)),
                Some(k) if k == symbol::RATE => TriggerArg::ClockRate((*a.right).clone()),
                _ => {
                    cx.error_spanned_by(
                        &a.left,
                        format!(
                            "unknown `clock` key, expected one of {}",
                            symbol::one_of(symbol::CLOCK_KEYS)
                        ),
                    );
                    return Ok(None);
                }
            }
        }
        (w, _) => {
            let known = symbol::TRIGGER_WORDS.iter().any(|k| k.0 == w);
            cx.error_spanned_by(
                &expr,
                if known {
                    format!("malformed trigger `{w}`; write {TRIGGER_EXAMPLE}")
                } else {
                    format!(
                        "unknown trigger `{w}`, expected one of {}",
                        symbol::one_of(symbol::TRIGGER_WORDS)
                    )
                },
            );
            return Ok(None);
        }
    };
    Ok(Some((span, t)))
}

// The attribute helpers every holo macro shares (one definition, in `param::attr`).
use crate::param::attr::{crate_path, skip_value, unknown_key};

/// `Input<T>` / `Output<T>`; `None` for any other type.
pub(crate) fn port_type(ty: &Type) -> Option<PortType<'_>> {
    let Type::Path(path) = ty else {
        return None;
    };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    let direction = if last.ident == "Input" {
        Direction::Input
    } else if last.ident == "Output" {
        Direction::Output
    } else {
        return None;
    };
    let payload = match &last.arguments {
        PathArguments::AngleBracketed(args) if args.args.len() == 1 => match &args.args[0] {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    };
    // `Input` without exactly one payload type is not holo's port type (or is rustc's
    // missing-generics error, which says it better): leave it as plain state.
    let payload = payload?;
    let tensor = matches!(payload, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "Tensor"));
    Some(PortType {
        direction,
        payload,
        tensor,
    })
}

impl<'a> Operator<'a> {
    pub(crate) fn from_ast(cx: &Ctxt, args: ContainerArgs, item: &'a ItemStruct) -> Option<Self> {
        let named = match &item.fields {
            Fields::Named(named) => named,
            Fields::Unnamed(fields) => {
                cx.error_spanned_by(
                    fields,
                    "`#[operator]` needs a struct with named fields; each port is a named `Input<…>` or `Output<…>` field",
                );
                return None;
            }
            Fields::Unit => {
                cx.error_spanned_by(
                    &item.ident,
                    "`#[operator]` needs a struct with named fields, found a unit struct; declare ports as `Input<…>` and `Output<…>` fields",
                );
                return None;
            }
        };
        let fields = named
            .named
            .iter()
            .filter_map(|f| Some(OpField::from_ast(cx, f.ident.as_ref()?, f)))
            .collect();
        Some(Self {
            item,
            params: args.params,
            krate: args.krate,
            trigger: args.trigger,
            fields,
        })
    }
}

impl<'a> OpField<'a> {
    fn from_ast(cx: &Ctxt, ident: &'a Ident, field: &'a syn::Field) -> Self {
        let port = port_type(&field.ty);
        let mut attr: Option<PortAttr> = None;
        for a in field.attrs.iter().filter(|a| is_port_attr(a)) {
            let direction = if a.path() == &symbol::INPUT {
                Direction::Input
            } else {
                Direction::Output
            };
            let parsed = parse_port_attr(cx, a, direction);
            if attr.is_some() {
                cx.error_spanned_by(
                    a.path(),
                    format!(
                        "a second port attribute on `{ident}`; put every key in one `#[{}(...)]`",
                        direction.word()
                    ),
                );
            } else {
                attr = Some(parsed);
            }
        }
        Self { ident, port, attr }
    }
}

/// Sets `slot` once; a second occurrence is an error on its key.
fn set<T>(cx: &Ctxt, slot: &mut Option<T>, value: T, word: Symbol, key: Symbol, span: Span) {
    if slot.is_some() {
        cx.error_at(span, format!("duplicate `#[{word}({key})]` key"));
    } else {
        *slot = Some(value);
    }
}

fn parse_port_attr(cx: &Ctxt, attr: &Attribute, direction: Direction) -> PortAttr {
    let word = direction.word();
    let mut out = PortAttr::new(direction, attr.path().span());
    match &attr.meta {
        syn::Meta::Path(_) => return out,
        syn::Meta::NameValue(nv) => {
            cx.error_spanned_by(
                nv,
                format!("`#[{word}]` takes a list of keys, like `#[{word}(name = \"frames\")]`"),
            );
            return out;
        }
        syn::Meta::List(_) => {}
    }
    let own_keys = match direction {
        Direction::Input => symbol::INPUT_KEYS,
        Direction::Output => symbol::OUTPUT_KEYS,
    };
    let result = attr.parse_nested_meta(|meta| {
        let Some(key) = symbol::OUTPUT_KEYS
            .iter()
            .chain(symbol::INPUT_KEYS)
            .find(|k| meta.path == **k)
            .copied()
        else {
            return unknown_key(cx, &meta, &format!("`#[{word}]`"), own_keys);
        };
        let span = meta.path.span();
        if out.keys.iter().any(|(k, _)| k.0 == key.0) {
            cx.error_at(span, format!("duplicate `#[{word}({key})]` key"));
            return skip_value(&meta);
        }
        out.keys.push((key, span));
        parse_key(cx, &meta, word, key, span, &mut out)
    });
    if let Err(err) = result {
        cx.syn_error(err);
    }
    out
}

fn parse_key(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    word: Symbol,
    key: Symbol,
    span: Span,
    out: &mut PortAttr,
) -> syn::Result<()> {
    if key.0 == symbol::OPTIONAL.0 || key.0 == symbol::LATEST.0 {
        if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
            cx.error_at(span, format!("`#[{word}({key})]` takes no value"));
            return skip_value(meta);
        }
        let slot = if key.0 == symbol::LATEST.0 {
            &mut out.latest
        } else {
            &mut out.optional
        };
        set(cx, slot, span, word, key, span);
        return Ok(());
    }
    if key.0 == symbol::WINDOW.0 && !meta.input.peek(Token![=]) {
        if meta.input.peek(syn::token::Paren) {
            cx.error_at(
                span,
                format!("`#[{word}(window)]` takes no list; write `window` or `window = 4`"),
            );
            return skip_value(meta);
        }
        set(
            cx,
            &mut out.window,
            Keyed::new(span, span, 1),
            word,
            key,
            span,
        );
        return Ok(());
    }
    if key.0 == symbol::FOLLOWS.0 {
        if !meta.input.peek(syn::token::Paren) {
            cx.error_at(
                span,
                format!(
                    "`#[{word}(follows)]` needs an input and a ratio, like `{}`",
                    example(key)
                ),
            );
            return skip_value(meta);
        }
        let content;
        syn::parenthesized!(content in meta.input);
        let input: Ident = content.parse()?;
        content.parse::<Token![,]>()?;
        let ratio: Expr = content.parse()?;
        let value_span = input.span();
        set(
            cx,
            &mut out.follows,
            Keyed::new(span, value_span, (input, ratio)),
            word,
            key,
            span,
        );
        return Ok(());
    }
    if !meta.input.peek(Token![=]) {
        cx.error_at(
            span,
            format!("`#[{word}({key})]` needs a value, like `{}`", example(key)),
        );
        return skip_value(meta);
    }
    let expr: Expr = meta.value()?.parse()?;
    let value_span = expr.span();
    match key.0 {
        "name" => {
            if let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &expr
            {
                set(cx, &mut out.name, s.clone(), word, key, span);
            } else {
                cx.error_spanned_by(
                    &expr,
                    format!("`#[{word}(name)]` needs a string literal, like `name = \"frames\"`"),
                );
            }
        }
        "storage" => {
            if let Some(w) = word_value(cx, &expr, word, key, symbol::STORAGE_WORDS, "storage") {
                set(
                    cx,
                    &mut out.storage,
                    Keyed::new(span, value_span, w),
                    word,
                    key,
                    span,
                );
            }
        }
        "memory" => {
            let words: Vec<Symbol> = symbol::MEMORY_WORDS.iter().map(|(w, _)| *w).collect();
            if let Some(w) = word_value(cx, &expr, word, key, &words, "memory kind") {
                let variant = symbol::MEMORY_WORDS
                    .iter()
                    .find(|(s, _)| s.0 == w.0)
                    .map_or("Host", |(_, v)| *v);
                set(
                    cx,
                    &mut out.memory,
                    Keyed::new(span, value_span, variant),
                    word,
                    key,
                    span,
                );
            }
        }
        "dtype" => {
            let words: Vec<Symbol> = symbol::DTYPE_WORDS.iter().map(|(w, _)| *w).collect();
            if let Some(w) = word_value(cx, &expr, word, key, &words, "dtype") {
                let variant = symbol::DTYPE_WORDS
                    .iter()
                    .find(|(s, _)| s.0 == w.0)
                    .map_or("U8", |(_, v)| *v);
                set(
                    cx,
                    &mut out.dtype,
                    Keyed::new(span, value_span, variant),
                    word,
                    key,
                    span,
                );
            }
        }
        "missing" => {
            if let Some(w) = word_value(
                cx,
                &expr,
                word,
                key,
                symbol::MISSING_WORDS,
                "missing-data policy",
            ) {
                set(
                    cx,
                    &mut out.missing,
                    Keyed::new(span, value_span, w),
                    word,
                    key,
                    span,
                );
            }
        }
        "expected_rate" | "nominal_rate" => {
            let slot = if key.0 == "expected_rate" {
                &mut out.expected_rate
            } else {
                &mut out.nominal_rate
            };
            set(
                cx,
                slot,
                Keyed::new(span, value_span, expr),
                word,
                key,
                span,
            );
        }
        "history" if !matches!(expr, Expr::Lit(_)) => {
            if let Some(count) = HistoryCount::of(&expr) {
                set(
                    cx,
                    &mut out.history_count,
                    Keyed::new(span, value_span, count),
                    word,
                    key,
                    span,
                );
            } else {
                // Only this form names its field in tokens, where the macro can check
                // that the field is neither sensitive nor changeable.
                cx.error_spanned_by(
                    &expr,
                    "`#[input(history)]` needs a non-negative integer literal or `parameter_count(param_ref!(Params::field))`, like `history = 4`",
                );
            }
        }
        "rank" | "max_rank" | "max_loans" | "history" | "burst" | "window" => {
            if let Some(v) = int_value(cx, &expr, word, key) {
                let slot = match key.0 {
                    "rank" => &mut out.rank,
                    "max_rank" => &mut out.max_rank,
                    "history" => &mut out.history,
                    "burst" => &mut out.burst,
                    "window" => &mut out.window,
                    _ => &mut out.max_loans,
                };
                set(cx, slot, Keyed::new(span, value_span, v), word, key, span);
            }
        }
        "forwards" => {
            let ident = match &expr {
                Expr::Path(ExprPath {
                    qself: None, path, ..
                }) => path.get_ident().cloned(),
                _ => None,
            };
            match ident {
                Some(input) => set(
                    cx,
                    &mut out.forwards,
                    Keyed::new(span, value_span, input),
                    word,
                    key,
                    span,
                ),
                None => cx.error_spanned_by(
                    &expr,
                    format!(
                        "`#[{word}(forwards)]` names one `Input<Tensor>` field of this operator, like `{}`",
                        example(key)
                    ),
                ),
            }
        }
        "bounds" if reads_parameter(&expr) => {
            // A bound is a hard cap fixed when the program is built; one that a
            // parameter sizes is a byte span, resolved when the plan is compiled.
            cx.error_spanned_by(
                &expr,
                "`#[output(bounds)]` is a constant cap, a `u64` const expression like `bounds = 64 * 1024`; to size slots from a parameter, write `byte_span = …`, like `byte_span = parameter_contiguous_byte_span(param_ref!(Params::shape))`",
            );
        }
        "bounds" => set(
            cx,
            &mut out.bounds,
            Keyed::new(span, value_span, expr),
            word,
            key,
            span,
        ),
        "byte_span" => set(
            cx,
            &mut out.byte_span,
            Keyed::new(span, value_span, expr),
            word,
            key,
            span,
        ),
        "memory_kind" => set(
            cx,
            &mut out.memory_kind,
            Keyed::new(span, value_span, expr),
            word,
            key,
            span,
        ),
        _ => {}
    }
    Ok(())
}

fn example(key: Symbol) -> &'static str {
    match key.0 {
        "name" => "name = \"frames\"",
        "storage" => "storage = runtime_pool",
        "memory" => "memory = host",
        "dtype" => "dtype = u8",
        "rank" => "rank = 3",
        "max_rank" => "max_rank = 4",
        "bounds" => "bounds = 1 << 20",
        "byte_span" => "byte_span = tensor_byte_span(1 << 20)",
        "memory_kind" => "memory_kind = parameter_memory_kind_exact(param_ref!(Params::storage))",
        "history" => "history = 4",
        "burst" => "burst = 2",
        "window" => "window = 4",
        "missing" => "missing = reuse_last",
        "expected_rate" => "expected_rate = Rate::hz(60)",
        "nominal_rate" => "nominal_rate = Rate::hz(60)",
        "follows" => "follows(frames, RateRatio::new(1, 4))",
        "forwards" => "forwards = frames",
        _ => "max_loans = 2",
    }
}

/// A bare word among `words`; anything else is an error listing them.
fn word_value(
    cx: &Ctxt,
    expr: &Expr,
    word: Symbol,
    key: Symbol,
    words: &[Symbol],
    what: &str,
) -> Option<Symbol> {
    let ident = match expr {
        Expr::Path(ExprPath {
            qself: None, path, ..
        }) => path.get_ident(),
        _ => None,
    };
    let Some(ident) = ident else {
        cx.error_spanned_by(
            expr,
            format!(
                "`#[{word}({key})]` needs one of {}, like `{}`",
                symbol::one_of(words),
                example(key)
            ),
        );
        return None;
    };
    let found = words.iter().find(|w| *ident == **w).copied();
    if found.is_none() {
        cx.error_spanned_by(
            ident,
            format!(
                "unknown {what} `{ident}` in `#[{word}({key})]`, expected one of {}",
                symbol::one_of(words)
            ),
        );
    }
    found
}

/// A non-negative integer literal.
fn int_value(cx: &Ctxt, expr: &Expr, word: Symbol, key: Symbol) -> Option<u64> {
    if let Expr::Lit(ExprLit {
        lit: Lit::Int(i), ..
    }) = expr
        && let Ok(v) = i.base10_parse::<u64>()
    {
        // A suffix would be dropped unchecked (`rank = 3u8`), and a count past `u32` cut
        // to `u32::MAX`: both are refused on the literal.
        if !i.suffix().is_empty() {
            cx.error_spanned_by(
                expr,
                format!(
                    "`#[{word}({key})]` takes an integer literal without a type suffix, like `{}`",
                    example(key)
                ),
            );
            return None;
        }
        if v > u64::from(u32::MAX) {
            cx.error_spanned_by(
                expr,
                format!(
                    "`#[{word}({key} = {v})]` is past {}, the largest count",
                    u32::MAX
                ),
            );
            return None;
        }
        return Some(v);
    }
    cx.error_spanned_by(
        expr,
        format!(
            "`#[{word}({key})]` needs a non-negative integer literal, like `{}`",
            example(key)
        ),
    );
    None
}
