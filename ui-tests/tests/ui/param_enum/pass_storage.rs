use holo_runtime::{ParamEnum, ParamSchema, ParamSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
enum OutputStorage {
    Host,
    #[param(name = "pinned")]
    PinnedHost,
    CudaDevice,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Storage", version = 1)]
struct Storage {
    #[param(enum_values(Host, PinnedHost), default = OutputStorage::Host)]
    output_storage: OutputStorage,
}

fn main() {
    assert_eq!(OutputStorage::CudaDevice.wire_name(), "cuda_device");
    let set = ParamSet::<Storage>::from_toml_str("output_storage = \"pinned\"").unwrap();
    assert_eq!(set.values().output_storage, OutputStorage::PinnedHost);
}
