use holo_runtime::spec::PortPayload;
use holo_runtime::{operator, Input, OperatorPorts, Output, Tensor};

/// Forwards what `frames` receives, under its port name `camera`.
#[operator]
struct Relay {
    #[input(name = "camera")]
    frames: Input<Tensor>,
    #[output(storage = pass_through, forwards = frames)]
    out: Output<Tensor>,
    #[output(storage = runtime_pool, memory = host, bounds = 64, forwards = frames)]
    both: Output<Tensor>,
}

fn main() {
    let spec = Relay::operator_spec();
    let forwards: Vec<Option<&str>> = spec
        .ports
        .iter()
        .filter_map(|p| match &p.payload {
            PortPayload::Tensor(t) => Some(t.forwards),
            _ => None,
        })
        .collect();
    assert_eq!(forwards, [Some("camera"), Some("camera")]);
}
