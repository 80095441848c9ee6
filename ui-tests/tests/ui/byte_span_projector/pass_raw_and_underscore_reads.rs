// A field named by a raw identifier (`r#type`) read by a projector: the macro built its
// view struct's name from the path's text and panicked ("is not a valid Ident"). And the
// paths `a.b_c` and `a_b.c` named the same view struct twice.
use holo_runtime::{byte_span_projector, ByteSpanProjector, ParamSchema, ParamSet};

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Inner", version = 1)]
pub struct Inner {
    #[param(recompile_required, default = 2)]
    w: u32,
    #[param(recompile_required, default = 3)]
    b_c: u32,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Leaf", version = 1)]
pub struct Leaf {
    #[param(recompile_required, default = 5)]
    c: u32,
}

#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Outer", version = 1)]
pub struct Outer {
    r#type: Inner,
    a: Inner,
    a_b: Leaf,
}

#[byte_span_projector(id = "com.example.raw.v1", reads(r#type.w, a.b_c, a_b.c))]
pub fn span(params: &Outer) -> Result<u64, holo_runtime::Error> {
    Ok(u64::from(params.r#type.w) * u64::from(params.a.b_c) * u64::from(params.a_b.c))
}

fn main() {
    // The key is the field's name, `type`, not `r#type`.
    let set = ParamSet::<Outer>::from_toml_str("[type]\nw = 7\n").unwrap();
    assert_eq!(span(set.values()).unwrap(), 7 * 3 * 5);
    let reads: Vec<String> = span::reads().into_iter().map(|d| d.path).collect();
    assert_eq!(reads, ["type.w", "a.b_c", "a_b.c"]);
}
