//! Parse: `[crate = path;] Enum { Variant => Kind, ... }`.

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, Path, Token};

/// The parsed invocation.
pub(crate) struct MemoryKindMap {
    pub(crate) krate: Option<Path>,
    /// The user's `ParamEnum`.
    pub(crate) enumeration: Path,
    pub(crate) arms: Vec<Arm>,
}

/// `Variant => Kind`.
pub(crate) struct Arm {
    /// The left side as written; must be a single identifier (checked in `valid.rs`).
    pub(crate) variant: Path,
    /// The right side as written: `PinnedHost` or `MemoryKind::PinnedHost`.
    pub(crate) kind: Path,
}

impl Parse for Arm {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let variant = input.call(Path::parse_mod_style)?;
        input.parse::<Token![=>]>()?;
        let kind = input.call(Path::parse_mod_style)?;
        Ok(Self { variant, kind })
    }
}

impl Parse for MemoryKindMap {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let krate = if input.peek(Token![crate]) && input.peek2(Token![=]) {
            input.parse::<Token![crate]>()?;
            input.parse::<Token![=]>()?;
            let path = input.call(Path::parse_mod_style)?;
            input.parse::<Token![;]>()?;
            Some(path)
        } else {
            None
        };
        let enumeration = input.call(Path::parse_mod_style).map_err(|err| {
            syn::Error::new(
                err.span(),
                "`memory_kind_map!` needs an enum and its mapping, like `memory_kind_map!(OutputStorage { Host => Host, Pinned => PinnedHost })`",
            )
        })?;
        let content;
        syn::braced!(content in input);
        let arms = Punctuated::<Arm, Token![,]>::parse_terminated(&content)?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the `memory_kind_map!` mapping"));
        }
        Ok(Self {
            krate,
            enumeration,
            arms: arms.into_iter().collect(),
        })
    }
}

impl Arm {
    /// The variant identifier, when the left side is one.
    pub(crate) fn variant_ident(&self) -> Option<&Ident> {
        self.variant.get_ident()
    }

    /// The kind's last segment.
    /// The kind's name: written alone (`PinnedHost`), or as `MemoryKind::PinnedHost` with
    /// any path before `MemoryKind` (`holo_runtime::MemoryKind::PinnedHost`). Any other
    /// qualifier (`OutputStorage::PinnedHost`, `foo::Host`) names no memory kind: `None`.
    pub(crate) fn kind_ident(&self) -> Option<&Ident> {
        let segments: Vec<&syn::PathSegment> = self.kind.segments.iter().collect();
        match segments.as_slice() {
            [.., qualifier, last] if qualifier.ident == "MemoryKind" => Some(&last.ident),
            [last] if self.kind.leading_colon.is_none() => Some(&last.ident),
            _ => None,
        }
    }
}
