//! Integration tests live in `tests/tests/`; this library holds what they share with the
//! helper binaries in `src/bin/` (a test's peer process).

pub mod counting;
pub mod device_pipeline;
pub mod foreign;
pub mod ipc_frames;
pub mod spin;
