//! Unit tests of `#[byte_span_projector]` parse → validate → expand.

use proc_macro2::TokenStream;
use quote::quote;

use super::byte_span_projector;
use super::valid::id_is_versioned;

fn errors(args: TokenStream, item: TokenStream) -> Vec<String> {
    byte_span_projector(args, item)
        .to_string()
        .split("compile_error ! {")
        .skip(1)
        .map(ToOwned::to_owned)
        .collect()
}

fn assert_one_error(args: TokenStream, item: TokenStream, expected: &str) {
    let errors = errors(args, item);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains(expected), "{errors:#?}");
}

#[test]
fn body_sees_a_view_of_the_declared_reads() {
    let out = byte_span_projector(
        quote!(
            id = "com.example.Batch.output.v1",
            reads(width, geometry.height, geometry.depth)
        ),
        quote! {
            pub fn batch_span(params: &BatchParams) -> Result<u64, Error> {
                Ok(u64::from(params.width))
            }
        },
    )
    .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(
        out.contains("struct __HoloReads < T0 , T1 > { width : T0 , geometry : T1 }"),
        "{out}"
    );
    assert!(
        out.contains("struct __HoloReads1 < T0 , T1 > { height : T0 , depth : T1 }"),
        "{out}"
    );
    assert!(out.contains("let params = & __HoloReads { width : :: core :: clone :: Clone :: clone (& (* params) . width) , geometry : __HoloReads1 {"), "{out}");
    assert!(out.contains("field_hash (\"geometry\")"), "{out}");
    assert!(out.contains("COMPILE_READABLE"), "{out}");
    assert!(
        out.contains("pub struct batch_span { _private : () , }"),
        "{out}"
    );
    assert!(
        out.contains("impl :: holo_runtime :: __private :: ByteSpanProjector for batch_span"),
        "{out}"
    );
    assert!(
        out.contains("const ID : & 'static str = \"com.example.Batch.output.v1\""),
        "{out}"
    );
    assert!(out.contains("param_dependency (:: holo_runtime :: __private :: ParamRef :: __new (& [\"geometry\" , \"height\"]"), "{out}");
}

#[test]
fn ids_end_in_a_version() {
    assert!(id_is_versioned("com.example.A.v1"));
    assert!(id_is_versioned("a.v12"));
    assert!(!id_is_versioned("com.example.A"));
    assert!(!id_is_versioned(".v1"));
    assert!(!id_is_versioned("a.v"));
    assert!(!id_is_versioned("a.v1x"));
    assert!(!id_is_versioned("a b.v1"));
}

#[test]
fn mistakes_are_reported_one_each() {
    let good = quote!(
        fn f(p: &P) -> Result<u64> {
            Ok(1)
        }
    );
    let cases: &[(TokenStream, TokenStream, &str)] = &[
        (
            quote!(id = "a.b", reads(x)),
            good.clone(),
            "needs a stable id ending in a version",
        ),
        (quote!(reads(x)), good.clone(), "needs an id"),
        (
            quote!(id = "a.v1"),
            good.clone(),
            "needs the fields it reads",
        ),
        (
            quote!(id = "a.v1", reads()),
            good.clone(),
            "needs at least one field",
        ),
        (
            quote!(id = "a.v1", reads(x, x)),
            good.clone(),
            "duplicate read `x`",
        ),
        (
            quote!(id = "a.v1", reads(g, g.w)),
            good.clone(),
            "lists both `g` and `g.w`",
        ),
        (
            quote!(id = "a.v1", reads(x), colour = 1),
            good.clone(),
            "unknown `#[byte_span_projector]` key `colour`, expected one of `id`, `reads` or `crate`",
        ),
        (
            quote!(id = 1, reads(x)),
            good.clone(),
            "needs a string literal",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                fn f(p: P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "by reference",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                fn f(p: &mut P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "not `&mut Params`",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                fn f(p: &P, q: &P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "exactly one argument",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                fn f() -> Result<u64> {
                    Ok(1)
                }
            ),
            "takes one argument",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                fn f(p: &P) {}
            ),
            "returns the byte span",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                fn f<T>(p: &P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "no generic parameters",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                async fn f(p: &P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "cannot be `async`",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                unsafe fn f(p: &P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "cannot be `unsafe`",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                const fn f(p: &P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "cannot be `const`",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                extern "C" fn f(p: &P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "cannot be `extern`",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                fn f((a, b): &P) -> Result<u64> {
                    Ok(1)
                }
            ),
            "plain identifier",
        ),
        (
            quote!(id = "a.v1", reads(x)),
            quote!(
                struct S;
            ),
            "goes on a free function",
        ),
    ];
    for (args, item, expected) in cases {
        assert_one_error(args.clone(), item.clone(), expected);
    }
}

#[test]
fn fallback_keeps_the_function_and_the_type() {
    let out = byte_span_projector(
        quote!(id = "nope"),
        quote!(
            fn f(p: &P) -> Result<u64> {
                Ok(1)
            }
        ),
    )
    .to_string();
    assert!(out.contains("fn f (p : & P)"), "{out}");
    assert!(out.contains("struct f"), "{out}");
    assert!(!out.contains("ByteSpanProjector for"), "{out}");
}
