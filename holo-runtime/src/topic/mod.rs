//! Topics in one process: standalone clients that attach to a running session's topics by
//! name (docs/TOPICS.md).
//!
//! A graph exports an output or imports an input under a topic name
//! ([`Graph::export_topic`](crate::Graph::export_topic),
//! [`Graph::import_topic`](crate::Graph::import_topic)); `compile` records each topic's
//! contract and sizes its pools ([`TopicRecord`](crate::plan::TopicRecord)); the session
//! materializes the topic's queues from that record, and a client outside any graph
//! attaches by name:
//!
//! - a [`ChannelSubscriber`] takes one of an exported topic's declared subscriber seats,
//!   each a preallocated queue the exporting output publishes into beside its flows;
//! - a [`ChannelPublisher`] publishes into an imported input's queue, with tensors loaned
//!   from the topic's own pool.
//!
//! Both are users of the channel layer — its queues, pools and stream contract — like the
//! session's own ports; neither re-implements readiness, release or retirement.
//!
//! # Seats
//!
//! An exported topic has one queue per declared subscriber, made when the session starts.
//! A seat is free, claimed (an attach is emptying it), attached, or detaching. The
//! exporting output pushes only into attached seats: a free seat holds no slot and never
//! blocks the producer, whatever its policy. A subscriber that detaches (drops) marks its
//! seat detaching, drops what its queue held and frees the seat; should the producer push
//! into the seat as it detaches, the producer sees the seat no longer attached after its
//! push and drops the entry itself (a fence on each side orders the two checks), so a free
//! seat never keeps a slot.

mod publisher;
mod subscriber;

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_utils::CachePadded;

pub use publisher::{ChannelPublisher, PublisherLoan, PublisherOptions, PublisherWriteGuard};
pub use subscriber::{ChannelSubscriber, SubscriberOptions};

use crate::channel::OrderingDomain;
use crate::channel::pool::Pool;
use crate::channel::queue::{EdgeFactory, EdgeQueue, Endpoint, ErasedEdge, Stamp};
use crate::plan::{TopicContractRecord, TopicDirection, TopicRecord};
use crate::session::context::SessionClock;
use crate::session::ports::EdgeContract;
use crate::session::run::Shared;
use crate::spec::TensorInputSpec;
use crate::tensor::Tensor;
use crate::{Error, ErrorCode, Result};

/// The states of a subscriber seat.
pub(crate) mod seat {
    /// No subscriber: the producer pushes nothing into the seat.
    pub(crate) const FREE: u8 = 0;
    /// An attach is emptying the seat's queue before it takes it.
    pub(crate) const CLAIMED: u8 = 1;
    /// A subscriber holds the seat: the producer pushes into it.
    pub(crate) const ATTACHED: u8 = 2;
    /// The subscriber is detaching: it empties the queue, then frees the seat (no attach
    /// can take the seat meanwhile, so the emptying drops nothing of a new subscriber's).
    pub(crate) const DETACHING: u8 = 3;
}

/// A seat's state, on a cache line of its own (the producer reads it on every emit), and
/// the hook of a seat served to another process.
#[derive(Default)]
pub(crate) struct SeatState(CachePadded<AtomicU8>, pub(crate) RemoteHook);

/// A seat served to another process (crate `ipc`): while `active`, the exporting output
/// hands each tensor to the seat's sender itself — the descriptor leaves on the emitting
/// thread — when nothing waits in the seat's queue before it and the subscriber has room;
/// otherwise the tensor is queued and the seat's thread sends it. The sender's lock orders
/// the two: the seat's thread pops and sends under it.
#[derive(Default)]
pub(crate) struct RemoteHook {
    pub(crate) active: AtomicBool,
    pub(crate) sender: Mutex<Option<Box<dyn RemoteSend>>>,
}

/// The sending half of a seat served to another process.
pub(crate) trait RemoteSend: Send {
    /// Sends `t` now if the subscriber has room (`false`: queue it instead).
    fn try_send(&mut self, t: &Tensor, stamp: Stamp) -> bool;
    /// The concrete sender, for the seat's own thread.
    fn as_any(&mut self) -> &mut dyn Any;
}

impl SeatState {
    #[inline]
    pub(crate) fn is_attached(&self, order: Ordering) -> bool {
        self.0.load(order) == seat::ATTACHED
    }
}

/// One subscriber seat of an exported topic.
pub(crate) struct Seat {
    pub(crate) state: Arc<SeatState>,
    /// The seat's queue, typed (an `EdgeQueue<T>` of the port's payload).
    pub(crate) typed: Arc<dyn Any + Send + Sync>,
    pub(crate) erased: Arc<dyn ErasedEdge>,
    /// The subscriber's end: the thread waiting in a receive.
    pub(crate) endpoint: Arc<CachePadded<Endpoint>>,
}

/// An imported topic's session side.
pub(crate) struct ImportSide {
    /// The imported input's queue, typed (the session holds it erased among its edges).
    pub(crate) typed: Arc<dyn Any + Send + Sync>,
    /// The topic's pool (`topic:<name>`), for a tensor topic.
    pub(crate) pool: Option<Arc<Pool>>,
    /// The importing operator's stream, registered as a release stream on every published
    /// tensor (its `receive` waits on the publisher's readiness there); `None` for a
    /// stream-less importer.
    pub(crate) consumer: Option<OrderingDomain>,
    /// Publishers attached now.
    pub(crate) attached: AtomicU32,
    /// Held across a publisher's checks and push, and by teardown as it closes the topic:
    /// publishers' room checks and pushes do not interleave (a full `Block` queue refuses
    /// with the value handed back, never drops it), and nothing is pushed after close.
    pub(crate) publish: Mutex<()>,
}

pub(crate) enum Side {
    Export(Box<[Seat]>),
    Import(ImportSide),
}

/// One topic of a running session.
pub(crate) struct TopicState {
    pub(crate) record: TopicRecord,
    /// Set by teardown: nothing attaches, publishes or receives afterwards.
    pub(crate) closed: AtomicBool,
    pub(crate) side: Side,
    /// `topic "<name>"`, for errors.
    pub(crate) location: &'static str,
}

/// Every topic of a running session, by the plan's topic id.
pub(crate) struct TopicRegistry {
    pub(crate) topics: Vec<Arc<TopicState>>,
    pub(crate) clock: SessionClock,
    /// The session's shared state, once it exists (a stopping session refuses clients).
    shared: OnceLock<Arc<Shared>>,
}

/// A subscriber seat as the exporting output binds it: its typed queue and its state.
pub(crate) type BoundSeat = (Arc<dyn Any + Send + Sync>, Arc<SeatState>);

/// An imported input's queue as the session wires it into its operator.
pub(crate) struct ImportWiring {
    pub(crate) operator: usize,
    pub(crate) port: usize,
    pub(crate) typed: Arc<dyn Any + Send + Sync>,
    pub(crate) erased: Arc<dyn ErasedEdge>,
    pub(crate) contract: EdgeContract,
}

/// What the session wires into its operators from the topics: the exported outputs'
/// seats, the seats a source waits on for room, and the imported inputs' queues with
/// their contracts.
#[derive(Default)]
pub(crate) struct Wiring {
    /// `(operator, port, seats)` of each exported output.
    pub(crate) seats: Vec<(usize, usize, Vec<BoundSeat>)>,
    /// `(operator, seat queue)` of `Block` seats.
    pub(crate) block: Vec<(usize, Arc<dyn ErasedEdge>)>,
    pub(crate) imports: Vec<ImportWiring>,
}

/// What `TopicRegistry::create` reads of the session being started.
pub(crate) struct Materials<'a> {
    /// The queue factory of each plan topic (the graph's topic of the same index).
    pub(crate) factories: Vec<EdgeFactory>,
    /// Each operator's partition end.
    pub(crate) endpoint_of: &'a dyn Fn(usize) -> Arc<CachePadded<Endpoint>>,
    /// The ordering domain of a plan stream.
    pub(crate) domain_of: &'a dyn Fn(u32) -> Option<OrderingDomain>,
    /// The pool with this id.
    pub(crate) pool: &'a dyn Fn(&str) -> Option<Arc<Pool>>,
    pub(crate) clock: SessionClock,
}

impl TopicRegistry {
    /// Makes every topic's queues from the plan's records (cold; fails closed, naming the
    /// topic), and what the operators bind of them.
    pub(crate) fn create(
        plan: &crate::plan::ExecutionPlan,
        m: Materials<'_>,
    ) -> Result<(TopicRegistry, Wiring)> {
        let mut wiring = Wiring::default();
        let mut topics = Vec::with_capacity(plan.topics().len());
        for (rec, factory) in plan.topics().iter().zip(m.factories) {
            let (o, p) = (rec.operator as usize, rec.port_index as usize);
            let location = crate::session::run::intern(format!("topic {:?}", rec.name));
            let cold = |e: crate::cold::ColdAllocError| {
                Error::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "the queue of depth {} of topic {:?}: {e}",
                        rec.depth, rec.name
                    ),
                )
                .at(location)
            };
            let side = match rec.direction {
                TopicDirection::Export => {
                    let mut seats = Vec::with_capacity(rec.subscribers as usize);
                    let mut typed = Vec::with_capacity(rec.subscribers as usize);
                    for _ in 0..rec.subscribers {
                        let endpoint: Arc<CachePadded<Endpoint>> = Arc::default();
                        let new = factory(
                            rec.depth as usize,
                            rec.policy,
                            Arc::clone(&endpoint),
                            (m.endpoint_of)(o),
                        )
                        .map_err(cold)?;
                        let state = Arc::new(SeatState::default());
                        if rec.policy == crate::graph::QueuePolicy::Block {
                            wiring.block.push((o, Arc::clone(&new.erased)));
                        }
                        typed.push((Arc::clone(&new.typed), Arc::clone(&state)));
                        seats.push(Seat {
                            state,
                            typed: new.typed,
                            erased: new.erased,
                            endpoint,
                        });
                    }
                    wiring.seats.push((o, p, typed));
                    Side::Export(seats.into_boxed_slice())
                }
                TopicDirection::Import => {
                    let new = factory(
                        rec.depth as usize,
                        rec.policy,
                        (m.endpoint_of)(o),
                        Arc::default(),
                    )
                    .map_err(cold)?;
                    let consumer = match rec.consumer_stream {
                        None => None,
                        Some(id) => Some((m.domain_of)(id).ok_or_else(|| {
                            Error::new(
                                ErrorCode::Internal,
                                format!("compute stream S{id} of the plan was not created"),
                            )
                            .at(format!("plan topic record {}", rec.id))
                        })?),
                    };
                    let pool = match &rec.pool {
                        Some(id) => Some((m.pool)(id).ok_or_else(|| {
                            Error::new(
                                ErrorCode::InvalidArgument,
                                format!("the plan's topic record names pool {id:?}, which the plan does not allocate"),
                            )
                            .at(format!("plan topic record {}", rec.id))
                        })?),
                        None => None,
                    };
                    wiring.imports.push(ImportWiring {
                        operator: o,
                        port: p,
                        typed: Arc::clone(&new.typed),
                        erased: new.erased,
                        contract: EdgeContract {
                            consumer: consumer.unwrap_or(OrderingDomain::Host),
                            fused: false,
                            host_wait: rec.host_wait,
                        },
                    });
                    Side::Import(ImportSide {
                        typed: new.typed,
                        pool,
                        consumer: consumer.filter(|d| d.stream().is_some()),
                        attached: AtomicU32::new(0),
                        publish: Mutex::new(()),
                    })
                }
            };
            topics.push(Arc::new(TopicState {
                record: rec.clone(),
                closed: AtomicBool::new(false),
                side,
                location,
            }));
        }
        Ok((
            TopicRegistry {
                topics,
                clock: m.clock,
                shared: OnceLock::new(),
            },
            wiring,
        ))
    }

    /// The session's shared state, once started.
    pub(crate) fn set_shared(&self, shared: Arc<Shared>) {
        let _ = self.shared.set(shared);
    }

    /// Whether the session is stopping or stopped.
    pub(crate) fn stopping(&self) -> bool {
        self.shared
            .get()
            .is_some_and(|s| s.stop.load(Ordering::Acquire))
    }

    /// The topic named `name`, for a client attaching to it: `NotFound` for a name the
    /// plan has no topic of (the error lists the ones it has), `Cancelled` once the
    /// session stops.
    pub(crate) fn find(&self, name: &str) -> Result<&Arc<TopicState>> {
        let Some(t) = self.topics.iter().find(|t| t.record.name == name) else {
            let mut known: Vec<&str> = self.topics.iter().map(|t| t.record.name.as_str()).collect();
            known.sort_unstable();
            return Err(Error::new(
                ErrorCode::NotFound,
                format!(
                    "the session has no topic {name:?}; its topics: {}",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        format!("{known:?}")
                    }
                ),
            )
            .at(format!("topic {name:?}")));
        };
        if t.closed.load(Ordering::Acquire) || self.stopping() {
            return Err(t.cancelled());
        }
        Ok(t)
    }

    /// Closes every topic (teardown's first step): nothing attaches, publishes or
    /// receives afterwards; a publish in progress finishes first.
    pub(crate) fn close(&self) {
        for t in &self.topics {
            match &t.side {
                Side::Import(i) => {
                    let _held = i
                        .publish
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    t.closed.store(true, Ordering::Release);
                }
                Side::Export(_) => t.closed.store(true, Ordering::Release),
            }
        }
    }

    /// Drops every entry queued for a subscriber (teardown, after the producers stopped),
    /// and returns the entries evicted from and refused by subscriber queues.
    pub(crate) fn drain(&self) -> u64 {
        let mut drops = 0;
        for t in &self.topics {
            if let Side::Export(seats) = &t.side {
                for s in seats {
                    let c = s.erased.counters();
                    drops +=
                        c.evicted.load(Ordering::Relaxed) + c.backpressured.load(Ordering::Relaxed);
                    s.erased.clear();
                }
            }
        }
        drops
    }

    /// The most entries operator `operator` pushed into one subscriber seat of a topic it
    /// exports (`None`: it exports none).
    pub(crate) fn pushed_by(&self, operator: usize) -> Option<u64> {
        self.topics
            .iter()
            .filter(|t| t.record.operator as usize == operator)
            .filter_map(|t| match &t.side {
                Side::Export(seats) => seats
                    .iter()
                    .map(|s| s.erased.counters().pushed.load(Ordering::Relaxed))
                    .max(),
                Side::Import(_) => None,
            })
            .max()
    }

    /// Whether any subscriber's queue holds an entry (a free seat's is empty).
    pub(crate) fn queued(&self) -> bool {
        self.topics.iter().any(|t| match &t.side {
            Side::Export(seats) => seats.iter().any(|s| s.erased.len() != 0),
            Side::Import(_) => false,
        })
    }

    /// `(attached, declared)` clients of the topic `name`.
    pub(crate) fn attachments(&self, name: &str) -> Option<(u32, u32)> {
        let t = self.topics.iter().find(|t| t.record.name == name)?;
        Some(match &t.side {
            Side::Export(seats) => (
                u32::try_from(
                    seats
                        .iter()
                        .filter(|s| s.state.is_attached(Ordering::Acquire))
                        .count(),
                )
                .unwrap_or(u32::MAX),
                t.record.subscribers,
            ),
            Side::Import(i) => (i.attached.load(Ordering::Acquire), t.record.publishers),
        })
    }
}

impl TopicState {
    pub(crate) fn cancelled(&self) -> Error {
        Error::new(
            ErrorCode::Cancelled,
            "the session is stopping or has stopped: its topics take no client and move nothing",
        )
        .at(self.location)
    }

    /// Refuses a client of the wrong direction.
    pub(crate) fn expect_direction(&self, want: TopicDirection) -> Result<()> {
        if self.record.direction == want {
            return Ok(());
        }
        let (is, client) = match self.record.direction {
            TopicDirection::Export => ("exported (the graph publishes it)", "a ChannelSubscriber"),
            TopicDirection::Import => ("imported (the graph receives it)", "a ChannelPublisher"),
        };
        Err(Error::new(
            ErrorCode::InvalidArgument,
            format!("the topic is {is}: attach {client} to it"),
        )
        .at(self.location))
    }

    /// The topic's queue of payload `T`, or `InvalidArgument` when the port's payload is
    /// another type.
    pub(crate) fn typed<Q: Send + 'static>(
        &self,
        queue: &Arc<dyn Any + Send + Sync>,
    ) -> Result<Arc<EdgeQueue<Q>>> {
        Arc::clone(queue).downcast::<EdgeQueue<Q>>().map_err(|_| {
            Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "the topic's port does not carry `{}`{}",
                    std::any::type_name::<Q>(),
                    if self.record.tensor {
                        ": it carries `Tensor`"
                    } else {
                        ""
                    }
                ),
            )
            .at(self.location)
        })
    }

    /// Checks a client's expected tensor contract against the topic's: every field the
    /// client states must be one the topic declares, with the same value
    /// (`ProtocolError` listing each difference).
    pub(crate) fn check_expected(&self, expected: Option<&TensorInputSpec>) -> Result<()> {
        let Some(want) = expected else {
            return Ok(());
        };
        if !self.record.tensor {
            return Err(Error::new(
                ErrorCode::ProtocolError,
                "the client expects a tensor contract, and the topic carries messages",
            )
            .at(self.location));
        }
        check_contract(&self.record.contract, want).map_err(|e| e.at(self.location))
    }
}

/// Refuses (`ProtocolError`) a client contract `want` that `c` does not meet: every field
/// `want` states (memory kind, dtype, rank) must be the topic's. Shared by in-process
/// clients and subscribers in another process (against their catalog's contract).
pub(crate) fn check_contract(c: &TopicContractRecord, want: &TensorInputSpec) -> Result<()> {
    let mut differences = Vec::new();
    let shown = |v: Option<String>| v.unwrap_or_else(|| "undeclared".to_owned());
    if let Some(k) = want.memory_kind
        && !c.memory_kind.is_some_and(|have| k.accepts(have))
    {
        differences.push(format!(
            "memory kind {} where {k} is expected",
            shown(c.memory_kind.map(|k| k.to_string()))
        ));
    }
    if let Some(d) = want.dtype
        && c.dtype != Some(d)
    {
        differences.push(format!(
            "dtype {} where {d} is expected",
            shown(c.dtype.map(|d| d.to_string()))
        ));
    }
    if let Some(r) = want.rank
        && c.rank != Some(r)
    {
        differences.push(format!(
            "rank {} where rank {r} is expected",
            shown(c.rank.map(|r| r.to_string()))
        ));
    }
    if differences.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        ErrorCode::ProtocolError,
        format!(
            "the topic's contract differs from the client's: {}",
            differences.join(", ")
        ),
    ))
}

/// Whether tensor `t` meets a topic's contract (memory kind, dtype, rank; bytes for one
/// that is not from the topic's pool).
pub(crate) fn meets(t: &Tensor, c: &TopicContractRecord) -> bool {
    c.memory_kind.is_none_or(|k| k.accepts(t.memory_kind()))
        && c.dtype.is_none_or(|d| d == t.dtype())
        && c.rank.is_none_or(|r| r == t.rank())
        && c.max_bytes.is_none_or(|b| t.byte_size() as u64 <= b)
}

/// The stamp a client publishes a value with: its frame id, its capture time (now, when
/// not given) and now as its publish time.
pub(crate) fn client_stamp(
    clock: &SessionClock,
    options: crate::EmitOptions,
    next_frame: &mut u64,
) -> Stamp {
    let now = clock.now_ns();
    let frame = options.frame.unwrap_or_else(|| {
        let f = *next_frame;
        *next_frame += 1;
        f
    });
    Stamp {
        capture_ns: options
            .capture_time
            .map_or(now, |t| clock.ns_since_epoch(t)),
        frame,
        publish_ns: now,
    }
}
