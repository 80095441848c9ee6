// Defaults inside their bounds and domain (and a constant, which the macro leaves to the
// decode) compile and load.
use holo_runtime::{MemoryKind, ParamSchema, ParamSet};

const KIND: MemoryKind = MemoryKind::Host;

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Within", version = 1)]
struct Within {
    #[param(min = 1, max = 240, default = 240)]
    fps: u32,
    #[param(min = -10, max = 10, default = -10)]
    gain: i32,
    #[param(enum_values(Host, PinnedHost), default = MemoryKind::PinnedHost)]
    kind: MemoryKind,
    #[param(enum_values(Host, PinnedHost), default = KIND)]
    other: MemoryKind,
}

fn main() {
    let set = ParamSet::<Within>::defaults().unwrap();
    assert_eq!(set.values().fps, 240);
    assert_eq!(set.values().gain, -10);
    assert_eq!(set.values().kind, MemoryKind::PinnedHost);
    assert_eq!(set.values().other, MemoryKind::Host);
}
