//! Expand: the `<Name>Ports` handles and the `OperatorPorts` impl of the struct as
//! configured, naming runtime items only through `<root>::__private` and `::core`. The
//! struct itself stays where the user wrote it: this is a derive's output.

use proc_macro2::{Literal, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ItemStruct, Type};

use super::ast::{Direction, Keyed, OpField, Operator, PortAttr, port_type};
use crate::param::{fixed_field_checks, private};

/// `Tensor` / `Vec<u8>`: the payload type as text, without the spaces `quote` puts in.
fn type_text(ty: &Type) -> String {
    let mut text = ty.to_token_stream().to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
        ("( ", "("),
        (" )", ")"),
    ] {
        text = text.replace(from, to);
    }
    text
}

fn option<T: ToTokens>(value: Option<T>) -> TokenStream {
    value.map_or_else(
        || quote!(::core::option::Option::None),
        |v| quote!(::core::option::Option::Some(#v)),
    )
}

fn u32_lit(v: u64) -> Literal {
    Literal::u32_suffixed(u32::try_from(v).unwrap_or(u32::MAX))
}

fn ports_ident(item: &ItemStruct) -> Ident {
    format_ident!("{}Ports", item.ident)
}

/// `<Name>Ports`: one handle per port field whose type could be read.
fn ports_struct(p: &TokenStream, item: &ItemStruct, fields: &[PortField<'_>]) -> TokenStream {
    let vis = &item.vis;
    let ident = &item.ident;
    let ports = ports_ident(item);
    let doc = format!(
        "Typed port handles of [`{ident}`], returned by `Graph::add_operator` and passed to `Graph::add_flow`."
    );
    let entries = fields.iter().map(|f| {
        let field = f.ident;
        let payload = f.payload;
        let (handle, what) = match f.direction {
            Direction::Input => (quote!(#p::InPort<#payload>), "input"),
            Direction::Output => (quote!(#p::OutPort<#payload>), "output"),
        };
        let doc = format!("The `{}` {what} port (`{}`).", f.name, type_text(payload));
        quote! {
            #[doc = #doc]
            pub #field: #handle
        }
    });
    quote! {
        #[doc = #doc]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug)]
        #vis struct #ports {
            #(#entries,)*
        }
    }
}

/// What the ports struct and `__ports`/`__bind` need of a port field.
struct PortField<'a> {
    ident: &'a Ident,
    name: String,
    direction: Direction,
    payload: &'a Type,
}

fn port_fields<'a>(op: &'a Operator<'_>) -> Vec<PortField<'a>> {
    op.fields
        .iter()
        .filter_map(|f| {
            let port = f.port.as_ref()?;
            Some(PortField {
                ident: f.ident,
                name: f.port_name(),
                direction: port.direction,
                payload: port.payload,
            })
        })
        .collect()
}

/// An expression the user wrote, in a block that brings the byte-span vocabulary and the
/// operator's input names into scope, and checked against the operator's schema.
fn user_expression(
    p: &TokenStream,
    inputs: &[(&Ident, String)],
    expected: &TokenStream,
    expr: &Keyed<syn::Expr>,
) -> TokenStream {
    let value = &expr.value;
    let bindings = inputs.iter().map(|(ident, name)| {
        quote! {
            #[allow(unused_variables)]
            let #ident = #p::InputName(#name);
        }
    });
    let ty = quote_spanned!(expr.value_span=> #expected);
    quote! {{
        #[allow(unused_imports)]
        use #p::bytespan_prelude::*;
        #(#bindings)*
        let __holo_expression: #ty = #value;
        __holo_expression
    }}
}

/// A `u64` the user wrote as a const expression (`FRAME_BYTES`, `64 * 1024`), evaluated
/// by rustc in a `const` item: a value of another type, or one only known at run time,
/// is rustc's error on the user's tokens.
fn const_u64(expr: &syn::Expr) -> TokenStream {
    quote_spanned! {expr.span()=> {
        const __HOLO_VALUE: u64 = #expr;
        __HOLO_VALUE
    }}
}

/// A rate expression (`Rate`, or `parameter_rate(...)`), converted into `RateExpr<P>`.
fn rate_expression(
    p: &TokenStream,
    params: &TokenStream,
    expr: &syn::Expr,
    span: proc_macro2::Span,
) -> TokenStream {
    let ty = quote_spanned!(span=> #p::RateExpr<#params>);
    quote! {{
        #[allow(unused_imports)]
        use #p::bytespan_prelude::*;
        let __holo_rate: #ty = ::core::convert::Into::into(#expr);
        __holo_rate
    }}
}

/// The port's temporal declaration.
fn temporal_spec(
    p: &TokenStream,
    params: &TokenStream,
    inputs: &[(&Ident, String)],
    attr: Option<&PortAttr>,
) -> TokenStream {
    let mode = match (
        attr.and_then(|a| a.window.as_ref()),
        attr.and_then(|a| a.latest),
    ) {
        (Some(w), _) => {
            let min = u32_lit(w.value);
            quote!(#p::InputMode::Window { min: #min })
        }
        (None, Some(_)) => quote!(#p::InputMode::Latest),
        (None, None) => quote!(#p::InputMode::Queue),
    };
    let history = u32_lit(attr.and_then(|a| a.history.as_ref()).map_or(0, |h| h.value));
    let history_parameter = option(attr.and_then(|a| a.history_count.as_ref()).map(|e| {
        let value = &e.value.expr;
        let ty = quote_spanned!(e.value_span=> #p::ParameterCount<#params>);
        quote! {{
            #[allow(unused_imports)]
            use #p::bytespan_prelude::*;
            let __holo_count: #ty = #value;
            __holo_count
        }}
    }));
    let burst = u32_lit(attr.and_then(|a| a.burst.as_ref()).map_or(1, |h| h.value));
    let missing = if attr
        .and_then(|a| a.missing.as_ref())
        .is_some_and(|m| m.value.0 == crate::symbol::REUSE_LAST.0)
    {
        quote!(#p::MissingPolicy::ReuseLast)
    } else {
        quote!(#p::MissingPolicy::Skip)
    };
    let expected = option(
        attr.and_then(|a| a.expected_rate.as_ref())
            .map(|e| rate_expression(p, params, &e.value, e.value_span)),
    );
    let nominal = option(
        attr.and_then(|a| a.nominal_rate.as_ref())
            .map(|e| rate_expression(p, params, &e.value, e.value_span)),
    );
    let follows = option(attr.and_then(|a| a.follows.as_ref()).map(|f| {
        let (input, ratio) = &f.value;
        let name = inputs
            .iter()
            .find(|(i, _)| *i == input)
            .map_or_else(|| input.to_string(), |(_, n)| n.clone());
        let ty = quote_spanned!(ratio.span()=> #p::RateRatio);
        quote! {({
            #[allow(unused_imports)]
            use #p::bytespan_prelude::*;
            let __holo_ratio: #ty = #ratio;
            (#name, __holo_ratio)
        })}
    }));
    quote! {
        #p::PortTemporalSpec {
            mode: #mode,
            history: #history,
            history_parameter: #history_parameter,
            missing: #missing,
            expected_rate: #expected,
            nominal_rate: #nominal,
            follows: #follows,
            burst: #burst,
        }
    }
}

fn trigger_spec(
    p: &TokenStream,
    params: &TokenStream,
    inputs: &[(&Ident, String)],
    op: &Operator<'_>,
) -> TokenStream {
    use super::ast::{ClockHz, TriggerArg};
    let Some(t) = &op.trigger else {
        return quote!(#p::Trigger::AllInputs);
    };
    match &t.value {
        TriggerArg::AllInputs => quote!(#p::Trigger::AllInputs),
        TriggerArg::AnyInput => quote!(#p::Trigger::AnyInput),
        TriggerArg::OnArrival(input) => {
            let name = inputs
                .iter()
                .find(|(i, _)| *i == input)
                .map_or_else(|| input.to_string(), |(_, n)| n.clone());
            quote!(#p::Trigger::OnArrival(#name))
        }
        TriggerArg::ClockHz(ClockHz::Literal(hz)) => {
            let hz = Literal::u64_suffixed(*hz);
            quote!(#p::Trigger::Clock(#p::RateExpr::Fixed(#p::Rate::hz(#hz))))
        }
        TriggerArg::ClockHz(ClockHz::Const(e)) => {
            let hz = const_u64(e);
            quote!(#p::Trigger::Clock(#p::RateExpr::Fixed(#p::Rate::hz(#hz))))
        }
        TriggerArg::ClockHz(ClockHz::Parameter(e)) | TriggerArg::ClockRate(e) => {
            let r = rate_expression(p, params, e, t.value_span);
            quote!(#p::Trigger::Clock(#r))
        }
    }
}

fn tensor_output_payload(
    p: &TokenStream,
    params: &TokenStream,
    inputs: &[(&Ident, String)],
    attr: Option<&PortAttr>,
) -> TokenStream {
    let memory = attr
        .and_then(|a| a.memory.as_ref())
        .map(|m| Ident::new(m.value, m.value_span));
    let memory = option(memory.map(|v| quote!(#p::MemoryKind::#v)));
    let dtype = attr
        .and_then(|a| a.dtype.as_ref())
        .map(|d| Ident::new(d.value, d.value_span));
    let dtype = option(dtype.map(|v| quote!(#p::DType::#v)));
    let rank = attr.and_then(|a| a.rank.as_ref()).map(|r| r.value);
    let max_rank = attr.and_then(|a| a.max_rank.as_ref()).map(|r| r.value);
    let bounds = option(attr.and_then(|a| a.bounds.as_ref()).map(|b| {
        let limit = max_rank.or(rank).map_or_else(
            || quote!(#p::MAX_TENSOR_RANK),
            |r| u32_lit(r).into_token_stream(),
        );
        let value = const_u64(&b.value);
        quote!(#p::TensorBounds { max_rank: #limit, max_byte_span: #value })
    }));
    let storage = if attr.is_some_and(PortAttr::runtime_pool) {
        quote!(#p::TensorOutputStorage::RuntimePool)
    } else {
        quote!(#p::TensorOutputStorage::PassThrough)
    };
    let byte_span = option(
        attr.and_then(|a| a.byte_span.as_ref())
            .map(|e| user_expression(p, inputs, &quote!(#p::ByteSpanExpr<#params>), e)),
    );
    let memory_kind = option(
        attr.and_then(|a| a.memory_kind.as_ref())
            .map(|e| user_expression(p, inputs, &quote!(#p::MemoryKindDerivation<#params>), e)),
    );
    let max_loans = u32_lit(
        attr.and_then(|a| a.max_loans.as_ref())
            .map_or(1, |m| m.value),
    );
    let rank = option(rank.map(u32_lit));
    let max_rank = option(max_rank.map(u32_lit));
    let forwards = option(attr.and_then(|a| a.forwards.as_ref()).map(|f| {
        let input = &f.value;
        inputs
            .iter()
            .find(|(i, _)| *i == input)
            .map_or_else(|| input.to_string(), |(_, n)| n.clone())
    }));
    quote! {
        #p::PortPayload::Tensor(#p::TensorOutputSpec {
            representation: #p::TensorRepresentation {
                memory_kind: #memory,
                dtype: #dtype,
                rank: #rank,
            },
            bounds: #bounds,
            storage: #storage,
            byte_span: #byte_span,
            memory_kind: #memory_kind,
            max_loans: #max_loans,
            max_rank: #max_rank,
            forwards: #forwards,
        })
    }
}

fn tensor_input_payload(p: &TokenStream, attr: Option<&PortAttr>) -> TokenStream {
    let memory = attr
        .and_then(|a| a.memory.as_ref())
        .map(|m| Ident::new(m.value, m.value_span));
    let memory = option(memory.map(|v| quote!(#p::MemoryKind::#v)));
    let dtype = attr
        .and_then(|a| a.dtype.as_ref())
        .map(|d| Ident::new(d.value, d.value_span));
    let dtype = option(dtype.map(|v| quote!(#p::DType::#v)));
    let rank = option(attr.and_then(|a| a.rank.as_ref()).map(|r| u32_lit(r.value)));
    quote! {
        #p::PortPayload::TensorInput(#p::TensorInputSpec {
            memory_kind: #memory,
            dtype: #dtype,
            rank: #rank,
        })
    }
}

fn port_spec(
    p: &TokenStream,
    params: &TokenStream,
    inputs: &[(&Ident, String)],
    field: &OpField<'_>,
) -> Option<TokenStream> {
    let port = field.port.as_ref()?;
    let attr = field.attr.as_ref();
    let name = field.port_name();
    let payload_type = type_text(port.payload);
    let payload = match (port.tensor, port.direction) {
        (true, Direction::Output) => tensor_output_payload(p, params, inputs, attr),
        (true, Direction::Input) => tensor_input_payload(p, attr),
        (false, _) => quote!(#p::PortPayload::Message(#payload_type)),
    };
    let direction = match port.direction {
        Direction::Input => quote!(#p::PortDirection::Input),
        Direction::Output => quote!(#p::PortDirection::Output),
    };
    let optional = attr.is_some_and(|a| a.optional.is_some());
    let temporal = temporal_spec(p, params, inputs, attr);
    Some(quote! {
        #p::PortSpec {
            name: #name,
            direction: #direction,
            payload: #payload,
            payload_type: #payload_type,
            optional: #optional,
            temporal: #temporal,
        }
    })
}

/// `const` checks spanned on each payload type: `Tensor` ports carry the runtime's
/// tensor, message payloads are `Clone + Send + 'static`.
fn payload_assertions(p: &TokenStream, op: &Operator<'_>) -> TokenStream {
    let checks = op.fields.iter().filter_map(|f| {
        let port = f.port.as_ref()?;
        let ty = port.payload;
        Some(if port.tensor {
            quote_spanned!(ty.span()=> #p::assert_tensor_port::<#ty>();)
        } else {
            quote_spanned!(ty.span()=> #p::assert_message_port::<#ty>();)
        })
    });
    quote!(const _: () = { #(#checks)* };)
}

/// `const` checks that each `history = parameter_count(param_ref!(S::field))` reads a
/// field that is not sensitive and is fixed for the life of a plan: the count sizes the
/// producer's pool, as a byte span does.
fn history_checks(p: &TokenStream, op: &Operator<'_>) -> TokenStream {
    let checks = op.fields.iter().filter_map(|f| {
        let count = &f.attr.as_ref()?.history_count.as_ref()?.value.field;
        let text = count.text();
        let schema = &count.schema;
        Some(fixed_field_checks(
            p,
            quote!(#schema),
            &count.segments,
            &format!(
                "`{text}` is `sensitive`: `#[input(history = parameter_count(...))]` may read only non-sensitive `compile_time` or `recompile_required` fields"
            ),
            &format!(
                "`{text}` is neither `compile_time` nor `recompile_required`: a history count sizes the producer's pool, so it may read only fields fixed for the life of a plan; mark it `#[param(recompile_required)]`"
            ),
        ))
    });
    quote!(#(#checks)*)
}

/// `const` checks, spanned on each `rank = N` / `max_rank = N` value, that N is at most
/// the runtime's `MAX_TENSOR_RANK` (zero is the macro's own error).
fn rank_checks(p: &TokenStream, op: &Operator<'_>) -> TokenStream {
    let checks = op.fields.iter().filter_map(|f| f.attr.as_ref()).flat_map(|attr| {
        let word = attr.direction.word();
        [
            (crate::symbol::RANK, &attr.rank),
            (crate::symbol::MAX_RANK, &attr.max_rank),
        ]
        .into_iter()
        .filter_map(move |(key, rank)| {
            let rank = rank.as_ref()?;
            let value = Literal::u64_suffixed(rank.value);
            let message = format!(
                "`#[{word}({key} = {})]` is out of range; a rank is 1 to `holo_runtime::MAX_TENSOR_RANK`",
                rank.value
            );
            Some(quote_spanned! {rank.value_span=>
                const _: () = ::core::assert!(#value <= #p::MAX_TENSOR_RANK as u64, #message);
            })
        })
    });
    quote!(#(#checks)*)
}

fn params_type(p: &TokenStream, params: Option<&Type>) -> TokenStream {
    params.map_or_else(|| quote!(#p::NoParams), ToTokens::to_token_stream)
}

fn ports_and_bind(p: &TokenStream, item: &ItemStruct, fields: &[PortField<'_>]) -> TokenStream {
    let ports = ports_ident(item);
    let handles = fields.iter().zip(0u64..).map(|(f, index)| {
        let ident = f.ident;
        let index = u32_lit(index);
        match f.direction {
            Direction::Input => quote!(#ident: #p::InPort::__new(id, #index)),
            Direction::Output => quote!(#ident: #p::OutPort::__new(id, #index)),
        }
    });
    let binds = fields.iter().zip(0u64..).map(|(f, index)| {
        let ident = f.ident;
        let index = u32_lit(index);
        match f.direction {
            Direction::Input => quote!(binder.bind_input(#index, &mut self.#ident)?;),
            Direction::Output => quote!(binder.bind_output(#index, &mut self.#ident)?;),
        }
    });
    quote! {
        fn __ports(id: #p::OperatorId) -> #ports {
            #ports { #(#handles,)* }
        }
        fn __bind(&mut self, binder: &mut #p::PortBinder<'_>) -> #p::Result<()> {
            #(#binds)*
            ::core::result::Result::Ok(())
        }
    }
}

pub(crate) fn operator(op: &Operator<'_>) -> TokenStream {
    let p = private(op.krate.as_ref());
    let item = op.item;
    let ident = &item.ident;
    let type_name = ident.to_string();
    let params = params_type(&p, op.params.as_ref());
    let fields = port_fields(op);
    let ports = ports_ident(item);
    let ports_struct = ports_struct(&p, item, &fields);
    let inputs: Vec<(&Ident, String)> = fields
        .iter()
        .filter(|f| f.direction == Direction::Input)
        .map(|f| (f.ident, f.name.clone()))
        .collect();
    let specs = op
        .fields
        .iter()
        .filter_map(|f| port_spec(&p, &params, &inputs, f));
    let assertions = payload_assertions(&p, op);
    let history_checks = history_checks(&p, op);
    let rank_checks = rank_checks(&p, op);
    let trigger = trigger_spec(&p, &params, &inputs, op);
    let ports_and_bind = ports_and_bind(&p, item, &fields);
    quote! {
        #ports_struct

        #[allow(unused_variables, unused_qualifications, clippy::all, clippy::pedantic)]
        const _: () = {
            #assertions
            #history_checks
            #rank_checks

            #[automatically_derived]
            impl #p::OperatorPorts for #ident {
                type Params = #params;
                type Ports = #ports;
                fn operator_spec() -> #p::OperatorSpec<#params> {
                    #p::OperatorSpec {
                        type_name: #type_name,
                        ports: #p::Vec::from([#(#specs),*]),
                        trigger: #trigger,
                    }
                }
                #ports_and_bind
            }
        };
    }
}

/// After an error: the port handles (for the fields whose type could be read) and an
/// `OperatorPorts` impl whose bodies never run, so uses of the operator elsewhere add no
/// errors of their own.
pub(crate) fn fallback(
    item: &ItemStruct,
    krate: Option<&syn::Path>,
    params: Option<&Type>,
) -> TokenStream {
    let p = private(krate);
    let ident = &item.ident;
    let fields: Vec<PortField<'_>> = match &item.fields {
        syn::Fields::Named(named) => named
            .named
            .iter()
            .filter_map(|f| {
                let port = port_type(&f.ty)?;
                let ident = f.ident.as_ref()?;
                Some(PortField {
                    ident,
                    name: ident.to_string(),
                    direction: port.direction,
                    payload: port.payload,
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    if !item.generics.params.is_empty() {
        return TokenStream::new();
    }
    let ports = ports_ident(item);
    let ports_struct = ports_struct(&p, item, &fields);
    let params = params_type(&p, params);
    quote! {
        #ports_struct

        #[allow(unused_variables, clippy::all, clippy::pedantic)]
        const _: () = {
            impl #p::OperatorPorts for #ident {
                type Params = #params;
                type Ports = #ports;
                fn operator_spec() -> #p::OperatorSpec<#params> { ::core::unreachable!() }
                fn __ports(id: #p::OperatorId) -> #ports { ::core::unreachable!() }
                fn __bind(&mut self, binder: &mut #p::PortBinder<'_>) -> #p::Result<()> {
                    ::core::unreachable!()
                }
            }
        };
    }
}
