//! A topic exported across processes from a pass-through output (issue 15; docs/IPC.md,
//! "Foreign tensors across processes"): its tensors live in pools no other process maps —
//! a foreign DLPack import, a host vector — so each one emitted is copied once into the
//! topic's boundary pool, and every subscriber in another process receives that copy.
//!
//! Provoked here: the plan records the boundary (`host_contract` or `device_contract`, the
//! pool `boundary:<name>` sized per subscriber) and prints it, and a boundary without a
//! bound is `TOPIC_BOUNDARY_UNBOUNDED`; foreign host tensors reach two subscriber processes
//! with their bytes, one copy per frame; foreign device tensors filled on a stream after a
//! delay reach a subscriber process behind their readiness (a copy made before it would
//! hold the poison) through a device contract, and are materialized on the host through a
//! host contract; an uncontracted foreign device tensor is refused at the boundary
//! (`ProtocolError`), and so is a tensor past the boundary's bound (`InvalidArgument`),
//! nothing published. On CUDA device 0 where it opens, else the
//! software device (whose `DeviceIpc` stands in for CUDA's).

#[path = "common/ipc_peer.rs"]
mod ipc_peer;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use holo_runtime::device::{DeviceBackend, DeviceId};
use holo_runtime::ipc::{ProcessSubscriber, ProcessSubscriberOptions};
use holo_runtime::plan::{ExecutionPlan, TopicBoundary};
use holo_runtime::{
    CompileOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph, MemoryKind, Operator,
    Output, Result, SessionOptions, Tensor, TopicOptions, compile, operator,
};
use holo_tests::foreign::foreign_device_bytes;
use holo_tests::ipc_frames::{check_device_frame, cuda_or_software, device_fill, fill_frame};
use ipc_peer::{Peer, WAIT, catalog_path, eventually, serve_in};

const POISON: u8 = 0;

/// What a source did: frames emitted, and the first refusal.
#[derive(Default)]
struct Emitted {
    frames: AtomicU64,
    refused: Mutex<Option<(ErrorCode, String)>>,
}

impl Emitted {
    fn note(&self, r: Result<()>) {
        match r {
            Ok(()) => {
                self.frames.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.refused
                    .lock()
                    .unwrap()
                    .get_or_insert((e.code(), e.message().to_owned()));
            }
        }
    }
}

/// Emits frame k as a foreign host tensor (`Tensor::from_host_vec`, `fill_frame`) on a
/// pass-through output, while `go` is set, up to `limit`.
#[operator]
struct HostSource {
    #[output(storage = pass_through, memory = host, dtype = u8, rank = 1)]
    out: Output<Tensor>,
    go: Arc<AtomicBool>,
    limit: u64,
    stats: Arc<Emitted>,
}

impl Operator for HostSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let k = self.stats.frames.load(Ordering::Relaxed);
        if !self.go.load(Ordering::Acquire) || k >= self.limit {
            std::thread::sleep(Duration::from_micros(200));
            return Ok(());
        }
        let mut bytes = vec![0u8; 4096];
        fill_frame(k, &mut bytes);
        let t = Tensor::from_host_vec(&[4096], DType::U8, bytes)?;
        match self.out.emit(t, EmitOptions::default().with_frame(k)) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            r => {
                self.stats.note(r);
                Ok(())
            }
        }
    }
}

/// Emits frame k as a foreign device tensor (a DLPack import of a buffer "another
/// library" allocates, poisoned, then filled with `device_fill(k)` on that library's own
/// stream after `delay`), with its readiness stream set to that stream (`contract`) or
/// not, on a pass-through output in `$kind` memory: a copy not ordered behind the
/// readiness holds the poison. (`scratch`, bound to the device and never written, puts the operator on a
/// stream when `out` is host memory.)
macro_rules! device_source {
    ($name:ident, $kind:ident) => {
        #[operator]
        struct $name {
            #[output(storage = pass_through, memory = $kind, dtype = u8, rank = 1)]
            out: Output<Tensor>,
            #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 16)]
            scratch: Output<Tensor>,
            go: Arc<AtomicBool>,
            limit: u64,
            bytes: usize,
            delay: Duration,
            contract: bool,
            stats: Arc<Emitted>,
            /// The other library's stream.
            foreign: Option<holo_runtime::device::StreamHandle>,
        }

        impl Operator for $name {
            fn start(&mut self, ctx: &mut holo_runtime::LifecycleContext<'_>) -> Result<()> {
                self.foreign = Some(ctx.cuda()?.backend().create_stream()?);
                Ok(())
            }

            fn stop(&mut self, ctx: &mut holo_runtime::LifecycleContext<'_>) -> Result<()> {
                if let Some(s) = self.foreign.take() {
                    let backend = ctx.cuda()?.backend();
                    backend.synchronize_stream(s)?;
                    backend.destroy_stream(s)?;
                }
                Ok(())
            }

            fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
                let k = self.stats.frames.load(Ordering::Relaxed);
                let refused = self.stats.refused.lock().unwrap().is_some();
                if !self.go.load(Ordering::Acquire) || k >= self.limit || refused {
                    std::thread::sleep(Duration::from_micros(200));
                    return Ok(());
                }
                let device = ctx.device().cloned().expect("a device partition");
                let stream = self.foreign.expect("made in start");
                let (dl, _) = foreign_device_bytes(
                    &device,
                    self.bytes,
                    stream,
                    self.delay,
                    POISON,
                    device_fill(k),
                );
                let t = Tensor::from_dlpack(dl, Some(&device))?;
                if self.contract {
                    t.set_readiness_stream(stream)?;
                }
                match self.out.emit(t, EmitOptions::default().with_frame(k)) {
                    Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
                    r => {
                        self.stats.note(r);
                        Ok(())
                    }
                }
            }
        }
    };
}

device_source!(DeviceSource, cuda_device);
device_source!(MaterializedSource, host);

/// Depth 2, 2 holds per subscriber, `subscribers` of them, frames of 4 MiB at most.
fn options(subscribers: u32) -> TopicOptions {
    TopicOptions::DEFAULT
        .with_depth(2)
        .with_holds_per_subscriber(2)
        .with_subscribers(subscribers)
        .with_max_bytes(4 << 20)
        .across_processes()
}

/// A graph of `source` (operator `camera`) exporting "cam" with `topic`, its outputs
/// `bound` bound to CUDA device 0, and its plan.
fn exported<O: Operator>(
    source: O,
    port: impl FnOnce(&O::Ports) -> holo_runtime::OutPort<Tensor>,
    topic: TopicOptions,
    bound: &[&str],
) -> (
    Graph,
    std::result::Result<ExecutionPlan, holo_runtime::Diagnostics>,
) {
    let mut graph = Graph::new();
    let h = graph.add_operator_with_defaults("camera", source).unwrap();
    graph.export_topic(port(&h), "cam", topic);
    let mut o = CompileOptions::default();
    for p in bound {
        o.deployment
            .bind_tensor_output_device("camera", p, DeviceId::cuda(0));
    }
    let plan = compile(&graph, o);
    (graph, plan)
}

fn host_source(limit: u64) -> (HostSource, Arc<AtomicBool>, Arc<Emitted>) {
    let (go, stats) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Emitted::default()),
    );
    let s = HostSource {
        out: Output::default(),
        go: Arc::clone(&go),
        limit,
        stats: Arc::clone(&stats),
    };
    (s, go, stats)
}

#[test]
fn the_plan_records_and_prints_each_boundary_and_refuses_one_without_a_bound() {
    let (source, _, _) = host_source(1);
    let (_, plan) = exported(source, |h| h.out, options(2), &[]);
    let plan = plan.expect("a pass-through export across processes compiles");
    let t = &plan.topics()[0];
    assert_eq!(t.boundary, Some(TopicBoundary::HostContract));
    assert_eq!(t.pool.as_deref(), Some("boundary:cam"));
    let pool = plan
        .tensor_allocations()
        .iter()
        .find(|a| a.pool == "boundary:cam")
        .expect("the boundary pool");
    // Per subscriber its depth and holds (2 × (2 + 2)), the copy in flight, retirement.
    assert_eq!(
        (pool.slot_count, pool.per_slot_bytes, pool.memory_kind),
        (10, 4 << 20, MemoryKind::Host)
    );
    let text = plan.render_human();
    assert!(
        text.contains("boundary host_contract (each tensor copied once into boundary:cam)"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    assert_eq!(json["topics"][0]["boundary"], "host_contract");
    assert!(plan.dot().contains("boundary host_contract"));
    // A device contract for device memory.
    let (go, stats) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Emitted::default()),
    );
    let device = DeviceSource {
        out: Output::default(),
        scratch: Output::default(),
        go,
        limit: 0,
        bytes: 256,
        delay: Duration::ZERO,
        contract: true,
        stats,
        foreign: None,
    };
    let (_, plan) = exported(device, |h| h.out, options(1), &["out", "scratch"]);
    let plan = plan.expect("it compiles");
    assert_eq!(
        plan.topics()[0].boundary,
        Some(TopicBoundary::DeviceContract)
    );
    // No bound: the boundary pool cannot be sized.
    let (source, _, _) = host_source(1);
    let unbounded = TopicOptions::DEFAULT.across_processes();
    let (_, plan) = exported(source, |h| h.out, unbounded, &[]);
    let d = plan.map(|_| ()).unwrap_err();
    let found: Vec<_> = d
        .with_code(holo_runtime::codes::TOPIC_BOUNDARY_UNBOUNDED)
        .collect();
    assert_eq!((found.len(), d.items.len()), (1, 1), "{d}");
    assert!(found[0].message.contains("no bound"), "{d}");
    // In this process, no boundary: the tensors are shared as they are.
    let (source, _, _) = host_source(1);
    let (_, plan) = exported(source, |h| h.out, TopicOptions::DEFAULT, &[]);
    assert_eq!(plan.unwrap().topics()[0].boundary, None);
}

#[test]
fn foreign_host_tensors_cross_a_host_contract_boundary_to_every_subscriber() {
    let test = "boundary_host";
    let n = 500;
    let (source, go, stats) = host_source(n);
    let (graph, plan) = exported(source, |h| h.out, options(2), &[]);
    let plan = plan.unwrap();
    let (session, slots) = serve_in(
        test,
        graph,
        &plan,
        SessionOptions::default(),
        "boundary:cam",
    );
    let catalog = catalog_path(test);
    let mut peers: Vec<Peer> = (0..2)
        .map(|_| {
            Peer::spawn(&[
                "subscribe",
                catalog.to_str().unwrap(),
                "cam",
                &n.to_string(),
            ])
        })
        .collect();
    for p in &mut peers {
        p.expect("attached");
    }
    eventually("both subscribers are attached", || {
        session.topic_attachments("cam") == Some((2, 2))
    });
    go.store(true, Ordering::Release);
    for p in &mut peers {
        assert_eq!(
            p.expect("ok"),
            n.to_string(),
            "every frame's bytes are its own"
        );
        p.wait_success();
    }
    ends_clean(session, &stats, slots);
}

/// A device source's graph, session and stats, serving "cam" in `test`'s namespace.
/// The source emitted everything without a refusal, every boundary slot comes back, and
/// the session stops and joins cleanly.
fn ends_clean(session: holo_runtime::RunSession, stats: &Emitted, slots: u32) {
    assert_eq!(*stats.refused.lock().unwrap(), None);
    eventually("every boundary slot is back", || {
        session.pool_free_slots("boundary:cam") == Some(slots)
    });
    session.stop();
    session.join().expect("the session ends cleanly");
}

fn device_session(
    test: &str,
    device: &Arc<dyn DeviceBackend>,
    host_contract: bool,
    contract: bool,
    limit: u64,
    bytes: usize,
) -> (holo_runtime::RunSession, Arc<AtomicBool>, Arc<Emitted>, u32) {
    let (go, stats) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Emitted::default()),
    );
    let delay = Duration::from_micros(200);
    let (graph, plan) = if host_contract {
        let s = MaterializedSource {
            out: Output::default(),
            scratch: Output::default(),
            go: Arc::clone(&go),
            limit,
            bytes,
            delay,
            contract,
            stats: Arc::clone(&stats),
            foreign: None,
        };
        exported(s, |h| h.out, options(1), &["scratch"])
    } else {
        let s = DeviceSource {
            out: Output::default(),
            scratch: Output::default(),
            go: Arc::clone(&go),
            limit,
            bytes,
            delay,
            contract,
            stats: Arc::clone(&stats),
            foreign: None,
        };
        exported(s, |h| h.out, options(1), &["out", "scratch"])
    };
    let options = SessionOptions::default().on_device(Arc::clone(device));
    let (session, slots) = serve_in(test, graph, &plan.unwrap(), options, "boundary:cam");
    (session, go, stats, slots)
}

#[test]
fn foreign_device_tensors_cross_a_device_contract_boundary_behind_their_readiness() {
    let device = cuda_or_software();
    let test = "boundary_device";
    let n = 200;
    for bytes in [256, 64 << 10] {
        let (session, go, stats, slots) = device_session(test, &device, false, true, n, bytes);
        let catalog = catalog_path(test);
        let mut peer = Peer::spawn(&[
            "subscribe-device",
            catalog.to_str().unwrap(),
            "cam",
            &n.to_string(),
        ]);
        peer.expect("attached");
        go.store(true, Ordering::Release);
        assert_eq!(
            peer.expect("ok"),
            format!("{n} abandoned 0"),
            "{bytes} B: every frame's bytes are its own (a copy before the readiness holds the poison)"
        );
        peer.wait_success();
        ends_clean(session, &stats, slots);
    }
}

#[test]
fn a_foreign_device_tensor_is_materialized_once_through_a_host_contract_boundary() {
    let device = cuda_or_software();
    let test = "boundary_materialized";
    let n = 100;
    let (session, go, stats, _) = device_session(test, &device, true, true, n, 4096);
    let catalog = session.endpoint_catalog();
    assert_eq!(catalog.topic("cam").unwrap().memory_kind, "host");
    let mut sub = ProcessSubscriber::attach(&catalog, "cam", ProcessSubscriberOptions::DEFAULT)
        .expect("a host subscriber attaches");
    go.store(true, Ordering::Release);
    for k in 0..n {
        let (t, info) = sub.receive_with_info(WAIT).unwrap().expect("a frame");
        assert_eq!((info.frame, t.memory_kind()), (k, MemoryKind::Host));
        check_device_frame(k, t.data().unwrap()).unwrap();
    }
    assert_eq!(*stats.refused.lock().unwrap(), None);
    drop(sub);
    session.stop();
    session.join().expect("the session ends cleanly");
}

#[test]
fn an_uncontracted_foreign_device_tensor_is_refused_at_the_boundary() {
    let device = cuda_or_software();
    let test = "boundary_uncontracted";
    let (session, go, stats, slots) = device_session(test, &device, false, false, 1, 256);
    let catalog = session.endpoint_catalog();
    let sub = ProcessSubscriber::attach_with_device(
        &catalog,
        "cam",
        ProcessSubscriberOptions::DEFAULT,
        Arc::clone(&device),
    )
    .expect("the subscriber attaches");
    refused_and_nothing_published(
        session,
        sub,
        &go,
        &stats,
        slots,
        (ErrorCode::ProtocolError, "set_readiness_stream"),
    );
}

#[test]
fn a_tensor_past_the_boundary_bound_is_refused_and_nothing_published() {
    let test = "boundary_too_large";
    let (source, go, stats) = host_source(1);
    let bounded = TopicOptions::DEFAULT
        .with_max_bytes(1024)
        .across_processes();
    let (graph, plan) = exported(source, |h| h.out, bounded, &[]);
    let (session, slots) = serve_in(
        test,
        graph,
        &plan.unwrap(),
        SessionOptions::default(),
        "boundary:cam",
    );
    let catalog = session.endpoint_catalog();
    let sub = ProcessSubscriber::attach(&catalog, "cam", ProcessSubscriberOptions::DEFAULT)
        .expect("a host subscriber attaches");
    refused_and_nothing_published(
        session,
        sub,
        &go,
        &stats,
        slots,
        (ErrorCode::InvalidArgument, "per-slot bound"),
    );
}

/// Lets the source go and checks that its emit is refused with `code` (its message
/// naming `needle`) and nothing published: the subscriber receives nothing, every
/// boundary slot is back; then ends the session.
fn refused_and_nothing_published(
    session: holo_runtime::RunSession,
    mut sub: ProcessSubscriber,
    go: &AtomicBool,
    stats: &Emitted,
    slots: u32,
    (code, needle): (ErrorCode, &str),
) {
    go.store(true, Ordering::Release);
    eventually("the emit is refused", || {
        stats.refused.lock().unwrap().is_some()
    });
    let (got, message) = stats.refused.lock().unwrap().clone().unwrap();
    assert_eq!(got, code, "{message}");
    assert!(message.contains(needle), "{message}");
    assert_eq!(
        sub.receive(Duration::from_millis(100)).unwrap().map(|_| ()),
        None
    );
    assert_eq!(session.pool_free_slots("boundary:cam"), Some(slots));
    assert_eq!(stats.frames.load(Ordering::Relaxed), 0);
    drop(sub);
    session.stop();
    session.join().expect("the session ends cleanly");
}
