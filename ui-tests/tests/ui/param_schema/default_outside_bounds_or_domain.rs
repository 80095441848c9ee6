use holo_runtime::{MemoryKind, ParamSchema};

// Each default was accepted, and every config that left its key out (and
// `ParamSet::defaults()`) failed at run time with `OutOfBounds` or `NotInDomain`.
#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Defaults", version = 1)]
struct Defaults {
    #[param(min = 1, max = 240, default = 0)]
    fps: u32,
    #[param(min = -10, max = 10, default = 11)]
    gain: i32,
    #[param(enum_values(Host), default = MemoryKind::PinnedHost)]
    kind: MemoryKind,
}

fn main() {}
