//! The host chain against copper-rs (`cu29` 1.3.1), its closest Rust peer, in the same
//! process (DESIGN.md, "Performance method").
//!
//! Both run a 4-stage chain on one thread: source → forward → forward → sink, once with a
//! `u64` payload and once with a 256-byte payload moved by value ([`Bytes256`]).
//!
//! - **holo, threaded**: one partition, `Output<P>`/`Input<P>` on default connections,
//!   `SessionOptions::frames`, on its partition thread; the sink times its own chunks of
//!   frames on that thread.
//! - **holo, stepped**: the same graph started with `RunSession::start_stepped`, one
//!   `step()` per frame on the bench's thread (copper's way), timed in the same chunks
//!   around the loop.
//! - **copper**: `#[copper_runtime]` over `benches/copper_chain.ron`, logging off
//!   (`enable_task_logging: false, enable_keyframe_logging: false`), `run_one_iteration`
//!   on the bench's thread, timed in the same chunks.
//!
//! Reported, for each payload:
//! - **per frame**: after `WARMUP` frames, `FRAMES` frames in chunks of `CHUNK`; a run's
//!   figure is its median chunk over `CHUNK` (on this shared 2-core machine a whole
//!   window's mean also carries every preemption of the thread).
//! - **p50 from the end of the previous frame**: holo's own capture → end-of-sink latency
//!   (`RunReport::latency_p50`; the stepped run leaves the warm-up out with
//!   `reset_latency`, the threaded one keeps it, 1 % of its frames): a source that
//!   emits without a capture time is stamped with the clock reading that ended the
//!   partition's previous activation (the sink's), so in this chain it is the
//!   sink-to-sink cycle. Copper's: the sink reads the robot clock as it ends, and the
//!   figure is the distance to its previous reading.
//! - **p50 source start → sink end** (copper only): the source stamps its message's time
//!   of validity with the start time copper's runtime recorded for it (no clock read of
//!   its own), the forwarders carry it, the sink reads the clock as it ends. Holo has no
//!   stamp at a source's start that costs no clock read, so this window is copper's
//!   alone; it leaves out copper's per-iteration work outside the tasks.
//!
//! Copper's latency samples go through the same 1/16 log-linear buckets as holo's
//! histogram (the lower edge is reported), so the p50s have one resolution. Each figure
//! is the median of `ROUNDS` interleaved rounds of one run of each (rotating which runs
//! first); each ratio (holo over copper) is the median of the rounds' ratios.
//!
//! ```text
//! cargo bench -p holo-runtime --bench copper_chain
//! cargo bench -p holo-runtime --bench copper_chain -- holo-u64   # one side alone (profiling)
//! ```

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    reason = "bench arithmetic on nanosecond timings and frame counts"
)]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cu29::prelude::RobotClock;

/// Frames before the timed window (steady state: caches warm, the partition spinning).
const WARMUP: u64 = 1_000;
/// Frames per timed chunk.
const CHUNK: u64 = 1_000;
/// Frames in the timed window: 100 chunks.
const FRAMES: u64 = 100 * CHUNK;
/// Interleaved rounds (one run of each side) per payload.
const ROUNDS: usize = 15;

/// A payload both frameworks carry: made by the source from its frame count, read back
/// by the sink.
trait Payload: Clone + Send + 'static {
    fn make(n: u64) -> Self;
    fn probe(&self) -> u64;
}

impl Payload for u64 {
    #[inline]
    fn make(n: u64) -> Self {
        n
    }
    #[inline]
    fn probe(&self) -> u64 {
        *self
    }
}

/// 256 bytes moved by value through both pipelines. A newtype because copper's payload
/// contract (`CuMsgPayload`) asks for serde, which `[u8; 256]` lacks.
#[derive(Clone, Copy, Debug)]
struct Bytes256([u8; 256]);

impl Default for Bytes256 {
    fn default() -> Self {
        Self([0; 256])
    }
}

impl Payload for Bytes256 {
    #[inline]
    fn make(n: u64) -> Self {
        let mut b = [0u8; 256];
        b[..8].copy_from_slice(&n.to_le_bytes());
        Self(b)
    }
    #[inline]
    fn probe(&self) -> u64 {
        u64::from(self.0[0]) + u64::from(self.0[255])
    }
}

impl serde::Serialize for Bytes256 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Bytes256 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = <Vec<u8>>::deserialize(d)?;
        v.try_into()
            .map(Self)
            .map_err(|_| serde::de::Error::custom("expected 256 bytes"))
    }
}

impl cu29::bincode::Encode for Bytes256 {
    fn encode<E: cu29::bincode::enc::Encoder>(
        &self,
        e: &mut E,
    ) -> std::result::Result<(), cu29::bincode::error::EncodeError> {
        self.0.encode(e)
    }
}

impl<C> cu29::bincode::Decode<C> for Bytes256 {
    fn decode<D: cu29::bincode::de::Decoder<Context = C>>(
        d: &mut D,
    ) -> std::result::Result<Self, cu29::bincode::error::DecodeError> {
        <[u8; 256]>::decode(d).map(Self)
    }
}

/// The lower edge of `ns`'s bucket in holo's latency histogram (log-linear, 16 sub-buckets
/// per power of two), so copper's p50s are read at the resolution of `RunReport`'s.
fn bucket_lower(ns: u64) -> u64 {
    if ns < 16 {
        return ns;
    }
    let log = ns.ilog2();
    ns & !((1u64 << (log - 4)) - 1)
}

/// The p50 of `v`, at the histogram's resolution.
fn p50_bucketed(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    bucket_lower(v[v.len() / 2]) as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per frame of a run: its median chunk over `CHUNK`.
fn per_frame(chunks: &[Duration]) -> f64 {
    assert_eq!(chunks.len() as u64, FRAMES / CHUNK);
    median(chunks.iter().map(|d| d.as_nanos() as f64).collect()) / CHUNK as f64
}

/// Waits without spinning: the machine may have as few cores as the pipeline has
/// threads, and a spinning observer would steal one from them.
fn wait(counter: &AtomicU64, n: u64) {
    while counter.load(Ordering::Acquire) < n {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// One process-wide robot clock: building one calibrates it for 10 ms.
fn robot_clock() -> RobotClock {
    static CLOCK: OnceLock<RobotClock> = OnceLock::new();
    CLOCK.get_or_init(RobotClock::new).clone()
}

/// One run's figures, in ns.
#[derive(Clone, Copy)]
struct Figures {
    per_frame: f64,
    /// p50 from the end of the previous frame to the end of the sink.
    p50_cycle: f64,
    /// p50 from the source's start to the end of the sink (copper only).
    p50_source: Option<f64>,
}

/// Both chains for one payload type: holo's operators and graph, copper's tasks and
/// application (its config names the tasks and the message type).
macro_rules! chain {
    ($module:ident, $payload:ty, $config:tt) => {
        mod $module {
            use std::sync::Arc;
            use std::sync::Mutex;
            use std::sync::atomic::{AtomicU64, Ordering};
            use std::time::Instant;

            use super::{
                CHUNK, FRAMES, Figures, Payload, WARMUP, p50_bucketed, per_frame, robot_clock, wait,
            };
            // The code `#[copper_runtime]` generates names copper's traits unqualified.
            use cu29::prelude::*;
            // Explicit, so they win over any same name in copper's prelude.
            use holo_runtime::{
                CompileOptions, ConnectionOptions, EmitOptions, ExecutionContext, Graph, Input,
                Operator, Output, ParamSet, Result, RunSession, SessionOptions, compile, operator,
            };

            /// The payload; `benches/copper_chain.ron` names it as the message type.
            type P = $payload;

            #[operator]
            struct HoloSource {
                out: Output<P>,
                n: u64,
            }

            impl Operator for HoloSource {
                fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
                    self.n += 1;
                    // No capture time: the runtime stamps a source's default one.
                    self.out.emit(P::make(self.n), EmitOptions::default())
                }
            }

            #[operator]
            struct HoloForward {
                input: Input<P>,
                out: Output<P>,
            }

            impl Operator for HoloForward {
                fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
                    // Read in place and cloned into the output, as copper's forwarder
                    // clones its input into its output message.
                    while let Some(sent) = self
                        .input
                        .receive_with(|v| self.out.emit(v.clone(), EmitOptions::default()))
                    {
                        sent?;
                    }
                    Ok(())
                }
            }

            #[operator]
            struct HoloSink {
                input: Input<P>,
                received: Arc<AtomicU64>,
                /// The chunks' ends, timed on the partition thread itself (a waiting
                /// observer may wake late); handed over after the last frame.
                marks: Vec<Instant>,
                chunks: Arc<Mutex<Vec<Instant>>>,
                count: u64,
                sum: u64,
            }

            impl Operator for HoloSink {
                fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
                    // Read in place, as copper's sink reads its input message.
                    while let Some(probe) = self.input.receive_with(Payload::probe) {
                        self.sum = self.sum.wrapping_add(probe);
                        self.count += 1;
                        if self.count >= WARMUP && (self.count - WARMUP) % CHUNK == 0 {
                            self.marks.push(Instant::now());
                            if self.count == WARMUP + FRAMES {
                                *self.chunks.lock().unwrap() = std::mem::take(&mut self.marks);
                            }
                        }
                        // Only this thread writes the counter: a store.
                        self.received.store(self.count, Ordering::Release);
                    }
                    std::hint::black_box(self.sum);
                    Ok(())
                }
            }

            /// Source → forward → forward → sink; the sink counts into `received` and
            /// hands its chunk marks to `chunks`.
            fn graph(received: &Arc<AtomicU64>, chunks: &Arc<Mutex<Vec<Instant>>>) -> Graph {
                let mut g = Graph::new();
                let defaults = || ParamSet::defaults().unwrap();
                let s = g
                    .add_operator(
                        "src",
                        HoloSource {
                            out: Output::default(),
                            n: 0,
                        },
                        defaults(),
                    )
                    .unwrap();
                let mut prev = s.out;
                for name in ["fwd1", "fwd2"] {
                    let f = g
                        .add_operator(
                            name,
                            HoloForward {
                                input: Input::default(),
                                out: Output::default(),
                            },
                            defaults(),
                        )
                        .unwrap();
                    g.add_flow(prev, f.input, ConnectionOptions::default());
                    prev = f.out;
                }
                let k = g
                    .add_operator(
                        "sink",
                        HoloSink {
                            input: Input::default(),
                            received: Arc::clone(received),
                            marks: Vec::with_capacity((FRAMES / CHUNK + 1) as usize),
                            chunks: Arc::clone(chunks),
                            count: 0,
                            sum: 0,
                        },
                        defaults(),
                    )
                    .unwrap();
                g.add_flow(prev, k.input, ConnectionOptions::default());
                g
            }

            /// One threaded holo run: the chain in one partition, on its own thread.
            pub(super) fn holo() -> Figures {
                let received = Arc::new(AtomicU64::new(0));
                let chunks = Arc::new(Mutex::new(Vec::new()));
                let g = graph(&received, &chunks);
                let plan = compile(&g, CompileOptions::default()).unwrap();
                assert_eq!(plan.partitions().len(), 1);
                let session =
                    RunSession::start(g, &plan, SessionOptions::frames(WARMUP + FRAMES)).unwrap();
                // No `reset_latency` after the warm-up here: the bench's thread may wake
                // only after the last frame (it sleeps between looks), leaving the report
                // no latency at all. The warm-up is 1 % of the frames: the p50 keeps it.
                wait(&received, WARMUP + FRAMES);
                let report = session.join().unwrap();
                let marks = std::mem::take(&mut *chunks.lock().unwrap());
                Figures {
                    per_frame: per_frame(
                        &marks.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>(),
                    ),
                    p50_cycle: report.latency_p50.unwrap().as_nanos() as f64,
                    p50_source: None,
                }
            }

            /// One stepped holo run: the same chain, one `step()` per frame on this
            /// thread.
            pub(super) fn holo_stepped() -> Figures {
                let received = Arc::new(AtomicU64::new(0));
                let chunks = Arc::new(Mutex::new(Vec::new()));
                let g = graph(&received, &chunks);
                let plan = compile(&g, CompileOptions::default()).unwrap();
                assert_eq!(plan.partitions().len(), 1);
                let mut session =
                    RunSession::start_stepped(g, &plan, SessionOptions::frames(WARMUP + FRAMES))
                        .unwrap();
                for _ in 0..WARMUP {
                    session.step().unwrap();
                }
                session.reset_latency();
                let mut chunks = Vec::with_capacity((FRAMES / CHUNK) as usize);
                for _ in 0..FRAMES / CHUNK {
                    let t0 = Instant::now();
                    for _ in 0..CHUNK {
                        session.step().unwrap();
                    }
                    chunks.push(t0.elapsed());
                }
                assert_eq!(received.load(Ordering::Acquire), WARMUP + FRAMES);
                let report = session.join().unwrap();
                Figures {
                    per_frame: per_frame(&chunks),
                    p50_cycle: report.latency_p50.unwrap().as_nanos() as f64,
                    p50_source: None,
                }
            }

            #[derive(Reflect)]
            pub(super) struct CopperSource {
                n: u64,
            }

            impl Freezable for CopperSource {}

            impl CuSrcTask for CopperSource {
                type Resources<'r> = ();
                type Output<'m> = output_msg!(P);

                fn new(_: Option<&ComponentConfig>, (): ()) -> CuResult<Self> {
                    Ok(Self { n: 0 })
                }

                fn process(
                    &mut self,
                    _ctx: &CuContext,
                    output: &mut Self::Output<'_>,
                ) -> CuResult<()> {
                    self.n += 1;
                    output.set_payload(P::make(self.n));
                    // The capture time: the start the runtime stamped before this call
                    // (no clock read of our own).
                    let start: Option<cu29::clock::CuTime> =
                        output.metadata.process_time.start.into();
                    output.tov = start.into();
                    Ok(())
                }
            }

            #[derive(Reflect)]
            pub(super) struct CopperForward;

            impl Freezable for CopperForward {}

            impl CuTask for CopperForward {
                type Resources<'r> = ();
                type Input<'m> = input_msg!(P);
                type Output<'m> = output_msg!(P);

                fn new(_: Option<&ComponentConfig>, (): ()) -> CuResult<Self> {
                    Ok(Self)
                }

                fn process(
                    &mut self,
                    _ctx: &CuContext,
                    input: &Self::Input<'_>,
                    output: &mut Self::Output<'_>,
                ) -> CuResult<()> {
                    if let Some(v) = input.payload() {
                        output.set_payload(v.clone());
                    }
                    output.tov = input.tov;
                    Ok(())
                }
            }

            /// The last copper run's latencies (moved out of the sink in `stop`): the
            /// sink-to-sink cycles and the source-start → sink-end windows.
            static COPPER_LATENCIES: Mutex<(Vec<u64>, Vec<u64>)> =
                Mutex::new((Vec::new(), Vec::new()));

            #[derive(Reflect)]
            pub(super) struct CopperSink {
                sum: u64,
                last_end: Option<u64>,
                cycles: Vec<u64>,
                from_source: Vec<u64>,
            }

            impl Freezable for CopperSink {}

            impl CuSinkTask for CopperSink {
                type Resources<'r> = ();
                type Input<'m> = input_msg!(P);

                fn new(_: Option<&ComponentConfig>, (): ()) -> CuResult<Self> {
                    let n = (WARMUP + FRAMES) as usize;
                    Ok(Self {
                        sum: 0,
                        last_end: None,
                        cycles: Vec::with_capacity(n),
                        from_source: Vec::with_capacity(n),
                    })
                }

                fn process(&mut self, ctx: &CuContext, input: &Self::Input<'_>) -> CuResult<()> {
                    if let Some(v) = input.payload() {
                        self.sum = self.sum.wrapping_add(v.probe());
                    }
                    // One clock read, as holo's runtime takes at the end of a sink.
                    let end = ctx.now().0;
                    if self.cycles.len() < self.cycles.capacity() {
                        if let Some(last) = self.last_end {
                            self.cycles.push(end.saturating_sub(last));
                        }
                        if let Tov::Time(t) = input.tov {
                            self.from_source.push(end.saturating_sub(t.0));
                        }
                    }
                    self.last_end = Some(end);
                    Ok(())
                }

                fn stop(&mut self, _ctx: &CuContext) -> CuResult<()> {
                    std::hint::black_box(self.sum);
                    *COPPER_LATENCIES.lock().unwrap() = (
                        std::mem::take(&mut self.cycles),
                        std::mem::take(&mut self.from_source),
                    );
                    Ok(())
                }
            }

            #[copper_runtime(config = $config)]
            struct CopperChain {}

            /// One copper run: the same chain, `run_one_iteration` on this thread.
            pub(super) fn copper() -> Figures {
                let app = CopperChain::builder()
                    .with_clock(robot_clock())
                    .build()
                    .unwrap();
                let mut running = app.start().unwrap();
                for _ in 0..WARMUP {
                    running.run_one_iteration().unwrap();
                }
                let mut chunks = Vec::with_capacity((FRAMES / CHUNK) as usize);
                for _ in 0..FRAMES / CHUNK {
                    let t0 = Instant::now();
                    for _ in 0..CHUNK {
                        running.run_one_iteration().unwrap();
                    }
                    chunks.push(t0.elapsed());
                }
                drop(running.stop().unwrap());
                let (mut cycles, mut from_source) =
                    std::mem::take(&mut *COPPER_LATENCIES.lock().unwrap());
                assert_eq!(from_source.len() as u64, WARMUP + FRAMES);
                // The warm-up left out, as holo's `reset_latency` does.
                let w = WARMUP as usize;
                Figures {
                    per_frame: per_frame(&chunks),
                    p50_cycle: p50_bucketed(&mut cycles[w - 1..]),
                    p50_source: Some(p50_bucketed(&mut from_source[w..])),
                }
            }
        }
    };
}

chain!(chain_u64, u64, "benches/copper_chain.ron");
chain!(chain_256, super::Bytes256, "benches/copper_chain.ron");

/// One side's run.
type Side = fn() -> Figures;

/// The sides of one payload's comparison: holo threaded, holo stepped, copper.
struct Sides {
    holo: Side,
    holo_stepped: Side,
    copper: Side,
}

/// Interleaved rounds, one run of each side, rotating which runs first, so a change in
/// the machine's speed reaches every side alike; medians of each side and of the rounds'
/// ratios (holo over copper).
fn compare(what: &str, sides: &Sides) {
    let order: [Side; 3] = [sides.holo, sides.holo_stepped, sides.copper];
    // runs[side][round]
    let mut runs: [Vec<Figures>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for k in 0..3 {
            let side = (round + k) % 3;
            runs[side].push(order[side]());
        }
    }
    let all = |side: usize, f: fn(&Figures) -> f64| runs[side].iter().map(f).collect::<Vec<_>>();
    let ratio = |side: usize, f: fn(&Figures) -> f64| {
        median(
            runs[side]
                .iter()
                .zip(&runs[2])
                .map(|(h, c)| f(h) / f(c))
                .collect(),
        )
    };
    let source = |f: &Figures| f.p50_source.unwrap_or(f64::NAN);
    if std::env::var_os("HOLO_BENCH_VERBOSE").is_some() {
        for (side, name) in ["holo threaded", "holo stepped", "copper"]
            .iter()
            .enumerate()
        {
            println!(
                "  {name}: per frame {:.1?}\n  {name}: p50 cycle {:?}",
                all(side, |f| f.per_frame),
                all(side, |f| f.p50_cycle),
            );
        }
        println!("  copper: p50 source → sink {:?}", all(2, source));
    }
    println!(
        "host chain source → forward → forward → sink, {what} (one thread; medians of {ROUNDS} interleaved rounds of {FRAMES} frames):"
    );
    println!(
        "                                          holo threaded   holo stepped   copper-rs   ratio threaded   ratio stepped"
    );
    let line = |label: &str, f: fn(&Figures) -> f64, digits: usize| {
        println!(
            "  {label:<40}{:>10.digits$} ns  {:>10.digits$} ns  {:>7.digits$} ns  {:>15.2}  {:>14.2}",
            median(all(0, f)),
            median(all(1, f)),
            median(all(2, f)),
            ratio(0, f),
            ratio(1, f),
        );
    };
    line("per frame (median 1,000-frame chunk)", |f| f.per_frame, 1);
    line(
        "p50 end of previous frame → end of sink",
        |f| f.p50_cycle,
        0,
    );
    println!(
        "  {:<40}{:>13}  {:>13}  {:>7.0} ns",
        "p50 source start → end of sink",
        "—",
        "—",
        median(all(2, source))
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // `copper_chain --bench [u64|256]` runs one payload; `holo-u64`, `holo-stepped-u64`,
    // `copper-u64` (and the `-256` ones) run one side alone, three times (for profiling).
    let only: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let u64_sides = Sides {
        holo: chain_u64::holo,
        holo_stepped: chain_u64::holo_stepped,
        copper: chain_u64::copper,
    };
    let bytes_sides = Sides {
        holo: chain_256::holo,
        holo_stepped: chain_256::holo_stepped,
        copper: chain_256::copper,
    };
    let alone: [(&str, Side); 6] = [
        ("holo-u64", u64_sides.holo),
        ("holo-stepped-u64", u64_sides.holo_stepped),
        ("copper-u64", u64_sides.copper),
        ("holo-256", bytes_sides.holo),
        ("holo-stepped-256", bytes_sides.holo_stepped),
        ("copper-256", bytes_sides.copper),
    ];
    if let Some((name, side)) = alone.iter().find(|(n, _)| only.as_deref() == Some(n)) {
        for _ in 0..3 {
            let f = side();
            println!(
                "{name}: {:.1} ns per frame, p50 from the previous frame {:.0} ns",
                f.per_frame, f.p50_cycle
            );
        }
        return;
    }
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if run("u64") {
        compare("u64 payload", &u64_sides);
    }
    if run("256") {
        compare("256-byte payload by value", &bytes_sides);
    }
}
