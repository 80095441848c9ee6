//! `#[operator]`, `#[byte_span_projector]` and `memory_kind_map!` expand to code that
//! names nothing from the user's scope: prelude and runtime names are shadowed here, and
//! warnings are denied on the expansions.
#![deny(warnings)]
#![allow(dead_code, reason = "the shadowing types exist only to be in scope")]
#![allow(non_camel_case_types, reason = "shadows lower-case prelude items")]

struct Option;
struct Result;
struct Ok;
struct Err;
struct Some;
struct None;
struct Box;
struct Vec;
struct String;
struct Default;
struct Clone;
struct core;
struct std;
struct holo_params;
struct MemoryKind;
struct InPort;
struct OutPort;
struct PortBinder;
struct OperatorSpec;
struct PortSpec;
mod __private {}

use holo_runtime::{
    ExecutionContext, Input, Operator, Output, ParamEnum, ParamSchema, Tensor, byte_span_projector,
    operator,
};

#[derive(
    ::core::clone::Clone, ::core::marker::Copy, PartialEq, Eq, ::core::fmt::Debug, ParamEnum,
)]
enum Storage {
    Host,
    Pinned,
}

#[derive(::core::clone::Clone, ::core::fmt::Debug, ParamSchema)]
#[param(schema = "test.Hygiene", version = 1)]
struct HygieneParams {
    #[param(recompile_required, default = [4, 4])]
    shape: [u64; 2],
    #[param(recompile_required, default = Storage::Host)]
    storage: Storage,
    #[param(recompile_required, default = 2)]
    count: u64,
}

#[byte_span_projector(id = "test.Hygiene.bytes.v1", reads(count))]
fn hygiene_bytes(params: &HygieneParams) -> ::holo_runtime::Result<u64> {
    ::core::result::Result::Ok(params.count * 16)
}

/// An operator using every kind of port key.
#[operator(params = HygieneParams)]
struct Everything {
    #[input(dtype = u8, rank = 2, history = 2)]
    frames: Input<Tensor>,
    #[input(optional)]
    control: Input<u32>,
    #[output(storage = runtime_pool, dtype = u8, rank = 2,
             byte_span = parameter_contiguous_byte_span(param_ref!(HygieneParams::shape)),
             memory_kind = parameter_memory_kind(param_ref!(HygieneParams::storage),
                 memory_kind_map!(Storage { Host => Host, Pinned => PinnedHost })))]
    shaped: Output<Tensor>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1,
             byte_span = input_max_byte_span(frames).maximum_with(parameter_projected_byte_span::<hygiene_bytes>()))]
    projected: Output<Tensor>,
    count: Output<u64>,
}

impl Operator for Everything {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> ::holo_runtime::Result<()> {
        ::core::result::Result::Ok(())
    }
}

#[test]
fn expansions_compile_with_shadowed_names_and_no_warnings() {
    let spec = <Everything as ::holo_runtime::OperatorPorts>::operator_spec();
    let names: ::std::vec::Vec<&str> = spec.ports.iter().map(|p| p.name).collect();
    assert_eq!(names, ["frames", "control", "shaped", "projected", "count"]);
}
