//! Shared helpers for the holo examples.
