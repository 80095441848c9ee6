use holo_runtime::{memory_kind_map, MemoryKind, ParamEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum OutputStorage {
    Host,
    Pinned,
    Device,
}

fn main() {
    let map: fn(OutputStorage) -> MemoryKind = memory_kind_map!(OutputStorage {
        Host => Host,
        Pinned => MemoryKind::PinnedHost,
        Device => holo_runtime::MemoryKind::CudaDevice,
    });
    assert_eq!(map(OutputStorage::Host), MemoryKind::Host);
    assert_eq!(map(OutputStorage::Pinned), MemoryKind::PinnedHost);
    assert_eq!(map(OutputStorage::Device), MemoryKind::CudaDevice);
}
