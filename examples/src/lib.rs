//! Shared helpers for the holo examples.

pub mod ipc;
pub mod side;
