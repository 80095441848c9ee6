//! Spans and events through `tracing`, with the cargo feature `tracing`; without it these
//! macros expand to nothing (their field expressions are not even evaluated), so the
//! default build carries no tracing code at all.
//!
//! - `span!("name", field = value, …)`: an `info`-level span, entered until the end of
//!   the enclosing scope (bind it: `let _span = span!(…);`).
//! - `event!(level, …)`: a `tracing` event at `level` (`debug`, `warn`, `error`, …).
//! - `phase!(slot, "name")`: the next of a sequence of sibling spans.

macro_rules! span {
    ($name:literal $(, $($fields:tt)*)?) => {{
        #[cfg(feature = "tracing")]
        let entered = ::tracing::info_span!($name $(, $($fields)*)?).entered();
        #[cfg(not(feature = "tracing"))]
        let entered = $crate::trace::NoSpan;
        entered
    }};
}

macro_rules! event {
    ($level:ident, $($arg:tt)*) => {{
        #[cfg(feature = "tracing")]
        ::tracing::$level!($($arg)*);
    }};
}

/// Moves a phase variable (`let mut phase = None;` under `#[cfg(feature = "tracing")]`)
/// to the next phase: the previous phase's span is exited first, so phases are siblings.
macro_rules! phase {
    ($slot:ident, $name:literal) => {
        #[cfg(feature = "tracing")]
        #[allow(
            unused_assignments,
            reason = "the last phase's span is read by its drop"
        )]
        {
            drop($slot.take());
            $slot = Some(::tracing::info_span!($name).entered());
        }
    };
}

/// What `span!` gives without the feature: nothing to enter or exit.
#[cfg(not(feature = "tracing"))]
pub(crate) struct NoSpan;

pub(crate) use {event, phase, span};
