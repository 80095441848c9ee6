//! Validate: each left side is a variant name written once, each right side a concrete
//! memory kind. That every variant is mapped is checked by the compiler: the expansion is
//! a `match` with no `_` arm.

use super::ast::MemoryKindMap;
use crate::ctxt::Ctxt;
use crate::symbol;

pub(crate) fn check(cx: &Ctxt, map: &MemoryKindMap) {
    let mut seen: Vec<&syn::Ident> = Vec::new();
    for arm in &map.arms {
        match arm.variant_ident() {
            None => cx.error_spanned_by(
                &arm.variant,
                "write the variant name alone on the left of `=>`, like `Pinned => PinnedHost`",
            ),
            Some(variant) if seen.contains(&variant) => cx.error_spanned_by(
                variant,
                format!(
                    "duplicate variant `{variant}` in `memory_kind_map!`; map each variant once"
                ),
            ),
            Some(variant) => seen.push(variant),
        }
        let kind = arm.kind_ident();
        if !kind.is_some_and(|k| symbol::MEMORY_KIND_VARIANTS.iter().any(|v| k == v)) {
            let written = quote::ToTokens::to_token_stream(&arm.kind)
                .to_string()
                .replace(' ', "");
            cx.error_spanned_by(
                &arm.kind,
                format!(
                    "`{written}` is not a memory kind; map each variant to one of {}",
                    symbol::one_of(symbol::MEMORY_KIND_VARIANTS)
                ),
            );
        }
    }
}
