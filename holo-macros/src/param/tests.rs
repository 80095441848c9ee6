//! Unit tests of parse → validate → expand over `proc_macro2` tokens.

use quote::quote;

use super::{derive_param_enum, derive_param_schema, param_ref};

fn text(tokens: &proc_macro2::TokenStream) -> String {
    tokens.to_string()
}

#[test]
fn schema_expands_to_private_paths_in_a_const_block() {
    let out = text(&derive_param_schema(quote! {
        #[param(schema = "com.example.Resize", version = 2)]
        struct Resize {
            /// Width.
            #[param(min = 1, max = 64, recompile_required)]
            width: u32,
        }
    }));
    assert!(out.starts_with("# [allow"), "{out}");
    assert!(out.contains("const _ : () ="), "{out}");
    assert!(
        out.contains(":: holo_runtime :: __private :: ParamSchema for Resize"),
        "{out}"
    );
    assert!(out.contains("\"com.example.Resize\""), "{out}");
    assert!(out.contains("version : 2u32"), "{out}");
    assert!(out.contains("Some (1i128)"), "{out}");
    assert!(out.contains("\"Width.\""), "{out}");
    assert!(!out.contains("compile_error"), "{out}");
}

#[test]
fn crate_override_changes_the_root() {
    let out = text(&derive_param_schema(quote! {
        #[param(schema = "a.B", version = 1, crate = holo_params)]
        struct B { x: u8 }
    }));
    assert!(
        out.contains("holo_params :: __private :: ParamSchema"),
        "{out}"
    );
    assert!(!out.contains("holo_runtime"), "{out}");
}

#[test]
fn every_mistake_is_reported_at_once_with_a_stub() {
    let out = text(&derive_param_schema(quote! {
        #[param(schema = "a.B", version = "one", colour = 3)]
        struct B {
            #[param(min = 5, max = 1, enum_values())]
            x: u8,
        }
    }));
    assert_eq!(out.matches("compile_error").count(), 4, "{out}");
    assert!(out.contains("needs an integer literal"), "{out}");
    assert!(out.contains("unknown `#[param]` struct key `colour`, expected one of `schema`, `version`, `crate` or `debug`"), "{out}");
    assert!(out.contains("is greater than"), "{out}");
    assert!(out.contains("needs at least one value"), "{out}");
    assert!(
        out.contains("unreachable"),
        "the stub impls are emitted: {out}"
    );
}

#[test]
fn duplicate_keys_and_values_are_errors() {
    let out = text(&derive_param_schema(quote! {
        #[param(schema = "a.B", version = 1)]
        struct B {
            #[param(sensitive, sensitive, enum_values(Host, Host))]
            kind: MemoryKind,
            #[param(name = "kind")]
            other: u8,
        }
    }));
    assert!(out.contains("duplicate `#[param(sensitive)]` key"), "{out}");
    assert!(out.contains("duplicate value `Host`"), "{out}");
    assert!(out.contains("duplicate parameter key `kind`"), "{out}");
}

#[test]
fn unsupported_shapes_are_errors() {
    for input in [
        quote!(
            #[param(schema = "a.B", version = 1)]
            enum B {
                X,
            }
        ),
        quote!(
            #[param(schema = "a.B", version = 1)]
            struct B(u8);
        ),
        quote!(
            #[param(schema = "a.B", version = 1)]
            struct B {
                x: Vec<u8>,
            }
        ),
        quote!(
            #[param(schema = "a.B", version = 1)]
            struct B {
                x: (u8, u8),
            }
        ),
        quote!(
            #[param(schema = "a.B", version = 1)]
            struct B {
                x: MemoryKind,
            }
        ),
        quote!(
            #[param(schema = "a.B", version = 1)]
            struct B<T> {
                x: T,
            }
        ),
        quote!(
            struct B {
                x: u8,
            }
        ),
    ] {
        let out = text(&derive_param_schema(input));
        assert!(out.contains("compile_error"), "{out}");
    }
}

#[test]
fn enum_wire_names_default_to_snake_case_and_must_be_unique() {
    let out = text(&derive_param_enum(quote! {
        enum Storage { Host, #[param(name = "pinned")] PinnedHost, CudaDevice2 }
    }));
    assert!(out.contains("\"host\""), "{out}");
    assert!(out.contains("\"pinned\""), "{out}");
    assert!(out.contains("\"cuda_device2\""), "{out}");
    let dup = text(&derive_param_enum(quote! {
        enum Storage { Host, #[param(name = "host")] Other }
    }));
    assert!(
        dup.contains("wire name \\\"host\\\" is already used by variant `Host`"),
        "{dup}"
    );
}

#[test]
fn param_ref_expands_to_a_field_access() {
    let out = text(&param_ref(quote!(BatchParams::geometry.width)));
    assert_eq!(
        out,
        ":: holo_runtime :: __private :: ParamRef :: __new (& [\"geometry\" , \"width\"] , | params : & BatchParams | & (* params) . geometry . width)"
    );
    let nested = text(&param_ref(quote!(crate::m::Batch::x)));
    assert!(
        nested.contains("| params : & crate :: m :: Batch | & (* params) . x"),
        "{nested}"
    );
    assert!(text(&param_ref(quote!(Batch))).contains("compile_error"));
}

#[test]
fn snake_case_of_variant_names() {
    assert_eq!(super::ast::snake_case("PinnedHost"), "pinned_host");
    assert_eq!(super::ast::snake_case("Host"), "host");
    assert_eq!(super::ast::snake_case("Rgba8"), "rgba8");
}
