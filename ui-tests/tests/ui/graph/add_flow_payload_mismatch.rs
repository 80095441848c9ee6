use holo_runtime::{
    operator, ConnectionOptions, ExecutionContext, Graph, Input, Operator, Output, ParamSet,
    Tensor,
};

#[operator]
struct A {
    #[output(storage = runtime_pool, memory = host, bounds = 4096)]
    frames: Output<Tensor>,
    count: Output<u64>,
}

impl Operator for A {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> holo_runtime::Result<()> {
        Ok(())
    }
}

#[operator]
struct B {
    input: Input<Tensor>,
    count: Input<u64>,
}

impl Operator for B {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> holo_runtime::Result<()> {
        Ok(())
    }
}

fn build() -> holo_runtime::Result<Graph> {
    let mut graph = Graph::new();
    let a = graph.add_operator(
        "a",
        A { frames: Output::default(), count: Output::default() },
        ParamSet::defaults()?,
    )?;
    let b = graph.add_operator(
        "b",
        B { input: Input::default(), count: Input::default() },
        ParamSet::defaults()?,
    )?;
    graph.add_flow(a.frames, b.count, ConnectionOptions::default());
    Ok(graph)
}

fn main() {
    let _ = build();
}
