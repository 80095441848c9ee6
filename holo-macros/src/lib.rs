//! Procedural macros for holo. Use them through `holo_runtime`, which re-exports them.
//!
//! Each macro goes parse → validate → expand in its own modules; every authoring mistake
//! is a `syn::Error` spanned on the offending token, and all mistakes of one invocation
//! are reported together.

use proc_macro::TokenStream;
