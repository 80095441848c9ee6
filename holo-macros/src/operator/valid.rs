//! Validate: which keys fit which port, which keys exclude or need each other, and port
//! names. What depends on types (a payload is `Tensor`, an expression's schema is the
//! operator's) is checked by generated code the compiler must accept.

use std::collections::BTreeMap;

use proc_macro2::Span;

use super::ast::{Direction, OpField, Operator, PortAttr};
use crate::ctxt::Ctxt;
use crate::symbol::{self, Symbol};

pub(crate) fn check(cx: &Ctxt, op: &Operator<'_>) {
    let item = op.item;
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        cx.error_spanned_by(
            &item.generics,
            "`#[operator]` does not support generic parameters; declare one operator struct per concrete type",
        );
    }
    for field in &op.fields {
        check_field(cx, field);
    }
    check_port_names(cx, op);
    check_temporal(cx, op);
    check_forwards(cx, op);
}

/// `forwards = field` names a `Tensor` input of the same operator.
fn check_forwards(cx: &Ctxt, op: &Operator<'_>) {
    for field in &op.fields {
        let (Some(attr), Some(port)) = (&field.attr, &field.port) else {
            continue;
        };
        let Some(forwards) = &attr.forwards else {
            continue;
        };
        // A message output or an input was told already that the key does not apply.
        if !port.tensor || port.direction != Direction::Output {
            continue;
        }
        let input = &forwards.value;
        let target = op.fields.iter().find(|f| f.ident == input);
        match target.and_then(|f| f.port.as_ref()) {
            Some(p) if p.direction == Direction::Input && p.tensor => {}
            Some(p) if p.direction == Direction::Input => cx.error_spanned_by(
                input,
                format!(
                    "`forwards = {input}` names a message input; only a received `Tensor` can be forwarded, so name an `Input<Tensor>` field"
                ),
            ),
            _ => cx.error_spanned_by(
                input,
                format!(
                    "`forwards = {input}` names no input field of this operator; an output forwards what an `Input<Tensor>` field of the same operator received"
                ),
            ),
        }
    }
}

/// The field named `ident`, if it is an input port.
fn is_input_field(op: &Operator<'_>, ident: &syn::Ident) -> bool {
    op.fields.iter().any(|f| {
        f.ident == ident
            && f.port
                .as_ref()
                .is_some_and(|p| p.direction == Direction::Input)
    })
}

fn check_temporal(cx: &Ctxt, op: &Operator<'_>) {
    if let Some(t) = &op.trigger
        && let super::ast::TriggerArg::OnArrival(input) = &t.value
        && !is_input_field(op, input)
    {
        cx.error_spanned_by(
            input,
            format!("`on_arrival({input})` names no input field of this operator; name an `Input<…>` field"),
        );
    }
    for field in &op.fields {
        let Some(attr) = &field.attr else { continue };
        if let Some(f) = &attr.follows
            && !is_input_field(op, &f.value.0)
        {
            cx.error_spanned_by(
                &f.value.0,
                format!(
                    "`follows({}, …)` names no input field of this operator; an output's rate follows an input of the same operator",
                    f.value.0
                ),
            );
        }
        if let (Some(_), Some(follows)) = (&attr.nominal_rate, &attr.follows) {
            cx.error_at(
                follows.key,
                "`#[output(nominal_rate)]` and `#[output(follows)]` both set the output's rate; keep one",
            );
        }
        if let (Some(latest), Some(_)) = (&attr.latest, &attr.window) {
            cx.error_at(
                *latest,
                "`#[input(latest)]` and `#[input(window)]` exclude each other: an input sees the latest sample or a window",
            );
        }
        for (key, v) in [(symbol::BURST, &attr.burst), (symbol::WINDOW, &attr.window)] {
            if let Some(v) = v
                && v.value == 0
            {
                cx.error_at(
                    v.value_span,
                    format!(
                        "`#[{}({key} = 0)]` admits no entry; it is at least 1",
                        attr.direction.word()
                    ),
                );
            }
        }
    }
}

fn check_field(cx: &Ctxt, field: &OpField<'_>) {
    let Some(attr) = &field.attr else {
        return;
    };
    let word = attr.direction.word();
    let Some(port) = &field.port else {
        cx.error_at(
            attr.span,
            format!(
                "`#[{word}]` goes on an `{}<…>` field; `{}` is plain operator state",
                attr.direction.type_name(),
                field.ident
            ),
        );
        return;
    };
    if port.direction != attr.direction {
        let right = port.direction.word();
        cx.error_at(
            attr.span,
            format!(
                "`#[{word}]` on an `{}<…>` field; use `#[{right}(...)]` on `{}`",
                port.direction.type_name(),
                field.ident
            ),
        );
        return;
    }
    let mut applicable = true;
    for (key, span) in &attr.keys {
        applicable &= check_key_applies(cx, field, attr, port.tensor, *key, *span);
    }
    if applicable && port.tensor {
        check_tensor_keys(cx, attr);
    }
}

/// Reports a key that does not fit the port it is on; `false` if one was reported.
fn check_key_applies(
    cx: &Ctxt,
    field: &OpField<'_>,
    attr: &PortAttr,
    tensor: bool,
    key: Symbol,
    span: Span,
) -> bool {
    let word = attr.direction.word();
    let key_is = |keys: &[Symbol]| keys.iter().any(|k| k.0 == key.0);
    if key.0 == symbol::OPTIONAL.0 && attr.direction == Direction::Output {
        cx.error_at(
            span,
            "`#[output(optional)]` is not allowed: only an input may stay unconnected",
        );
        return false;
    }
    if attr.direction == Direction::Output && key_is(symbol::INPUT_ONLY_KEYS) {
        cx.error_at(
            span,
            format!(
                "`#[output({key})]` is an input key; `#[output]` accepts {}",
                if tensor {
                    symbol::one_of(symbol::OUTPUT_KEYS)
                } else {
                    symbol::one_of(symbol::MESSAGE_OUTPUT_KEYS)
                }
            ),
        );
        return false;
    }
    if attr.direction == Direction::Input && key_is(symbol::OUTPUT_ONLY_KEYS) {
        cx.error_at(
            span,
            format!(
                "`#[input({key})]` is an output key; `#[input]` accepts {}",
                if tensor {
                    symbol::one_of(symbol::INPUT_KEYS)
                } else {
                    symbol::one_of(symbol::MESSAGE_INPUT_KEYS)
                }
            ),
        );
        return false;
    }
    let message_keys = match attr.direction {
        Direction::Input => symbol::MESSAGE_INPUT_KEYS,
        Direction::Output => symbol::MESSAGE_OUTPUT_KEYS,
    };
    if !tensor && !key_is(message_keys) {
        cx.error_at(
            span,
            format!(
                "`#[{word}({key})]` applies only to `Tensor` ports; `{}` is a message port, which accepts only {}",
                field.ident,
                symbol::one_of(message_keys)
            ),
        );
        return false;
    }
    true
}

fn check_tensor_keys(cx: &Ctxt, attr: &PortAttr) {
    let word = attr.direction.word();
    for (key, rank) in [
        (symbol::RANK, &attr.rank),
        (symbol::MAX_RANK, &attr.max_rank),
    ] {
        // The upper limit is the runtime's `MAX_TENSOR_RANK`, checked by generated code
        // (`expand::rank_checks`) so that the limit has one definition.
        if let Some(rank) = rank
            && rank.value == 0
        {
            cx.error_at(
                rank.value_span,
                format!("`#[{word}({key} = 0)]` is out of range; a rank is at least 1"),
            );
        }
    }
    if let (Some(rank), Some(max_rank)) = (&attr.rank, &attr.max_rank)
        && rank.value > max_rank.value
        && max_rank.value >= 1
    {
        cx.error_at(
            rank.value_span,
            format!(
                "`#[{word}(rank = {})]` is greater than `max_rank = {}`",
                rank.value, max_rank.value
            ),
        );
    }
    if attr.direction == Direction::Input {
        return;
    }
    if let (Some(_), Some(byte_span)) = (&attr.bounds, &attr.byte_span) {
        cx.error_at(
            byte_span.key,
            "`#[output(bounds)]` and `#[output(byte_span)]` both set the slot bound; keep one",
        );
    }
    if let (Some(_), Some(memory_kind)) = (&attr.memory, &attr.memory_kind) {
        cx.error_at(
            memory_kind.key,
            "`#[output(memory)]` and `#[output(memory_kind)]` both set the memory kind; keep one",
        );
    }
    if let Some(max_loans) = &attr.max_loans
        && max_loans.value == 0
    {
        cx.error_at(
            max_loans.value_span,
            "`#[output(max_loans = 0)]` would never let the producer allocate; `max_loans` is at least 1",
        );
    }
    if let Some(storage) = &attr.storage
        && attr.runtime_pool()
    {
        // A bound written in a form that was reported already counts as written.
        let bound_written = attr
            .keys
            .iter()
            .any(|(k, _)| k.0 == symbol::BOUNDS.0 || k.0 == symbol::BYTE_SPAN.0);
        if !bound_written {
            cx.error_at(
                storage.value_span,
                "`#[output(storage = runtime_pool)]` needs a finite slot bound: add `bounds = <bytes>` or `byte_span = <expression>`",
            );
        }
        if attr.memory.is_none() && attr.memory_kind.is_none() {
            cx.error_at(
                storage.value_span,
                "`#[output(storage = runtime_pool)]` needs a memory kind: add `memory = host` (or `pinned`, `cuda_device`, `cuda_managed`, `opencl_device`, `device`) or `memory_kind = <derivation>`",
            );
        }
    } else if !attr.keys.iter().any(|(k, _)| k.0 == symbol::STORAGE.0) {
        // A misspelled `storage` word is reported already; these would only repeat it.
        let pool_only = [
            (symbol::BOUNDS, attr.bounds.as_ref().map(|k| k.key)),
            (symbol::BYTE_SPAN, attr.byte_span.as_ref().map(|k| k.key)),
            (symbol::MAX_LOANS, attr.max_loans.as_ref().map(|k| k.key)),
        ];
        for (key, span) in pool_only {
            if let Some(span) = span {
                cx.error_at(
                    span,
                    format!(
                        "`#[output({key})]` needs `storage = runtime_pool`; a pass-through output has no slots to bound"
                    ),
                );
            }
        }
    }
}

fn check_port_names(cx: &Ctxt, op: &Operator<'_>) {
    let ports: Vec<&OpField<'_>> = op.fields.iter().filter(|f| f.port.is_some()).collect();
    let mut seen: BTreeMap<String, &OpField<'_>> = BTreeMap::new();
    for field in &ports {
        let name = field.port_name();
        let explicit = field.attr.as_ref().and_then(|a| a.name.as_ref());
        if let Some(lit) = explicit
            && (name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            cx.error_spanned_by(
                lit,
                "a port name is non-empty and has no whitespace or control character, like `name = \"frames\"`",
            );
        }
        if let Some(first) = seen.get(&name) {
            cx.error_at(
                field.port_name_span(),
                format!(
                    "duplicate port name `{name}`: field `{}` already uses it; give one port another `name = \"...\"`",
                    first.ident
                ),
            );
            continue;
        }
        if explicit.is_some()
            && let Some(other) = ports
                .iter()
                .find(|o| o.ident != field.ident && *o.ident == name)
        {
            cx.error_at(
                field.port_name_span(),
                format!(
                    "port name `{name}` is the name of field `{}`; give this port another `name = \"...\"`",
                    other.ident
                ),
            );
        }
        seen.insert(name, field);
    }
}
