//! Expand: the impls, wrapped in `const _: () = { ... };`, naming runtime items only
//! through `<root>::__private` and `::core`.

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::DeriveInput;
use syn::ext::IdentExt as _;
use syn::spanned::Spanned;

use super::ast::{Default, Enum, Field, Schema};

/// The `__private` module under the crate root (`::holo_runtime` unless overridden).
pub(crate) fn private(krate: Option<&syn::Path>) -> TokenStream {
    krate.map_or_else(
        || quote!(::holo_runtime::__private),
        |path| quote!(#path::__private),
    )
}

fn option<T: quote::ToTokens>(value: Option<T>) -> TokenStream {
    value.map_or_else(
        || quote!(::core::option::Option::None),
        |v| quote!(::core::option::Option::Some(#v)),
    )
}

/// The name of the generated `const` holding a field's `FieldOps`.
fn ops(index: usize) -> syn::Ident {
    quote::format_ident!("__HOLO_PARAM_FIELD_{}", index)
}

fn field_descriptor(p: &TokenStream, index: usize, field: &Field<'_>) -> TokenStream {
    let ops = ops(index);
    let ty = field.ty;
    let key = field.key();
    let rust_name = field.ident.unraw().to_string();
    let doc = &field.doc;
    let (rr, sensitive, ct) = (
        field.recompile_required,
        field.sensitive,
        field.compile_time,
    );
    let min = option(field.min.map(|(v, _)| v));
    let max = option(field.max.map(|(v, _)| v));
    let enum_values = option(field.enum_values.as_ref().map(|(_, values)| {
        let names = values.iter().map(|v| {
            let variant = quote_spanned!(v.span()=> <#ty>::#v);
            quote!(<#ty as #p::ParamEnum>::wire_name(&#variant))
        });
        quote!(#p::Vec::from([#(#names),*]))
    }));
    let default = option(field.default.as_ref().map(|d| match d {
        Default::Expr(expr) => {
            quote_spanned!(expr.span()=> (#ops.encode_default)(#expr))
        }
        Default::Trait(span) => quote_spanned!(*span=>
            (#ops.encode_default)(<#ty as ::core::default::Default>::default())
        ),
    }));
    quote! {
        #p::FieldDescriptor {
            description: #doc,
            recompile_required: #rr,
            sensitive: #sensitive,
            compile_time: #ct,
            min: #min,
            max: #max,
            enum_values: #enum_values,
            default: #default,
            ..#p::FieldDescriptor::new(
                #key,
                #rust_name,
                (#ops.type_descriptor)(),
            )
        }
    }
}

/// Compile-time checks spanned on the user's tokens: the field type is a parameter type
/// (and an enum, with `enum_values`).
fn type_assertions(p: &TokenStream, index: usize, field: &Field<'_>) -> TokenStream {
    let ty = field.ty;
    let ops = ops(index);
    let value = quote_spanned!(ty.span()=>
        const #ops: #p::FieldOps<#ty> = #p::field_ops::<#ty>();
    );
    let enumeration = field
        .enum_values
        .as_ref()
        .map(|_| quote_spanned!(ty.span()=> const _: () = #p::assert_param_enum::<#ty>();));
    // `min`/`max` on a string, a bool, an enum or a struct were accepted and never read.
    let bounded = (field.min.is_some() || field.max.is_some())
        .then(|| quote_spanned!(ty.span()=> const _: () = #p::assert_bounded::<#ty>();));
    quote!(#value #enumeration #bounded)
}

pub(crate) fn schema(schema: &Schema<'_>) -> TokenStream {
    let p = private(schema.krate.as_ref());
    let ident = &schema.input.ident;
    let id = schema
        .id
        .as_ref()
        .map(syn::LitStr::value)
        .unwrap_or_default();
    let version = schema.version.map_or(0, |(v, _)| v);
    let rust_name = ident.to_string();
    let fields = &schema.fields;
    let descriptors = fields
        .iter()
        .enumerate()
        .map(|(i, f)| field_descriptor(&p, i, f));
    let assertions = fields
        .iter()
        .enumerate()
        .map(|(i, f)| type_assertions(&p, i, f));
    let field_facts = fields.iter().map(|f| field_facts(&p, ident, f));
    let ops: Vec<syn::Ident> = (0..fields.len()).map(ops).collect();
    let idents: Vec<_> = fields.iter().map(|f| f.ident).collect();
    let indices: Vec<Literal> = (0..fields.len()).map(Literal::usize_unsuffixed).collect();
    let encode_body = if fields.is_empty() {
        quote! {
            let _ = (self, redact);
            #p::BTreeMap::new()
        }
    } else {
        quote! {
            let schema = <Self as #p::ParamSchema>::schema();
            let mut table = #p::BTreeMap::new();
            #( (#ops.encode)(&mut table, &schema.fields[#indices], &self.#idents, redact); )*
            table
        }
    };
    let debug = schema.debug.then(|| {
        let entries = fields.iter().map(|f| {
            let name = f.ident.unraw().to_string();
            let ident = f.ident;
            if f.sensitive {
                quote!(.field(#name, &#p::Redacted))
            } else {
                quote!(.field(#name, &self.#ident))
            }
        });
        quote! {
            #[automatically_derived]
            impl ::core::fmt::Debug for #ident {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.debug_struct(#rust_name) #(#entries)* .finish()
                }
            }
        }
    });
    quote! {
        #[allow(non_upper_case_globals, unused_qualifications, clippy::all, clippy::pedantic)]
        const _: () = {
            #(#assertions)*

            #[automatically_derived]
            impl #p::ParamValue for #ident {
                fn type_descriptor() -> #p::TypeDescriptor {
                    #p::TypeDescriptor::Struct(<Self as #p::ParamSchema>::schema)
                }
                fn decode(
                    value: &#p::Value,
                    field: &#p::FieldDescriptor,
                    path: &#p::FieldPath,
                ) -> #p::Result<Self> {
                    #p::decode_struct::<Self>(value, field, path)
                }
                fn encode(&self) -> #p::Value {
                    #p::Value::Table(<Self as #p::ParamSchema>::encode_table(self, false))
                }
                fn encode_redacted(&self) -> #p::Value {
                    #p::Value::Table(<Self as #p::ParamSchema>::encode_table(self, true))
                }
            }

            #[automatically_derived]
            impl #p::ParamSchema for #ident {
                fn schema() -> &'static #p::SchemaDescriptor {
                    static SCHEMA: #p::OnceLock<#p::SchemaDescriptor> = #p::OnceLock::new();
                    SCHEMA.get_or_init(|| #p::SchemaDescriptor {
                        id: #id,
                        version: #version,
                        rust_name: #rust_name,
                        fields: #p::Vec::from([#(#descriptors),*]),
                    })
                }
                fn decode_table(
                    table: &#p::BTreeMap<#p::String, #p::Value>,
                    path: &#p::FieldPath,
                ) -> #p::Result<Self> {
                    let schema = <Self as #p::ParamSchema>::schema();
                    #p::reject_unknown_keys(table, schema, path)?;
                    ::core::result::Result::Ok(Self {
                        #( #idents: (#ops.decode)(table, &schema.fields[#indices], path)?, )*
                    })
                }
                fn encode_table(&self, redact: bool) -> #p::BTreeMap<#p::String, #p::Value> {
                    #encode_body
                }
            }

            #(#field_facts)*

            #debug
        };
    }
}

/// `Field<{ field_hash("rust_name") }>`: what `#[byte_span_projector]` checks at compile
/// time about a field it reads.
fn field_facts(p: &TokenStream, schema: &syn::Ident, field: &Field<'_>) -> TokenStream {
    let ty = field.ty;
    let rust_name = field.ident.unraw().to_string();
    let key = field.key();
    let sensitive = field.sensitive;
    let readable = !field.sensitive && (field.compile_time || field.recompile_required);
    quote! {
        #[automatically_derived]
        impl #p::Field<{ #p::field_hash(#rust_name) }> for #schema {
            type Type = #ty;
            const KEY: &'static str = #key;
            const SENSITIVE: bool = #sensitive;
            const COMPILE_READABLE: bool = #readable;
        }
    }
}

/// Impls whose bodies never run, emitted after an error so that uses of the type elsewhere
/// do not add errors of their own.
pub(crate) fn schema_stub(input: &DeriveInput, krate: Option<&syn::Path>) -> TokenStream {
    let p = private(krate);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[allow(unused_variables, clippy::all, clippy::pedantic)]
        const _: () = {
            impl #impl_generics #p::ParamValue for #ident #ty_generics #where_clause {
                fn type_descriptor() -> #p::TypeDescriptor { ::core::unreachable!() }
                fn decode(value: &#p::Value, field: &#p::FieldDescriptor, path: &#p::FieldPath) -> #p::Result<Self> {
                    ::core::unreachable!()
                }
                fn encode(&self) -> #p::Value { ::core::unreachable!() }
            }
            impl #impl_generics #p::ParamSchema for #ident #ty_generics #where_clause {
                fn schema() -> &'static #p::SchemaDescriptor { ::core::unreachable!() }
                fn decode_table(
                    table: &#p::BTreeMap<#p::String, #p::Value>,
                    path: &#p::FieldPath,
                ) -> #p::Result<Self> {
                    ::core::unreachable!()
                }
                fn encode_table(&self, redact: bool) -> #p::BTreeMap<#p::String, #p::Value> {
                    ::core::unreachable!()
                }
            }
        };
    }
}

pub(crate) fn enumeration(item: &Enum<'_>) -> TokenStream {
    let p = private(item.krate.as_ref());
    let ident = &item.input.ident;
    let name = ident.to_string();
    let variants: Vec<_> = item.variants.iter().map(|v| v.ident).collect();
    let wire: Vec<String> = item
        .variants
        .iter()
        .map(super::ast::Variant::wire_name)
        .collect();
    quote! {
        #[allow(clippy::all, clippy::pedantic)]
        const _: () = {
            #[automatically_derived]
            impl #p::ParamEnum for #ident {
                const NAME: &'static str = #name;
                const VARIANTS: &'static [(&'static str, Self)] = &[#( (#wire, Self::#variants) ),*];
                fn wire_name(&self) -> &'static str {
                    match self {
                        #( Self::#variants => #wire, )*
                    }
                }
            }

            #[automatically_derived]
            impl #p::ParamValue for #ident {
                fn type_descriptor() -> #p::TypeDescriptor {
                    #p::TypeDescriptor::Enum(<Self as #p::ParamEnum>::descriptor())
                }
                fn decode(
                    value: &#p::Value,
                    field: &#p::FieldDescriptor,
                    path: &#p::FieldPath,
                ) -> #p::Result<Self> {
                    #p::decode_enum::<Self>(value, field, path)
                }
                fn encode(&self) -> #p::Value {
                    #p::encode_enum::<Self>(self)
                }
            }
        };
    }
}

pub(crate) fn enum_stub(input: &DeriveInput, krate: Option<&syn::Path>) -> TokenStream {
    let p = private(krate);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[allow(unused_variables, clippy::all, clippy::pedantic)]
        const _: () = {
            impl #impl_generics #p::ParamEnum for #ident #ty_generics #where_clause {
                const NAME: &'static str = "";
                const VARIANTS: &'static [(&'static str, Self)] = &[];
                fn wire_name(&self) -> &'static str { ::core::unreachable!() }
            }
            impl #impl_generics #p::ParamValue for #ident #ty_generics #where_clause {
                fn type_descriptor() -> #p::TypeDescriptor { ::core::unreachable!() }
                fn decode(value: &#p::Value, field: &#p::FieldDescriptor, path: &#p::FieldPath) -> #p::Result<Self> {
                    ::core::unreachable!()
                }
                fn encode(&self) -> #p::Value { ::core::unreachable!() }
            }
        };
    }
}
