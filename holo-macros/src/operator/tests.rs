//! Unit tests of `#[operator]` parse → validate → expand over `proc_macro2` tokens.

use proc_macro2::TokenStream;
use quote::quote;

use super::{derive, operator};

/// What rustc makes of `#[operator(args)] item`: the attribute's output, then the
/// internal derive's output over the struct it re-emitted.
fn expand(args: TokenStream, item: TokenStream) -> String {
    let attributed = operator(args, item);
    let derived = syn::parse2::<syn::ItemStruct>(attributed.clone())
        .map(|item| derive(quote!(#item)))
        .unwrap_or_default();
    format!("{attributed} {derived}")
}

/// The messages of every `compile_error!` in an expansion.
fn errors(args: TokenStream, item: TokenStream) -> Vec<String> {
    let out = expand(args, item);
    out.split("compile_error ! {")
        .skip(1)
        .map(|rest| {
            let start = rest.find('"').map_or(0, |i| i + 1);
            let end = rest[start..].find("\" }").map_or(rest.len(), |i| start + i);
            rest[start..end].replace("\\\"", "\"")
        })
        .collect()
}

fn assert_one_error(args: TokenStream, item: TokenStream, expected: &str) {
    let errors = errors(args, item);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains(expected), "{errors:#?}");
}

#[test]
fn ports_spec_and_binding_expand_in_declaration_order() {
    let out = expand(
        quote!(params = ResizeParams),
        quote! {
            /// Resizes.
            pub struct Resize {
                #[input(memory = host, dtype = u8, rank = 3)]
                input: Input<Tensor>,
                frames_seen: u64,
                #[output(storage = runtime_pool, memory = pinned, dtype = f32, rank = 3, bounds = 1024, max_loans = 2)]
                output: Output<Tensor>,
                #[output(name = "n")]
                count: Output<u64>,
                #[input(optional)]
                control: Input<String>,
            }
        },
    );
    assert!(!out.contains("compile_error"), "{out}");
    assert!(
        out.starts_with(
            "# [derive (:: holo_runtime :: __private :: __OperatorPorts)] # [__holo_operator (params = ResizeParams)]"
        ),
        "the struct goes to the internal derive with the arguments: {out}"
    );
    assert!(
        out.contains("# [input (memory = host , dtype = u8 , rank = 3)]"),
        "port attributes stay, as the derive's inert helpers: {out}"
    );
    assert!(out.contains("# [doc = r\" Resizes.\"]"), "{out}");
    assert!(out.contains("pub struct ResizePorts"), "{out}");
    assert!(
        out.contains("pub input : :: holo_runtime :: __private :: InPort < Tensor >"),
        "{out}"
    );
    assert!(
        out.contains("impl :: holo_runtime :: __private :: OperatorPorts for Resize"),
        "{out}"
    );
    assert!(out.contains("type Params = ResizeParams"), "{out}");
    assert!(
        out.contains("input : :: holo_runtime :: __private :: InPort :: __new (id , 0u32)"),
        "{out}"
    );
    assert!(
        out.contains("output : :: holo_runtime :: __private :: OutPort :: __new (id , 1u32)"),
        "{out}"
    );
    assert!(
        out.contains("binder . bind_input (3u32 , & mut self . control) ?"),
        "{out}"
    );
    assert!(out.contains("MemoryKind :: PinnedHost"), "{out}");
    assert!(out.contains("DType :: F32"), "{out}");
    assert!(out.contains("TensorOutputStorage :: RuntimePool"), "{out}");
    assert!(
        out.contains("max_rank : 3u32"),
        "bounds take the exact rank: {out}"
    );
    assert!(out.contains("max_loans : 2u32"), "{out}");
    assert!(out.contains("name : \"n\""), "{out}");
    assert!(out.contains("PortPayload :: Message (\"u64\")"), "{out}");
    assert!(out.contains("optional : true"), "{out}");
    assert!(out.contains("assert_tensor_port :: < Tensor >"), "{out}");
    assert!(out.contains("assert_message_port :: < String >"), "{out}");
}

#[test]
fn expressions_see_the_prelude_and_input_names() {
    let out = expand(
        quote!(params = P, crate = "my_rt"),
        quote! {
            struct Op {
                a: Input<Tensor>,
                #[output(storage = runtime_pool, memory_kind = k(), byte_span = input_max_byte_span(a))]
                b: Output<Tensor>,
            }
        },
    );
    assert!(!out.contains("compile_error"), "{out}");
    assert!(!out.contains("holo_runtime"), "{out}");
    assert!(
        out.contains("use my_rt :: __private :: bytespan_prelude :: *"),
        "{out}"
    );
    assert!(
        out.contains("let a = my_rt :: __private :: InputName (\"a\")"),
        "{out}"
    );
    assert!(
        out.contains(": my_rt :: __private :: ByteSpanExpr < P > = input_max_byte_span (a)"),
        "{out}"
    );
    assert!(
        out.contains(": my_rt :: __private :: MemoryKindDerivation < P > = k ()"),
        "{out}"
    );
}

#[test]
fn default_params_are_no_params() {
    let out = expand(
        quote!(),
        quote!(
            struct Op {
                x: Output<u8>,
            }
        ),
    );
    assert!(
        out.contains("type Params = :: holo_runtime :: __private :: NoParams"),
        "{out}"
    );
}

#[test]
fn key_mistakes_are_reported_one_each() {
    let cases: &[(TokenStream, &str)] = &[
        (
            quote!(#[output(colour = 1)] o: Output<Tensor>),
            "unknown `#[output]` key `colour`, expected one of `name`, `storage`",
        ),
        (
            quote!(#[input(dtype = u8, dtype = u16)] i: Input<Tensor>),
            "duplicate `#[input(dtype)]` key",
        ),
        (
            quote!(#[input] state: u64),
            "`#[input]` goes on an `Input<…>` field",
        ),
        (
            quote!(#[input] o: Output<Tensor>),
            "`#[input]` on an `Output<…>` field; use `#[output(...)]`",
        ),
        (
            quote!(#[output(dtype = u8)] o: Output<u64>),
            "applies only to `Tensor` ports",
        ),
        (
            quote!(#[input(storage = runtime_pool)] i: Input<Tensor>),
            "`#[input(storage)]` is an output key",
        ),
        (
            quote!(#[output(optional)] o: Output<Tensor>),
            "only an input may stay unconnected",
        ),
        (
            quote!(#[output(storage = runtime_pool, memory = host, bounds = 1, byte_span = x)] o: Output<Tensor>),
            "both set the slot bound",
        ),
        (
            quote!(#[output(storage = runtime_pool, memory = host, memory_kind = k, bounds = 1)] o: Output<Tensor>),
            "both set the memory kind",
        ),
        (
            quote!(#[output(storage = runtime_pool, memory = host)] o: Output<Tensor>),
            "needs a finite slot bound",
        ),
        (
            quote!(#[output(storage = runtime_pool, bounds = 1)] o: Output<Tensor>),
            "needs a memory kind",
        ),
        (
            quote!(#[output(bounds = 1)] o: Output<Tensor>),
            "`#[output(bounds)]` needs `storage = runtime_pool`",
        ),
        (
            quote!(#[output(max_rank = 0)] o: Output<Tensor>),
            "`#[output(max_rank = 0)]` is out of range",
        ),
        (
            quote!(#[output(dtype = u7)] o: Output<Tensor>),
            "unknown dtype `u7`",
        ),
        (
            quote!(#[output(memory = gpu)] o: Output<Tensor>),
            "unknown memory kind `gpu`",
        ),
        (
            quote!(#[output(storage = pool)] o: Output<Tensor>),
            "unknown storage `pool`",
        ),
        (
            quote!(#[output(storage = runtime_pool, memory = host, bounds = 1, max_loans = 0)] o: Output<Tensor>),
            "`max_loans` is at least 1",
        ),
        (
            quote!(#[output(rank = "3")] o: Output<Tensor>),
            "needs a non-negative integer literal",
        ),
        (
            quote!(#[output(name = frames)] o: Output<Tensor>),
            "needs a string literal",
        ),
        (
            quote!(#[output(storage = runtime_pool, memory = host, bounds = param_ref!(P::bytes))] o: Output<Tensor>),
            "`#[output(bounds)]` is a constant cap, a `u64` const expression like `bounds = 64 * 1024`; to size slots from a parameter, write `byte_span = …`",
        ),
        (
            quote!(#[output(storage = runtime_pool, memory = host, bounds = parameter_rate(param_ref!(P::bytes)))] o: Output<Tensor>),
            "`#[output(bounds)]` is a constant cap",
        ),
        (
            quote!(#[input(history = depth() * 2)] i: Input<u64>),
            "`#[input(history)]` needs a non-negative integer literal or `parameter_count(param_ref!(Params::field))`",
        ),
    ];
    for (field, expected) in cases {
        assert_one_error(quote!(), quote!(struct Op { #field }), expected);
    }
}

#[test]
fn port_names_are_unique() {
    assert_one_error(
        quote!(),
        quote!(
            struct Op {
                #[output(name = "x")]
                a: Output<u8>,
                #[output(name = "x")]
                b: Output<u8>,
            }
        ),
        "duplicate port name `x`: field `a` already uses it",
    );
    assert_one_error(
        quote!(),
        quote!(
            struct Op {
                a: Output<u8>,
                #[output(name = "a")]
                b: Output<u8>,
            }
        ),
        "duplicate port name `a`",
    );
    assert_one_error(
        quote!(),
        quote!(
            struct Op {
                #[output(name = "c")]
                a: Output<u8>,
                #[output(name = "x")]
                c: Output<u8>,
            }
        ),
        "port name `c` is the name of field `c`",
    );
}

#[test]
fn container_and_shape_mistakes() {
    assert_one_error(
        quote!(colour = 1),
        quote!(
            struct Op {}
        ),
        "unknown `#[operator]` key `colour`, expected one of `params`, `trigger` or `crate`",
    );
    assert_one_error(
        quote!(params),
        quote!(
            struct Op {}
        ),
        "`#[operator(params)]` needs a type",
    );
    assert_one_error(
        quote!(),
        quote!(
            struct Op(Input<u8>);
        ),
        "needs a struct with named fields",
    );
    assert_one_error(
        quote!(),
        quote!(
            struct Op;
        ),
        "found a unit struct",
    );
    assert_one_error(
        quote!(),
        quote!(
            struct Op<T> {
                t: T,
            }
        ),
        "does not support generic parameters",
    );
    assert_one_error(
        quote!(),
        quote!(
            enum Op {
                A,
            }
        ),
        "goes on a struct with named fields",
    );
}

#[test]
fn every_mistake_is_reported_with_a_fallback() {
    let item = quote! {
        struct Op {
            #[output(dtype = u7, rank = 0, colour)]
            o: Output<Tensor>,
            #[input]
            s: u8,
        }
    };
    assert_eq!(errors(quote!(), item.clone()).len(), 4);
    let out = expand(quote!(), item);
    assert!(out.contains("struct OpPorts"), "{out}");
    assert!(out.contains("unreachable"), "{out}");
}

#[test]
fn the_derive_sees_only_the_fields_cfg_left() {
    // rustc strips `cfg`'d-out fields before the derive runs; the derive numbers the
    // ports that remain.
    let out = derive(quote! {
        #[__holo_operator()]
        struct Op {
            #[cfg(all())]
            a: Input<u8>,
            #[output(name = "b")]
            b: Output<u8>,
        }
    });
    assert!(!out.to_string().contains("compile_error"), "{out}");
    assert!(
        out.to_string()
            .contains("binder . bind_output (1u32 , & mut self . b) ?"),
        "{out}"
    );
}

#[test]
fn a_port_attribute_on_the_struct_is_an_error() {
    let out = derive(quote! {
        #[__holo_operator()]
        #[input]
        struct Op {
            a: Input<u8>,
        }
    })
    .to_string();
    assert!(
        out.contains("`#[input]` goes on a port field, not on the operator struct"),
        "{out}"
    );
}

#[test]
fn a_history_count_checks_its_field_at_compile_time() {
    let out = expand(
        quote!(params = P),
        quote! {
            struct Op {
                #[input(history = holo_runtime::parameter_count(param_ref!(P::limits.depth)))]
                i: Input<u64>,
            }
        },
    );
    assert!(!out.contains("compile_error"), "{out}");
    let field = "< < P as :: holo_runtime :: __private :: Field < { :: holo_runtime :: __private :: field_hash (\"limits\") } >> :: Type as :: holo_runtime :: __private :: Field < { :: holo_runtime :: __private :: field_hash (\"depth\") } >>";
    assert!(
        out.contains(&format!(
            "const _ : () = :: core :: assert ! (! {field} :: SENSITIVE"
        )),
        "{out}"
    );
    assert!(out.contains("`limits.depth` is `sensitive`"), "{out}");
    assert!(
        out.contains(&format!("{field} :: COMPILE_READABLE")),
        "{out}"
    );
}

#[test]
fn ranks_are_checked_against_the_runtimes_limit() {
    let out = expand(
        quote!(),
        quote! {
            struct Op {
                #[output(storage = runtime_pool, memory = host, max_rank = 9, bounds = 64)]
                o: Output<Tensor>,
            }
        },
    );
    assert!(!out.contains("compile_error"), "{out}");
    assert!(
        out.contains("const _ : () = :: core :: assert ! (9u64 <= :: holo_runtime :: __private :: MAX_TENSOR_RANK as u64 , \"`#[output(max_rank = 9)]` is out of range"),
        "{out}"
    );
    let out = expand(
        quote!(),
        quote! {
            struct Op {
                #[output(storage = runtime_pool, memory = host, bounds = 64)]
                o: Output<Tensor>,
            }
        },
    );
    assert!(
        out.contains("max_rank : :: holo_runtime :: __private :: MAX_TENSOR_RANK"),
        "bounds without a rank take the runtime's limit: {out}"
    );
}

#[test]
fn a_clock_takes_a_literal_a_const_expression_or_a_parameter() {
    let clock = |hz: TokenStream| {
        let out = expand(
            quote!(params = P, trigger = clock(hz = #hz)),
            quote! {
                struct Op {
                    o: Output<u64>,
                }
            },
        );
        assert!(!out.contains("compile_error"), "{out}");
        let start = out.find("trigger :").unwrap_or_default();
        out[start..].to_owned()
    };
    assert!(
        clock(quote!(60)).starts_with(
            "trigger : :: holo_runtime :: __private :: Trigger :: Clock (:: holo_runtime :: __private :: RateExpr :: Fixed (:: holo_runtime :: __private :: Rate :: hz (60u64)))"
        ),
        "a literal is a fixed rate, as before"
    );
    for hz in [quote!(TICK_HZ), quote!(30 * 2), quote!(limits::TICK_HZ)] {
        let out = clock(hz.clone());
        assert!(
            out.starts_with(&format!(
                "trigger : :: holo_runtime :: __private :: Trigger :: Clock (:: holo_runtime :: __private :: RateExpr :: Fixed (:: holo_runtime :: __private :: Rate :: hz ({{ const __HOLO_VALUE : u64 = {hz} ; __HOLO_VALUE }})))"
            )),
            "a const expression is evaluated by rustc as a `u64`: {out}"
        );
    }
    for hz in [
        quote!(param_ref!(P::fps)),
        quote!(parameter_rate(param_ref!(P::fps))),
    ] {
        let out = clock(hz);
        assert!(
            out.contains("use :: holo_runtime :: __private :: bytespan_prelude :: * ;"),
            "{out}"
        );
        assert!(
            out.contains(
                "let __holo_rate : :: holo_runtime :: __private :: RateExpr < P > = :: core :: convert :: Into :: into (parameter_rate (param_ref ! (P :: fps)))"
            ),
            "a parameter is read as a rate attribute's `parameter_rate(...)` is: {out}"
        );
    }
}

#[test]
fn a_bound_is_a_const_expression() {
    for bound in [quote!(256), quote!(FRAME_BYTES), quote!(64 * 1024)] {
        let out = expand(
            quote!(),
            quote! {
                struct Op {
                    #[output(storage = runtime_pool, memory = host, bounds = #bound)]
                    o: Output<Tensor>,
                }
            },
        );
        assert!(!out.contains("compile_error"), "{out}");
        assert!(
            out.contains(&format!(
                "max_byte_span : {{ const __HOLO_VALUE : u64 = {bound} ; __HOLO_VALUE }}"
            )),
            "{out}"
        );
    }
}
