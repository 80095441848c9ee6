//! `memory_kind_map!`: parse (`ast`) → validate (`valid`) → expand (`expand`), over
//! `proc_macro2` tokens.

mod ast;
mod expand;
mod valid;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ctxt::Ctxt;

pub(crate) fn memory_kind_map(input: TokenStream) -> TokenStream {
    let map: ast::MemoryKindMap = match syn::parse2(input) {
        Ok(map) => map,
        Err(err) => return err.to_compile_error(),
    };
    let cx = Ctxt::new();
    valid::check(&cx, &map);
    match cx.check() {
        Ok(()) => expand::memory_kind_map(&map),
        Err(err) => {
            let errors = err.to_compile_error();
            let fallback = expand::fallback(&map);
            quote!({ #errors #fallback })
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::memory_kind_map;

    #[test]
    fn expands_to_an_exhaustive_match_without_a_wildcard() {
        let out =
            memory_kind_map(quote!(Storage { Host => Host, Pinned => MemoryKind::PinnedHost, }))
                .to_string();
        assert!(
            out.contains("Storage :: Host => :: holo_runtime :: __private :: MemoryKind :: Host"),
            "{out}"
        );
        assert!(
            out.contains(
                "Storage :: Pinned => :: holo_runtime :: __private :: MemoryKind :: PinnedHost"
            ),
            "{out}"
        );
        assert!(!out.contains("_ =>"), "{out}");
        assert!(
            out.contains("as fn (Storage) -> :: holo_runtime :: __private :: MemoryKind"),
            "{out}"
        );
    }

    #[test]
    fn unknown_kinds_and_duplicate_variants_are_errors() {
        let out =
            memory_kind_map(quote!(Storage { Host => Unknown, Host => CudaDevice })).to_string();
        assert!(out.contains("`Unknown` is not a memory kind; map each variant to one of `Host`, `PinnedHost`, `CudaDevice`, `CudaManaged`, `OpenClDevice` or `Device`"), "{out}");
        assert!(out.contains("duplicate variant `Host`"), "{out}");
        assert!(out.contains("unreachable"), "{out}");
    }

    #[test]
    fn a_kind_under_another_qualifier_is_no_memory_kind() {
        // Only the last segment was read: both arms silently became `PinnedHost` and
        // `Host`.
        let out = memory_kind_map(quote!(S { A => OutputStorage::PinnedHost, B => foo::Host }))
            .to_string();
        assert!(
            out.contains("`OutputStorage::PinnedHost` is not a memory kind"),
            "{out}"
        );
        assert!(out.contains("`foo::Host` is not a memory kind"), "{out}");
        // `MemoryKind::X`, under any path, still is.
        let out = memory_kind_map(quote!(S {
            A => MemoryKind::PinnedHost,
            B => holo_runtime::MemoryKind::Host
        }))
        .to_string();
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn crate_override_and_malformed_input() {
        let out = memory_kind_map(quote!(crate = my_rt; S { A => Host })).to_string();
        assert!(
            out.contains("my_rt :: __private :: MemoryKind :: Host"),
            "{out}"
        );
        assert!(
            memory_kind_map(quote!(S { A }))
                .to_string()
                .contains("compile_error")
        );
        assert!(
            memory_kind_map(quote!(S { S::A => Host }))
                .to_string()
                .contains("variant name alone")
        );
    }
}
