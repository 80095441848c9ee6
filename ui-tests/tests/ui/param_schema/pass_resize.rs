use holo_runtime::{BoundedVec, MemoryKind, ParamSchema, ParamSet};

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Geometry", version = 1)]
struct Geometry {
    #[param(min = 1, max = 8192)]
    width: u32,
    #[param(default = 480)]
    height: u32,
}

/// Parameters of a resize operator.
#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.ResizeParams", version = 2, debug)]
struct ResizeParams {
    geometry: Geometry,
    /// Height, width, channels.
    #[param(min = 1, recompile_required)]
    output_shape: [u64; 3],
    #[param(default)]
    batch: BoundedVec<u32, 4>,
    #[param(name = "storage", enum_values(Host, PinnedHost), recompile_required)]
    output_storage: MemoryKind,
    #[param(sensitive, compile_time, default = String::new())]
    token: String,
    #[param(min = -5, max = 5, default = 0)]
    bias: i32,
}

fn main() {
    let set = ParamSet::<ResizeParams>::from_toml_str(
        "output_shape = [1, 2, 3]\nstorage = \"pinned\"\n[geometry]\nwidth = 4\n",
    )
    .unwrap();
    assert_eq!(set.values().output_storage, MemoryKind::PinnedHost);
    assert_eq!(set.values().geometry.height, 480);
}
