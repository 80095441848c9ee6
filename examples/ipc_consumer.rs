//! The consumer of `ipc_producer`, in a process of its own (docs/IPC.md): attaches to the
//! topic `camera/frames` through the endpoint catalog the producer wrote, receives every
//! frame as a read-only view of the producer's shared slot, checks its bytes and that the
//! frame ids follow each other, and reports when the producer stops serving.
//!
//! ```text
//! cargo run -p holo-examples --example ipc_producer     # starts this consumer itself
//! cargo run -p holo-examples --example ipc_consumer -- /tmp/holo-ipc-producer-<pid>.toml
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    // `args_os`: a path need not be UTF-8 (`args` panics on one that is not).
    let Some(catalog) = std::env::args_os().nth(1) else {
        eprintln!("usage: ipc_consumer <endpoint catalog written by ipc_producer>");
        return ExitCode::FAILURE;
    };
    match holo_examples::ipc::consume(std::path::Path::new(&catalog)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
