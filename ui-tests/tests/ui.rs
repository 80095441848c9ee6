//! Every authoring mistake holo's macros promise to catch, one file each, with the
//! compiler output checked in beside it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    for dir in [
        "param_schema",
        "param_enum",
        "param_ref",
        "operator",
        "byte_span_projector",
        "memory_kind_map",
        "graph",
    ] {
        t.pass(format!("tests/ui/{dir}/pass_*.rs"));
        t.compile_fail(format!("tests/ui/{dir}/[!p]*.rs"));
    }
}
