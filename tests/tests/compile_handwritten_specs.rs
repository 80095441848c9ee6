//! Diagnostics that `#[operator]` makes unreachable (rustc rejects the same mistakes), but
//! that `compile` still enforces for an operator whose `OperatorPorts` is written by hand
//! (a generator, a binding from another language): a runtime pool with no bound, one with
//! no memory kind, a parameter-contiguous span with no dtype, zero loans, a zero burst or
//! window, and a flow between two ports of the wrong directions.

use holo_runtime::__private::{
    OperatorId, OperatorSpec, PortBinder, PortDirection, PortPayload, PortSpec, TensorInputSpec,
    TensorOutputSpec, TensorOutputStorage, TensorRepresentation,
};
use holo_runtime::spec::PortTemporalSpec;
use holo_runtime::{
    CompileOptions, ConnectionOptions, ExecutionContext, Graph, InPort, MemoryKind, NoParams,
    Operator, OperatorPorts, OutPort, ParamSchema, ParamSet, Result, Tensor, codes, compile,
    param_ref, parameter_contiguous_byte_span,
};
use holo_runtime::{InputMode, Trigger};

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.HandParams", version = 1)]
struct HandParams {
    #[param(recompile_required, default = [2, 2])]
    shape: [u64; 2],
}

/// What the hand-written operator declares.
#[derive(Clone, Copy)]
enum Flavor {
    NoBound,
    NoMemoryKind,
    NoDtype,
    Ports,
    ZeroLoans,
    ZeroBurst,
    ZeroWindow,
}

struct Hand<const F: u8>;

const fn flavor(f: u8) -> Flavor {
    match f {
        0 => Flavor::NoBound,
        1 => Flavor::NoMemoryKind,
        2 => Flavor::NoDtype,
        4 => Flavor::ZeroLoans,
        5 => Flavor::ZeroBurst,
        6 => Flavor::ZeroWindow,
        _ => Flavor::Ports,
    }
}

#[derive(Clone, Copy)]
struct HandPorts {
    out: OutPort<Tensor>,
    input: InPort<Tensor>,
}

impl<const F: u8> OperatorPorts for Hand<F> {
    type Params = HandParams;
    type Ports = HandPorts;

    fn operator_spec() -> OperatorSpec<HandParams> {
        let representation = TensorRepresentation {
            memory_kind: Some(MemoryKind::Host),
            dtype: Some(holo_runtime::DType::U8),
            rank: Some(2),
        };
        let out = match flavor(F) {
            Flavor::NoBound => TensorOutputSpec {
                representation,
                storage: TensorOutputStorage::RuntimePool,
                ..TensorOutputSpec::default()
            },
            Flavor::NoMemoryKind => TensorOutputSpec {
                representation: TensorRepresentation {
                    memory_kind: None,
                    ..representation
                },
                bounds: Some(holo_runtime::tensor_bounds(64)),
                storage: TensorOutputStorage::RuntimePool,
                ..TensorOutputSpec::default()
            },
            Flavor::NoDtype => TensorOutputSpec {
                representation: TensorRepresentation {
                    dtype: None,
                    ..representation
                },
                storage: TensorOutputStorage::RuntimePool,
                byte_span: Some(parameter_contiguous_byte_span(param_ref!(
                    HandParams::shape
                ))),
                ..TensorOutputSpec::default()
            },
            Flavor::ZeroLoans => TensorOutputSpec {
                representation,
                bounds: Some(holo_runtime::tensor_bounds(64)),
                storage: TensorOutputStorage::RuntimePool,
                max_loans: 0,
                ..TensorOutputSpec::default()
            },
            Flavor::Ports | Flavor::ZeroBurst | Flavor::ZeroWindow => TensorOutputSpec::default(),
        };
        let (mut out_temporal, mut in_temporal) =
            (PortTemporalSpec::default(), PortTemporalSpec::default());
        match flavor(F) {
            Flavor::ZeroBurst => out_temporal.burst = 0,
            Flavor::ZeroWindow => in_temporal.mode = InputMode::Window { min: 0 },
            _ => {}
        }
        OperatorSpec {
            type_name: "Hand",
            ports: vec![
                PortSpec {
                    name: "out",
                    direction: PortDirection::Output,
                    payload: PortPayload::Tensor(out),
                    payload_type: "Tensor",
                    optional: false,
                    temporal: out_temporal,
                },
                PortSpec {
                    name: "input",
                    direction: PortDirection::Input,
                    payload: PortPayload::TensorInput(TensorInputSpec::default()),
                    payload_type: "Tensor",
                    optional: true,
                    temporal: in_temporal,
                },
            ],
            trigger: Trigger::AllInputs,
        }
    }

    fn __ports(id: OperatorId) -> HandPorts {
        HandPorts {
            out: OutPort::__new(id, 0),
            input: InPort::__new(id, 1),
        }
    }

    fn __bind(&mut self, binder: &mut PortBinder<'_>) -> Result<()> {
        let _ = binder;
        Ok(())
    }
}

impl<const F: u8> Operator for Hand<F> {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

fn only<const F: u8>() -> holo_runtime::Diagnostic {
    let mut g = Graph::new();
    g.add_operator("hand", Hand::<F>, ParamSet::defaults().unwrap())
        .unwrap();
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.items.len(), 1, "{d}");
    d.items[0].clone()
}

#[test]
fn a_runtime_pool_without_a_bound() {
    let d = only::<0>();
    assert_eq!(
        (d.code, d.port.as_deref()),
        (codes::PHYSICAL_TENSOR_UNBOUNDED_POOL, Some("out"))
    );
}

#[test]
fn a_runtime_pool_without_a_memory_kind() {
    let d = only::<1>();
    assert_eq!(d.code, codes::PHYSICAL_TENSOR_MEMORY_KIND_MISSING);
}

#[test]
fn a_parameter_contiguous_span_without_a_dtype() {
    let d = only::<2>();
    assert_eq!(d.code, codes::PHYSICAL_TENSOR_BYTE_SPAN_DTYPE_MISSING);
}

#[test]
fn zero_loans_on_a_hand_written_pool() {
    let d = only::<4>();
    assert_eq!(
        (d.code, d.port.as_deref()),
        (codes::POOL_LOANS_ZERO, Some("out"))
    );
}

#[test]
fn a_zero_burst_or_window_on_a_hand_written_port() {
    let d = only::<5>();
    assert_eq!(
        (d.code, d.port.as_deref()),
        (codes::RATE_INVALID, Some("out")),
        "{d}"
    );
    assert!(d.message.contains("`burst = 0`"), "{d}");
    let d = only::<6>();
    assert_eq!(
        (d.code, d.port.as_deref()),
        (codes::RATE_INVALID, Some("input")),
        "{d}"
    );
    assert!(d.message.contains("`window = 0`"), "{d}");
}

#[test]
fn a_flow_between_ports_of_the_wrong_directions() {
    let mut g = Graph::new();
    let a = g
        .add_operator("a", Hand::<3>, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator("b", Hand::<3>, ParamSet::defaults().unwrap())
        .unwrap();
    // Handles forged from the other direction's indices: input 1 of `a` as an output.
    g.add_flow(
        OutPort::<Tensor>::__new(a.input.operator(), 1),
        InPort::<Tensor>::__new(b.out.operator(), 0),
        ConnectionOptions::default(),
    );
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(d.codes(), vec![codes::GRAPH_INVALID_FLOW], "{d}");
    let _ = NoParams::default();
}

/// A hand-written schema whose `MemoryKind` field declares no `enum_values` domain (the
/// derive refuses that; a hand-written schema can still say it).
#[derive(Clone, Debug)]
struct OpenKindParams {
    kind: MemoryKind,
}

fn open_kind_schema() -> &'static holo_runtime::params::SchemaDescriptor {
    static SCHEMA: std::sync::OnceLock<holo_runtime::params::SchemaDescriptor> =
        std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut field = holo_runtime::params::FieldDescriptor::new(
            "kind",
            "kind",
            <MemoryKind as holo_runtime::ParamValue>::type_descriptor(),
        );
        field.recompile_required = true;
        holo_runtime::params::SchemaDescriptor {
            id: "test.OpenKindParams",
            version: 1,
            rust_name: "OpenKindParams",
            fields: vec![field],
        }
    })
}

impl holo_runtime::ParamValue for OpenKindParams {
    fn type_descriptor() -> holo_runtime::params::TypeDescriptor {
        holo_runtime::params::TypeDescriptor::Struct(open_kind_schema)
    }
    fn decode(
        value: &holo_runtime::params::Value,
        field: &holo_runtime::params::FieldDescriptor,
        path: &holo_runtime::params::FieldPath,
    ) -> Result<Self> {
        holo_runtime::__private::decode_struct(value, field, path)
    }
    fn encode(&self) -> holo_runtime::params::Value {
        holo_runtime::params::Value::Table(<Self as ParamSchema>::encode_table(self, false))
    }
}

impl ParamSchema for OpenKindParams {
    fn schema() -> &'static holo_runtime::params::SchemaDescriptor {
        open_kind_schema()
    }
    fn decode_table(
        _table: &std::collections::BTreeMap<String, holo_runtime::params::Value>,
        _path: &holo_runtime::params::FieldPath,
    ) -> Result<Self> {
        Ok(OpenKindParams {
            kind: MemoryKind::Host,
        })
    }
    fn encode_table(
        &self,
        _redact: bool,
    ) -> std::collections::BTreeMap<String, holo_runtime::params::Value> {
        std::collections::BTreeMap::from([(
            "kind".to_owned(),
            holo_runtime::ParamValue::encode(&self.kind),
        )])
    }
}

#[holo_runtime::operator(params = OpenKindParams)]
struct OpenKind {
    #[output(storage = runtime_pool, dtype = u8, rank = 1, bounds = 64,
             memory_kind = parameter_memory_kind_exact(holo_runtime::ParamRef::__new(&["kind"], |p: &OpenKindParams| &p.kind)))]
    out: holo_runtime::Output<Tensor>,
}

impl Operator for OpenKind {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_direct_memory_kind_parameter_without_a_domain() {
    let mut g = Graph::new();
    let params = ParamSet::from_values(OpenKindParams {
        kind: MemoryKind::Host,
    });
    g.add_operator(
        "open",
        OpenKind {
            out: holo_runtime::Output::default(),
        },
        params,
    )
    .unwrap();
    let d = compile(&g, CompileOptions::default()).unwrap_err();
    assert_eq!(
        d.codes(),
        vec![codes::PHYSICAL_TENSOR_MEMORY_KIND_DOMAIN],
        "{d}"
    );
    assert_eq!(d.items[0].field_path.as_deref(), Some("kind"));
}
