//! See `tests/ui/`.
