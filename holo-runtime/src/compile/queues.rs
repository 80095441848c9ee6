//! Rates → horizons → hard floors → recipes → depths: the queue-sizing pass, run before
//! pool sizing. Every number is exact rational arithmetic, checked.

use std::borrow::Cow;
use std::sync::Arc;

use num_rational::Ratio;

use super::{Diagnostic, DiagnosticCode, Work, codes};
use crate::graph::NodePort;
use crate::plan::{
    AccumulationHorizonRecord, ExactPortRate, HardFloorContributorRecord, PortRateRecord,
    QueueSizingRecipeRecord,
};
use crate::spec::rates::{ceil_entries, exact_ratio, mul};
use crate::spec::{InputMode, PortDirection, Rate, RateExpr, Trigger};

type Q = Ratio<i128>;

/// A port's resolved rate.
#[derive(Clone, Debug, Default)]
pub(crate) struct PortRate {
    pub(crate) source: &'static str,
    pub(crate) active: Option<Q>,
    pub(crate) admitted: Option<Q>,
}

/// What the pass hands to pools and the plan.
pub(crate) struct Sized {
    /// Per edge: final depth and its source.
    pub(crate) depth: Vec<(u32, &'static str)>,
    /// Per edge: the depth over the admitted domain (`None`: unbounded).
    pub(crate) admitted_depth: Vec<Option<u32>>,
    pub(crate) port_rates: Vec<PortRateRecord>,
    pub(crate) horizons: Vec<AccumulationHorizonRecord>,
    pub(crate) contributors: Vec<HardFloorContributorRecord>,
    pub(crate) recipes: Vec<QueueSizingRecipeRecord>,
    /// Per operator: the clock rate of a clock trigger ([`clock_of`]: empty when no
    /// operator has one).
    pub(crate) clocks: Vec<Option<Q>>,
}

/// The clock rate of operator `op`'s clock trigger, from a table that is empty when no
/// operator has one (48 bytes an operator, 480 kB at 10,000, written for nothing in a
/// graph without clocks).
pub(crate) fn clock_of(clocks: &[Option<Q>], op: u32) -> Option<&Q> {
    clocks.get(op as usize).and_then(Option::as_ref)
}

/// The ports' resolved rates and what sizing an edge reads besides.
struct Resolution {
    /// Every port's rate record, in the plan's order once every operator is resolved.
    records: Vec<PortRateRecord>,
    /// Per port ([`Work::port_index`](super::Work::port_index)): its record in
    /// `records`, once its operator has been reached in topological order (a record
    /// holds the rate, so there is no second table of rates).
    at: Vec<u32>,
    /// Per operator: the clock rate of a clock trigger (empty when no operator has one).
    clocks: Vec<Option<Q>>,
    headroom: Option<Q>,
    /// The headroom ratio as the recipes show it (one allocation, shared by them).
    headroom_ratio: Arc<str>,
}

impl Resolution {
    fn rate(&self, work: &Work<'_>, op: u32, port: u32) -> Option<&PortRateRecord> {
        let &at = self.at.get(work.port_index(op, port))?;
        self.records.get(at as usize)
    }

    /// Points `at` at the records from `first` on.
    fn index_from(&mut self, work: &Work<'_>, first: usize) {
        for (i, r) in self.records.iter().enumerate().skip(first) {
            self.at[work.port_index(r.operator, r.port_index)] =
                u32::try_from(i).unwrap_or(u32::MAX);
        }
    }
}

fn hz(q: Option<&Q>) -> Option<String> {
    q.map(exact_ratio)
}

struct Pass<'w, 'g> {
    work: &'w mut Work<'g>,
}

impl Pass<'_, '_> {
    fn op_name(&self, op: u32) -> String {
        self.work.op_name(op).to_owned()
    }

    fn report(
        &mut self,
        code: DiagnosticCode,
        op: u32,
        port: Option<&str>,
        msg: String,
        hint: &str,
    ) {
        let mut d = Diagnostic::error(code, msg)
            .operator(&self.op_name(op))
            .hint(hint);
        if let Some(p) = port {
            d = d.port(p);
        }
        self.work.diagnostics.push(d);
    }

    /// Resolves a declared rate: its active value and admitted maximum, validated.
    fn resolve(
        &mut self,
        op: u32,
        port: &str,
        expr: &RateExpr<()>,
        what: &str,
    ) -> Option<(Q, Option<Q>, Option<String>)> {
        if let Some(dep) = expr.dependency()
            && !dep.is_compile_readable()
        {
            let mut d = Diagnostic::error(
                codes::RATE_UNREADABLE_PARAMETER,
                format!("the compiler may not read the parameter of this {what}: it is sensitive, or neither `compile_time` nor `recompile_required`"),
            )
            .operator(&self.op_name(op))
            .port(port)
            .field(&dep.path)
            .hint("mark the rate's field `#[param(recompile_required)]` and never derive a rate from a sensitive field");
            if port.is_empty() {
                d.port = None;
            }
            self.work.diagnostics.push(d);
            return None;
        }
        let params = self.work.graph.operators[op as usize].params.as_ref();
        let (active, admitted, parameter) = expr.resolve(params);
        let Some(a) = active.ratio() else {
            let mut d = Diagnostic::error(
                codes::RATE_INVALID,
                format!("the {what} {active} is not a positive rate"),
            )
            .operator(&self.op_name(op))
            .hint("a rate is positive and finite: `Rate::hz(60)`, `Rate::new(1, 4)`");
            if !port.is_empty() {
                d = d.port(port);
            }
            if let Some(p) = &parameter {
                d = d.field(p);
            }
            self.work.diagnostics.push(d);
            return None;
        };
        let admitted = admitted.and_then(Rate::ratio).map(|m| m.max(a));
        Some((a, admitted, parameter))
    }
}

/// A human "port" label for a diagnostic without a port (an operator's clock).
const NO_PORT: &str = "";

pub(crate) fn size_queues(work: &mut Work<'_>) -> Sized {
    let graph = work.graph;
    let options = work.options.automatic_queue_sizing;
    let headroom = options.headroom_ratio.ratio();
    if headroom.is_none() {
        work.diagnostics.push(
            Diagnostic::error(
                codes::RATE_INVALID,
                format!(
                    "the automatic queue-sizing headroom ratio {} is not positive",
                    options.headroom_ratio
                ),
            )
            .hint("use a positive ratio, like `RateRatio::new(2, 1)` (the default)"),
        );
    }
    let mut pass = Pass { work };
    let ports = graph.port_facts.len();
    let mut res = Resolution {
        records: Vec::with_capacity(ports),
        at: vec![u32::MAX; ports],
        clocks: Vec::new(),
        headroom,
        headroom_ratio: options.headroom_ratio.to_string().into(),
    };
    let edges = graph.edges.len();
    let mut out = Sized {
        depth: Vec::with_capacity(edges),
        admitted_depth: Vec::with_capacity(edges),
        port_rates: Vec::new(),
        horizons: Vec::with_capacity(edges),
        // An edge's floor has two or three contributors.
        contributors: Vec::with_capacity(3 * edges),
        recipes: Vec::with_capacity(edges),
        clocks: Vec::new(),
    };
    // Each edge is sized as soon as its consumer's inputs are resolved, while the records
    // it reads are in cache (at 10,000 operators a second sweep over the edges read them
    // all again from memory); `order` is the edges in the order they were sized.
    let mut order: Vec<u32> = Vec::with_capacity(edges);
    let mut sized = vec![false; edges];
    let mut edge_diagnostics = EdgeDiagnostics::default();
    let topo = pass.work.topo.clone();
    for &o in &topo {
        let node = &graph.operators[o as usize];
        let first = res.records.len();
        let name: Arc<str> = Arc::from(pass.work.op_name(o));
        if let Trigger::Clock(expr) = &node.trigger
            && let Some((a, _, _)) = pass.resolve(o, NO_PORT, expr, "clock rate")
        {
            // The session ticks in whole nanoseconds of 64 bits: a period past that (a
            // clock slower than one tick in 584 years) compiled and then failed at start.
            let period_ns = crate::spec::rates::clock_period_ns(&a);
            if u64::try_from(period_ns).is_err() {
                pass.report(
                    codes::RATE_INVALID,
                    o,
                    None,
                    format!(
                        "the clock rate {} Hz has a period of {period_ns} ns, past 64 bits of nanoseconds (584 years)",
                        crate::spec::rates::exact_ratio(&a)
                    ),
                    "give a clock rate the pipeline can tick at",
                );
            }
            if res.clocks.is_empty() {
                res.clocks.resize(graph.operators.len(), None);
            }
            res.clocks[o as usize] = Some(a);
        }
        let facts = graph.port_facts_of(o as usize);
        // Inputs first: an output may follow one.
        for dir in [PortDirection::Input, PortDirection::Output] {
            for (p, f) in facts.iter().enumerate() {
                if f.direction != dir {
                    continue;
                }
                // A port without rate metadata needs nothing more of the graph's port (at
                // 10,000 operators, reading each again cost a cache miss per port).
                let port = f.rated.then(|| &node.ports[p]);
                let p = u32::try_from(p).unwrap_or(u32::MAX);
                if dir == PortDirection::Input && f.history > super::MAX_QUEUE_DEPTH {
                    // Its entries are preallocated at start, as a queue's are (a message
                    // input's history has no pool to bound it).
                    pass.report(
                        codes::QUEUE_DEPTH_LIMIT,
                        o,
                        Some(f.name),
                        format!(
                            "the input's history of {} entries exceeds holo's limit of {} entries per input (every entry is preallocated at start)",
                            f.history,
                            super::MAX_QUEUE_DEPTH
                        ),
                        "retain what the operator really reads, or lower the parameter the history is derived from",
                    );
                }
                let (rate, parameter, follows) = match (dir, port) {
                    (PortDirection::Input, _) => {
                        (input_rate(&mut pass, &res, o, p, port), None, None)
                    }
                    (PortDirection::Output, Some(port)) => output_rate(&mut pass, &res, o, port),
                    (PortDirection::Output, None) => (
                        PortRate {
                            source: "undeclared",
                            ..PortRate::default()
                        },
                        None,
                        None,
                    ),
                };
                let expected = port.and_then(|port| {
                    let e = port.temporal.expected_rate.as_ref()?;
                    if e.dependency().is_some_and(|dep| !dep.is_compile_readable()) {
                        // Not read, so not shown in the plan (it is redacted from the
                        // operator's parameters): reported, unless resolving it as the
                        // input's rate did already.
                        let name = pass.op_name(o);
                        let reported = pass.work.diagnostics.iter().any(|d| {
                            d.code == codes::RATE_UNREADABLE_PARAMETER
                                && d.operator.as_deref() == Some(name.as_str())
                                && d.port.as_deref() == Some(port.name)
                        });
                        if !reported {
                            let _ = pass.resolve(o, port.name, e, "expected rate");
                        }
                        return None;
                    }
                    let params = graph.operators[o as usize].params.as_ref();
                    e.resolve(params).0.ratio()
                });
                res.records.push(PortRateRecord {
                    operator: o,
                    operator_name: Arc::clone(&name),
                    port: f.name.into(),
                    direction: match dir {
                        PortDirection::Input => "input",
                        PortDirection::Output => "output",
                    }
                    .into(),
                    source: rate.source.into(),
                    active_hz: hz(rate.active.as_ref()),
                    admitted_max_hz: hz(rate.admitted.as_ref()),
                    parameter,
                    follows,
                    expected_rate_hz: hz(expected.as_ref()),
                    port_index: p,
                    exact: {
                        let follows = port
                            .and_then(|port| port.temporal.follows)
                            .and_then(|(i, r)| Some((i.to_owned(), r.ratio()?)));
                        (rate.active.is_some() || rate.admitted.is_some() || follows.is_some())
                            .then(|| {
                                Box::new(ExactPortRate {
                                    active: rate.active,
                                    admitted: rate.admitted,
                                    follows,
                                })
                            })
                    },
                });
                let (at, record) = (pass.work.port_index(o, p), res.records.len() - 1);
                res.at[at] = u32::try_from(record).unwrap_or(u32::MAX);
            }
        }
        // The plan lists an operator's ports by name (stable: an input before an output
        // of the same name), sorted here while they are in cache ...
        res.records[first..].sort_by(|a, b| a.port.cmp(&b.port));
        res.index_from(pass.work, first);
        // The edges into this operator: every record they read is resolved (a producer
        // comes first in topological order). Their horizon records share the operator's
        // name with its port-rate records (one allocation per operator, not one per
        // record; no table of names is kept: a consumer's edges are sized here).
        for (p, f) in graph.port_facts_of(o as usize).iter().enumerate() {
            if f.direction != PortDirection::Input {
                continue;
            }
            let p = u32::try_from(p).unwrap_or(u32::MAX);
            for k in 0..pass.work.incoming(o, p).len() {
                let id = pass.work.incoming(o, p)[k];
                if let Some(done) = sized.get_mut(id as usize) {
                    *done = true;
                    edge_diagnostics.size(&mut pass, &res, id, Some(&name), &mut out);
                    order.push(id);
                }
            }
        }
    }
    // A flow the graph check refused (not from an output to an input) is in no input's
    // list: sized here, as before, so every edge has its records.
    for (id, &done) in sized.iter().enumerate() {
        if !done {
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            edge_diagnostics.size(&mut pass, &res, id, None, &mut out);
            order.push(id);
        }
    }
    // ... and the operators by index, which they already are when the topological order
    // is the operators' own (a chain); stable, so each operator's ports keep their order.
    if !topo.is_sorted() {
        res.records.sort_by_key(|r| r.operator);
        res.index_from(pass.work, 0);
    }
    // The plan lists the edges' records by edge, as they already are when the edges
    // were added in the consumers' topological order (a chain).
    let reorder = !order.is_sorted();
    if reorder {
        by_edge(&order, &mut out);
    }
    edge_diagnostics.append_to(pass.work, reorder);
    out.port_rates = res.records;
    out.clocks = res.clocks;
    out
}

fn input_rate(
    pass: &mut Pass<'_, '_>,
    res: &Resolution,
    op: u32,
    index: u32,
    // `None`: the port declares no rate metadata (`PortFacts::rated`).
    port: Option<&NodePort>,
) -> PortRate {
    let first = pass.work.incoming(op, index).first().copied();
    let graph = pass.work.graph;
    let expected = |pass: &mut Pass<'_, '_>| {
        let port = port?;
        let declared = port.temporal.expected_rate.as_ref()?;
        let (active, admitted, _) = pass.resolve(op, port.name, declared, "expected rate")?;
        Some(PortRate {
            source: "expected_rate",
            active: Some(active),
            admitted,
        })
    };
    let Some(edge) = first else {
        return expected(pass).unwrap_or(PortRate {
            source: "undeclared",
            ..PortRate::default()
        });
    };
    let flow = &graph.edges[edge as usize];
    if pass.work.port(flow.from.0.0, flow.from.1).declares_rate {
        // A connected upstream output is authoritative.
        return match res.rate(pass.work, flow.from.0.0, flow.from.1) {
            Some(r) if r.active().is_some() => PortRate {
                source: "upstream",
                active: r.active(),
                admitted: r.admitted(),
            },
            _ => PortRate {
                source: "unresolved",
                ..PortRate::default()
            },
        };
    }
    // Upstream rate metadata is positively absent: the weaker fallback may apply.
    expected(pass).unwrap_or(PortRate {
        source: "undeclared",
        ..PortRate::default()
    })
}

fn output_rate(
    pass: &mut Pass<'_, '_>,
    res: &Resolution,
    o: u32,
    port: &NodePort,
) -> (PortRate, Option<String>, Option<String>) {
    let t = &port.temporal;
    if let Some(expr) = &t.nominal_rate {
        return match pass.resolve(o, port.name, expr, "nominal rate") {
            Some((a, m, param)) => (
                PortRate {
                    source: "nominal_rate",
                    active: Some(a),
                    admitted: m,
                },
                param,
                None,
            ),
            None => (
                PortRate {
                    source: "unresolved",
                    ..PortRate::default()
                },
                None,
                None,
            ),
        };
    }
    let Some((input, ratio)) = t.follows else {
        return (
            PortRate {
                source: "undeclared",
                ..PortRate::default()
            },
            None,
            None,
        );
    };
    let label = Some(format!("{input} × {ratio}"));
    let unresolved = PortRate {
        source: "unresolved",
        ..PortRate::default()
    };
    let Some(r) = ratio.ratio() else {
        pass.report(
            codes::RATE_INVALID,
            o,
            Some(port.name),
            format!("`follows({input}, {ratio})`: the ratio is not positive"),
            "use a positive ratio, like `RateRatio::new(1, 4)`",
        );
        return (unresolved, None, label);
    };
    let node = &pass.work.graph.operators[o as usize];
    let Some(ip) = node
        .ports
        .iter()
        .position(|p| p.name == input && p.direction == PortDirection::Input)
    else {
        return (unresolved, None, label);
    };
    let ip = u32::try_from(ip).unwrap_or(u32::MAX);
    let Some(from) = res.rate(pass.work, o, ip) else {
        return (unresolved, None, label);
    };
    let Some(a) = from.active() else {
        return (unresolved, None, label);
    };
    let active = mul(&a, &r);
    let admitted = from.admitted().map(|m| mul(&m, &r));
    match (active, admitted) {
        (Some(active), admitted) if !matches!(admitted, Some(None)) => (
            PortRate {
                source: "follows",
                active: Some(active),
                admitted: admitted.flatten(),
            },
            None,
            label,
        ),
        _ => {
            pass.report(
                codes::RATE_ARITHMETIC_OVERFLOW,
                o,
                Some(port.name),
                format!("`follows({input}, {ratio})`: the derived rate overflows exact 128-bit arithmetic"),
                "reduce the rates or the ratio",
            );
            (unresolved, None, label)
        }
    }
}

/// The horizon of an edge's input under its consumer's trigger.
fn horizon(res: &Resolution, work: &Work<'_>, to: u32) -> (Option<Q>, Cow<'static, str>) {
    let node = &work.graph.operators[to as usize];
    match &node.trigger {
        Trigger::Clock(_) => match clock_of(&res.clocks, to) {
            Some(c) => (
                Some(c.recip()),
                format!("clock at {} Hz: one activation per period", exact_ratio(c)).into(),
            ),
            None => (None, "the clock rate is invalid".into()),
        },
        Trigger::OnArrival(x) => {
            let ports = work.graph.port_facts_of(to as usize);
            let xp = ports
                .iter()
                .position(|p| p.name == *x && p.direction == PortDirection::Input)
                .and_then(|p| u32::try_from(p).ok());
            match xp
                .and_then(|p| res.rate(work, to, p))
                .and_then(PortRateRecord::active)
            {
                Some(r) => (
                    Some(r.recip()),
                    format!(
                        "on_arrival({x}) at {} Hz: one activation per arrival",
                        exact_ratio(&r)
                    )
                    .into(),
                ),
                None => (
                    None,
                    format!("on_arrival({x}): the trigger input's rate is not declared").into(),
                ),
            }
        }
        // Fixed words: no allocation (most edges of a large graph take this branch).
        Trigger::AllInputs => (
            None,
            "all_inputs: the contract bounds no interval between activations".into(),
        ),
        Trigger::AnyInput => (
            None,
            "any_input: the contract bounds no interval between activations".into(),
        ),
    }
}

/// The diagnostics and warnings of the edges, by edge: an edge is sized when its consumer
/// is reached, and the plan reports them after the ports' and in edge order, as a second
/// sweep over the edges did.
#[derive(Default)]
struct EdgeDiagnostics {
    errors: Vec<(u32, Diagnostic)>,
    warnings: Vec<(u32, Diagnostic)>,
}

impl EdgeDiagnostics {
    /// Sizes edge `id`, keeping what it reports.
    /// `consumer`: the consumer's name when the caller has it.
    fn size(
        &mut self,
        pass: &mut Pass<'_, '_>,
        res: &Resolution,
        id: u32,
        consumer: Option<&Arc<str>>,
        out: &mut Sized,
    ) {
        let (errors, warnings) = (pass.work.diagnostics.len(), pass.work.warnings.len());
        let e = &pass.work.graph.edges[id as usize];
        size_edge(pass, res, id, e, consumer, out);
        // (Most edges report nothing.)
        if pass.work.diagnostics.len() > errors {
            self.errors
                .extend(pass.work.diagnostics.drain(errors..).map(|d| (id, d)));
        }
        if pass.work.warnings.len() > warnings {
            self.warnings
                .extend(pass.work.warnings.drain(warnings..).map(|d| (id, d)));
        }
    }

    /// Appends them after every other diagnostic, in edge order (`reorder`: the edges
    /// were not sized in their order).
    fn append_to(mut self, work: &mut Work<'_>, reorder: bool) {
        if reorder {
            // Stable: an edge's own diagnostics keep their order.
            self.errors.sort_by_key(|&(id, _)| id);
            self.warnings.sort_by_key(|&(id, _)| id);
        }
        work.diagnostics
            .extend(self.errors.into_iter().map(|(_, d)| d));
        work.warnings
            .extend(self.warnings.into_iter().map(|(_, d)| d));
    }
}

/// Puts the edges' records, pushed in the order `order` sized the edges, in edge order.
fn by_edge(order: &[u32], out: &mut Sized) {
    fn sort<T>(order: &[u32], v: &mut Vec<T>) {
        let mut tagged: Vec<(u32, T)> = order.iter().copied().zip(v.drain(..)).collect();
        tagged.sort_by_key(|&(id, _)| id);
        v.extend(tagged.into_iter().map(|(_, x)| x));
    }
    sort(order, &mut out.depth);
    sort(order, &mut out.admitted_depth);
    out.horizons.sort_by_key(|h| h.edge);
    out.recipes.sort_by_key(|r| r.edge);
    // Stable: an edge's contributors keep their order.
    out.contributors.sort_by_key(|c| c.edge);
}

fn size_edge(
    pass: &mut Pass<'_, '_>,
    res: &Resolution,
    id: u32,
    e: &crate::graph::EdgeNode,
    consumer_name: Option<&Arc<str>>,
    out: &mut Sized,
) {
    let graph = pass.work.graph;
    let options = pass.work.options;
    let (fo, fp) = (e.from.0.0, e.from.1);
    let (to, tp) = (e.to.0.0, e.to.1);
    let consumer = &graph.operators[to as usize];
    // The ports' facts, not the graph's ports: those were read in topological order.
    let (in_port, out_port) = (*pass.work.port(to, tp), *pass.work.port(fo, fp));
    let port_name = in_port.name;
    let (h, reason) = horizon(res, pass.work, to);
    out.horizons.push(AccumulationHorizonRecord {
        edge: id,
        operator: consumer_name.map_or_else(|| Arc::from(pass.work.op_name(to)), Arc::clone),
        port: port_name.into(),
        trigger: consumer.trigger.name().into(),
        mode: in_port.mode.name().into(),
        horizon_seconds: hz(h.as_ref()),
        reason,
    });

    // The edge's hard floor: one scenario, one group of alternatives (every contributor
    // counts entries queued on this edge at once).
    let retention = match in_port.mode {
        InputMode::Latest => Some(("selector_retention", 1)),
        InputMode::Window { min } => Some(("window_retention", min.max(1))),
        InputMode::Queue => None,
    };
    let floor_items = [
        Some(("minimum_queue", 1)),
        Some(("producer_burst", out_port.burst.max(1))),
        retention,
    ];
    for &(c, n) in floor_items.iter().flatten() {
        out.contributors.push(HardFloorContributorRecord {
            scope: "edge".into(),
            edge: Some(id),
            pool: None,
            scenario: "steady".into(),
            group: "queued_entries".into(),
            contributor: c.into(),
            entries: n,
        });
    }
    // One scenario and one group: `compose` is the largest contributor.
    let floor = floor_items
        .iter()
        .flatten()
        .map(|&(_, n)| n)
        .max()
        .unwrap_or(1);

    let (rate_source, active, admitted) = match res.rate(pass.work, to, tp) {
        Some(r) => (r.source.clone(), r.active(), r.admitted()),
        None => ("".into(), None, None),
    };
    let mut recipe = QueueSizingRecipeRecord {
        edge: id,
        rate_source,
        rate_hz: hz(active.as_ref()),
        horizon_seconds: hz(h.as_ref()),
        headroom_ratio: Arc::clone(&res.headroom_ratio),
        nominal_arrivals: None,
        recommendation: None,
        hard_floor: floor,
        automatic_depth: None,
        admitted_max_hz: hz(admitted.as_ref()),
        admitted_ceiling: None,
        explicit_depth: e.options.queue_depth,
        queue_depth: 0,
        depth_source: "".into(),
    };
    let headroom = res.headroom;
    let rate_aware = active.is_some() && h.is_some() && headroom.is_some();
    // Where the rate came from: the producing port's parameter, if it names one (a
    // parameter of another operator: named in the message, the diagnostic being this
    // input's).
    let upstream = res.rate(pass.work, e.from.0.0, e.from.1).and_then(|r| {
        r.parameter
            .clone()
            .map(|p| (Arc::clone(&r.operator_name), p))
    });
    let overflow = |pass: &mut Pass<'_, '_>| {
        let figures = format!(
            "{} Hz × {} s × {}",
            hz(active.as_ref()).unwrap_or_else(|| "?".to_owned()),
            hz(h.as_ref()).unwrap_or_else(|| "?".to_owned()),
            res.headroom_ratio
        );
        let from = upstream.as_ref().map_or_else(String::new, |(op, p)| {
            format!("; the rate is parameter `{p}` of operator {op:?}")
        });
        pass.report(
            codes::RATE_ARITHMETIC_OVERFLOW,
            to,
            Some(port_name),
            format!(
                "the rate × horizon × headroom arithmetic overflows (or exceeds a u32 entry count): {figures}{from}"
            ),
            "reduce the rates, the horizon or the headroom ratio",
        );
    };
    if rate_aware {
        let (Some(r), Some(h), Some(hr)) = (active, h, headroom) else {
            return;
        };
        let sized = mul(&r, &h).and_then(|x| ceil_entries(&x)).and_then(|a| {
            Some((
                a,
                ceil_entries(&mul(&Q::from_integer(i128::from(a)), &hr)?)?,
            ))
        });
        match sized {
            Some((arrivals, rec)) => {
                recipe.nominal_arrivals = Some(arrivals);
                recipe.recommendation = Some(rec);
                recipe.automatic_depth = Some(floor.max(rec));
            }
            None => overflow(pass),
        }
        if let Some(m) = admitted {
            match mul(&m, &h)
                .and_then(|x| ceil_entries(&x))
                .and_then(|a| ceil_entries(&mul(&Q::from_integer(i128::from(a)), &hr)?))
            {
                Some(c) => recipe.admitted_ceiling = Some(floor.max(c)),
                // Reported once per edge: the active arithmetic already overflowed.
                None if recipe.recommendation.is_none() => {}
                None => overflow(pass),
            }
        }
        if options.automatic_queue_sizing.arrival_evidence == super::ArrivalEvidence::Bounded {
            pass.report(
                codes::RATE_NOMINAL_ONLY_EVIDENCE,
                to,
                Some(port_name),
                format!(
                    "the edge from {}.{} is sized from nominal rate metadata only ({}), but the compile profile requires bounded arrival evidence",
                    graph.operators[fo as usize].name, out_port.name, recipe.rate_source
                ),
                "a larger queue does not prove a maximum arrival process: declare bounded arrival evidence, or compile with `ArrivalEvidence::Nominal`",
            );
        }
    } else if active.is_some()
        && h.is_none()
        && matches!(in_port.mode, InputMode::Window { .. })
        && e.options.queue_depth.is_none()
    {
        pass.report(
            codes::RATE_HORIZON_MISSING,
            to,
            Some(port_name),
            format!(
                "the window input is fed at {} Hz but its consumer's `{}` trigger proves no finite accumulation horizon, so no queue depth covers the window",
                hz(active.as_ref()).unwrap_or_default(),
                consumer.trigger.name()
            ),
            "give the consumer a `trigger = clock(...)` or `trigger = on_arrival(...)` on an input with a declared rate, or give the edge an explicit `queue_depth`",
        );
    }

    let (depth, source) = match e.options.queue_depth {
        Some(0) => {
            pass.report(
                codes::QUEUE_DEPTH_ZERO,
                to,
                Some(port_name),
                "an explicit queue depth of 0 admits nothing".to_owned(),
                "give a depth of at least 1, or leave it out",
            );
            (0, "explicit")
        }
        Some(d) => {
            if d < floor {
                pass.report(
                    codes::RATE_QUEUE_DEPTH_BELOW_HARD_FLOOR,
                    to,
                    Some(port_name),
                    format!("the explicit queue depth {d} is below the edge's semantic hard floor {floor}"),
                    "an explicit depth is exact authority, so it must cover the hard floor (see `hard_floor_contributors()`); raise it, or leave it out for automatic sizing",
                );
            } else if let Some(rec) = recipe.recommendation
                && d < rec
            {
                pass.work.warnings.push(
                    Diagnostic::warning(
                        codes::RATE_QUEUE_DEPTH_BELOW_RECOMMENDATION,
                        format!(
                            "the explicit queue depth {d} is kept, but it is below the nominal recommendation {rec} ({} nominal arrivals × headroom {})",
                            recipe.nominal_arrivals.unwrap_or(0),
                            recipe.headroom_ratio
                        ),
                    )
                    .operator(&consumer.name)
                    .port(port_name)
                    .hint("explicit depth is exact authority; leave it out to size automatically"),
                );
            }
            (d, "explicit")
        }
        None => match recipe.automatic_depth {
            Some(a) => (a, "automatic"),
            None => (options.default_queue_depth.max(1).max(floor), "default"),
        },
    };
    if depth > super::MAX_QUEUE_DEPTH {
        pass.report(
            codes::QUEUE_DEPTH_LIMIT,
            to,
            Some(port_name),
            format!(
                "the {source} queue depth {depth} exceeds holo's limit of {} entries per flow (every entry is preallocated at start)",
                super::MAX_QUEUE_DEPTH
            ),
            "give a depth the pipeline can really hold, or lower the rates or horizon it is derived from",
        );
    }
    recipe.queue_depth = depth;
    recipe.depth_source = source.into();
    let admitted = if source == "automatic" {
        recipe.admitted_ceiling
    } else {
        Some(depth)
    };
    out.depth.push((depth, source));
    out.admitted_depth.push(admitted);
    out.recipes.push(recipe);
}
