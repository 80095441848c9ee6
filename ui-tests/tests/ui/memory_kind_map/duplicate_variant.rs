use holo_runtime::{memory_kind_map, ParamEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum OutputStorage {
    Host,
    Pinned,
    Device,
}

fn main() {
    let map = memory_kind_map!(OutputStorage { Host => Host, Pinned => PinnedHost, Host => CudaDevice, Device => CudaDevice });
    let _ = map(OutputStorage::Host);
}
