//! Typed field paths: two nested paths that end at the same reused nested descriptor are
//! distinct dependencies.

use holo_runtime::{ParamSchema, ParamSet, param_ref};

#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "com.example.Geometry", version = 1)]
struct Geometry {
    /// Width in pixels.
    #[param(min = 1, max = 4096, recompile_required)]
    width: u32,
}

#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "com.example.StereoParams", version = 1)]
struct StereoParams {
    /// Left eye.
    left: Geometry,
    /// Right eye.
    #[param(name = "right_eye")]
    right: Geometry,
}

#[test]
fn nested_paths_through_a_reused_descriptor_are_distinct_dependencies() {
    let left = param_ref!(StereoParams::left.width);
    let right = param_ref!(StereoParams::right.width);
    // Both end at the same field descriptor of the reused `Geometry` schema…
    assert!(std::ptr::eq(left.descriptor(), right.descriptor()));
    // …but they are different dependencies, with different paths and values.
    assert_ne!(left, right);
    assert_eq!(left.path(), "left.width");
    assert_eq!(right.path(), "right_eye.width");
    assert_eq!(left.rust_path(), ["left", "width"]);
    assert_eq!(right.rust_path(), ["right", "width"]);
    let set =
        ParamSet::<StereoParams>::from_toml_str("[left]\nwidth = 640\n[right_eye]\nwidth = 320\n")
            .expect("valid document");
    assert_eq!(*left.get(set.values()), 640);
    assert_eq!(*right.get(set.values()), 320);
    assert_eq!(left, param_ref!(StereoParams::left.width));
}
