//! Running a plan: [`RunSession`].
//!
//! `start` is the cold path: it checks the plan against the graph, materializes every
//! pool, creates every queue, binds every port and runs every operator's `start`, in that
//! order, and fails closed — on any error everything already built is torn down and
//! nothing has run `compute`. Then each execution partition runs on its own thread.
//!
//! The hot path (`compute` → `allocate_tensor` → write → commit → `emit` → `receive`)
//! allocates nothing, walks no graph and never blocks: an idle partition parks its thread
//! and is woken by the queues it reads and the queues it feeds.

pub(crate) mod context;
pub(crate) mod idle;
pub(crate) mod ports;
pub(crate) mod rates;
mod records;
pub(crate) mod run;
mod signal;
pub(crate) use run::fault;
mod stats;
mod streams;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use context::{DeviceAccess, ExecutionContext, LifecycleContext};
pub use ports::{EmitOptions, FrameInfo, Input, Output, PortBinder, Refused};
pub use rates::{
    GenerationPortRate, PortRateView, RateCandidate, RateGeneration, RateGenerationCode,
    RateGenerationSnapshot, RatePort, RejectedRateGeneration, generation_codes,
};

use crate::channel::pool::PoolOwner;
use crate::channel::queue::ErasedEdge;
use crate::graph::Graph;
use crate::plan::ExecutionPlan;
use crate::{Error, ErrorCode, Result};
use run::{OpRuntime, Shared};
use stats::LatencyHistogram;

/// Options of one session.
#[derive(Clone)]
#[non_exhaustive]
pub struct SessionOptions {
    /// Each source operator (one with no connected input) runs at most this many
    /// activations; once every source is done and the graph has drained, the session is
    /// idle (see [`RunSession::wait_idle`]).
    pub max_source_activations: Option<u64>,
    /// The device backend for plans with CUDA streams or device-backed pools (pinned,
    /// managed, CUDA device). One session drives one device; the plan's device ordinals
    /// must match it. A plan that needs a device fails to start without one
    /// (`DeviceUnavailable`).
    pub device: Option<std::sync::Arc<dyn crate::device::DeviceBackend>>,
    /// How long an idle partition thread, and the retirement worker, keep polling —
    /// a short spin, then re-checking with the CPU yielded now and then (a partition
    /// thread yields once every 4 µs, the worker between polls) — before they park.
    /// Work that arrives within it is picked up with no futex wake on the sender's thread
    /// and no wake-up latency on this one; the price is up to this much CPU time after
    /// each burst of work. Zero parks right after the short spin. Default
    /// [`SessionOptions::DEFAULT_IDLE_SPIN`].
    pub idle_spin: std::time::Duration,
    /// The namespace the session serves its topics exported across processes in: the
    /// topic's socket is `holo/<namespace>/<topic>` (abstract), and
    /// [`endpoint_catalog`](RunSession::endpoint_catalog) names it for the importing
    /// process. Two sessions that export the same topic across processes need different
    /// namespaces. Default `"holo"`.
    pub ipc_namespace: String,
    /// How long the start waits for the sessions in other processes whose exports this
    /// session imports (`TopicOptions::from_other_process`) to serve them: `None` (the
    /// default) fails the start at once with `NotFound` when one does not.
    pub wait_for_exporters: Option<std::time::Duration>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            max_source_activations: None,
            device: None,
            idle_spin: Self::DEFAULT_IDLE_SPIN,
            ipc_namespace: "holo".to_owned(),
            wait_for_exporters: None,
        }
    }
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("max_source_activations", &self.max_source_activations)
            .field("idle_spin", &self.idle_spin)
            .field("ipc_namespace", &self.ipc_namespace)
            .field("wait_for_exporters", &self.wait_for_exporters)
            .field(
                "device",
                &self
                    .device
                    .as_ref()
                    .map(|d| (d.backend_kind().name(), d.ordinal())),
            )
            .finish()
    }
}

impl SessionOptions {
    /// The default [`idle_spin`](Self::idle_spin): 50 µs, a few frames' gap of a fast
    /// device pipeline, and 0.3 % of a core at 60 frames per second.
    pub const DEFAULT_IDLE_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

    /// These options serving topics exported across processes in `namespace`.
    #[must_use]
    pub fn with_ipc_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.ipc_namespace = namespace.into();
        self
    }

    /// These options waiting up to `wait` at start for the exporting sessions of the
    /// imports fed by other processes (`wait_for_exporters`).
    #[must_use]
    pub fn with_wait_for_exporters(mut self, wait: std::time::Duration) -> Self {
        self.wait_for_exporters = Some(wait);
        self
    }

    /// Each source runs `n` activations.
    pub fn frames(n: u64) -> Self {
        Self {
            max_source_activations: Some(n),
            ..Self::default()
        }
    }

    /// The same options on `device`.
    pub fn on_device(mut self, device: std::sync::Arc<dyn crate::device::DeviceBackend>) -> Self {
        self.device = Some(device);
        self
    }

    /// These options with each source running at most `n` activations (`None`: no
    /// limit).
    #[must_use]
    pub fn with_max_source_activations(mut self, n: Option<u64>) -> Self {
        self.max_source_activations = n;
        self
    }

    /// These options with `device` (`None`: no device).
    #[must_use]
    pub fn with_device(
        mut self,
        device: Option<std::sync::Arc<dyn crate::device::DeviceBackend>>,
    ) -> Self {
        self.device = device;
        self
    }

    /// These options with `idle_spin`.
    #[must_use]
    pub fn with_idle_spin(mut self, idle_spin: std::time::Duration) -> Self {
        self.idle_spin = idle_spin;
        self
    }
}

/// What one pool looked like when the session ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolReport {
    /// The pool id (`<operator>.<port>`).
    pub pool: String,
    /// Its slot count.
    pub slot_count: u32,
    /// Slots free after teardown (equal to `slot_count`: anything else is a leak, which
    /// `join` reports as an error).
    pub free_at_end: u32,
    /// Loans granted.
    pub loans: u64,
    /// `allocate_tensor` calls refused with `ResourceExhausted`.
    pub exhausted: u64,
}

/// The summary of a session.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunReport {
    /// Frames each source operator (one with no connected input) produced: the entries
    /// it pushed on its busiest output edge or topic subscriber queue (a fan-out counts a
    /// frame once), by name.
    pub produced: Vec<(String, u64)>,
    /// Frames each sink operator (one with no connected output) received: the entries
    /// delivered to it over all its input edges, by name.
    pub received: Vec<(String, u64)>,
    /// Entries evicted by drop-oldest queues plus emits and publishes refused with
    /// `Backpressured`, on flows and on topics' queues (a refusal handed back by
    /// `try_emit` or `try_publish` and sent again counts too).
    pub drops: u64,
    /// Activations per operator, by name.
    pub activations: Vec<(String, u64)>,
    /// Median latency from capture time to the end of a sink's activation (bucket lower
    /// edge, 1/16 resolution).
    pub latency_p50: Option<Duration>,
    /// 99th percentile of the same.
    pub latency_p99: Option<Duration>,
    /// Every pool after teardown.
    pub pools: Vec<PoolReport>,
    /// How long the partitions ran.
    pub elapsed: Duration,
    /// Every topic this session imported across processes (from publishers in other
    /// processes, or from another process's export), as it ended.
    pub ipc_imports: Vec<IpcImportReport>,
}

/// How a topic imported across processes ended ([`RunReport::ipc_imports`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IpcImportReport {
    /// The topic.
    pub topic: String,
    /// Frames whose publisher died before its stream wrote their fence
    /// ([`RunSession::ipc_abandoned_frames`]); 0 for an import from another process's
    /// export (its subscriber counts its own).
    pub abandoned_frames: u64,
    /// An import from another process's export: why it received nothing more before the
    /// session stopped ([`RunSession::ipc_import_end`]): the code and message.
    pub ended: Option<(ErrorCode, String)>,
}

/// A running plan.
pub struct RunSession {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<Vec<OpRuntime>>>,
    /// A session started with `start_stepped`: its operators, run by `step` (through
    /// `&mut self`, so never locked: the mutex keeps the session `Sync`).
    stepped: std::sync::Mutex<Option<run::Stepped>>,
    edges: Vec<Arc<dyn ErasedEdge>>,
    /// The producing and consuming operator of each of `edges`.
    edge_ends: Vec<(usize, usize)>,
    pools: Vec<PoolOwner>,
    streams: streams::Streams,
    retirer: Arc<crate::channel::retire::Retirer>,
    retire_thread: Option<JoinHandle<()>>,
    started: Instant,
    plan: ExecutionPlan,
    /// The topics standalone clients attach to.
    topics: Arc<crate::topic::TopicRegistry>,
    /// The servers of the topics exported across processes.
    ipc: Vec<crate::ipc::Server>,
    /// The namespace they serve in.
    ipc_namespace: String,
    /// `join` or `Drop` ran the teardown.
    torn_down: bool,
    /// The latency recorded before the last `reset_latency`, left out of the report.
    latency_baseline: std::sync::Mutex<Option<LatencyHistogram>>,
    /// The process that started the session: in a fork of it the session's threads do
    /// not exist (`crate::fork`).
    owner: crate::fork::Owner,
}

impl std::fmt::Debug for RunSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSession")
            .field("partitions", &self.threads.len())
            .field("pools", &self.pools.len())
            .finish_non_exhaustive()
    }
}

impl RunSession {
    /// The device the session runs on (`None` for a plan that needs none): the "compute
    /// device" a caller creates its own streams on, in the device's context
    /// ([`DeviceBackend::raw_context`](crate::device::DeviceBackend::raw_context)), to take
    /// the session's tensors with [`Tensor::device_array`](crate::Tensor::device_array).
    pub fn device(&self) -> Option<&std::sync::Arc<dyn crate::device::DeviceBackend>> {
        self.streams.device()
    }

    /// Starts `plan` over the operators of `graph` (which must be the graph the plan was
    /// compiled from). Fails closed: on error nothing keeps running and no `compute` ran.
    pub fn start(
        graph: Graph,
        plan: &ExecutionPlan,
        options: SessionOptions,
    ) -> Result<RunSession> {
        run::start(graph, plan, options, None, false)
    }

    /// Starts `plan` like [`start`](Self::start), but runs no thread of its own: each
    /// [`step`](Self::step) runs one scheduling round of every partition's operators on
    /// the calling thread (copper's `run_one_iteration`), for tests and simulation. The
    /// retirement worker of a device plan still runs on its own thread. Every other
    /// method works as on a threaded session; `wait_idle` sees the state the last step
    /// left.
    pub fn start_stepped(
        graph: Graph,
        plan: &ExecutionPlan,
        options: SessionOptions,
    ) -> Result<RunSession> {
        run::start(graph, plan, options, None, true)
    }

    /// One scheduling round of a session started with
    /// [`start_stepped`](Self::start_stepped), on the calling thread (the thread that
    /// started it: any other is `NotSupported`): every operator whose trigger fires runs
    /// once, partition by partition in plan order. Returns how many activations ran or
    /// were skipped (0: nothing was ready). `Cancelled` once the session is stopping (an
    /// operator failed or asked to stop: `join` returns why); `NotSupported` on a
    /// threaded session.
    pub fn step(&mut self) -> Result<usize> {
        let stepped = self
            .stepped
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match stepped {
            Some(s) => s.step(&self.shared),
            None => Err(Error::new(
                ErrorCode::NotSupported,
                "step() is for a session started with RunSession::start_stepped; this one runs on its partition threads",
            )),
        }
    }

    /// Like [`start`](Self::start), with `candidate` as the first rate generation instead
    /// of the plan's compiled rates. A rejected candidate does not stop the session: it
    /// runs on the plan's compiled rates, nothing is published, and
    /// [`capture_rate_generations`](Self::capture_rate_generations) reports the rejection.
    pub fn start_with_rates(
        graph: Graph,
        plan: &ExecutionPlan,
        options: SessionOptions,
        candidate: RateCandidate,
    ) -> Result<RunSession> {
        run::start(graph, plan, options, Some(candidate), false)
    }

    /// Owning evidence of the published rate generation and the latest rejected
    /// candidate, each independently absent.
    pub fn capture_rate_generations(&self) -> RateGenerationSnapshot {
        self.shared.rates.snapshot()
    }

    /// Proposes new active nominal rates within the plan's admitted domain. Published when
    /// every rate is valid, admitted, and every rate-sized edge's arrivals still fit its
    /// compiled depth (nothing is resized); otherwise recorded as the latest rejection and
    /// returned as `InvalidArgument` naming the stable code. Returns the published
    /// generation's number.
    pub fn propose_rates(&self, candidate: &RateCandidate) -> Result<u64> {
        self.shared.rates.propose(&self.plan, candidate)
    }

    /// Asks every partition to stop after the activation in progress.
    pub fn stop(&self) {
        self.shared.request_stop();
    }

    /// Whether the session has stopped on its own (an operator's error or panic, or
    /// `ExecutionContext::request_stop`).
    pub fn is_stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// Waits until the session is idle — every source has run its
    /// `max_source_activations`, no activation is running, no entry is queued on any edge
    /// or for an attached topic subscriber, and no device slot is still retiring — or the
    /// session stops, or `timeout` passes (`Duration::MAX` waits without a deadline).
    /// Returns whether the session became idle. Once it returns `true`, every frame the
    /// sources produced has been received (or dropped by a drop-oldest queue, counted in
    /// the report): a subscriber that stays attached without receiving keeps the session
    /// from being idle — and so does a subscriber in another process until it released
    /// every tensor it was sent, and a frame a publisher in another process committed
    /// until it is queued for the importing input.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return false;
            }
            if self.is_idle() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// One consistent look at the session: no activation ran across the look, none is
    /// running, the sources are done, every queue is empty and no slot is retiring.
    ///
    /// An activation counts itself begun before it can pop anything and finished after
    /// everything it pushed, and a pop or push is a release on the queue that the reads
    /// of `len` acquire: so an entry popped by an activation that is still running shows
    /// as `begun > finished`, one popped by an activation begun during the look changes
    /// `begun`, and one pushed by a finished activation is in a queue or was popped by a
    /// begun one.
    fn is_idle(&self) -> bool {
        let begun = self.shared.activations_started();
        let finished = self.shared.activations_finished();
        if begun != finished || !self.shared.sources_done() {
            return false;
        }
        if self.edges.iter().any(|e| e.len() != 0)
            || self.topics.queued()
            || self.retirer.outstanding() != 0
            || self.ipc.iter().any(|s| s.outstanding() != 0)
        {
            return false;
        }
        self.shared.activations_started() == begun
    }

    /// Stops the session, joins its threads, runs every operator's `stop`, drops every
    /// queued entry and checks that every slot went back to its pool. Returns the run
    /// summary, or the first error an operator returned (or its panic, as `Internal`),
    /// with the operator named in its location.
    ///
    /// Dropping a session without `join` runs the same teardown (every `stop` runs, the
    /// streams are quiesced) and reports the error `join` would have returned: on stderr,
    /// or as a `tracing` error event with the feature `tracing`.
    ///
    /// In a fork of the process that started the session (`fork()` after `start`),
    /// `join` returns `NotSupported` at once, and neither it nor `Drop` touches the
    /// session's threads, streams or pools: they are the parent's, and the fork leaks its
    /// copy of them instead of joining threads that do not exist there (which aborted it).
    pub fn join(mut self) -> Result<RunReport> {
        self.teardown()
    }

    /// The teardown `join` and `Drop` share; runs once.
    fn teardown(&mut self) -> Result<RunReport> {
        if std::mem::replace(&mut self.torn_down, true) {
            return Err(Error::new(
                ErrorCode::Cancelled,
                "the session was already torn down",
            ));
        }
        if let Err(e) = self.owner.check("this RunSession") {
            self.abandon_in_fork();
            return Err(e);
        }
        // No client attaches, publishes or receives from here on; the subscribers in other
        // processes are told the topic ends, and the tensors they held are dropped here.
        self.topics.close();
        for server in &mut self.ipc {
            server.stop();
        }
        self.shared.request_stop();
        let elapsed = self.started.elapsed();
        let mut ops: Vec<OpRuntime> = Vec::new();
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(o) => ops.extend(o),
                Err(_) => self.shared.fail(Error::new(
                    ErrorCode::Internal,
                    "a partition thread panicked outside an operator",
                )),
            }
        }
        let stepped = self
            .stepped
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(stepped) = stepped {
            ops.extend(stepped.finish());
        }
        ops.sort_by_key(|o| o.index);
        for o in ops.iter_mut().rev() {
            run::stop_operator(&self.shared, o);
        }
        let activations = ops
            .iter()
            .map(|o| (o.name.clone(), o.activations))
            .collect();
        let counted = |o: &OpRuntime, out: bool| {
            let ends = self.edges.iter().zip(&self.edge_ends);
            let mine = ends.filter(|(_, (from, to))| *(if out { from } else { to }) == o.index);
            let counts = mine
                .map(|(e, _)| {
                    let c = e.counters();
                    if out { &c.pushed } else { &c.delivered }.load(Ordering::Relaxed)
                })
                // What it pushed to its exported topics' subscribers counts too.
                .chain(out.then(|| self.topics.pushed_by(o.index)).flatten());
            (
                o.name.clone(),
                if out {
                    counts.max().unwrap_or(0)
                } else {
                    counts.sum()
                },
            )
        };
        let produced = ops
            .iter()
            .filter(|o| o.is_source)
            .map(|o| counted(o, true))
            .collect();
        let received = ops
            .iter()
            .filter(|o| o.is_sink)
            .map(|o| counted(o, false))
            .collect();
        drop(ops);
        // What subscribers' queues still hold (the producers have stopped).
        let mut drops = self.topics.drain();
        for e in &self.edges {
            let c = e.counters();
            drops += c.evicted.load(Ordering::Relaxed) + c.backpressured.load(Ordering::Relaxed);
            e.clear();
        }
        self.edges.clear();
        // Device slots retire asynchronously. Close the retirer first: a slot released
        // from now on (a tensor kept past the session) is returned by its releasing
        // thread, recording nothing on the streams destroyed below. Then wait (polling,
        // bounded) for the worker to return every slot it was handed, quiesce the streams
        // and stop the worker. (A slot still held by a tensor kept past the session is
        // not waited for: it is reported below.)
        self.retirer.close();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.retirer.outstanding() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        match self.streams.synchronize() {
            Ok(()) => self.retirer.mark_quiesced(),
            Err(e) => self.shared.fail(e),
        }
        // The servers' fence words are registered with the device until they drop: after
        // the streams that write them ran everything.
        let ipc_imports = self
            .ipc
            .iter()
            .filter_map(crate::ipc::Server::import_report)
            .collect();
        self.ipc.clear();
        self.retirer.shutdown();
        if self.retirer.outstanding() == 0
            && let Some(t) = self.retire_thread.take()
        {
            let _ = t.join();
        }
        let mut pools = Vec::with_capacity(self.pools.len());
        let mut leak = None;
        for p in &self.pools {
            let free = p.free_slots();
            if free != p.slot_count && leak.is_none() {
                // Held by handles kept past the session (a subscriber's tensor, a
                // DeviceArray, a publisher's loan): the caller's, not a fault of holo's.
                leak = Some(Error::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "pool {} has {} of {} slots still held after teardown, by tensors, arrays or loans kept past the session: each returns its slot when it drops, and the pool is freed after the last",
                        p.name,
                        p.slot_count - free,
                        p.slot_count
                    ),
                ));
            }
            pools.push(PoolReport {
                pool: p.name.clone(),
                slot_count: p.slot_count,
                free_at_end: free,
                loans: p.counters.loans.load(Ordering::Relaxed),
                exhausted: p.counters.exhausted.load(Ordering::Relaxed),
            });
        }
        // Free what the session made now, so that a device refusing to free or destroy
        // something is reported here: the pools (their memory and events, unless a
        // tensor kept past the session still holds one), then the streams.
        self.pools.clear();
        if let Err(e) = self.streams.destroy() {
            self.shared.fail(e);
        }
        if let Some(e) = self.retirer.take_error() {
            self.shared.fail(e);
        }
        if let Some(e) = self.shared.take_error() {
            return Err(e);
        }
        if let Some(e) = leak {
            return Err(e);
        }
        let mut latency = LatencyHistogram::merged(self.shared.signals.iter().map(|s| &s.latency));
        if let Some(base) = self
            .latency_baseline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            latency = latency.minus(base);
        }
        Ok(RunReport {
            produced,
            received,
            drops,
            activations,
            latency_p50: latency.quantile(0.50),
            latency_p99: latency.quantile(0.99),
            pools,
            elapsed,
            ipc_imports,
        })
    }

    /// Leaves the latency recorded so far out of the run report's p50 and p99 (after a
    /// warm-up, say): the report's latency covers the sink activations that end after
    /// this call. Allocation-free on the partitions' side; the snapshot is taken here.
    pub fn reset_latency(&self) {
        let now = LatencyHistogram::merged(self.shared.signals.iter().map(|s| &s.latency));
        *self
            .latency_baseline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(now);
    }

    /// How many clients are attached to topic `topic` now, and how many its plan record
    /// declares: `(attached, declared)` subscribers of an exported topic (attached:
    /// receiving what the output emits — a subscriber in another process counts once its
    /// handshake has ended), publishers of an imported one. `None` for a topic the plan
    /// does not have.
    pub fn topic_attachments(&self, topic: &str) -> Option<(u32, u32)> {
        self.topics.attachments(topic)
    }

    /// The endpoint catalog of the topics this session serves to other processes, in its
    /// namespace ([`ExecutionPlan::endpoint_catalog`] with
    /// [`SessionOptions::ipc_namespace`]): write it where the importing process reads it.
    pub fn endpoint_catalog(&self) -> crate::ipc::EndpointCatalog {
        self.plan.endpoint_catalog(&self.ipc_namespace)
    }

    /// Frames of `topic`, imported across processes, whose publisher's process died
    /// before its stream wrote their fence: the seat abandoned the fence (the session's
    /// stream waits for nothing that will not come) and their bytes may be incomplete.
    /// `None` when the session does not import `topic` across processes (docs/IPC.md,
    /// "Publishers in other processes").
    pub fn ipc_abandoned_frames(&self, topic: &str) -> Option<u64> {
        self.ipc
            .iter()
            .filter_map(crate::ipc::Server::abandoned_frames)
            .find(|(t, _)| *t == topic)
            .map(|(_, n)| n)
    }

    /// Why the import `topic`, fed by another process's export
    /// (`TopicOptions::from_other_process`), receives nothing more: `Cancelled` once the
    /// exporting session stopped serving it, `PeerLost` once its process died; `None`
    /// while it is fed, and for a topic that is no such import. The session goes on with
    /// its other topics (docs/IPC.md, "Two sessions").
    pub fn ipc_import_end(&self, topic: &str) -> Option<Error> {
        self.ipc
            .iter()
            .filter_map(crate::ipc::Server::import_end)
            .find(|(t, _)| *t == topic)
            .and_then(|(_, e)| e)
    }

    /// The session's topics, for the clients that attach to them.
    pub(crate) fn topic_registry(&self) -> &Arc<crate::topic::TopicRegistry> {
        &self.topics
    }

    /// Slots currently free in pool `<operator>.<port>` (an imported topic's pool:
    /// `topic:<name>`).
    pub fn pool_free_slots(&self, pool: &str) -> Option<u32> {
        self.pools
            .iter()
            .find(|p| p.name == pool)
            .map(|p| p.free_slots())
    }
}

impl RunSession {
    /// In a fork of the process that started the session: leaks everything the session
    /// owns instead of dropping it. Its threads are the parent's (joining one panics: the
    /// fork has no such thread), its streams and device memory are the parent's device
    /// objects, and its pools' slots may still be queued to the parent's retirement
    /// worker: none of it may run here. The fork's memory is a copy of the parent's, so
    /// the leak loses nothing the parent has.
    fn abandon_in_fork(&mut self) {
        std::mem::forget(std::mem::take(&mut self.threads));
        std::mem::forget(self.retire_thread.take());
        std::mem::forget(std::mem::take(&mut self.edges));
        std::mem::forget(std::mem::take(&mut self.pools));
        std::mem::forget(std::mem::take(&mut self.ipc));
        std::mem::forget(std::mem::replace(
            &mut self.streams,
            streams::Streams::none(),
        ));
        std::mem::forget(
            self.stepped
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        // The last strong counts stay: what they own is never dropped.
        std::mem::forget(Arc::clone(&self.shared));
        std::mem::forget(Arc::clone(&self.retirer));
        std::mem::forget(Arc::clone(&self.topics));
    }
}

impl Drop for RunSession {
    /// The teardown of [`join`](RunSession::join): every operator's `stop` runs and the
    /// streams are quiesced; the error `join` would have returned goes to stderr.
    fn drop(&mut self) {
        if self.torn_down {
            return;
        }
        if let Err(e) = self.teardown() {
            #[cfg(feature = "tracing")]
            tracing::error!(error = %e, "a RunSession dropped without join ended with an error");
            #[cfg(not(feature = "tracing"))]
            eprintln!("holo: a RunSession dropped without join ended with an error: {e}");
        }
    }
}
