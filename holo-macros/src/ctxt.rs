//! One error context per macro invocation: it collects every mistake, so the user sees
//! them all at once, and it panics if dropped without being checked (serde's `Ctxt`).

use std::cell::RefCell;
use std::fmt::Display;

use quote::ToTokens;

pub(crate) struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Self {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// An error spanned on `tokens` (their first to last token).
    pub(crate) fn error_spanned_by<T: ToTokens, M: Display>(&self, tokens: T, message: M) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    /// An error at `span`.
    pub(crate) fn error_at<M: Display>(&self, span: proc_macro2::Span, message: M) {
        self.syn_error(syn::Error::new(span, message));
    }

    pub(crate) fn syn_error(&self, error: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("the error context was already checked")
            .push(error);
    }

    /// Consumes the context: `Err` combines every error collected.
    pub(crate) fn check(self) -> syn::Result<()> {
        let mut errors = self
            .errors
            .borrow_mut()
            .take()
            .expect("the error context was already checked")
            .into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        assert!(
            std::thread::panicking() || self.errors.borrow().is_none(),
            "an error context was dropped without being checked"
        );
    }
}
