//! With holo-runtime's `tracing` feature (this crate enables it): a span per compile pass
//! and per materialization phase, a span per activation naming its operator, partition
//! and frame, and events for refusals and operator errors — captured here by a
//! subscriber of the test's own. One test function: the subscriber is process-wide.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, Operator, Output, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest,
    compile, operator,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// A span or event's fields, as (name, value) text.
type FieldList = Vec<(String, String)>;

/// Every span (name and fields, with fields recorded later) and every event's fields.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Log>>);

#[derive(Default)]
struct Log {
    spans: Vec<(Id, String, FieldList)>,
    events: Vec<FieldList>,
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut fields = Vec::new();
        attrs.record(&mut Fields(&mut fields));
        let mut log = self.0.lock().unwrap();
        log.spans
            .push((id.clone(), attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut log = self.0.lock().unwrap();
        if let Some((_, _, fields)) = log.spans.iter_mut().rev().find(|(i, _, _)| i == id) {
            values.record(&mut Fields(fields));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().events.push(fields);
    }
}

/// Emits a value each activation; on its fourth, holds every slot of a small pool until
/// one more loan is refused, then fails.
#[operator]
struct Source {
    out: Output<u64>,
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 8, max_loans = 1)]
    scratch: Output<Tensor>,
    n: u64,
    held: Vec<holo_runtime::TensorOutputLoan>,
}

impl Operator for Source {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        if self.n == 4 {
            let req = TensorLoanRequest {
                shape: &[8],
                dtype: DType::U8,
            };
            let refused = loop {
                match self.scratch.allocate_tensor(req) {
                    Ok(loan) if self.held.len() < 64 => self.held.push(loan),
                    Ok(_) => panic!("the pool never ran out"),
                    Err(e) => break e,
                }
            };
            assert_eq!(refused.code(), ErrorCode::ResourceExhausted);
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the fourth frame is bad",
            ));
        }
        self.out.emit(self.n, EmitOptions::default())
    }
}

#[operator]
struct Sink {
    input: Input<u64>,
}

impl Operator for Sink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.input.receive().is_some() {}
        Ok(())
    }
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn spans_and_events_report_compile_start_activations_refusals_and_errors() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone()))
        .unwrap();

    let mut g = Graph::new();
    let s = g
        .add_operator_with_defaults(
            "source",
            Source {
                out: Output::default(),
                scratch: Output::default(),
                n: 0,
                held: Vec::new(),
            },
        )
        .unwrap();
    let k = g
        .add_operator_with_defaults(
            "sink",
            Sink {
                input: Input::default(),
            },
        )
        .unwrap();
    g.add_flow(
        s.out,
        k.input,
        ConnectionOptions::default().with_queue_depth(4),
    );
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::frames(10)).unwrap();
    let _ = session.wait_idle(Duration::from_secs(10));
    let e = session.join().unwrap_err();
    assert_eq!(e.code(), ErrorCode::ProtocolError);

    let log = capture.0.lock().unwrap();
    let names: Vec<&str> = log.spans.iter().map(|(_, n, _)| n.as_str()).collect();
    assert!(names.contains(&"compile"), "{names:?}");
    let passes: Vec<&str> = log
        .spans
        .iter()
        .filter(|(_, n, _)| n == "compile.pass")
        .filter_map(|(_, _, f)| field(f, "pass"))
        .collect();
    assert_eq!(
        passes,
        [
            "\"check_graph\"",
            "\"check_topics\"",
            "\"partition\"",
            "\"resolve_tensors\"",
            "\"place\"",
            "\"size_queues\"",
            "\"edge_records\"",
            "\"pools\""
        ]
    );
    for phase in [
        "session.start",
        "session.create_streams",
        "session.materialize_pools",
        "session.create_queues",
        "session.create_topics",
        "session.bind_ports",
        "session.start_operators",
        "session.spawn_partitions",
    ] {
        assert!(names.contains(&phase), "{phase}: {names:?}");
    }
    // One span per activation, naming its operator; the sink's carry the frame ids of
    // what they received.
    let activations: Vec<&Vec<(String, String)>> = log
        .spans
        .iter()
        .filter(|(_, n, _)| n == "activation")
        .map(|(_, _, f)| f)
        .collect();
    let of = |op: &str| {
        activations
            .iter()
            .filter(|f| field(f, "operator") == Some(op))
            .count()
    };
    assert_eq!(of("source"), 4, "three emits and the failing fourth");
    assert!(of("sink") >= 1);
    let frames: Vec<&str> = activations
        .iter()
        .filter(|f| field(f, "operator") == Some("sink"))
        .filter_map(|f| field(f, "frame"))
        .collect();
    assert!(frames.contains(&"0") && frames.contains(&"2"), "{frames:?}");
    assert!(activations.iter().all(|f| field(f, "partition").is_some()));
    // The refusal and the operator's error are events.
    let messages: Vec<&str> = log
        .events
        .iter()
        .filter_map(|f| field(f, "message"))
        .collect();
    assert!(
        messages.contains(&"allocate_tensor refused: no free slot"),
        "{messages:?}"
    );
    assert!(
        log.events.iter().any(|f| field(f, "message")
            == Some("an activation failed; the session stops")
            && field(f, "operator") == Some("source")),
        "{messages:?}"
    );
}
