//! Integration tests live in `tests/tests/`; this library holds what they share with the
//! helper binaries in `src/bin/` (a test's peer process).

pub mod counting;
pub mod device_pipeline;
pub mod foreign;
pub mod ipc_frames;
pub mod spin;

/// How long a test waits for a session to go idle (`RunSession::wait_idle`) before it
/// joins: a minute, and under Miri an hour of Miri's virtual clock, which a run of a few
/// hundred frames through several partitions can pass in a minute (the join then drops
/// what is still queued, and a test that counts every frame fails for that alone).
pub const IDLE_WAIT: std::time::Duration = if cfg!(miri) {
    std::time::Duration::from_hours(1)
} else {
    std::time::Duration::from_mins(1)
};
