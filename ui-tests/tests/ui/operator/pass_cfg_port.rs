use holo_runtime::{operator, Input, OperatorPorts, Output, Tensor};

#[operator]
struct Op {
    #[cfg(all())]
    #[input(memory = host, dtype = u8, rank = 1)]
    kept: Input<Tensor>,
    #[cfg(any())]
    #[input(memory = host, dtype = u8, rank = 1)]
    dropped: Input<Tensor>,
    #[cfg_attr(all(), output(name = "count"))]
    counted: Output<u64>,
    #[cfg(any())]
    state: u64,
}

fn main() {
    let names: Vec<&str> = Op::operator_spec().ports.iter().map(|p| p.name).collect();
    assert_eq!(names, ["kept", "count"]);
    let op = Op { kept: Input::default(), counted: Output::default() };
    drop(op);
}
