//! `#[operator]` sees the struct after `cfg` and `cfg_attr` are applied: a port field
//! configured out is no port at all, and a port attribute inside `cfg_attr` applies.

use std::time::Duration;

use holo_runtime::{
    CompileOptions, ConnectionOptions, EmitOptions, ErrorCode, ExecutionContext, Graph, Input,
    Operator, OperatorPorts, Output, ParamSet, Result, RunSession, SessionOptions, compile,
    operator,
};

/// A source whose second output exists only under a configuration that is never set.
#[operator]
struct Source {
    #[cfg(test)]
    #[output(name = "kept")]
    kept: Output<u64>,
    #[cfg(any())]
    #[output(name = "dropped")]
    dropped: Output<u64>,
    #[cfg_attr(test, output(name = "renamed"))]
    aliased: Output<u64>,
    next: u64,
}

impl Operator for Source {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.next += 1;
        match self.kept.emit(self.next, EmitOptions::default()) {
            Err(e) if e.code() != ErrorCode::Backpressured => Err(e),
            _ => Ok(()),
        }
    }
}

/// A sink whose configured-out input sits between two that stay, so a wrong port index
/// would bind the wrong field.
#[operator(trigger = any_input)]
struct Sink {
    #[cfg(test)]
    first: Input<u64>,
    #[cfg(any())]
    #[input(optional)]
    gone: Input<String>,
    #[input(optional)]
    last: Input<u64>,
    received: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Operator for Sink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.first.receive().is_some() {
            self.received
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

fn port_names<O: OperatorPorts>() -> Vec<&'static str> {
    O::operator_spec().ports.iter().map(|p| p.name).collect()
}

#[test]
fn a_configured_out_port_is_absent_from_the_spec() {
    assert_eq!(port_names::<Source>(), ["kept", "renamed"]);
    assert_eq!(port_names::<Sink>(), ["first", "last"]);
}

#[test]
fn the_ports_that_stay_connect_and_bind_in_order() {
    let received = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut g = Graph::new();
    let source = Source {
        kept: Output::default(),
        aliased: Output::default(),
        next: 0,
    };
    let sink = Sink {
        first: Input::default(),
        last: Input::default(),
        received: std::sync::Arc::clone(&received),
    };
    let a = g
        .add_operator("source", source, ParamSet::defaults().unwrap())
        .unwrap();
    let b = g
        .add_operator("sink", sink, ParamSet::defaults().unwrap())
        .unwrap();
    g.add_flow(a.kept, b.first, ConnectionOptions::default());
    g.add_flow(a.aliased, b.last, ConnectionOptions::default());
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(20)).unwrap();
    assert!(session.wait_idle(Duration::from_secs(20)));
    session.join().unwrap();
    assert!(received.load(std::sync::atomic::Ordering::Relaxed) > 0);
}
