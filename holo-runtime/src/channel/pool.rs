//! Runtime pools: sized when the plan is compiled, materialized once in
//! `RunSession::start`, borrowed on the hot path.
//!
//! A pool owns one contiguous backing of `slot_count × per_slot_bytes` bytes, one
//! metadata record per slot and a lock-free free list of slot indices, all allocated
//! before the first `compute()`. A device-backed pool (pinned, managed or CUDA device
//! memory) also owns its whole event inventory: one readiness event per slot and
//! `release_capacity` release events per slot, created cold and never grown.
//!
//! `allocate_tensor` pops an index or fails with `ResourceExhausted` at once; with the
//! free list empty it first polls, once and without waiting, the release events of the
//! slots the retirement worker holds (unless the worker is polling them), so that a slot
//! already free on the device is not refused while the worker is off its CPU. A slot
//! goes back on the free list when its last handle (every consumer's `Tensor` and every
//! `TensorReadLease`) is dropped — directly when no release stream was registered, or
//! through the session's retirement worker, which polls the release events recorded on
//! every registered consumer stream and never blocks a host thread.
//!
//! # Who submits what to a consumer's stream
//!
//! Only the consumer's own thread, so no thread waits behind another thread's submission
//! to the same stream (on the H200 a record or wait on a stream another thread was
//! submitting to took 3-8 µs, against 0.2-0.7 µs on the thread's own stream):
//! - `emit` registers each consumer stream as a release stream (no device call; the cap
//!   is checked there), and the consumer's `receive` enqueues its stream's wait on the
//!   readiness event;
//! - in a fan-out, a consumer that received the slot into a stream its partition owns
//!   alone ([`DomainOwner::Partition`]) keeps that stream's release position in its
//!   handle ([`Holder`]: told to the pool on release, never read from a thread-local),
//!   records the stream's release event when it drops the handle (its work on the slot is
//!   enqueued by then) and marks it clean; receiving the slot again clears the mark. The
//!   last handle records
//!   the release events not marked clean — its own stream's always, and every stream a
//!   user call registered (`synchronize_for_consumer_stream`, `copy_to_host_async`),
//!   since work on those may come from any thread.
//!
//! # Who keeps a pool alive
//!
//! A pool is shared as `Arc<Pool>`, but a loan or a tensor does not touch the reference
//! count: every **free** slot holds ("parks") one strong count. Borrowing a slot moves its
//! count into the loan, the loan moves it into the tensor, and the last handle of the slot
//! moves it back onto the free list — so a hop takes no atomic read-modify-write on the
//! pool. The [`PoolOwner`] the session holds closes the pool when it is dropped: it drops
//! the counts parked on the free list, and from then on a slot released late (by a tensor
//! that outlived its session) drops its count instead of parking it. A pool is freed when
//! its owner, every other `Arc` and every outstanding slot are gone.

use std::cell::UnsafeCell;
use std::hint::cold_path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use dlpark::AllocationDeleter;

use super::free_list::FreeList;
use super::retire::Retirer;
use super::sync::{self, AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
use super::{BufferRef, DomainOwner, OrderingDomain};
use crate::device::{AllocKind, DeviceBackend, DevicePtr, EventHandle, MemoryObject, StreamHandle};
use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::{Error, ErrorCode, MemoryKind, Result};

/// What a slot holds once its writer committed: shape, dtype and byte size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TensorMeta {
    pub(crate) shape: [u64; MAX_TENSOR_RANK as usize],
    pub(crate) rank: u8,
    pub(crate) dtype: DType,
    pub(crate) byte_size: usize,
}

impl TensorMeta {
    pub(crate) const EMPTY: TensorMeta = TensorMeta {
        shape: [0; MAX_TENSOR_RANK as usize],
        rank: 0,
        dtype: DType::U8,
        byte_size: 0,
    };

    pub(crate) fn shape(&self) -> &[u64] {
        &self.shape[..usize::from(self.rank)]
    }
}

/// The readiness of a slot's bytes.
pub(crate) mod readiness {
    /// Complete on the host (a host write, or not written on a stream).
    pub(crate) const HOST: u8 = 0;
    /// The readiness event was recorded on the writer's stream.
    pub(crate) const RECORDED: u8 = 1;
    /// Fusion elided the record: ordering is implied by the writer's stream; the event is
    /// recorded lazily the first time anything else needs it.
    pub(crate) const ELIDED: u8 = 2;
    /// A thread is recording it lazily right now.
    pub(crate) const RECORDING: u8 = 3;
    /// A device-memory DLPack import whose producer's stream is not known: nothing can be
    /// ordered behind its writes until `Tensor::set_readiness_stream` records it.
    pub(crate) const UNCONTRACTED: u8 = 4;
}

#[repr(C, align(64))]
struct Slot {
    // The first cache line holds every field a hand-off, a commit, a receive and a
    // release read or write (`repr(C)` keeps them there; the metadata follows): a
    // steady-state hand-off on a GPU runs between driver calls that evict much of what it
    // touched (`handoff cold`, BENCHMARKS.md).
    /// The raw writer stream (0: written on the host).
    writer: AtomicU64,
    /// The slot's readiness event, which every reader takes from here: the line it reads
    /// the state from (the pool's `readiness` owns the events and destroys them); 0 for a
    /// host pool.
    ready: EventHandle,
    /// Bit `i`: release stream `i` is a partition's own stream and a handle held in it
    /// ([`Holder`]) recorded its release event when it was dropped, and the slot was not
    /// received into that stream since (see [`Pool::release`]).
    release_clean: AtomicU64,
    /// Bit `i`: release stream `i` was registered by a user call
    /// (`synchronize_for_consumer_stream`, `copy_to_host_async`), from any thread: its
    /// event is always recorded by the slot's last handle.
    release_sticky: AtomicU64,
    /// Live handles: the producer's loan, then every `Tensor` and read lease.
    refs: AtomicU32,
    /// Advanced each time the slot is loaned (by the loaning thread, which holds the
    /// slot exclusively then): with the index, it names one use of the slot
    /// ([`SlotRef`](crate::channel::SlotRef)).
    generation: AtomicU32,
    release_count: AtomicU32,
    state: AtomicU8,
    /// Guards `release_count` and this slot's release streams (held for a few loads).
    release_lock: AtomicBool,
    /// Written only by the slot's exclusive loan holder before publication.
    meta: UnsafeCell<TensorMeta>,
}

/// Release positions that can be marked clean (the rest are always recorded by the last
/// handle).
const CLEAN_BITS: usize = 64;

/// Who drops a handle, passed explicitly on every release: the release position of the
/// ordering domain the handle's holder owns alone ([`DomainOwner::Partition`]), found when
/// the holder received the slot into that domain ([`Pool::enter_domain`]). Such a holder
/// records its own stream's release event when it drops a handle that is not the last.
/// [`Holder::NONE`]: the holder owns no release position (a producer, a host reader, a
/// consumer whose stream other partitions share, a caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holder(u8);

impl Holder {
    /// The holder owns no release position.
    pub(crate) const NONE: Holder = Holder(u8::MAX);

    /// The release position, if any.
    #[inline]
    fn position(self) -> Option<usize> {
        (self.0 != u8::MAX).then_some(usize::from(self.0))
    }
}

/// What a steady-state hand-off found in one pass over its slot
/// ([`Pool::registered_hand_off`]).
pub(crate) struct SteadyHandOff<'p> {
    pub(crate) backing: &'p DeviceBacking,
    /// The slot's readiness event, which the caller's stream waits on.
    pub(crate) ready: EventHandle,
    /// What the hand-off's end records and marks (with the stream's release position).
    pub(crate) end: HandOffEnd<'p>,
}

/// The end of a steady-state hand-off, found when it began: the stream's release event
/// and the slot's clean mark, so that the end touches neither the pool's fields nor its
/// event table. A hand-off on a GPU ends after the caller's own driver calls, which evict
/// much of what it touched (`handoff cold`, BENCHMARKS.md).
pub(crate) struct HandOffEnd<'p> {
    backend: &'p dyn DeviceBackend,
    release: EventHandle,
    clean: &'p AtomicU64,
    bit: u64,
    /// The hand-off's stream (adopted until after the end) and its release position.
    stream: StreamHandle,
    position: Holder,
}

impl HandOffEnd<'_> {
    /// [`Pool::record_release_at`] for this position with `mark_clean`: records the
    /// release event on the hand-off's stream and marks the position clean.
    #[inline]
    pub(crate) fn record(&self) -> Result<()> {
        // SAFETY: the event is the pool's, live while the hand-off's tensor keeps the
        // pool; the stream is the hand-off's, adopted until after this call.
        unsafe {
            self.backend
                .record_event_unchecked(self.release, self.stream)?;
        }
        if self.clean.load(Ordering::Relaxed) & self.bit == 0 {
            self.clean.fetch_or(self.bit, Ordering::Release);
        }
        Ok(())
    }

    /// The hand-off's stream.
    pub(crate) fn stream(&self) -> StreamHandle {
        self.stream
    }

    /// The stream's release position in the slot.
    pub(crate) fn position(&self) -> Holder {
        self.position
    }
}

/// The streams of the output a pool belongs to, bound once when the session binds the
/// output (a pool outside a session has neither).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LoanStreams {
    /// The producing operator's planned stream (`None` in a host-only partition).
    pub(crate) planned: Option<StreamHandle>,
    /// The stream the plan proved the output's sole edge fused on.
    pub(crate) fused: Option<StreamHandle>,
}

/// How a pool closes (see [`PoolOwner`]).
#[derive(Default)]
struct Closing {
    /// Set once by [`PoolOwner`]'s drop: free slots no longer park their count.
    closed: AtomicBool,
    /// Threads other than the owner between checking `closed` and parking a slot (the
    /// closer waits for none to be left before it drains the free list).
    parking: AtomicUsize,
}

impl Slot {
    /// A slot with `refs` handles and `meta`, host-ready, with no writer and no release
    /// stream; `ready` is its readiness event in `backing` (0 for a host pool).
    fn new(refs: u32, meta: TensorMeta, ready: EventHandle) -> Slot {
        Slot {
            ready,
            refs: AtomicU32::new(refs),
            generation: AtomicU32::new(0),
            meta: UnsafeCell::new(meta),
            writer: AtomicU64::new(0),
            state: AtomicU8::new(readiness::HOST),
            release_lock: AtomicBool::new(false),
            release_count: AtomicU32::new(0),
            release_clean: AtomicU64::new(0),
            release_sticky: AtomicU64::new(0),
        }
    }
}

/// `product(shape) × dtype size` in bytes, or `None` when it overflows.
#[inline]
pub(crate) fn checked_byte_size(shape: &[u64], dtype: DType) -> Option<u64> {
    shape
        .iter()
        .try_fold(dtype.size_bytes(), |bytes, &e| bytes.checked_mul(e))
}

/// Counters a pool keeps for the run summary and for tests.
#[derive(Debug, Default)]
pub(crate) struct PoolCounters {
    // `std`'s even under loom: statistics, which order nothing.
    pub(crate) loans: std::sync::atomic::AtomicU64,
    pub(crate) exhausted: std::sync::atomic::AtomicU64,
}

/// The alignment of a host pool's backing: every slot of a 256-byte-multiple size starts
/// on a cache line (and DLPack's recommended 256-byte boundary).
const HOST_ALIGN: usize = 256;

/// What [`Pool::retire`] leaves its caller to do with a slot's count: the steps that may
/// free the pool.
#[must_use]
enum Retired {
    /// Hand it to the retirement worker, which returns it once the release events ran.
    ToWorker(Arc<Pool>),
    /// The retirer was closed (a tensor kept past its session): the release events were
    /// waited for on the host; park the slot (dropping the count, the pool being closed).
    AfterTeardown,
    /// Its release could be neither recorded nor waited for: the retirer withholds it.
    Withheld,
}

enum Backing {
    Host {
        ptr: *mut u8,
        len: usize,
        owner: HostBytes,
    },
    Device(DeviceBacking),
}

/// Who frees a host backing.
enum HostBytes {
    /// A materialized pool's zeroed, `HOST_ALIGN`-aligned block: the pool.
    Aligned(std::alloc::Layout),
    /// A pass-through tensor's `Box<[u8]>`: the pool.
    Boxed,
    /// A foreign buffer (a DLPack import): its owner, through [`Pool::foreign`].
    Foreign,
    /// A shared-memory segment (the pool of a topic exported across processes): the
    /// pool's handle of it; importers map it too.
    Shared(Arc<crate::ipc::Segment>),
}

/// A device-backed pool's memory and event inventory.
pub(crate) struct DeviceBacking {
    pub(crate) backend: Arc<dyn DeviceBackend>,
    kind: AllocKind,
    /// The backing, a memory object of `backend`: slot `i` is it at offset
    /// `i × per_slot_bytes`.
    memory: MemoryObject,
    bytes: usize,
    /// `false` for a foreign buffer (a DLPack import), which its owner frees.
    owns_memory: bool,
    /// A pinned pool served across processes: its memory is this shared-memory segment,
    /// registered with the device (unregistered, not freed, when the pool drops).
    segment: Option<Arc<crate::ipc::Segment>>,
    readiness: Box<[EventHandle]>,
    /// `release_capacity` events per slot, slot-major.
    release_events: Box<[EventHandle]>,
    /// The raw stream registered in each release position, slot-major.
    release_streams: Box<[AtomicU64]>,
    release_capacity: u32,
    retirer: Arc<Retirer>,
}

impl Drop for DeviceBacking {
    fn drop(&mut self) {
        // A failure is noted for the session (its `join` reports it when the pool is
        // freed at teardown; a pool freed later, by a tensor kept past the session, has
        // only the trace event).
        for &e in self.readiness.iter().chain(self.release_events.iter()) {
            if let Err(error) = self.backend.destroy_event(e) {
                self.retirer.note_error(error, "a pool's events");
            }
        }
        if let Some(segment) = &self.segment {
            if let Some(ipc) = self.backend.ipc() {
                // SAFETY: as below: no pending operation uses the memory any more.
                if let Err(error) = unsafe { ipc.unregister_host(segment.as_ptr()) } {
                    self.retirer.note_error(error, "a pool's memory");
                }
            }
            return;
        }
        if !self.owns_memory {
            return;
        }
        // SAFETY: the pool is dropped only when no handle remains, and the session
        // synchronized every stream at teardown, so no pending operation uses the memory.
        if let Err(error) = unsafe {
            self.backend
                .free_memory_object(self.kind, self.memory, self.bytes)
        } {
            self.retirer.note_error(error, "a pool's memory");
        }
    }
}

/// A materialized pool.
pub(crate) struct Pool {
    pub(crate) name: String,
    /// `operator "camera", port "frames"` — interned, so hot-path errors name it without
    /// allocating.
    pub(crate) location: &'static str,
    pub(crate) kind: MemoryKind,
    pub(crate) dtype: Option<DType>,
    /// The smallest rank a loan may request: the declared exact rank, else 0.
    pub(crate) min_rank: u32,
    pub(crate) max_rank: u32,
    pub(crate) per_slot_bytes: usize,
    pub(crate) slot_count: u32,
    /// A one-slot pool around a pass-through tensor's own bytes (`Tensor::from_host_vec`),
    /// not a runtime pool of the plan.
    pub(crate) pass_through: bool,
    loan_streams: std::sync::OnceLock<LoanStreams>,
    backing: Backing,
    slots: Box<[Slot]>,
    free: FreeList,
    /// On a cache line of its own: consumers on other threads write `parking` on every
    /// release, and the producer's loans must not miss on the fields they read.
    closing: CachePadded<Closing>,
    pub(crate) counters: PoolCounters,
    /// A foreign buffer's release (the DLPack deleter of an import): run once, when the
    /// slot's last handle is released (see [`Pool::wrap_foreign`]).
    foreign: Option<AllocationDeleter>,
    /// Slots another process writes behind a generation fence (docs/IPC.md): their fence
    /// words, which tell a frame whose writer died before its fence
    /// ([`Pool::fence_abandoned`]).
    fence_words: OnceLock<FenceWords>,
}

/// The fence words of a pool's slots in another process's control segment: slot `s`'s word
/// is `first + s`; a word holding `abandoned` is a fence the writer never wrote (its
/// process died, and a watchdog or the serving seat ended the wait). While a handle of a
/// slot is held, its word is not reset (that happens when the slot is granted or sent
/// again), so a holder reads its own use's outcome.
pub(crate) struct FenceWords {
    /// A word shared with another process: std's atomic, never the loom shim's.
    pub(crate) first: std::ptr::NonNull<std::sync::atomic::AtomicU64>,
    pub(crate) abandoned: u64,
    /// Keeps the words mapped for as long as the pool lives (`None`: the slot's foreign
    /// owner does, until the slot's last handle is released).
    #[allow(dead_code, reason = "held, never read: it keeps the words mapped")]
    pub(crate) keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: the pointer is to shared atomics, only ever read atomically, mapped while `keep`
// (or the foreign owner of the slot being read) lives.
unsafe impl Send for FenceWords {}
// SAFETY: as above.
unsafe impl Sync for FenceWords {}

// SAFETY: the backing and each slot's metadata are written only by the holder of that
// slot's loan, which took the index off the free list exclusively; readers access them only
// after the loan was committed and published through a queue (a release/acquire pair), and
// the slot returns to the free list only after its last reader's release-ordered decrement
// (and, for device pools, after every registered release stream passed its event).
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Drop for Pool {
    fn drop(&mut self) {
        match self.backing {
            // SAFETY: `ptr` came from `alloc_zeroed(layout)` in `materialize`, and no handle
            // outlives the pool (each slot handle carries a strong count).
            Backing::Host {
                ptr,
                owner: HostBytes::Aligned(layout),
                ..
            } => unsafe { std::alloc::dealloc(ptr, layout) },
            // SAFETY: `ptr` came from `Box::<[u8]>::into_raw` with this length in
            // `wrap_host_bytes`; as above.
            Backing::Host {
                ptr,
                len,
                owner: HostBytes::Boxed,
            } if len > 0 => {
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
            }
            _ => {}
        }
    }
}

/// The session's handle of a pool: dropping it closes the pool (see the module
/// documentation). Derefs to the shared `Arc<Pool>`.
pub(crate) struct PoolOwner(Arc<Pool>);

impl std::ops::Deref for PoolOwner {
    type Target = Arc<Pool>;
    fn deref(&self) -> &Arc<Pool> {
        &self.0
    }
}

impl Drop for PoolOwner {
    fn drop(&mut self) {
        Pool::close(&self.0);
    }
}

/// How to materialize one pool.
pub(crate) struct PoolSpec {
    pub(crate) name: String,
    pub(crate) location: &'static str,
    pub(crate) kind: MemoryKind,
    pub(crate) dtype: Option<DType>,
    /// The exact rank of every loan (`rank = N`), if declared.
    pub(crate) rank: Option<u32>,
    pub(crate) max_rank: u32,
    pub(crate) per_slot_bytes: u64,
    pub(crate) slot_count: u32,
    pub(crate) release_capacity: u32,
    /// A host pool in a shared-memory segment (a topic exported across processes).
    pub(crate) shared_memory: bool,
}

fn exhausted(spec: &PoolSpec, what: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::ResourceExhausted,
        format!("pool {}: {what}", spec.name),
    )
    .at(spec.location)
}

impl Pool {
    /// Materializes a pool: every byte, every slot record, the full free list and, for a
    /// device pool, every event — or an error naming the pool, with everything already
    /// created released. Nothing is allocated for it afterwards.
    pub(crate) fn materialize(
        spec: PoolSpec,
        device: Option<(&Arc<dyn DeviceBackend>, &Arc<Retirer>)>,
    ) -> Result<PoolOwner> {
        let per_slot = usize::try_from(spec.per_slot_bytes).map_err(|_| {
            exhausted(
                &spec,
                format!(
                    "{} bytes per slot do not fit this host",
                    spec.per_slot_bytes
                ),
            )
        })?;
        let total = per_slot
            .checked_mul(spec.slot_count as usize)
            .ok_or_else(|| {
                exhausted(
                    &spec,
                    format!(
                        "{} slots × {per_slot} bytes overflow this host",
                        spec.slot_count
                    ),
                )
            })?;
        let backing = if spec.kind == MemoryKind::Host && spec.shared_memory {
            let segment = crate::ipc::Segment::create(&format!("holo:{}", spec.name), total)
                .map_err(|e| exhausted(&spec, e.message()))?;
            Backing::Host {
                ptr: segment.as_ptr(),
                len: total,
                owner: HostBytes::Shared(Arc::new(segment)),
            }
        } else if spec.kind == MemoryKind::Host {
            let layout = std::alloc::Layout::from_size_align(total.max(1), HOST_ALIGN)
                .map_err(|e| exhausted(&spec, format!("cannot lay out {total} bytes: {e}")))?;
            // SAFETY: `layout` has a non-zero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            if ptr.is_null() {
                return Err(exhausted(
                    &spec,
                    format!("cannot reserve {total} bytes of host memory"),
                ));
            }
            Backing::Host {
                ptr,
                len: total,
                owner: HostBytes::Aligned(layout),
            }
        } else {
            let Some((backend, retirer)) = device else {
                return Err(Error::new(
                    ErrorCode::DeviceUnavailable,
                    format!(
                        "pool {} needs {} memory, which needs a device backend: start the session with `SessionOptions::device`",
                        spec.name, spec.kind
                    ),
                )
                .at(spec.location));
            };
            // A kind of one API never lives on the other's device: a CUDA kind is not
            // "this device's memory" on OpenCL, nor `opencl_device` on CUDA.
            let api = backend.backend_kind().api();
            if !api.holds(spec.kind) {
                return Err(Error::invalid_argument(format!(
                    "pool {} needs {} memory, which a {} device does not hold ({} device {}): bind the output to a device of the kind's API, or declare `memory = device`",
                    spec.name,
                    spec.kind,
                    api,
                    backend.backend_kind().name(),
                    backend.ordinal()
                ))
                .at(spec.location));
            }
            Backing::Device(device_backing(&spec, backend, retirer, total.max(1))?)
        };
        let slots = crate::cold::boxed_slice(spec.slot_count as usize, |i| {
            Slot::new(0, TensorMeta::EMPTY, backing.readiness_of(i))
        })
        .map_err(|e| exhausted(&spec, format!("its slot records: {e}")))?;
        let free = FreeList::full(spec.slot_count)
            .map_err(|e| exhausted(&spec, format!("its free list: {e}")))?;
        Ok(Pool {
            name: spec.name,
            location: spec.location,
            kind: spec.kind,
            dtype: spec.dtype,
            // A declared rank is exact; the slot metadata has room for MAX_TENSOR_RANK
            // extents.
            min_rank: spec.rank.unwrap_or(0),
            max_rank: spec.rank.unwrap_or(spec.max_rank).min(MAX_TENSOR_RANK),
            per_slot_bytes: per_slot,
            slot_count: spec.slot_count,
            pass_through: false,
            loan_streams: std::sync::OnceLock::new(),
            backing,
            slots,
            free,
            closing: CachePadded::default(),
            counters: PoolCounters::default(),
            foreign: None,
            fence_words: OnceLock::new(),
        }
        .into_owner())
    }

    /// Shares the pool with every free slot parking one strong count (see the module
    /// documentation).
    fn into_owner(self) -> PoolOwner {
        let parked = self.free.len();
        let pool = Arc::new(self);
        for _ in 0..parked {
            // SAFETY: `pool` is a live Arc; each free slot now owns one more count.
            unsafe { Arc::increment_strong_count(Arc::as_ptr(&pool)) };
        }
        PoolOwner(pool)
    }

    /// A one-slot host pool that owns `bytes`, its slot committed with `meta` and held by
    /// one handle: the backing of a pass-through tensor. The returned count is the slot's
    /// (the tensor's); when the slot is released, the pool is freed.
    pub(crate) fn wrap_host_bytes(bytes: Box<[u8]>, meta: TensorMeta) -> Arc<Pool> {
        let len = bytes.len();
        Arc::new(Pool {
            name: String::new(),
            location: "a pass-through tensor",
            kind: MemoryKind::Host,
            dtype: Some(meta.dtype),
            min_rank: u32::from(meta.rank),
            max_rank: u32::from(meta.rank),
            per_slot_bytes: len,
            slot_count: 1,
            pass_through: true,
            loan_streams: std::sync::OnceLock::new(),
            backing: Backing::Host {
                ptr: Box::into_raw(bytes).cast::<u8>(),
                len,
                owner: HostBytes::Boxed,
            },
            slots: Box::new([Slot::new(1, meta, EventHandle::from_raw(0))]),
            free: FreeList::empty(),
            closing: CachePadded::default(),
            counters: PoolCounters::default(),
            foreign: None,
            fence_words: OnceLock::new(),
        })
    }

    // ---- foreign buffers (DLPack imports) ---------------------------------------------

    /// A one-slot pass-through pool around a foreign buffer (a DLPack import), its slot
    /// committed with `meta` and held by one handle (the returned count is the slot's). The
    /// buffer is never freed by holo's allocator: `foreign.owner` releases it, exactly once,
    /// when the slot's last handle is released — at once, or after the retirement worker saw
    /// every registered release stream pass its event. A device-backed kind starts with no
    /// readiness stream contract ([`readiness::UNCONTRACTED`]).
    ///
    /// Pools of released imports are recycled (see [`Pool::release_foreign`]): an import
    /// then allocates nothing, and reuses the event inventory of one on the same backend.
    pub(crate) fn wrap_foreign(foreign: ForeignBytes<'_>) -> Result<Arc<Pool>> {
        if let Some(mut pool) = recycled_foreign().pop()
            && let Some(p) = Arc::get_mut(&mut pool)
        {
            let old = std::mem::replace(&mut p.backing, Backing::EMPTY_FOREIGN);
            p.backing = foreign_backing(&foreign, Some(old))?;
            p.kind = foreign.kind;
            p.dtype = Some(foreign.meta.dtype);
            p.min_rank = u32::from(foreign.meta.rank);
            p.max_rank = u32::from(foreign.meta.rank);
            p.per_slot_bytes = foreign.meta.byte_size;
            let generation = p.slots[0]
                .generation
                .load(Ordering::Relaxed)
                .wrapping_add(1);
            p.slots[0] = Slot::new(1, foreign.meta, p.backing.readiness_of(0));
            p.slots[0].generation.store(generation, Ordering::Relaxed);
            p.foreign = Some(foreign.owner);
            p.fence_words = OnceLock::new();
            p.mark_uncontracted();
            return Ok(pool);
        }
        let backing = foreign_backing(&foreign, None)?;
        let ready = backing.readiness_of(0);
        let pool = Pool {
            name: String::new(),
            location: FOREIGN_LOCATION,
            kind: foreign.kind,
            dtype: Some(foreign.meta.dtype),
            min_rank: u32::from(foreign.meta.rank),
            max_rank: u32::from(foreign.meta.rank),
            per_slot_bytes: foreign.meta.byte_size,
            slot_count: 1,
            pass_through: true,
            loan_streams: OnceLock::new(),
            backing,
            slots: Box::new([Slot::new(1, foreign.meta, ready)]),
            free: FreeList::empty(),
            closing: CachePadded::default(),
            counters: PoolCounters::default(),
            foreign: Some(foreign.owner),
            fence_words: OnceLock::new(),
        };
        pool.mark_uncontracted();
        Ok(Arc::new(pool))
    }

    /// Gives the pool's slots their fence words (once; `InvalidArgument` if they have
    /// some already).
    pub(crate) fn set_fence_words(&self, words: FenceWords) -> Result<()> {
        self.fence_words
            .set(words)
            .map_err(|_| Error::invalid_argument("the pool's fence words are set already"))
    }

    /// Whether `slot`'s writer in another process died before its fence, so that the
    /// fence was abandoned (see [`FenceWords`]); false for a pool no other process writes.
    pub(crate) fn fence_abandoned(&self, slot: u32) -> bool {
        self.fence_words.get().is_some_and(|f| {
            // SAFETY: `slot` is one of this pool's slots, whose words follow `first`; they
            // are mapped while `keep` or the slot's foreign owner lives (the caller holds a
            // handle of the slot).
            let word = unsafe { &*f.first.as_ptr().add(slot as usize) };
            word.load(std::sync::atomic::Ordering::Acquire) == f.abandoned
        })
    }

    /// A device-backed foreign slot starts with no readiness stream contract.
    fn mark_uncontracted(&self) {
        if self.device().is_some() {
            self.slots[0]
                .state
                .store(readiness::UNCONTRACTED, Ordering::Release);
        }
    }

    /// The last handle of a foreign pool's slot was released (directly or by the
    /// retirement worker), carrying the pool's count: runs the foreign buffer's release
    /// (the DLPack deleter) and keeps the pool for the next import, or frees it when the
    /// reserve is full. A pool someone else still references (a `Weak` in a test) is just
    /// dropped: its release runs with its fields.
    ///
    /// # Safety
    /// `this` points to a live foreign pool, and the caller transfers the slot's count.
    #[cold]
    unsafe fn release_foreign(this: *const Pool) {
        // SAFETY: the caller's contract: this count is the slot's.
        let mut pool = unsafe { Arc::from_raw(this) };
        let Some(p) = Arc::get_mut(&mut pool) else {
            return;
        };
        // The release (the DLPack deleter, a cross-process release ticket), exactly once
        // (the option is empty afterwards) — run only once the pool is back in the
        // reserve: a release that lets its producer hand over the next buffer at once (a
        // release word an exporter polls) finds this pool there for it, and the next
        // import allocates nothing.
        let release = p.foreign.take();
        if let Backing::Host { ptr, len, .. } = &mut p.backing {
            *ptr = std::ptr::null_mut();
            *len = 0;
        }
        // A full reserve hands the pool back: it is freed.
        drop(recycled_foreign().push(pool));
        drop(release);
    }

    /// Whether the pool wraps a foreign buffer (a DLPack import).
    pub(crate) fn is_foreign(&self) -> bool {
        self.foreign.is_some()
    }

    /// Whether consumers can be ordered behind `slot`'s writes: everything but a
    /// device-memory import whose producer's stream was never recorded.
    pub(crate) fn has_readiness_contract(&self, slot: u32) -> bool {
        self.slots[slot as usize].state.load(Ordering::Acquire) != readiness::UNCONTRACTED
    }

    /// Records the readiness event of a device-backed foreign slot on `stream`, the stream
    /// its foreign producer wrote on: from then on consumers wait on it. `NotSupported` for
    /// any other pool (a runtime slot's readiness is recorded at commit; host bytes need
    /// none).
    pub(crate) fn record_foreign_readiness(
        &self,
        slot: u32,
        stream: crate::device::StreamOrQueue,
    ) -> Result<()> {
        let (true, Some(d)) = (self.is_foreign(), self.device()) else {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "set_readiness_stream is for a device-memory tensor imported through DLPack: a runtime tensor's readiness was recorded at its producer's commit, and host memory needs none",
            )
            .at(self.location));
        };
        let stream = d
            .backend
            .adopt_stream(stream)
            .map_err(|e| e.at(self.location))?;
        let s = &self.slots[slot as usize];
        // One recorder at a time; a consumer that finds RECORDING spins until it is done.
        let before = loop {
            let state = s.state.load(Ordering::Acquire);
            if state != readiness::RECORDING
                && s.state
                    .compare_exchange(
                        state,
                        readiness::RECORDING,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
            {
                break state;
            }
            sync::spin_loop();
        };
        let r = d.backend.record_event(s.ready, stream);
        if r.is_ok() {
            s.writer.store(stream.raw(), Ordering::Relaxed);
        }
        s.state.store(
            if r.is_ok() {
                readiness::RECORDED
            } else {
                before
            },
            Ordering::Release,
        );
        d.backend.release_adopted_stream(stream);
        r.map_err(|e| e.at(self.location))
    }

    /// Why a foreign slot without a readiness stream contract cannot be ordered.
    #[cold]
    #[inline(never)]
    fn uncontracted(&self, slot: u32) -> Error {
        let meta = self.meta(slot);
        Error::new(
            ErrorCode::ProtocolError,
            format!(
                "the {} tensor {:?} of {} imported through DLPack has no readiness stream contract, so no consumer can be ordered behind its producer's writes: call set_readiness_stream(<the stream its producer wrote on>) before a stream-aware consumer takes it",
                self.kind,
                meta.shape(),
                meta.dtype
            ),
        )
        .at(self.location)
    }

    /// Borrows a free slot, or `ResourceExhausted` at once. The slot starts with one
    /// reference (the loan's), no writer, host readiness and no release stream.
    #[inline]
    pub(crate) fn borrow_slot(&self) -> Result<u32> {
        let Some(slot) = self.free.pop().or_else(|| self.reclaim()) else {
            cold_path();
            self.counters.exhausted.fetch_add(1, Ordering::Relaxed);
            crate::trace::event!(debug, pool = %self.name, "allocate_tensor refused: no free slot");
            return Err(Error::new(
                ErrorCode::ResourceExhausted,
                "the pool has no free slot: every slot is queued, held, loaned or retiring (allocate_tensor never waits)",
            )
            .at(self.location));
        };
        let s = &self.slots[slot as usize];
        s.refs.store(1, Ordering::Relaxed);
        // Only the loaning thread writes it, while it holds the slot alone: no
        // read-modify-write. Release: a reader that sees the new generation sees the loan.
        s.generation.store(
            s.generation.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
        // A host pool's slots are never stream-written and never get a release stream:
        // their writer, readiness and release count keep their initial values.
        if let Backing::Device(_) = self.backing {
            s.writer.store(0, Ordering::Relaxed);
            s.state.store(readiness::HOST, Ordering::Relaxed);
            s.release_count.store(0, Ordering::Relaxed);
            s.release_clean.store(0, Ordering::Relaxed);
            s.release_sticky.store(0, Ordering::Relaxed);
        }
        // Only the owning operator's thread borrows from its pool.
        let c = &self.counters.loans;
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Ok(slot)
    }

    /// The free list is empty: a device pool's slots may be waiting on the retirement
    /// worker with their release events already complete. Polls them on this thread
    /// ([`Retirer::assist`]: no wait) and pops again.
    #[cold]
    #[inline(never)]
    fn reclaim(&self) -> Option<u32> {
        match &self.backing {
            Backing::Device(d) if d.retirer.assist() => self.free.pop(),
            _ => None,
        }
    }

    /// The current use of `slot` (held by the caller: its generation cannot change).
    #[inline]
    pub(crate) fn slot_ref(&self, slot: u32) -> crate::channel::SlotRef {
        crate::channel::SlotRef {
            slot,
            generation: self.slots[slot as usize].generation.load(Ordering::Acquire),
        }
    }

    /// Checks that `r` names the current use of one of this pool's slots, a use some
    /// handle still holds: `InvalidArgument` for a slot this pool does not have, a stale
    /// generation (the slot was loaned again since) or a slot no handle holds.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the check the DLPack capsules and cross-process descriptors of the next issues call; tested here"
        )
    )]
    pub(crate) fn check_slot_ref(&self, r: crate::channel::SlotRef) -> Result<()> {
        let Some(s) = self.slots.get(r.slot as usize) else {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("{r} does not exist: the pool has {} slots", self.slot_count),
            )
            .at(self.location));
        };
        let current = s.generation.load(Ordering::Acquire);
        if current != r.generation {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("{r} is stale: the slot is at generation {current} (it was loaned again)"),
            )
            .at(self.location));
        }
        if s.refs.load(Ordering::Acquire) == 0 {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("{r} was released: no handle holds that use of the slot"),
            )
            .at(self.location));
        }
        Ok(())
    }

    /// Binds the streams of the pool's output (once; the session binds each output once).
    pub(crate) fn bind_loan_streams(&self, streams: LoanStreams) {
        let _ = self.loan_streams.set(streams);
    }

    /// The streams of the pool's output (none before the session bound it).
    #[inline]
    pub(crate) fn loan_streams(&self) -> LoanStreams {
        self.loan_streams.get().copied().unwrap_or_default()
    }

    /// Borrows a slot for a loan of `shape` × `dtype` and writes the slot's metadata in
    /// place: the request is checked against the declared dtype, `max_rank` and per-slot
    /// bound first, and a pool with no free slot gives `ResourceExhausted` at once.
    #[inline]
    pub(crate) fn loan(&self, shape: &[u64], dtype: DType) -> Result<u32> {
        let bytes = self.check_shape(shape, dtype)?;
        let slot = self.borrow_slot()?;
        // SAFETY: the slot was just borrowed: this loan has exclusive write authority over
        // its metadata until commit publishes it.
        unsafe { self.write_meta(slot, shape, dtype, bytes) };
        Ok(slot)
    }

    /// Gives a loaned slot the shape and dtype it is written with (a slot granted to a
    /// publisher in another process before it knew them), refused as a loan of them is.
    ///
    /// # Safety
    /// The caller holds `slot`'s loan, not yet committed.
    pub(crate) unsafe fn shape_loan(&self, slot: u32, shape: &[u64], dtype: DType) -> Result<()> {
        let bytes = self.check_shape(shape, dtype)?;
        // SAFETY: the caller's contract: the loan's exclusive write authority.
        unsafe { self.write_meta(slot, shape, dtype, bytes) };
        Ok(())
    }

    /// The bytes of a loan of `shape` and `dtype`, or the refusal naming why not.
    #[inline]
    fn check_shape(&self, shape: &[u64], dtype: DType) -> Result<u64> {
        if self.dtype.is_some_and(|d| d != dtype)
            || shape.len() > self.max_rank as usize
            || shape.len() < self.min_rank as usize
        {
            cold_path();
            return Err(self.refuse(shape, dtype));
        }
        match checked_byte_size(shape, dtype) {
            Some(b) if b <= self.per_slot_bytes as u64 => Ok(b),
            _ => {
                cold_path();
                Err(self.refuse(shape, dtype))
            }
        }
    }

    /// Writes a loaned slot's metadata.
    ///
    /// # Safety
    /// The caller holds the slot's loan (exclusive write authority over its metadata).
    #[inline]
    unsafe fn write_meta(&self, slot: u32, shape: &[u64], dtype: DType, bytes: u64) {
        // SAFETY: the caller's contract.
        let m = unsafe { &mut *self.slots[slot as usize].meta.get() };
        #[allow(
            clippy::cast_possible_truncation,
            reason = "shape.len() <= max_rank <= MAX_TENSOR_RANK, and bytes <= per_slot_bytes, a usize"
        )]
        {
            m.rank = shape.len() as u8;
            m.byte_size = bytes as usize;
        }
        m.dtype = dtype;
        for (d, &e) in m.shape.iter_mut().zip(shape) {
            *d = e;
        }
    }

    /// Why a loan request was refused (off the hot path).
    #[cold]
    #[inline(never)]
    fn refuse(&self, shape: &[u64], dtype: DType) -> Error {
        let (code, why) = if self.dtype.is_some_and(|d| d != dtype) {
            (
                ErrorCode::InvalidArgument,
                "the loan's dtype differs from the dtype the output declares",
            )
        } else if self.min_rank > 0
            && self.min_rank == self.max_rank
            && shape.len() != self.max_rank as usize
        {
            (
                ErrorCode::InvalidArgument,
                "the loan's rank differs from the rank the output declares (`rank = N` is exact)",
            )
        } else if shape.len() > self.max_rank as usize {
            (
                ErrorCode::InvalidArgument,
                "the loan's rank exceeds the output's max_rank (a zero bound rejects every loan)",
            )
        } else if checked_byte_size(shape, dtype).is_none() {
            (
                ErrorCode::ArithmeticOverflow,
                "the loan's byte size overflows",
            )
        } else {
            (
                ErrorCode::InvalidArgument,
                "the loan's byte size exceeds the pool's per-slot bound (a zero bound rejects every loan)",
            )
        };
        Error::new(code, why).at(self.location)
    }

    /// Where `slot`'s bytes are: the backing's memory object and the slot's offset in it
    /// (a host pool's object is its block's address).
    #[inline]
    pub(crate) fn buffer(&self, slot: u32) -> BufferRef {
        let memory = match &self.backing {
            Backing::Host { ptr, .. } => {
                MemoryObject::from_raw(DevicePtr::from_host_ptr(*ptr).raw())
            }
            Backing::Device(d) => d.memory,
        };
        BufferRef {
            memory,
            offset: u64::from(slot) * self.per_slot_bytes as u64,
            len: self.per_slot_bytes as u64,
        }
    }

    /// The address of `slot`'s bytes, on a backend with unified addressing (a host
    /// address for host-accessible memory). On one without, the memory object plus
    /// offset ([`buffer`](Self::buffer)) is the bytes' only name.
    #[inline]
    pub(crate) fn slot_addr(&self, slot: u32) -> DevicePtr {
        let offset = slot as usize * self.per_slot_bytes;
        match &self.backing {
            // SAFETY: `slot < slot_count`, so the offset stays inside the allocation.
            Backing::Host { ptr, .. } => DevicePtr::from_host_ptr(unsafe { ptr.add(offset) }),
            Backing::Device(d) => DevicePtr::from_raw(d.memory.raw().wrapping_add(offset as u64)),
        }
    }

    /// The bytes of `slot` as a host pointer (host-accessible kinds only).
    #[inline]
    pub(crate) fn slot_ptr(&self, slot: u32) -> *mut u8 {
        self.slot_addr(slot).as_host_ptr()
    }

    /// A descriptor of a device pool's memory for another process (the pool of a topic
    /// served across processes in device memory), and the bytes it holds.
    pub(crate) fn export_device_memory(&self) -> Result<(std::os::fd::OwnedFd, usize)> {
        let d = self.device().ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                "a host pool has no device memory to export",
            )
        })?;
        let ipc = d.backend.ipc().ok_or_else(|| {
            Error::new(
                ErrorCode::NotSupported,
                "the pool's backend cannot share memory with another process",
            )
        })?;
        Ok((ipc.export_fd(DevicePtr::from_raw(d.memory.raw()))?, d.bytes))
    }

    /// The shared-memory segment of a pool served across processes (host or pinned).
    pub(crate) fn shared_segment(&self) -> Option<&Arc<crate::ipc::Segment>> {
        match &self.backing {
            Backing::Host {
                owner: HostBytes::Shared(s),
                ..
            } => Some(s),
            Backing::Device(d) => d.segment.as_ref(),
            Backing::Host { .. } => None,
        }
    }

    /// Marks a device-backed foreign slot's bytes complete on the host: a pinned frame
    /// another process wrote on the host (no stream to wait for).
    pub(crate) fn mark_foreign_host_ready(&self, slot: u32) {
        if self.is_foreign() {
            self.slots[slot as usize]
                .state
                .store(readiness::HOST, Ordering::Release);
        }
    }

    /// The bytes each slot has.
    pub(crate) fn per_slot_bytes(&self) -> usize {
        self.per_slot_bytes
    }

    /// The device side, for device-backed pools.
    #[inline]
    pub(crate) fn device(&self) -> Option<&DeviceBacking> {
        match &self.backing {
            Backing::Device(d) => Some(d),
            Backing::Host { .. } => None,
        }
    }

    /// The metadata of a committed slot.
    #[inline]
    pub(crate) fn meta(&self, slot: u32) -> &TensorMeta {
        // SAFETY: read only through a handle of a committed slot, after publication;
        // nobody writes the metadata until the slot is free again.
        unsafe { &*self.slots[slot as usize].meta.get() }
    }

    #[inline]
    pub(crate) fn retain(&self, slot: u32) {
        self.slots[slot as usize]
            .refs
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one handle of `slot`. The last one records a release event on every
    /// registered release stream and hands the slot to the retirement worker, or returns
    /// it to the free list at once when none was registered. Either way the slot's strong
    /// count goes with it, so `this` may be freed by the time this returns: the caller
    /// must not use the pool afterwards.
    ///
    /// A fan-out's consumers each record their own stream's release event: a handle whose
    /// `holder` owns one of several release streams records that stream's event then (the
    /// holder's work on the slot is all enqueued by then), and the last handle records
    /// only the streams not so covered. So no thread records on a stream another thread
    /// is submitting to (on the H200 such a record took 3-5 µs, against 0.2-0.7 µs on the
    /// thread's own stream).
    #[inline]
    pub(crate) fn release(this: &Arc<Pool>, slot: u32, holder: Holder) {
        let pool: &Pool = this;
        let s = &pool.slots[slot as usize];
        // Whether this call just recorded its own stream's release event.
        let mut recorded_own = false;
        // The sole handle (the usual case: one consumer) needs no read-modify-write: no
        // other handle exists to clone from, so nobody can raise the count meanwhile. The
        // acquire load orders this after every other handle's release-ordered decrement.
        if s.refs.load(Ordering::Acquire) == 1 {
            s.refs.store(0, Ordering::Relaxed);
        } else {
            if let Backing::Device(d) = &pool.backing
                && s.release_count.load(Ordering::Acquire) > 1
            {
                // Before the decrement: the last handle must see the record.
                recorded_own = pool.record_own_release(d, slot, holder);
            }
            if s.refs.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            fence(Ordering::Acquire);
        }
        if let Backing::Device(d) = &pool.backing
            && s.release_count.load(Ordering::Relaxed) > 0
        {
            // The step that may free the pool runs here, where `d` is a local borrow: in
            // `retire`, whose arguments the borrow rules protect for the whole call, the
            // pool freed under `d` was undefined (found by Miri: RELIABILITY.md).
            match Self::retire(this, d, slot, holder, recorded_own) {
                Retired::ToWorker(carried) => {
                    if let Some(back) = d.retirer.retire(carried, slot) {
                        Self::return_retired(back, slot);
                    }
                }
                // SAFETY: the caller's handle carried the slot's count, which `park`
                // takes over (and drops, the pool being closed).
                Retired::AfterTeardown => unsafe { Self::park(Arc::as_ptr(this), slot) },
                Retired::Withheld => {}
            }
            return;
        }
        // The owner thread parks the slot privately (the in-partition hop); after `close`
        // nothing parks (and the owner thread has exited by then in a session).
        if !pool.pass_through
            && !pool.closing.closed.load(Ordering::Relaxed)
            && pool.free.push_owned(slot)
        {
            return;
        }
        // SAFETY: the caller's handle carried the slot's count, which `park` takes over.
        unsafe { Self::park(Arc::as_ptr(this), slot) };
    }

    /// A handle of `slot` other than the last is dropped by `holder`: if it owns one of
    /// the slot's release positions (its partition's own stream), records that stream's
    /// release event now — the holder submits to that stream alone, and its work on the
    /// slot is enqueued by then — and marks it clean. Returns whether it recorded. Not
    /// `#[cold]`: it is every fan-out consumer's release path but the last one's.
    fn record_own_release(&self, d: &DeviceBacking, slot: u32, holder: Holder) -> bool {
        let Some(i) = holder.position() else {
            return false;
        };
        let s = &self.slots[slot as usize];
        if i >= (s.release_count.load(Ordering::Acquire) as usize).min(CLEAN_BITS) {
            return false;
        }
        let base = slot as usize * d.release_capacity as usize;
        let stream = StreamHandle::from_raw(d.release_streams[base + i].load(Ordering::Relaxed));
        match d.backend.record_event(d.release_events[base + i], stream) {
            Ok(()) => {
                s.release_clean.fetch_or(1 << i, Ordering::Release);
                true
            }
            Err(e) => {
                // Left unclean: the last handle records it again (or waits for the
                // stream). The failure stops the session.
                d.retirer.note_error(e, self.location);
                s.release_clean.fetch_and(!(1 << i), Ordering::Release);
                false
            }
        }
    }

    /// A hand-off that holds `slot` in a borrowed stream's release position `holder`
    /// ([`DomainOwner::Borrowed`](crate::channel::DomainOwner::Borrowed)) ends: records
    /// that stream's release event now — the caller's work on the slot is enqueued by
    /// then, and the caller may destroy the stream afterwards — and marks it clean, so the
    /// slot's last handle does not record on the stream again. Call it before dropping the
    /// hand-off's handle.
    ///
    /// `on` records it on another stream that is ordered after the registered one (CUDA's
    /// legacy default stream for a per-thread default stream used from another thread).
    ///
    /// `mark_clean` false (a stream the backend runs itself, which other holders of the
    /// slot may go on using): the event is recorded but the position is not marked, so the
    /// slot's last handle records it again.
    #[inline]
    pub(crate) fn record_release_at(
        &self,
        slot: u32,
        holder: Holder,
        on: Option<StreamHandle>,
        mark_clean: bool,
    ) -> Result<()> {
        let (Some(d), Some(i)) = (self.device(), holder.position()) else {
            return Ok(());
        };
        let s = &self.slots[slot as usize];
        let base = slot as usize * d.release_capacity as usize;
        let stream = on.unwrap_or_else(|| {
            StreamHandle::from_raw(d.release_streams[base + i].load(Ordering::Relaxed))
        });
        // SAFETY: the event is this pool's (live until the pool drops, which this call's
        // caller keeps from happening by holding a handle); the stream is the hand-off's,
        // which holds its adoption until after this call.
        unsafe {
            d.backend
                .record_event_unchecked(d.release_events[base + i], stream)?;
        }
        // Already clean (an earlier hand-off's record, with no entry clearing it since:
        // see `enter_borrowed`): nothing to write.
        if mark_clean && s.release_clean.load(Ordering::Relaxed) & (1 << i) == 0 {
            s.release_clean.fetch_or(1 << i, Ordering::Release);
        }
        Ok(())
    }

    /// Marks `holder`'s release position of `slot` clean without recording: the stream's
    /// work on the slot is known complete (a hand-off that could not record its release
    /// waited for the stream on the host).
    pub(crate) fn mark_release_clean(&self, slot: u32, holder: Holder) {
        if let (Some(_), Some(i)) = (self.device(), holder.position())
            && i < CLEAN_BITS
        {
            self.slots[slot as usize]
                .release_clean
                .fetch_or(1 << i, Ordering::Release);
        }
    }

    /// A hand-off enters a caller stream's domain
    /// ([`DomainOwner::Borrowed`](crate::channel::DomainOwner::Borrowed)): registers
    /// `stream` as a release stream of `slot` unless it already is one, and returns its
    /// release position ([`Holder::NONE`] past the first 64).
    ///
    /// A stream already registered is found without the slot's registration lock: an
    /// entry below the acquire-loaded count is written once, before the count, and stays
    /// until the slot is loaned again, which the caller's handle keeps from happening.
    ///
    /// `hand_offs_only`: every user of the stream's position is a hand-off that records
    /// its release when it ends ([`record_release_at`](Self::record_release_at) with
    /// `mark_clean`: a caller's raw stream, which no partition submits to). Then the clean
    /// mark an earlier hand-off left is kept: the slot cannot retire before this hand-off
    /// ends (it holds a handle), and its end records the release again. Otherwise (a
    /// stream the backend runs itself) the mark is cleared as
    /// [`enter_domain`](Self::enter_domain) does.
    #[inline]
    pub(crate) fn enter_borrowed(
        &self,
        slot: u32,
        stream: StreamHandle,
        hand_offs_only: bool,
    ) -> Result<Holder> {
        if let Some(position) = self.enter_position(slot, stream, !hand_offs_only) {
            return Ok(position);
        }
        self.register_release(slot, OrderingDomain::borrowed(stream))?;
        Ok(self.enter_domain(slot, stream))
    }

    /// A holder received `slot` into its stream `stream` (registered as a release stream
    /// when the slot was published to it): the release event it may have recorded on that
    /// stream no longer covers its work, so the clean mark is cleared. Returns the
    /// stream's release position, which a holder owning the stream alone keeps in its
    /// handle ([`Holder`]); [`Holder::NONE`] if the stream is not one of the slot's
    /// first 64 release streams.
    #[inline]
    pub(crate) fn enter_domain(&self, slot: u32, stream: StreamHandle) -> Holder {
        self.enter_position(slot, stream, true)
            .unwrap_or(Holder::NONE)
    }

    /// `stream`'s release position of `slot` among its first 64 release streams, found
    /// without the registration lock (an entry below the acquire-loaded count is final
    /// while a handle of the slot is held), its clean mark cleared if `clear`; `None` if
    /// the stream is not there (or the pool is on the host).
    #[inline]
    fn enter_position(&self, slot: u32, stream: StreamHandle, clear: bool) -> Option<Holder> {
        let d = self.device()?;
        let s = &self.slots[slot as usize];
        let i = Self::position_of(d, s, slot, stream)?;
        if clear && s.release_clean.load(Ordering::Relaxed) & (1 << i) != 0 {
            s.release_clean.fetch_and(!(1 << i), Ordering::Relaxed);
        }
        #[allow(
            clippy::cast_possible_truncation,
            reason = "i < CLEAN_BITS = 64 fits in u8"
        )]
        Some(Holder(i as u8))
    }

    /// `stream`'s index among the first 64 release streams of slot `slot` (`s`), without
    /// the registration lock: an entry below the acquire-loaded count is final while a
    /// handle of the slot is held.
    #[inline]
    fn position_of(d: &DeviceBacking, s: &Slot, slot: u32, stream: StreamHandle) -> Option<usize> {
        let base = slot as usize * d.release_capacity as usize;
        let n = (s.release_count.load(Ordering::Acquire) as usize).min(CLEAN_BITS);
        (0..n).find(|&i| d.release_streams[base + i].load(Ordering::Relaxed) == stream.raw())
    }

    /// A steady-state hand-off's whole lookup in one pass over `slot`: its readiness event
    /// and `stream`'s release position — with what the hand-off's end needs, so that it
    /// does not look them up again ([`SteadyHandOff`]) — when the slot is on the device,
    /// its readiness is recorded, `stream` (whose raw value is `raw`) is not the writer's,
    /// and it is already one of the slot's first 64 release streams. `None` otherwise: the
    /// caller takes the general path ([`readiness_event`](Self::readiness_event),
    /// [`enter_borrowed`](Self::enter_borrowed)), which decides every other case. Clears
    /// no clean mark: for a stream only hand-offs use (`enter_borrowed`'s
    /// `hand_offs_only`).
    #[inline]
    pub(crate) fn registered_hand_off(
        &self,
        slot: u32,
        stream: StreamHandle,
        raw: u64,
    ) -> Option<SteadyHandOff<'_>> {
        let d = self.device()?;
        let s = &self.slots[slot as usize];
        if s.state.load(Ordering::Acquire) != readiness::RECORDED
            || s.writer.load(Ordering::Acquire) == raw
        {
            return None;
        }
        let i = Self::position_of(d, s, slot, stream)?;
        #[allow(
            clippy::cast_possible_truncation,
            reason = "i < CLEAN_BITS = 64 fits in u8"
        )]
        Some(SteadyHandOff {
            backing: d,
            ready: s.ready,
            end: HandOffEnd {
                backend: &*d.backend,
                release: d.release_events[slot as usize * d.release_capacity as usize + i],
                clean: &s.release_clean,
                bit: 1 << i,
                stream,
                position: Holder(i as u8),
            },
        })
    }

    /// The release event of `stream`'s position in `slot` (`None` if the stream is not one
    /// of the slot's first 64 release streams): the event a hand-off on that stream records
    /// when it ends. Read-only: no clean mark is touched.
    pub(crate) fn release_event(&self, slot: u32, stream: StreamHandle) -> Option<EventHandle> {
        let d = self.device()?;
        let i = Self::position_of(d, &self.slots[slot as usize], slot, stream)?;
        Some(d.release_events[slot as usize * d.release_capacity as usize + i])
    }

    /// Records the release events of `slot` not already recorded by their holders, and
    /// hands the slot, with its count, to the retirement worker. The last holder's own
    /// position is recorded again (it may have used the slot through another handle since
    /// an earlier record) unless `recorded_own`: it was recorded in this same release.
    /// Returns what the caller does with the slot's count then; nothing here may free
    /// the pool while `d`, a borrow into it, is an argument.
    #[cold]
    fn retire(
        this: &Arc<Pool>,
        d: &DeviceBacking,
        slot: u32,
        holder: Holder,
        recorded_own: bool,
    ) -> Retired {
        if !d.retirer.enter() {
            Self::release_after_teardown(this, d, slot);
            return Retired::AfterTeardown;
        }
        let s = &this.slots[slot as usize];
        let base = slot as usize * d.release_capacity as usize;
        let own = holder.position();
        let clean =
            s.release_clean.load(Ordering::Acquire) & !s.release_sticky.load(Ordering::Acquire);
        for i in 0..s.release_count.load(Ordering::Relaxed) as usize {
            let raw = d.release_streams[base + i].load(Ordering::Relaxed);
            if i < CLEAN_BITS && clean & (1 << i) != 0 && (own != Some(i) || recorded_own) {
                continue;
            }
            let stream = StreamHandle::from_raw(raw);
            if let Err(e) = d.backend.record_event(d.release_events[base + i], stream) {
                // The event still holds an earlier recording, which does not cover the
                // stream's latest work on the slot: wait for the stream on the host
                // instead (a cold path), so the poll cannot return the slot early. The
                // failure stops the session; if the stream cannot be waited on either,
                // the slot is withheld.
                d.retirer.note_error(e, this.location);
                if let Err(e) = d.backend.synchronize_stream(stream) {
                    d.retirer.note_error(e, this.location);
                    // SAFETY: the slot's count, carried by the caller's handle, moves
                    // into this Arc, which is withheld (never dropped).
                    d.retirer
                        .withhold(unsafe { Arc::from_raw(Arc::as_ptr(this)) });
                    return Retired::Withheld;
                }
            }
        }
        // SAFETY: the slot's count moves into this Arc (no increment: the caller's handle
        // carried it); the worker gives it back through `return_retired`.
        Retired::ToWorker(unsafe { Arc::from_raw(Arc::as_ptr(this)) })
    }

    /// The last handle of `slot` was dropped after its session's teardown closed the
    /// retirer (a tensor kept past `join`): the session's streams were synchronized then
    /// and may be destroyed now, so nothing is recorded on them; a stream a user call
    /// registered (`copy_to_host_async`, `synchronize_for_consumer_stream`) is the
    /// caller's own: its release event is recorded there. Then the slot waits on the host
    /// for every release event of the slot (a cold path: once per late release) — a
    /// hand-off's (a `DeviceArray`, a DLPack capsule) was recorded on the caller's stream
    /// when it ended, and the caller's work there may still run — and goes back without
    /// the worker (the caller parks it: the pool is freed once nothing else holds it, so
    /// not under that work).
    #[cold]
    #[inline(never)]
    fn release_after_teardown(this: &Arc<Pool>, d: &DeviceBacking, slot: u32) {
        let s = &this.slots[slot as usize];
        let base = slot as usize * d.release_capacity as usize;
        let sticky = s.release_sticky.load(Ordering::Acquire);
        let n = s.release_count.load(Ordering::Acquire) as usize;
        for i in 0..n.min(CLEAN_BITS) {
            let event = d.release_events[base + i];
            if sticky & (1 << i) != 0 {
                let stream =
                    StreamHandle::from_raw(d.release_streams[base + i].load(Ordering::Relaxed));
                // A failure here has no session left to report to; the wait below covers
                // the event's earlier recording at least.
                let _ = d.backend.record_event(event, stream);
            }
            // A session stream's event completed with the teardown's synchronization;
            // an event never recorded completes at once.
            let _ = d.backend.synchronize_event(event);
        }
    }

    /// Parks `slot` and its strong count on the shared free list from any thread (every
    /// release of a cross-partition consumer comes here), or
    /// drops the count once the pool is closed (a pass-through pool's slot always drops
    /// it: its pool goes with its last handle).
    ///
    /// # Safety
    /// `this` points to a live pool, and the caller transfers one strong count carried by
    /// `slot`'s last handle. The pool may be freed when this returns.
    unsafe fn park(this: *const Pool, slot: u32) {
        {
            // SAFETY: the carried count keeps the pool alive until it is parked or dropped.
            let pool = unsafe { &*this };
            if !pool.pass_through {
                pool.closing.parking.fetch_add(1, Ordering::SeqCst);
                sync::sc_handshake();
                if !pool.closing.closed.load(Ordering::SeqCst) {
                    pool.free.push_shared(slot);
                    // The closer waits for `parking` to drop to zero before it drains, so
                    // this slot's count is drained with the rest.
                    pool.closing.parking.fetch_sub(1, Ordering::SeqCst);
                    return;
                }
                pool.closing.parking.fetch_sub(1, Ordering::SeqCst);
            } else if pool.foreign.is_some() {
                // SAFETY: the caller's contract: the carried count moves on.
                unsafe { Self::release_foreign(this) };
                return;
            }
        }
        // SAFETY: the carried count; nothing touches the pool after this.
        unsafe { Arc::decrement_strong_count(this) };
    }

    /// Closes the pool (see [`PoolOwner`]): from now on released slots drop their count,
    /// and the counts parked on the free list are dropped now.
    fn close(this: &Arc<Pool>) {
        this.closing.closed.store(true, Ordering::SeqCst);
        // With `park`'s: either it sees `closed`, or this sees its `parking`.
        sync::sc_handshake();
        while this.closing.parking.load(Ordering::SeqCst) != 0 {
            sync::spin_loop();
        }
        // A thread that still owns the private stack (a pool used outside a session, on
        // the caller's thread) gives it back first; a partition thread gave it back before
        // it exited.
        this.free.give_back();
        let mut parked = 0usize;
        while this.free.pop().is_some() {
            parked += 1;
        }
        for _ in 0..parked {
            // SAFETY: each drained slot carried one count; `this` (the owner's Arc) keeps
            // the pool alive through the loop.
            unsafe { Arc::decrement_strong_count(Arc::as_ptr(this)) };
        }
    }

    /// Whether every release event of `slot` completed (polled by the retirement worker;
    /// never blocks). `done` counts the slot's first events already found complete by an
    /// earlier poll: they are not queried again (a completed event stays so until the
    /// slot is loaned and released again, and a pending slot is neither), and it grows as
    /// this poll finds more. On the H200 every query takes the driver's context lock that
    /// the partitions' submissions need (1.5 µs a query in the three-partition fork).
    ///
    /// `busy`: the release streams on which this pass of the worker already found an
    /// event incomplete. An event on one of them is not queried (it was recorded later on
    /// that stream, so it is incomplete too, or at worst found complete one pass later):
    /// a worker that fell behind makes one query per busy stream per pass, not one per
    /// pending slot, and leaves the driver's lock to the threads that submit.
    pub(crate) fn release_complete(
        &self,
        slot: u32,
        done: &mut u32,
        busy: &mut BusyStreams,
    ) -> Result<bool> {
        let Backing::Device(d) = &self.backing else {
            return Ok(true);
        };
        let s = &self.slots[slot as usize];
        let base = slot as usize * d.release_capacity as usize;
        let count = s.release_count.load(Ordering::Relaxed);
        while *done < count {
            let i = base + *done as usize;
            let stream = d.release_streams[i].load(Ordering::Relaxed);
            if busy.contains(stream) {
                return Ok(false);
            }
            if !d.backend.query_event(d.release_events[i])? {
                busy.insert(stream);
                return Ok(false);
            }
            *done += 1;
        }
        Ok(true)
    }

    /// Waits on the host for every release event of `slot` (the retirement worker's
    /// fallback when polling failed).
    pub(crate) fn wait_release(&self, slot: u32) -> Result<()> {
        let Backing::Device(d) = &self.backing else {
            return Ok(());
        };
        let s = &self.slots[slot as usize];
        let base = slot as usize * d.release_capacity as usize;
        for i in 0..s.release_count.load(Ordering::Relaxed) as usize {
            d.backend.synchronize_event(d.release_events[base + i])?;
        }
        Ok(())
    }

    /// Returns a retired slot, with the count `pool` carries, to the free list.
    pub(crate) fn return_retired(pool: Arc<Pool>, slot: u32) {
        let this = Arc::into_raw(pool);
        // SAFETY: `into_raw` hands over exactly the slot's count.
        unsafe { Self::park(this, slot) };
    }

    /// Makes the calling thread (the owning operator's partition thread) the free list's
    /// owner: slots released on it are reused without a compare-and-swap.
    pub(crate) fn claim_free_list(&self) {
        self.free.claim();
    }

    /// The owner thread gives its private free slots back (before it exits).
    pub(crate) fn give_back_free_list(&self) {
        self.free.give_back();
    }

    /// Slots currently free.
    pub(crate) fn free_slots(&self) -> u32 {
        u32::try_from(self.free.len()).unwrap_or(u32::MAX)
    }

    // ---- the stream contract on one slot ---------------------------------------------

    /// The loan of `slot` is written in `writer`'s domain (its readiness will be recorded
    /// there).
    #[inline]
    pub(crate) fn set_writer(&self, slot: u32, writer: OrderingDomain) {
        self.slots[slot as usize].writer.store(
            writer.stream().map_or(0, StreamHandle::raw),
            Ordering::Relaxed,
        );
    }

    /// Whether the session that owns this pool synchronized its streams in its teardown
    /// (they are gone: nothing may be recorded or waited on them).
    pub(crate) fn session_quiesced(&self) -> bool {
        self.device().is_some_and(|d| d.retirer.is_quiesced())
    }

    /// The stream `slot`'s loan was written on (`None`: written on the host).
    #[inline]
    pub(crate) fn writer_stream(&self, slot: u32) -> Option<StreamHandle> {
        match self.slots[slot as usize].writer.load(Ordering::Acquire) {
            0 => None,
            raw => Some(StreamHandle::from_raw(raw)),
        }
    }

    pub(crate) fn readiness_state(&self, slot: u32) -> u8 {
        self.slots[slot as usize].state.load(Ordering::Acquire)
    }

    /// Commits `slot` in the writer's domain: on the host nothing is recorded (the bytes
    /// are complete); on a stream the readiness event is recorded there, or (`elide`: a
    /// fused edge) nothing is recorded and the readiness is marked elided.
    pub(crate) fn commit(&self, slot: u32, writer: OrderingDomain, elide: bool) -> Result<()> {
        let s = &self.slots[slot as usize];
        let Some(stream) = writer.stream() else {
            s.state.store(readiness::HOST, Ordering::Release);
            return Ok(());
        };
        if elide {
            s.state.store(readiness::ELIDED, Ordering::Release);
            return Ok(());
        }
        let d = self
            .device()
            .ok_or_else(|| Error::new(ErrorCode::Internal, "a stream commit on a host pool"))?;
        d.backend.record_event(s.ready, stream)?;
        s.state.store(readiness::RECORDED, Ordering::Release);
        Ok(())
    }

    /// The readiness event of a stream-written slot, recording it now on the writer's
    /// stream if fusion elided it (the lazy fallback to the full contract). `None` for
    /// bytes that are complete on the host.
    #[inline]
    pub(crate) fn readiness_event(
        &self,
        slot: u32,
    ) -> Result<Option<(EventHandle, &Arc<dyn DeviceBackend>)>> {
        // The usual case, inlined into the hand-off and the delivery: recorded already.
        let s = &self.slots[slot as usize];
        if let Some(d) = self.device()
            && s.state.load(Ordering::Acquire) == readiness::RECORDED
        {
            return Ok(Some((s.ready, &d.backend)));
        }
        self.readiness_event_slow(slot)
    }

    /// [`readiness_event`](Self::readiness_event) for every state but a recorded one.
    #[inline(never)]
    fn readiness_event_slow(
        &self,
        slot: u32,
    ) -> Result<Option<(EventHandle, &Arc<dyn DeviceBackend>)>> {
        let Some(d) = self.device() else {
            return Ok(None);
        };
        let s = &self.slots[slot as usize];
        loop {
            match s.state.load(Ordering::Acquire) {
                readiness::HOST => return Ok(None),
                readiness::RECORDED => return Ok(Some((s.ready, &d.backend))),
                readiness::UNCONTRACTED => return Err(self.uncontracted(slot)),
                // The session's teardown synchronized the writer's stream (and destroys
                // it): the elided writes are complete, and there is nothing to record on.
                readiness::ELIDED if d.retirer.is_quiesced() => return Ok(None),
                readiness::ELIDED => {
                    if s.state
                        .compare_exchange(
                            readiness::ELIDED,
                            readiness::RECORDING,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        let writer = StreamHandle::from_raw(s.writer.load(Ordering::Acquire));
                        let r = d.backend.record_event(s.ready, writer);
                        s.state.store(
                            if r.is_ok() {
                                readiness::RECORDED
                            } else {
                                readiness::ELIDED
                            },
                            Ordering::Release,
                        );
                        r?;
                    }
                }
                _ => std::hint::spin_loop(),
            }
        }
    }

    /// Registers `reader`'s stream as a release stream of `slot`: deduplicated, capped,
    /// into preallocated positions. The stream past the cap is rejected. A caller's
    /// stream ([`DomainOwner::Caller`]), which work may reach from any thread, is marked
    /// so that the last handle always records its event. A host reader registers nothing.
    pub(crate) fn register_release(&self, slot: u32, reader: OrderingDomain) -> Result<()> {
        let (Some(d), OrderingDomain::Stream { stream, owner }) = (self.device(), reader) else {
            return Ok(());
        };
        let by_user = owner == DomainOwner::Caller;
        let s = &self.slots[slot as usize];
        while s
            .release_lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            sync::spin_loop();
        }
        let base = slot as usize * d.release_capacity as usize;
        let n = s.release_count.load(Ordering::Relaxed);
        let known = (0..n as usize)
            .find(|&i| d.release_streams[base + i].load(Ordering::Relaxed) == stream.raw());
        let sticky = |i: usize| {
            if by_user && i < CLEAN_BITS {
                s.release_sticky.fetch_or(1 << i, Ordering::Release);
            }
        };
        let result = if let Some(i) = known {
            sticky(i);
            Ok(())
        } else if n >= d.release_capacity {
            Err(Error::new(
                ErrorCode::ResourceExhausted,
                "the slot already has its maximum of distinct release streams (max_fanout_release_streams); this consumer stream is rejected, not serialized",
            )
            .at(self.location))
        } else {
            d.release_streams[base + n as usize].store(stream.raw(), Ordering::Relaxed);
            sticky(n as usize);
            // Release: a reader that loads the count without the lock sees the stream.
            s.release_count.store(n + 1, Ordering::Release);
            Ok(())
        };
        s.release_lock.store(false, Ordering::Release);
        result
    }

    /// The release streams registered on `slot` so far.
    pub(crate) fn release_stream_count(&self, slot: u32) -> u32 {
        self.slots[slot as usize]
            .release_count
            .load(Ordering::Acquire)
    }
}

/// The location a foreign pool's errors name.
const FOREIGN_LOCATION: &str = "a tensor imported through DLPack";

/// The release streams one pass of the retirement worker found busy (an event recorded
/// on them incomplete): a few, kept without allocating; past its room a stream is not
/// remembered and its events are queried as before.
#[derive(Default)]
pub(crate) struct BusyStreams {
    streams: [u64; 16],
    len: usize,
}

impl BusyStreams {
    #[inline]
    pub(crate) fn contains(&self, stream: u64) -> bool {
        self.streams[..self.len].contains(&stream)
    }

    #[inline]
    fn insert(&mut self, stream: u64) {
        if self.len < self.streams.len() {
            self.streams[self.len] = stream;
            self.len += 1;
        }
    }
}

/// Release positions of a foreign device slot: distinct consumer streams that may read it
/// at once (the default `max_fanout_release_streams`).
const FOREIGN_RELEASE_CAPACITY: u32 = 8;

/// Pools of released imports kept for reuse.
const RECYCLED_FOREIGN_POOLS: usize = 1024;

/// Foreign device slots the foreign retirement worker holds at once; past it a slot is
/// returned without waiting (its error noted), as a session's worker does.
const FOREIGN_RETIRING: usize = 4096;

/// A foreign buffer to wrap ([`Pool::wrap_foreign`]).
pub(crate) struct ForeignBytes<'a> {
    /// Where the bytes live.
    pub(crate) kind: MemoryKind,
    /// Their address: a host address for `host` memory, else an address of `backend`'s
    /// unified address space.
    pub(crate) addr: u64,
    /// Shape, dtype and byte size.
    pub(crate) meta: TensorMeta,
    /// The backend of a device-backed kind (`None` for `host`).
    pub(crate) backend: Option<&'a Arc<dyn DeviceBackend>>,
    /// Releases the buffer (the DLPack deleter), exactly once, when dropped.
    pub(crate) owner: AllocationDeleter,
}

fn recycled_foreign() -> &'static ArrayQueue<Arc<Pool>> {
    static POOLS: OnceLock<ArrayQueue<Arc<Pool>>> = OnceLock::new();
    POOLS.get_or_init(|| ArrayQueue::new(RECYCLED_FOREIGN_POOLS))
}

/// The retirement worker of foreign device slots (a session's worker retires only its own
/// pools' slots), started by the first device-memory import and kept for the process.
///
/// In a fork of the process that started it, the worker's thread does not exist: an
/// import there is `NotSupported` (`crate::fork`), checked before the lock, which the
/// fork may have inherited locked.
fn foreign_retirer() -> Result<Arc<Retirer>> {
    static RETIRER: Mutex<Option<Arc<Retirer>>> = Mutex::new(None);
    static OWNER: std::sync::OnceLock<crate::fork::Owner> = std::sync::OnceLock::new();
    if let Some(owner) = OWNER.get() {
        owner.check(
            "holo's foreign retirement worker (which the first device-memory DLPack import starts)",
        )?;
    }
    let mut current = RETIRER.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(r) = &*current {
        return Ok(Arc::clone(r));
    }
    let retirer = Retirer::new();
    // Detached: the worker lives as long as the process.
    drop(retirer.start(FOREIGN_RETIRING, std::time::Duration::ZERO)?);
    let _ = OWNER.set(crate::fork::Owner::current());
    *current = Some(Arc::clone(&retirer));
    Ok(retirer)
}

impl Backing {
    /// Slot `i`'s readiness event (0 for a host backing, or past the events).
    fn readiness_of(&self, i: usize) -> EventHandle {
        match self {
            Backing::Device(d) => d
                .readiness
                .get(i)
                .copied()
                .unwrap_or(EventHandle::from_raw(0)),
            Backing::Host { .. } => EventHandle::from_raw(0),
        }
    }

    /// A placeholder while a recycled foreign pool is rebound.
    const EMPTY_FOREIGN: Backing = Backing::Host {
        ptr: std::ptr::null_mut(),
        len: 0,
        owner: HostBytes::Foreign,
    };
}

/// The backing of a foreign buffer: host bytes, or a device backing that does not own its
/// memory, with one readiness event and [`FOREIGN_RELEASE_CAPACITY`] release events —
/// those of `old` (a recycled pool's) when it is on the same backend.
fn foreign_backing(foreign: &ForeignBytes<'_>, old: Option<Backing>) -> Result<Backing> {
    let len = foreign.meta.byte_size;
    let Some(backend) = foreign.backend.filter(|_| foreign.kind != MemoryKind::Host) else {
        return Ok(Backing::Host {
            ptr: DevicePtr::from_raw(foreign.addr).as_host_ptr(),
            len,
            owner: HostBytes::Foreign,
        });
    };
    let kind = AllocKind::try_from(foreign.kind)?;
    let memory = MemoryObject::from_raw(foreign.addr);
    if let Some(Backing::Device(mut d)) = old
        && Arc::ptr_eq(&d.backend, backend)
    {
        d.kind = kind;
        d.memory = memory;
        d.bytes = len;
        for s in &*d.release_streams {
            s.store(0, Ordering::Relaxed);
        }
        return Ok(Backing::Device(d));
    }
    let mut out = DeviceBacking {
        backend: Arc::clone(backend),
        kind,
        memory,
        bytes: len,
        owns_memory: false,
        segment: None,
        readiness: Box::new([]),
        release_events: Box::new([]),
        release_streams: Box::new([]),
        release_capacity: FOREIGN_RELEASE_CAPACITY,
        retirer: foreign_retirer()?,
    };
    let r = FOREIGN_RELEASE_CAPACITY as usize;
    out.release_streams = (0..r).map(|_| AtomicU64::new(0)).collect();
    // Created one by one into the backing, so a failure destroys those made before it.
    out.readiness = Box::new([backend.create_event()?]);
    let mut events = Vec::with_capacity(r);
    for _ in 0..r {
        match backend.create_event() {
            Ok(e) => events.push(e),
            Err(e) => {
                out.release_events = events.into_boxed_slice();
                return Err(e);
            }
        }
    }
    out.release_events = events.into_boxed_slice();
    Ok(Backing::Device(out))
}

/// A pinned pool's memory for a topic served across processes: a sealed memfd segment
/// (another process maps it) registered with the device, so that it is pinned and
/// device-accessible at the same address (`NotSupported` where the device would give it
/// another address).
fn shared_pinned(
    ipc: &dyn crate::device::DeviceIpc,
    name: &str,
    bytes: usize,
) -> Result<(MemoryObject, Arc<crate::ipc::Segment>)> {
    let segment = crate::ipc::Segment::create(&format!("holo:{name}"), bytes)?;
    // SAFETY: the segment stays mapped while the pool holds it; the pool unregisters it
    // before it drops it (`DeviceBacking::drop`).
    let device = unsafe { ipc.register_host(segment.as_ptr(), segment.len())? };
    let host = segment.as_ptr() as u64;
    if device.raw() != host {
        // SAFETY: registered just above, used by nothing.
        let _ = unsafe { ipc.unregister_host(segment.as_ptr()) };
        return Err(Error::new(
            ErrorCode::NotSupported,
            "the device maps registered host memory at another address than the host's, which a pinned pool across processes needs to be one address",
        ));
    }
    Ok((MemoryObject::from_raw(host), Arc::new(segment)))
}

fn device_backing(
    spec: &PoolSpec,
    backend: &Arc<dyn DeviceBackend>,
    retirer: &Arc<Retirer>,
    bytes: usize,
) -> Result<DeviceBacking> {
    let kind = AllocKind::try_from(spec.kind)?;
    let mut segment = None;
    let memory = if spec.shared_memory {
        // The pool of a topic served across processes: memory another process can map.
        match backend.ipc() {
            Some(ipc) if kind == AllocKind::Device => ipc
                .alloc_exportable(bytes)
                .map(|p| MemoryObject::from_raw(p.raw())),
            Some(ipc) if kind == AllocKind::PinnedHost => {
                shared_pinned(ipc, &spec.name, bytes).map(|(memory, s)| {
                    segment = Some(s);
                    memory
                })
            }
            _ => Err(Error::new(
                ErrorCode::NotSupported,
                format!(
                    "its {} memory is served across processes, which the {} backend cannot share with another process (a CUDA device can)",
                    spec.kind,
                    backend.backend_kind().name()
                ),
            )),
        }
    } else {
        backend.alloc_memory_object(kind, bytes)
    }
    .map_err(|e| {
        Error::new(e.code(), format!("pool {}: {}", spec.name, e.message())).at(spec.location)
    })?;
    // From here on, `DeviceBacking`'s Drop releases whatever was created if a later step fails.
    let mut out = DeviceBacking {
        backend: Arc::clone(backend),
        kind,
        memory,
        bytes,
        owns_memory: segment.is_none(),
        segment,
        readiness: Box::new([]),
        release_events: Box::new([]),
        release_streams: Box::new([]),
        release_capacity: spec.release_capacity,
        retirer: Arc::clone(retirer),
    };
    let n = spec.slot_count as usize;
    let r = spec.release_capacity as usize;
    let too_many =
        |e: crate::cold::ColdAllocError| exhausted(spec, format!("its event inventory: {e}"));
    let total = r
        .checked_add(1)
        .and_then(|per_slot| per_slot.checked_mul(n))
        .ok_or_else(|| {
            too_many(crate::cold::ColdAllocError {
                count: n,
                elem_bytes: (r + 1).saturating_mul(size_of::<EventHandle>()),
                bytes: None,
            })
        })?;
    // The release streams' positions first (plain memory), then the events.
    out.release_streams =
        crate::cold::boxed_slice(n * r, |_| AtomicU64::new(0)).map_err(too_many)?;
    let mut events = crate::cold::vec_with_capacity(total).map_err(too_many)?;
    let created: Result<()> = (0..total).try_for_each(|_| {
        events.push(backend.create_event()?);
        Ok(())
    });
    let rest = events.split_off(n.min(events.len()));
    out.readiness = events.into_boxed_slice();
    out.release_events = rest.into_boxed_slice();
    created.map_err(|e| {
        Error::new(
            e.code(),
            format!("pool {}: creating its events: {}", spec.name, e.message()),
        )
        .at(spec.location)
    })?;
    Ok(out)
}

#[cfg(all(test, not(holo_loom)))]
mod tests {
    use super::*;

    pub(super) fn spec(kind: MemoryKind, slots: u32) -> PoolSpec {
        PoolSpec {
            name: "op.out".into(),
            location: "op.out",
            kind,
            dtype: Some(DType::U8),
            rank: None,
            max_rank: 1,
            per_slot_bytes: 16,
            slot_count: slots,
            release_capacity: 2,
            shared_memory: false,
        }
    }

    #[test]
    fn a_stale_slot_ref_is_refused_never_aliased() {
        let pool = Pool::materialize(spec(MemoryKind::Host, 1), None).unwrap();
        let first = pool.borrow_slot().unwrap();
        let old = pool.slot_ref(first);
        assert_eq!(old.generation, 1);
        assert!(pool.check_slot_ref(old).is_ok());
        Pool::release(&pool, first, Holder::NONE);
        let e = pool.check_slot_ref(old).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("was released"), "{e}");
        // The one slot is loaned again: the old name does not alias the new use.
        let again = pool.borrow_slot().unwrap();
        assert_eq!(again, first);
        let new = pool.slot_ref(again);
        assert_eq!(new.generation, 2);
        let e = pool.check_slot_ref(old).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("stale"), "{e}");
        assert!(pool.check_slot_ref(new).is_ok());
        let missing = crate::channel::SlotRef {
            slot: 5,
            generation: 2,
        };
        assert_eq!(
            pool.check_slot_ref(missing).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        Pool::release(&pool, again, Holder::NONE);
    }

    /// The channel layer alone — no session: a device pool, the retirement worker and
    /// two ordering domains carry one slot from a producer's stream to a consumer's and
    /// back to the free list, with every actor named on every call.
    #[test]
    fn a_channel_carries_a_slot_between_two_domains_without_a_session() {
        let backend: Arc<dyn DeviceBackend> = crate::device::SoftwareDevice::new();
        let retirer = Retirer::new();
        let worker = retirer
            .start(2, std::time::Duration::ZERO)
            .expect("retirement worker");
        let p =
            Pool::materialize(spec(MemoryKind::CudaDevice, 2), Some((&backend, &retirer))).unwrap();
        let (producer, consumer) = (
            backend.create_stream().unwrap(),
            backend.create_stream().unwrap(),
        );
        let slot = p.loan(&[16], DType::U8).unwrap();
        let name = p.slot_ref(slot);
        // Memory object plus offset: both slots share the object, 16 bytes apart.
        let b = p.buffer(slot);
        assert_eq!((b.offset, b.len), (u64::from(slot) * 16, 16));
        assert_eq!(p.buffer(1 - slot).memory, b.memory);
        assert_eq!(b.unified_address(), Some(p.slot_addr(slot)));
        // The writer's domain records readiness; the reader's is registered for release.
        let writer = OrderingDomain::partition(producer);
        p.set_writer(slot, writer);
        backend
            .enqueue_delay(producer, std::time::Duration::from_millis(2))
            .unwrap();
        p.commit(slot, writer, false).unwrap();
        assert_eq!(p.readiness_state(slot), readiness::RECORDED);
        p.register_release(slot, OrderingDomain::partition(consumer))
            .unwrap();
        let (event, _) = p.readiness_event(slot).unwrap().expect("recorded");
        backend.wait_event(consumer, event).unwrap();
        let holder = p.enter_domain(slot, consumer);
        assert_eq!(
            holder,
            Holder(0),
            "the consumer's stream is release position 0"
        );
        assert_eq!(p.enter_domain(slot, producer), Holder::NONE);
        // The consumer's stream is busy after the slot is released: the slot waits.
        backend
            .enqueue_delay(consumer, std::time::Duration::from_millis(20))
            .unwrap();
        Pool::release(&p, slot, holder);
        assert_eq!(p.free_slots(), 1, "retiring, not free");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while p.free_slots() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            p.free_slots(),
            2,
            "returned once the consumer's stream passed it"
        );
        assert_eq!(
            p.check_slot_ref(name).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        retirer.close();
        retirer.shutdown();
        worker.join().unwrap();
        drop(p);
        backend.destroy_stream(producer).unwrap();
        backend.destroy_stream(consumer).unwrap();
    }

    #[test]
    fn borrow_until_exhausted_then_release_returns_the_slot() {
        let p = Pool::materialize(spec(MemoryKind::Host, 2), None).unwrap();
        let a = p.borrow_slot().unwrap();
        let b = p.borrow_slot().unwrap();
        assert_ne!(a, b);
        let err = p.borrow_slot().unwrap_err();
        assert_eq!(err.code(), ErrorCode::ResourceExhausted);
        assert_eq!(err.location(), Some("op.out"));
        p.retain(a);
        Pool::release(&p, a, Holder::NONE);
        assert_eq!(p.free_slots(), 0, "one reference is still live");
        Pool::release(&p, a, Holder::NONE);
        assert_eq!(p.free_slots(), 1);
        assert_eq!(p.counters.exhausted.load(Ordering::Relaxed), 1);
        Pool::release(&p, b, Holder::NONE);
    }

    #[test]
    fn a_slots_buffer_is_the_pools_object_at_the_slots_offset() {
        // Found by cargo-mutants: `slot / per_slot_bytes` for the offset survived (on
        // unified addressing the data pointer is computed apart).
        let pool = Pool::materialize(spec(MemoryKind::Host, 3), None).unwrap();
        let slots: Vec<u32> = (0..3).map(|_| pool.borrow_slot().unwrap()).collect();
        for &slot in &slots {
            let b = pool.buffer(slot);
            assert_eq!((b.offset, b.len), (u64::from(slot) * 16, 16), "slot {slot}");
            assert_eq!(
                b.memory,
                pool.buffer(slots[0]).memory,
                "one object for the pool"
            );
            assert_eq!(
                b.unified_address(),
                Some(pool.slot_addr(slot)),
                "slot {slot}"
            );
        }
        for slot in slots {
            Pool::release(&pool, slot, Holder::NONE);
        }
    }

    #[test]
    fn each_refused_loan_names_its_reason() {
        // Found by cargo-mutants: the refusal's branches (all but one `InvalidArgument`)
        // could be reordered or merged without a test noticing.
        let exact = |rank| PoolSpec {
            rank,
            max_rank: 2,
            ..spec(MemoryKind::Host, 1)
        };
        let refused = |spec: PoolSpec, shape: &[u64], dtype| {
            let pool = Pool::materialize(spec, None).unwrap();
            let e = pool.loan(shape, dtype).unwrap_err();
            assert_eq!(pool.free_slots(), 1, "a refused loan borrows nothing");
            (
                e.code(),
                e.message().split(" (").next().unwrap_or("").to_owned(),
            )
        };
        let invalid = ErrorCode::InvalidArgument;
        assert_eq!(
            refused(exact(Some(2)), &[2, 2], DType::F32),
            (
                invalid,
                "the loan's dtype differs from the dtype the output declares".into()
            )
        );
        assert_eq!(
            refused(exact(Some(2)), &[4], DType::U8),
            (
                invalid,
                "the loan's rank differs from the rank the output declares".into()
            )
        );
        assert_eq!(
            refused(exact(None), &[1, 1, 1], DType::U8),
            (
                invalid,
                "the loan's rank exceeds the output's max_rank".into()
            )
        );
        assert_eq!(
            refused(exact(Some(2)), &[u64::MAX, 2], DType::U8),
            (
                ErrorCode::ArithmeticOverflow,
                "the loan's byte size overflows".into()
            )
        );
        assert_eq!(
            refused(exact(None), &[4, 8], DType::U8),
            (
                invalid,
                "the loan's byte size exceeds the pool's per-slot bound".into()
            )
        );
        // A zero bound: every rank exceeds it (not "differs": `rank` was not declared).
        assert_eq!(
            refused(
                PoolSpec {
                    rank: None,
                    max_rank: 0,
                    ..spec(MemoryKind::Host, 1)
                },
                &[1],
                DType::U8
            ),
            (
                invalid,
                "the loan's rank exceeds the output's max_rank".into()
            )
        );
        // At the bound the loan is granted, and at the exact rank.
        for rank in [None, Some(2)] {
            let pool = Pool::materialize(exact(rank), None).unwrap();
            let slot = pool.loan(&[4, 4], DType::U8).unwrap();
            Pool::release(&pool, slot, Holder::NONE);
        }
    }

    #[test]
    fn device_pools_without_a_backend_fail_closed() {
        let err = Pool::materialize(spec(MemoryKind::PinnedHost, 2), None)
            .err()
            .unwrap();
        assert_eq!(err.code(), ErrorCode::DeviceUnavailable);
    }

    #[test]
    fn a_kind_of_another_api_is_refused_before_anything_is_allocated() {
        // The software device stands in for CUDA: `opencl_device` is not its memory.
        let backend: Arc<dyn DeviceBackend> = crate::device::SoftwareDevice::new();
        let retirer = Retirer::new();
        let err = Pool::materialize(
            spec(MemoryKind::OpenClDevice, 2),
            Some((&backend, &retirer)),
        )
        .err()
        .unwrap();
        assert_eq!(err.code(), ErrorCode::InvalidArgument);
        assert!(
            err.message().starts_with(
                "pool op.out needs opencl_device memory, which a cuda device does not hold"
            ),
            "{err}"
        );
        assert_eq!(backend.counters().snapshot().alloc, 0, "nothing allocated");
        // The neutral kind is its device's memory.
        Pool::materialize(spec(MemoryKind::Device, 2), Some((&backend, &retirer))).unwrap();
    }

    #[test]
    fn release_streams_are_deduplicated_and_capped() {
        let backend: Arc<dyn DeviceBackend> = crate::device::SoftwareDevice::new();
        let retirer = Retirer::new();
        let before = backend.counters().snapshot();
        let p =
            Pool::materialize(spec(MemoryKind::CudaDevice, 2), Some((&backend, &retirer))).unwrap();
        let made = backend.counters().snapshot() - before;
        assert_eq!(
            (made.alloc, made.event_create),
            (1, 2 * (1 + 2)),
            "every event created cold"
        );
        let slot = p.borrow_slot().unwrap();
        let (s1, s2, s3) = (
            backend.create_stream().unwrap(),
            backend.create_stream().unwrap(),
            backend.create_stream().unwrap(),
        );
        let caller = OrderingDomain::caller;
        p.register_release(slot, caller(s1)).unwrap();
        p.register_release(slot, caller(s1)).unwrap();
        assert_eq!(
            p.release_stream_count(slot),
            1,
            "a duplicate takes no capacity"
        );
        p.register_release(slot, caller(s2)).unwrap();
        let err = p.register_release(slot, caller(s3)).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ResourceExhausted);
        assert_eq!(p.release_stream_count(slot), 2);
    }
}

#[cfg(all(test, not(holo_loom)))]
#[path = "pool_ledger_tests.rs"]
mod ledger_tests;

/// A `u8` tensor of `shape` loaned from `pool`, written on `producer` (a stream the pool's
/// loans may be written on) and committed there: the handles the ledger tests and the
/// loom models drive.
#[cfg(test)]
pub(crate) fn written_tensor(
    pool: &Arc<Pool>,
    shape: &[u64],
    producer: StreamHandle,
) -> crate::Tensor {
    crate::tensor::TensorOutputLoan::new(
        pool,
        crate::TensorLoanRequest {
            shape,
            dtype: DType::U8,
        },
    )
    .unwrap()
    .write(producer)
    .unwrap()
    .commit()
    .unwrap()
    .into_tensor()
}

/// loom models of the pool's parked-count protocol and of its release-stream marks: every
/// interleaving of the threads (up to the preemption bound) drives the real pool and real
/// tensors (`Tensor`'s clone and drop are the handles' protocol), host pools on the host,
/// device pools on a fake backend ([`FakeDevice`]) that checks the release-event contract.
/// Each model asserts its invariant; RELIABILITY.md lists the interleavings each explored
/// and the mutation that made it fail.
///
/// ```text
/// RUSTFLAGS="--cfg holo_loom" CARGO_TARGET_DIR=target/loom cargo test -p holo-runtime --lib loom
/// ```
#[cfg(all(test, holo_loom))]
pub(crate) mod loom_models {
    use std::sync::Arc;

    use super::*;
    use crate::channel::sync::model::{self, FakeDevice};
    use crate::tensor::{Tensor, TensorLoanRequest, TensorOutputLoan};

    fn spec(kind: MemoryKind, slots: u32, release_capacity: u32) -> PoolSpec {
        PoolSpec {
            name: "op.out".into(),
            location: "op.out",
            kind,
            dtype: Some(DType::U8),
            rank: None,
            max_rank: 1,
            per_slot_bytes: 4,
            slot_count: slots,
            release_capacity,
            shared_memory: false,
        }
    }

    const REQUEST: TensorLoanRequest<'static> = TensorLoanRequest {
        shape: &[4],
        dtype: DType::U8,
    };

    /// A host tensor of `pool`, written on the host.
    fn host_tensor(pool: &Arc<Pool>) -> Tensor {
        TensorOutputLoan::new(pool, REQUEST)
            .unwrap()
            .write_host_and_commit(|b| b.fill(1))
            .unwrap()
            .into_tensor()
    }

    /// Two extra strong counts on the pool, so that its counts can be checked to balance
    /// exactly (see [`assert_balanced`]) without a count dropped twice ever freeing it.
    pub(crate) struct Witness([Arc<Pool>; 2]);

    impl Witness {
        pub(crate) fn new(pool: &Arc<Pool>) -> Witness {
            Witness([Arc::clone(pool), Arc::clone(pool)])
        }

        /// The pool's strong count is exactly `others` (its owner, the model's own
        /// `Arc`s) plus the witnesses' two plus one parked on every free slot: a count
        /// lost (a slot's count neither parked nor dropped) leaves more; a count dropped
        /// twice leaves fewer.
        pub(crate) fn assert_balanced(&self, others: usize) {
            let p = &self.0[0];
            assert_eq!(
                Arc::strong_count(p),
                others + 2 + p.free_slots() as usize,
                "the pool's counts do not balance: one lost or dropped twice"
            );
        }

        /// Drops the witnesses, the last counts: the pool is freed now, once.
        pub(crate) fn assert_last(self) {
            let weak = Arc::downgrade(&self.0[0]);
            self.assert_balanced(0);
            drop(self);
            assert!(weak.upgrade().is_none(), "the pool outlived its last count");
        }
    }

    /// The invariant: a slot is loaned again only after every handle of its last use
    /// was released — the new loan's write to the bytes is ordered after every earlier
    /// handle's read (loom checks the cell standing for the bytes) — and its count comes
    /// back exactly once.
    ///
    /// Mutations that fail it: `release`'s decrement `fetch_sub(1, Release)` weakened to
    /// `Relaxed`, or the sole handle's `refs.load(Acquire)` weakened to `Relaxed` (loom:
    /// a causality violation on the bytes' cell, the new loan's write racing an earlier
    /// handle's read).
    #[test]
    fn loom_a_slot_is_loaned_again_only_after_every_handle_is_released() {
        model::run(
            "a_slot_is_loaned_again_only_after_every_handle_is_released",
            None,
            || {
                let owner = Pool::materialize(spec(MemoryKind::Host, 1, 1), None).unwrap();
                let witness = Witness::new(&owner);
                // The bytes of the pool's one slot, as loom sees them.
                #[allow(
                    clippy::arc_with_non_send_sync,
                    reason = "shared between loom's threads on purpose: loom checks every access"
                )]
                let bytes = Arc::new(loom::cell::UnsafeCell::new(0u32));
                owner.claim_free_list();
                let tensor = host_tensor(&owner);
                bytes.with_mut(|b| unsafe { *b = 1 });
                // A fan-out: a second handle, dropped on another thread.
                let other = tensor.clone();
                let turns = Arc::new(model::Interleave::default());
                let consumer = {
                    let (bytes, turns) = (Arc::clone(&bytes), Arc::clone(&turns));
                    loom::thread::spawn(move || {
                        assert_eq!(bytes.with(|b| unsafe { *b }), 1);
                        turns.point();
                        drop(other);
                    })
                };
                assert_eq!(bytes.with(|b| unsafe { *b }), 1);
                turns.point();
                drop(tensor);
                // The producer loans again at once: it gets the slot only once both
                // handles are gone, and its write must come after both reads.
                if let Ok(again) = TensorOutputLoan::new(&owner, REQUEST) {
                    bytes.with_mut(|b| unsafe { *b = 2 });
                    drop(again);
                }
                consumer.join().unwrap();
                owner.give_back_free_list();
                assert_eq!(owner.free_slots(), 1, "the slot was lost or listed twice");
                witness.assert_balanced(1);
                drop(owner);
                witness.assert_last();
            },
        );
    }

    /// The invariant: the session's teardown closing the pool (dropping its
    /// [`PoolOwner`]) while a tensor is alive on another thread, which then outlives the
    /// owner, leaves no count behind and drops none twice: the slot released during or
    /// after the close either parks its count before the close drains the free list
    /// (`parking`) or drops it itself; the pool is freed exactly once, with its last
    /// count. Also a producer's second slot, released on the owner thread before the
    /// close, is drained by it.
    ///
    /// Mutation that fails it: `close` not waiting for `parking` to drain (a release
    /// between its `closed` check and its push parks its count after the drain: "the pool
    /// outlived its last count"). `park` against `close` is a store-buffering handshake of
    /// `SeqCst` accesses, which loom models as acquire/release only: `sync::sc_handshake`
    /// stands for them (without it loom fails this model although the real accesses are
    /// correct).
    #[test]
    fn loom_closing_the_pool_while_a_tensor_is_alive_elsewhere_frees_it_once() {
        model::run(
            "closing_the_pool_while_a_tensor_is_alive_elsewhere_frees_it_once",
            None,
            || {
                let owner = Pool::materialize(spec(MemoryKind::Host, 2, 1), None).unwrap();
                let witness = Witness::new(&owner);
                let tensor = host_tensor(&owner);
                drop(host_tensor(&owner));
                // The tensor escapes to another thread and outlives the pool's owner.
                let consumer = loom::thread::spawn(move || drop(tensor));
                drop(owner);
                consumer.join().unwrap();
                witness.assert_last();
            },
        );
    }

    /// A device pool of one slot on a fake device, its output bound to `producer`, with
    /// a retirer whose queue a model's thread empties ([`Retirer::model_pass`]).
    pub(crate) fn device_pool(
        release_capacity: u32,
    ) -> (Arc<FakeDevice>, Arc<Retirer>, PoolOwner, StreamHandle) {
        let device = Arc::new(FakeDevice::default());
        let backend: Arc<dyn DeviceBackend> = Arc::clone(&device) as Arc<dyn DeviceBackend>;
        let retirer = Retirer::new();
        retirer.install_queue(4);
        let pool = Pool::materialize(
            spec(MemoryKind::CudaDevice, 1, release_capacity),
            Some((&backend, &retirer)),
        )
        .unwrap();
        let producer = backend.create_stream().unwrap();
        pool.bind_loan_streams(LoanStreams {
            planned: Some(producer),
            fused: None,
        });
        (device, retirer, pool, producer)
    }

    /// A tensor written on `producer`, its readiness recorded there.
    pub(crate) fn device_tensor(pool: &Arc<Pool>, producer: StreamHandle) -> Tensor {
        super::written_tensor(pool, REQUEST.shape, producer)
    }

    /// After the model's threads: the worker's pass returns the slot (the fake device
    /// checks that every release event it finds complete covers its stream's work), and
    /// the slot and every count are back.
    fn retire_and_check(device: &FakeDevice, retirer: &Retirer, pool: PoolOwner, w: Witness) {
        retirer.model_pass();
        assert_eq!(retirer.pending_len(), 0, "a retired slot was not returned");
        assert_eq!(retirer.outstanding(), 0);
        device.assert_every_stream_is_covered();
        assert_eq!(pool.free_slots(), 1, "the slot was lost or listed twice");
        w.assert_balanced(1);
        drop(pool);
        w.assert_last();
    }

    /// The invariant: a slot is returned only after a release event covering all of its
    /// work was recorded on every registered stream. A fan-out to two partitions, each
    /// with a stream of its own: partition A received the slot twice (two handles) and
    /// drops them on its thread, B its one on its own; a non-last handle records its
    /// stream's release and marks it clean, the last records what is not clean — and its
    /// own stream again when its holder worked on it since an earlier record.
    ///
    /// Mutation that fails it: `retire` skipping a clean position even when it is the
    /// last holder's own (dropping `own != Some(i) || recorded_own`): A's second
    /// handle, last, leaves its work after its first handle's record uncovered.
    #[test]
    fn loom_every_release_stream_is_recorded_after_its_work() {
        model::run(
            "every_release_stream_is_recorded_after_its_work",
            None,
            || {
                let (device, retirer, pool, producer) = device_pool(2);
                let witness = Witness::new(&pool);
                let streams = [
                    device.create_stream().unwrap(),
                    device.create_stream().unwrap(),
                ];
                let t = device_tensor(&pool, producer);
                for s in streams {
                    t.register_release_stream(OrderingDomain::partition(s))
                        .unwrap();
                }
                let (mut a1, mut a2, mut b) = (t.clone(), t.clone(), t);
                let partition_a = {
                    let device = Arc::clone(&device);
                    loom::thread::spawn(move || {
                        let sa = OrderingDomain::partition(streams[0]);
                        a1.deliver_to(sa).unwrap();
                        a2.deliver_to(sa).unwrap();
                        device.work(streams[0]);
                        drop(a1);
                        device.work(streams[0]);
                        drop(a2);
                    })
                };
                b.deliver_to(OrderingDomain::partition(streams[1])).unwrap();
                device.work(streams[1]);
                drop(b);
                partition_a.join().unwrap();
                retire_and_check(&device, &retirer, pool, witness);
            },
        );
    }

    /// The invariant: a slot handed to the retirement worker comes back exactly once
    /// with its count when the worker's pass and a producer whose pool is empty
    /// ([`Retirer::assist`], from `borrow_slot`) poll it at the same time: whichever of
    /// them takes the pending list returns it, and the producer's loan gets it or is
    /// refused; never both returned, never lost.
    ///
    /// Mutation that fails it: the producer's pass giving a completed slot back without
    /// taking it off the pending list (the worker's pass returns it again: the retirer's
    /// outstanding count wraps below zero).
    #[test]
    fn loom_a_slot_polled_by_the_worker_and_a_producer_comes_back_once() {
        model::run(
            "a_slot_polled_by_the_worker_and_a_producer_comes_back_once",
            None,
            || {
                let (device, retirer, pool, producer) = device_pool(1);
                let witness = Witness::new(&pool);
                let consumer = device.create_stream().unwrap();
                let mut t = device_tensor(&pool, producer);
                t.register_release_stream(OrderingDomain::partition(consumer))
                    .unwrap();
                t.deliver_to(OrderingDomain::partition(consumer)).unwrap();
                device.work(consumer);
                // The last handle: the slot goes to the worker's queue.
                drop(t);
                let worker = {
                    let retirer = Arc::clone(&retirer);
                    loom::thread::spawn(move || {
                        retirer.model_pass();
                    })
                };
                // The producer, its free list empty until someone returns the slot.
                let loaned = TensorOutputLoan::new(&pool, REQUEST).ok();
                worker.join().unwrap();
                drop(loaned);
                retire_and_check(&device, &retirer, pool, witness);
            },
        );
    }

    /// The invariant: a stream a user call registered
    /// (`Tensor::synchronize_for_consumer_stream`, from any thread, while another
    /// thread's handle holds the same stream's release position) is always recorded by
    /// the slot's last handle, even when a partition's handle marked the position clean:
    /// the user's work on it after that record is covered.
    ///
    /// Mutation that fails it: `retire` ignoring the sticky marks (`clean` without
    /// `& !sticky`).
    #[test]
    fn loom_a_stream_a_user_registered_is_always_recorded() {
        model::run(
            "a_stream_a_user_registered_is_always_recorded",
            None,
            || {
                let (device, retirer, pool, producer) = device_pool(2);
                let witness = Witness::new(&pool);
                let (sa, sb) = (
                    device.create_stream().unwrap(),
                    device.create_stream().unwrap(),
                );
                let t = device_tensor(&pool, producer);
                t.register_release_stream(OrderingDomain::partition(sa))
                    .unwrap();
                t.register_release_stream(OrderingDomain::partition(sb))
                    .unwrap();
                let (mut a, user) = (t.clone(), t);
                let partition_a = {
                    let device = Arc::clone(&device);
                    loom::thread::spawn(move || {
                        a.deliver_to(OrderingDomain::partition(sa)).unwrap();
                        device.work(sa);
                        drop(a);
                    })
                };
                // A user thread orders its own work on the same stream after the producer.
                user.synchronize_for_consumer_stream(sa).unwrap();
                device.work(sa);
                drop(user);
                partition_a.join().unwrap();
                retire_and_check(&device, &retirer, pool, witness);
            },
        );
    }

    /// The invariant: two threads registering release streams on one slot at once
    /// (user calls, from the threads holding its handles) each get a position of their
    /// own — none overwritten, none counted twice — and both streams' work is covered
    /// when the slot returns.
    ///
    /// Mutation that fails it: `register_release` unlocking with a relaxed store (the
    /// second registrant reads a stale count and overwrites the first's position).
    #[test]
    fn loom_concurrent_registrations_keep_every_release_stream() {
        model::run(
            "concurrent_registrations_keep_every_release_stream",
            None,
            || {
                let (device, retirer, pool, producer) = device_pool(2);
                let witness = Witness::new(&pool);
                let (sx, sy) = (
                    device.create_stream().unwrap(),
                    device.create_stream().unwrap(),
                );
                let x = device_tensor(&pool, producer);
                let y = x.clone();
                let other = {
                    let device = Arc::clone(&device);
                    loom::thread::spawn(move || {
                        y.synchronize_for_consumer_stream(sy).unwrap();
                        device.work(sy);
                        drop(y);
                    })
                };
                x.synchronize_for_consumer_stream(sx).unwrap();
                device.work(sx);
                drop(x);
                other.join().unwrap();
                retire_and_check(&device, &retirer, pool, witness);
            },
        );
    }
}
