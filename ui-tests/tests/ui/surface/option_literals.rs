// Option and record structs are `#[non_exhaustive]`: a field added later is not a breaking
// change. Build options from `default()` with their `with_*` methods instead.
use holo_runtime::{CompileOptions, ConnectionOptions, EmitOptions, QueuePolicy, SessionOptions};

fn main() {
    let _ = ConnectionOptions {
        queue_depth: Some(4),
        policy: QueuePolicy::Block,
    };
    let _ = EmitOptions {
        capture_time: None,
        frame: None,
    };
    let _ = SessionOptions {
        idle_spin: std::time::Duration::ZERO,
        ..SessionOptions::default()
    };
    let _ = CompileOptions {
        default_queue_depth: 2,
        ..CompileOptions::default()
    };
}
