//! The parameter macros, re-exported with their documentation.

/// Derives [`ParamSchema`](crate::ParamSchema) and
/// [`ParamValue`](crate::ParamValue) for a struct with named fields: a deployment
/// parameter schema whose values a [`ParamSet`](crate::ParamSet) reads from TOML or JSON.
///
/// The struct must also be `Clone` (and `Send + Sync + 'static`). Every field's type is
/// a parameter type: an integer up to 64 bits or `usize`, `f32`, `f64`, `bool`,
/// `String`, `[T; N]`, [`BoundedVec<T, N>`](crate::BoundedVec), a
/// `#[derive(ParamEnum)]` enum, [`MemoryKind`](crate::MemoryKind), or another
/// `#[derive(ParamSchema)]` struct (a nested table; its keys are `outer.inner` paths).
/// A field's doc comment is its description in introspection.
///
/// # Struct attributes: `#[param(...)]`
///
/// | key | meaning |
/// |---|---|
/// | `schema = "com.example.Name"` | required: the stable schema id |
/// | `version = N` | required: the schema version, an integer literal |
/// | `crate = path` | the crate root generated code names (default `::holo_runtime`) |
/// | `debug` | also derive a `Debug` that prints `<redacted>` for sensitive fields |
///
/// # Field attributes: `#[param(...)]`
///
/// | key | meaning |
/// |---|---|
/// | `name = "key"` | the key in TOML and JSON (default: the field name) |
/// | `recompile_required` | changing the value needs a new plan and session |
/// | `sensitive` | the value is secret: redacted in errors, `Debug` and JSON |
/// | `compile_time` | the value is fixed when the plan is compiled |
/// | `min = N`, `max = N` | inclusive integer bounds (each element, for arrays) |
/// | `default = EXPR` / `default` | the value when the key is absent (`default` alone: `Default::default()`) |
/// | `enum_values(A, B)` | narrows an enum field's domain to these variants |
///
/// No `Debug` is derived unless `debug` is given; prefer it to `#[derive(Debug)]` on a
/// schema with sensitive fields. A [`ParamSet`](crate::ParamSet)'s own `Debug` and JSON
/// always redact them.
///
/// A `MemoryKind` field must declare `enum_values(...)`: exactly the concrete kinds the
/// operator supports. Loading rejects unknown keys (listing the valid ones), missing keys
/// without a default, wrong types, out-of-bounds values, values outside the domain and
/// arrays of the wrong length, each an `InvalidArgument` error naming the full path.
///
/// ```
/// use holo_runtime::{MemoryKind, ParamSchema, ParamSet};
///
/// #[derive(Clone, ParamSchema)]
/// #[param(schema = "com.example.ResizeParams", version = 1, debug)]
/// struct ResizeParams {
///     /// Output shape: height, width, channels.
///     #[param(min = 1, recompile_required)]
///     output_shape: [u64; 3],
///     #[param(enum_values(Host, PinnedHost), default = MemoryKind::Host)]
///     output_storage: MemoryKind,
///     #[param(sensitive, default)]
///     api_key: String,
/// }
///
/// let set = ParamSet::<ResizeParams>::from_toml_str(
///     "output_shape = [480, 640, 3]\napi_key = \"s3cr3t\"",
/// )?;
/// assert_eq!(set.values().output_shape, [480, 640, 3]);
/// assert!(!format!("{:?}", set.values()).contains("s3cr3t"));
///
/// let err = ParamSet::<ResizeParams>::from_toml_str("output_shape = [480, 640, 3]\nscale = 2")
///     .unwrap_err();
/// assert_eq!(err.location(), Some("scale"));
/// assert!(err.message().contains("expected one of `output_shape`, `output_storage`, `api_key`"));
/// # Ok::<(), holo_runtime::Error>(())
/// ```
pub use holo_macros::ParamSchema;

/// Derives [`ParamEnum`](crate::ParamEnum) and
/// [`ParamValue`](crate::ParamValue) for a fieldless enum, written in TOML and
/// JSON by wire name.
///
/// The enum must also be `Copy + Eq` (and `Send + Sync + 'static`).
///
/// | attribute | meaning |
/// |---|---|
/// | `#[param(crate = path)]` on the enum | the crate root generated code names |
/// | `#[param(name = "wire")]` on a variant | its wire name (default: the variant in snake_case) |
///
/// Wire names must be unique.
///
/// ```
/// use holo_runtime::{ParamEnum, ParamSchema, ParamSet};
///
/// #[derive(Clone, Copy, Debug, PartialEq, Eq, ParamEnum)]
/// enum OutputStorage {
///     Host,
///     #[param(name = "pinned")]
///     PinnedHost,
/// }
///
/// #[derive(Clone, ParamSchema)]
/// #[param(schema = "com.example.Storage", version = 1)]
/// struct Storage {
///     #[param(enum_values(Host, PinnedHost), recompile_required)]
///     output_storage: OutputStorage,
/// }
///
/// let set = ParamSet::<Storage>::from_json_str(r#"{"output_storage": "pinned"}"#)?;
/// assert_eq!(set.values().output_storage, OutputStorage::PinnedHost);
/// # Ok::<(), holo_runtime::Error>(())
/// ```
pub use holo_macros::ParamEnum;

/// A typed path to a schema field: `param_ref!(Schema::field)` or, through nested
/// schemas, `param_ref!(Schema::outer.inner)`. It is a
/// [`ParamRef<Schema, T>`](crate::ParamRef) where `T` is the field's type; a misspelled
/// segment is a compile error on that segment. `param_ref!(crate = path; Schema::field)`
/// overrides the crate root.
///
/// ```
/// use holo_runtime::{ParamSchema, ParamSet, param_ref};
///
/// #[derive(Clone, ParamSchema)]
/// #[param(schema = "com.example.Geometry", version = 1)]
/// struct Geometry {
///     #[param(name = "w")]
///     width: u32,
/// }
///
/// #[derive(Clone, ParamSchema)]
/// #[param(schema = "com.example.BatchParams", version = 1)]
/// struct BatchParams {
///     geometry: Geometry,
/// }
///
/// let width = param_ref!(BatchParams::geometry.width);
/// let set = ParamSet::<BatchParams>::from_toml_str("[geometry]\nw = 640")?;
/// let value: &u32 = width.get(set.values());
/// assert_eq!(*value, 640);
/// assert_eq!(width.path(), "geometry.w");
/// assert_eq!(width.rust_path(), ["geometry", "width"]);
/// # Ok::<(), holo_runtime::Error>(())
/// ```
pub use holo_macros::param_ref;
