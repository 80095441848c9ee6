//! What an operator sees during its callbacks.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A session's clock: a TSC-backed `quanta` clock for the hot path (~10 ns per read,
/// against ~25 ns for `Instant::now`); the public API speaks `std::time::Instant`.
///
/// The two clocks drift apart: quanta's calibration and the kernel's slewing of the
/// monotonic clock differ by tens of parts per million (measured here: several µs after
/// 50 ms). So an `Instant` is never converted through the session's epoch, whose error
/// would grow with the session's age, but through the present moment: both clocks are
/// read now and only the timestamp's age is converted, so the error is that of the age
/// (tens of ppm of a latency), and timestamps taken on either clock compare correctly.
///
/// "Both clocks read now" is one moment only if nothing runs between the two reads: a
/// thread preempted between them (tens of µs on a loaded machine) would shift the
/// conversion by the whole preemption. So std's clock is read on both sides of the session
/// clock and the session clock's reading is paired with the midpoint, from the first try
/// whose two std readings lie within [`PAIR_TIGHT`] (else the narrowest of [`PAIR_TRIES`]):
/// a conversion is off by at most half that width, plus the drift over the age.
#[derive(Clone)]
pub(crate) struct SessionClock {
    clock: quanta::Clock,
    /// The raw counter (TSC ticks where quanta found a usable TSC) at the epoch.
    epoch_raw: u64,
    epoch: Instant,
    /// Under Miri, which interprets neither `cpuid` nor `rdtsc` (quanta's calibration and
    /// reads): a session reads the monotonic clock instead (`clock` is then a mock that
    /// only [`on`](Self::on)'s tests drive).
    #[cfg(miri)]
    monotonic: bool,
}

impl SessionClock {
    pub(crate) fn new() -> Self {
        #[cfg(miri)]
        return Self {
            monotonic: true,
            ..Self::on(quanta::Clock::mock().0)
        };
        #[cfg(not(miri))]
        {
            static CLOCK: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();
            // Calibration runs once per process.
            Self::on(CLOCK.get_or_init(quanta::Clock::new).clone())
        }
    }

    fn on(clock: quanta::Clock) -> Self {
        let epoch = Instant::now();
        let epoch_raw = clock.raw();
        Self {
            clock,
            epoch_raw,
            epoch,
            #[cfg(miri)]
            monotonic: false,
        }
    }

    /// Nanoseconds since the session's epoch, now.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        #[cfg(miri)]
        if self.monotonic {
            return u64::try_from(self.epoch.elapsed().as_nanos())
                .unwrap_or(u64::MAX)
                .min(u64::MAX - 1);
        }
        // The raw counter scaled by one multiply and shift (no `Duration` round trip).
        self.clock
            .delta_as_nanos(self.epoch_raw, self.clock.raw())
            .min(u64::MAX - 1)
    }

    /// Both clocks' present moment as one reading (see the type's documentation).
    fn pair(&self) -> (u64, Instant) {
        #[cfg(miri)]
        if self.monotonic {
            // One clock: the session's time is std's, read once.
            let now = Instant::now();
            let ns = u64::try_from(now.duration_since(self.epoch).as_nanos())
                .unwrap_or(u64::MAX)
                .min(u64::MAX - 1);
            return (ns, now);
        }
        self.pair_with(Instant::now)
    }

    /// [`pair`](Self::pair) with std's clock read through `std_now` (the tests script a
    /// preemption with it).
    fn pair_with(&self, std_now: impl FnMut() -> Instant) -> (u64, Instant) {
        read_as_one_moment(std_now, || self.now_ns())
    }

    /// An `Instant` on the session clock's timeline, converted through the present
    /// moment (see the type's documentation).
    pub(crate) fn ns_since_epoch(&self, t: Instant) -> u64 {
        let (now_ns, now) = self.pair();
        let ns = match now.checked_duration_since(t) {
            // `t` lies `age` in the past.
            Some(age) => now_ns.saturating_sub(u64::try_from(age.as_nanos()).unwrap_or(u64::MAX)),
            // `t` lies ahead (a capture time from a clock slightly ahead).
            None => now_ns.saturating_add(
                u64::try_from(t.duration_since(now).as_nanos()).unwrap_or(u64::MAX),
            ),
        };
        ns.min(u64::MAX - 1)
    }

    /// A session-clock timestamp as an `Instant`, converted through the present moment.
    pub(crate) fn instant(&self, ns: u64) -> Instant {
        let (now_ns, now) = self.pair();
        if ns <= now_ns {
            now.checked_sub(Duration::from_nanos(now_ns - ns))
                .unwrap_or(self.epoch)
        } else {
            now + Duration::from_nanos(ns - now_ns)
        }
    }
}

/// A reading of a clock that [`read_as_one_moment`] can bracket another clock's with.
pub(crate) trait ClockReading: Copy {
    /// How long after `earlier` this reading lies (zero if before).
    fn since(self, earlier: Self) -> Duration;
    /// This reading moved on by `d`.
    fn plus(self, d: Duration) -> Self;
}

impl ClockReading for Instant {
    fn since(self, earlier: Self) -> Duration {
        self.saturating_duration_since(earlier)
    }
    fn plus(self, d: Duration) -> Self {
        self + d
    }
}

/// Nanoseconds of a clock (`CLOCK_MONOTONIC`'s, as the cross-process descriptors carry).
impl ClockReading for u64 {
    fn since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.saturating_sub(earlier))
    }
    fn plus(self, d: Duration) -> Self {
        self.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// Two clocks read as one moment: `outer` on both sides of `inner`, and `inner`'s reading
/// paired with `outer`'s midpoint, from the first try whose two outer readings lie within
/// [`PAIR_TIGHT`], else the narrowest of [`PAIR_TRIES`]. A thread preempted between two
/// plain reads (tens of µs on a loaded machine, more where the hypervisor takes the CPU)
/// would shift every conversion through the pair by the whole pause; bracketed, the pair
/// is off by at most half its width.
pub(crate) fn read_as_one_moment<O: ClockReading, I>(
    mut outer: impl FnMut() -> O,
    mut inner: impl FnMut() -> I,
) -> (I, O) {
    let mut read = || {
        let before = outer();
        let at = inner();
        let width = outer().since(before);
        (width, at, before.plus(width / 2))
    };
    let mut best = read();
    for _ in 1..PAIR_TRIES {
        if best.0 <= PAIR_TIGHT {
            break;
        }
        let next = read();
        if next.0 < best.0 {
            best = next;
        }
    }
    (best.1, best.2)
}

/// How far apart two readings of one clock around a reading of another may lie for the
/// pair to count as one moment: two clock reads and a counter read take well under a
/// microsecond, so a wider pair had the thread preempted (or interrupted) between them.
const PAIR_TIGHT: Duration = Duration::from_micros(2);

/// How many pairs a conversion reads at most before it takes the narrowest.
const PAIR_TRIES: usize = 8;

/// Per-operator activation state shared by its ports and the scheduler: the activation
/// time, the earliest capture time among the inputs received in this activation, and
/// whether anything was received. Only the operator's partition thread touches it, so
/// plain loads and stores suffice (no read-modify-write on the hot path).
///
/// Laid out in order, on a cache line of its own: the fields every activation and port
/// call touch fill the first 64 bytes, so that after a GPU driver call has evicted the
/// core's caches an activation fetches one line of it again, not three (the clock, read
/// only when an activation asks the time, and the error, follow).
#[repr(C, align(64))]
pub(crate) struct ActivationState {
    /// The `free_list::token` of the thread that runs the operator's callbacks now (its
    /// partition thread while the session runs; the starting or joining thread around
    /// `start` and `stop`). Its ports work only on that thread.
    thread: AtomicUsize,
    activation_ns: AtomicU64,
    /// When the partition was free to begin this activation: the clock reading that ended
    /// the previous one, when the partition went straight on (else `UNSET`). A source's
    /// default capture time, never its activation time (which is read at or after entry).
    ready_ns: AtomicU64,
    capture_ns: AtomicU64,
    /// The frame id that goes with `capture_ns`.
    frame: AtomicU64,
    /// Activations begun so far (for once-per-activation input behaviour).
    sequence: AtomicU64,
    received: AtomicBool,
    /// An output published since the last value was received: the next received value
    /// starts a new group (its capture time and frame id replace the group's).
    emitted: AtomicBool,
    failed: AtomicBool,
    clock: SessionClock,
    /// An error raised inside a port call that cannot return one (a failed host wait in
    /// `receive`); the scheduler fails the session with it after the activation.
    error: std::sync::Mutex<Option<crate::Error>>,
}

// The hot fields (up to `failed`) fit the first cache line.
const _: () = assert!(std::mem::offset_of!(ActivationState, failed) < 64);

pub(crate) const NO_CAPTURE: u64 = u64::MAX;
/// The activation time was not asked for yet in this activation.
pub(crate) const UNSET: u64 = u64::MAX;

impl ActivationState {
    pub(crate) fn new(clock: SessionClock) -> Self {
        Self {
            thread: AtomicUsize::new(0),
            activation_ns: AtomicU64::new(UNSET),
            ready_ns: AtomicU64::new(UNSET),
            capture_ns: AtomicU64::new(NO_CAPTURE),
            frame: AtomicU64::new(0),
            sequence: AtomicU64::new(0),
            received: AtomicBool::new(false),
            emitted: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            clock,
            error: std::sync::Mutex::new(None),
        }
    }

    /// Makes the calling thread the one that runs the operator's callbacks (and uses its
    /// ports), until [`unbind_thread`](Self::unbind_thread), which that thread calls
    /// before it exits (a later thread may reuse its token).
    pub(crate) fn bind_thread(&self) {
        self.thread
            .store(crate::channel::free_list::token(), Ordering::Release);
    }

    /// No thread runs the operator's callbacks now: every port call is refused.
    pub(crate) fn unbind_thread(&self) {
        self.thread.store(0, Ordering::Release);
    }

    /// Whether the calling thread is the one that runs the operator's callbacks: the only
    /// thread on which its ports may touch their single-threaded state (a same-partition
    /// queue, the free list of the pool the partition owns).
    #[inline]
    pub(crate) fn on_operator_thread(&self) -> bool {
        self.thread.load(Ordering::Relaxed) == crate::channel::free_list::token()
    }

    /// Activations begun so far.
    #[inline]
    pub(crate) fn sequence(&self) -> u64 {
        self.sequence.load(Ordering::Relaxed)
    }

    pub(crate) fn fail(&self, e: crate::Error) {
        let mut slot = self
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Whether a port call left an error for the scheduler.
    #[inline]
    pub(crate) fn has_failure(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn take_failure(&self) -> Option<crate::Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    pub(crate) fn ns_since_epoch(&self, t: Instant) -> u64 {
        self.clock.ns_since_epoch(t)
    }

    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Begins an activation. `ready` is when the partition was free to begin it, if it
    /// went straight on from an activation it timed at the end (else `UNSET`): a source's
    /// default capture time. The activation time itself is read from the clock the first
    /// time the activation asks, so it is never earlier than the activation's entry.
    #[inline]
    pub(crate) fn begin(&self, ready: u64) {
        self.activation_ns.store(UNSET, Ordering::Relaxed);
        self.ready_ns.store(ready, Ordering::Relaxed);
        self.capture_ns.store(NO_CAPTURE, Ordering::Relaxed);
        self.received.store(false, Ordering::Relaxed);
        self.emitted.store(false, Ordering::Relaxed);
        // Only the operator's partition thread writes it: no read-modify-write needed.
        self.sequence
            .store(self.sequence.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// An input received a value with this stamp. The values received since the
    /// activation's last emit form a group: its capture time is the earliest received,
    /// and its frame id that value's. So a join's output carries its earliest input, and
    /// a forwarder that receives and emits value by value keeps each value's own.
    #[inline]
    pub(crate) fn observe(&self, stamp: &crate::channel::queue::Stamp) {
        let first = !self.received.load(Ordering::Relaxed) || self.emitted.load(Ordering::Relaxed);
        self.received.store(true, Ordering::Relaxed);
        self.emitted.store(false, Ordering::Relaxed);
        if first || stamp.capture_ns < self.capture_ns.load(Ordering::Relaxed) {
            self.capture_ns.store(stamp.capture_ns, Ordering::Relaxed);
            self.frame.store(stamp.frame, Ordering::Relaxed);
        }
    }

    /// An output published: a value received next starts a new group (see
    /// [`observe`](Self::observe)).
    #[inline]
    pub(crate) fn note_emit(&self) {
        self.emitted.store(true, Ordering::Relaxed);
    }

    /// The frame id this activation carries forward: that of the value its capture time
    /// comes from, if it received anything.
    #[inline]
    pub(crate) fn received_frame(&self) -> Option<u64> {
        self.received().then(|| self.frame.load(Ordering::Relaxed))
    }

    /// Whether an input received anything in this activation.
    #[inline]
    pub(crate) fn received(&self) -> bool {
        self.received.load(Ordering::Relaxed)
    }

    /// The activation time, taken the first time it is asked for in this activation.
    #[inline]
    pub(crate) fn activation_ns(&self) -> u64 {
        match self.activation_ns.load(Ordering::Relaxed) {
            UNSET => self.read_activation_ns(),
            ns => ns,
        }
    }

    /// Reads the clock for [`activation_ns`](Self::activation_ns), out of line: its
    /// callers are inlined into every emit, and a partition going straight on reuses the
    /// previous activation's reading instead.
    #[inline(never)]
    fn read_activation_ns(&self) -> u64 {
        let now = self.clock.now_ns();
        self.activation_ns.store(now, Ordering::Relaxed);
        now
    }

    /// The earliest capture time received in this activation, if any.
    #[inline]
    pub(crate) fn received_capture_ns(&self) -> u64 {
        self.capture_ns.load(Ordering::Relaxed)
    }

    /// When this activation ran, for the values it publishes: the partition's reading
    /// from the end of the previous activation when it went straight on (no clock read),
    /// else the activation time.
    #[inline]
    pub(crate) fn publish_ns(&self) -> u64 {
        match self.ready_ns.load(Ordering::Relaxed) {
            UNSET => self.activation_ns(),
            ready => ready,
        }
    }

    #[inline]
    pub(crate) fn default_capture_ns(&self) -> u64 {
        match self.capture_ns.load(Ordering::Relaxed) {
            NO_CAPTURE => self.publish_ns(),
            c => c,
        }
    }

    pub(crate) fn instant(&self, ns: u64) -> Instant {
        self.clock.instant(ns)
    }
}

/// What `compute()` sees: the activation's time, its operator, and the session's stop
/// request. Ports are the operator's own fields.
pub struct ExecutionContext<'a> {
    /// A borrow of the operator's name field (not of its bytes): made without reading it.
    pub(crate) operator: &'a String,
    pub(crate) activation: &'a ActivationState,
    pub(crate) activation_index: u64,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) rates: super::rates::OperatorRates<'a>,
    pub(crate) stream: Option<crate::device::StreamHandle>,
    pub(crate) device: Option<&'a std::sync::Arc<dyn crate::device::DeviceBackend>>,
}

impl ExecutionContext<'_> {
    /// The operator's name in the graph.
    pub fn operator_name(&self) -> &str {
        self.operator
    }

    /// The activation's time, fixed for the whole activation: the clock is read the first
    /// time it is asked for in this activation (by this call, or by an emit that carries
    /// no capture time and received nothing, when the partition had no earlier reading),
    /// so it is never earlier than the activation's entry.
    pub fn activation_time(&self) -> Instant {
        self.activation.instant(self.activation.activation_ns())
    }

    /// How many activations of this operator ran before this one.
    pub fn activation_index(&self) -> u64 {
        self.activation_index
    }

    /// The earliest capture time among the inputs received so far in this activation.
    pub fn input_capture_time(&self) -> Option<Instant> {
        match self.activation.received_capture_ns() {
            NO_CAPTURE => None,
            ns => Some(self.activation.instant(ns)),
        }
    }

    /// The frame id this activation carries forward: that of the received value its
    /// capture time comes from (what an emit with `EmitOptions::frame: None` uses), if it
    /// received anything so far.
    pub fn input_frame(&self) -> Option<u64> {
        self.activation.received_frame()
    }

    /// The rate of one of this operator's ports (`ctx.rate(&self.frames)`) in the
    /// session's published rate generation: O(1) and allocation-free.
    pub fn rate(&self, port: &impl super::rates::RatePort) -> super::rates::PortRateView {
        self.rates.view(port.rate_port_index())
    }

    /// The operator's runtime-owned compute stream, valid for submissions during this
    /// callback only. `NotSupported` for an operator in a host-only partition (it has no
    /// stream).
    #[inline]
    pub fn cuda_stream(&self) -> crate::Result<crate::tensor::CudaStream<'_>> {
        match self.stream {
            Some(handle) => Ok(crate::tensor::CudaStream {
                handle,
                _activation: std::marker::PhantomData,
            }),
            None => Err(host_only(
                self.operator,
                "this operator runs in a host-only partition: it has no CUDA stream",
            )),
        }
    }

    /// The session's device backend, for an operator with a planned stream (to enqueue
    /// fills and copies on [`cuda_stream`](Self::cuda_stream)).
    #[inline]
    pub fn device(&self) -> Option<&std::sync::Arc<dyn crate::device::DeviceBackend>> {
        self.device
    }

    /// Typed access to the session's device and this operator's stream — ordinal, raw
    /// context, raw stream, the backend's asynchronous copies and fills — with the
    /// device's context already current on this thread, so a kernel launch needs no
    /// other call. `NotSupported` for an operator in a host-only partition.
    #[inline]
    pub fn cuda(&self) -> crate::Result<DeviceAccess<'_>> {
        device_access(self.operator, self.device, self.stream)
    }

    /// Asks the session to stop after the activations in progress.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Typed access to a session's device from an operator's callback
/// ([`ExecutionContext::cuda`], [`LifecycleContext::cuda`]): the device's context is
/// current on the calling thread for the whole callback. Its
/// [`memset_async`](Self::memset_async) and [`copy_async`](Self::copy_async) enqueue on
/// the operator's own stream without the handle check the backend's calls make on a bare
/// `StreamHandle` (the session keeps that stream live): the cheapest way to fill or copy
/// a tensor from an operator.
#[derive(Clone, Copy)]
pub struct DeviceAccess<'a> {
    backend: &'a std::sync::Arc<dyn crate::device::DeviceBackend>,
    stream: crate::device::StreamHandle,
}

impl std::fmt::Debug for DeviceAccess<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceAccess")
            .field("backend", &self.backend.backend_kind().name())
            .field("ordinal", &self.backend.ordinal())
            .field("stream", &self.stream)
            .finish()
    }
}

impl<'a> DeviceAccess<'a> {
    /// The device ordinal.
    pub fn ordinal(&self) -> u32 {
        self.backend.ordinal()
    }

    /// The raw context (CUDA: the `CUcontext` as an integer; `None` on the software
    /// device), current on this thread.
    pub fn raw_context(&self) -> Option<u64> {
        self.backend.raw_context()
    }

    /// The operator's runtime-owned stream, valid during this callback.
    pub fn stream(&self) -> crate::tensor::CudaStream<'a> {
        crate::tensor::CudaStream {
            handle: self.stream,
            _activation: std::marker::PhantomData,
        }
    }

    /// The raw stream (CUDA: the `CUstream` as an integer), for `cuLaunchKernel` or
    /// another library, valid during this callback.
    pub fn raw_stream(&self) -> u64 {
        self.stream.raw()
    }

    /// The backend: its asynchronous fills and copies on [`stream`](Self::stream), its
    /// events and its allocations (an operator may allocate its own buffers in `start`).
    pub fn backend(&self) -> &'a std::sync::Arc<dyn crate::device::DeviceBackend> {
        self.backend
    }

    /// Enqueues filling `bytes` bytes at `dst` with `value` on this operator's stream.
    /// The same call as the backend's `memset_async` on [`stream`](Self::stream), without
    /// its handle check (a registry lock and lookup per call): the session keeps the
    /// stream live for the whole callback, so there is nothing to check.
    ///
    /// # Safety
    /// `dst..dst + bytes` lies in a live allocation of the backend until the stream has
    /// run the fill, and nothing accesses it concurrently without stream ordering (as
    /// [`DeviceBackend::memset_async`](crate::device::DeviceBackend::memset_async)).
    #[inline]
    pub unsafe fn memset_async(
        &self,
        dst: crate::device::DevicePtr,
        value: u8,
        bytes: usize,
    ) -> crate::Result<()> {
        // SAFETY: the caller's contract, and the stream is this operator's runtime-owned
        // one, live until the session has joined its threads and stopped its operators.
        unsafe {
            self.backend
                .memset_async_unchecked(dst, value, bytes, self.stream)
        }
    }

    /// Enqueues a copy of `bytes` bytes from `src` to `dst` on this operator's stream
    /// (the backend's `copy_async` without its handle check, as
    /// [`memset_async`](Self::memset_async)).
    ///
    /// # Safety
    /// Both ranges lie in live allocations of the backend until the stream has run the
    /// copy; they do not overlap, and nothing writes them (or reads `dst`) concurrently
    /// without stream ordering (as
    /// [`DeviceBackend::copy_async`](crate::device::DeviceBackend::copy_async)).
    #[inline]
    pub unsafe fn copy_async(
        &self,
        dst: crate::device::DevicePtr,
        src: crate::device::DevicePtr,
        bytes: usize,
    ) -> crate::Result<()> {
        // SAFETY: as `memset_async`.
        unsafe {
            self.backend
                .copy_async_unchecked(dst, src, bytes, self.stream)
        }
    }
}

#[inline]
fn device_access<'a>(
    operator: &str,
    device: Option<&'a std::sync::Arc<dyn crate::device::DeviceBackend>>,
    stream: Option<crate::device::StreamHandle>,
) -> crate::Result<DeviceAccess<'a>> {
    if let (Some(backend), Some(stream)) = (device, stream) {
        Ok(DeviceAccess { backend, stream })
    } else {
        std::hint::cold_path();
        Err(host_only(
            operator,
            "this operator runs in a host-only partition: it has no device stream",
        ))
    }
}

/// The refusal of [`ExecutionContext::cuda_stream`] and of [`device_access`] in a
/// host-only partition (`message`: which of the two), out of line: the accessors
/// themselves stay a few instructions inlined into the operator.
#[cold]
#[inline(never)]
fn host_only(operator: &str, message: &'static str) -> crate::Error {
    crate::Error::new(crate::ErrorCode::NotSupported, message).at(format!("operator {operator:?}"))
}

/// What `start()` and `stop()` see.
pub struct LifecycleContext<'a> {
    pub(crate) operator: &'a str,
    pub(crate) rates: super::rates::OperatorRates<'a>,
    pub(crate) stream: Option<crate::device::StreamHandle>,
    pub(crate) device: Option<&'a std::sync::Arc<dyn crate::device::DeviceBackend>>,
}

impl LifecycleContext<'_> {
    /// The operator's device and stream, as in `compute` ([`ExecutionContext::cuda`]):
    /// an operator can allocate its own device buffers or load its kernels in `start`
    /// and free them in `stop`. `NotSupported` for an operator in a host-only partition.
    #[inline]
    pub fn cuda(&self) -> crate::Result<DeviceAccess<'_>> {
        device_access(self.operator, self.device, self.stream)
    }

    /// The rate of one of this operator's ports in the published rate generation.
    pub fn rate(&self, port: &impl super::rates::RatePort) -> super::rates::PortRateView {
        self.rates.view(port.rate_port_index())
    }

    /// The operator's name in the graph.
    pub fn operator_name(&self) -> &str {
        self.operator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast clock runs at half the speed of `Instant` (a drift far beyond any real
    /// one, to make the rule visible): conversions through the present moment stay exact,
    /// where the session epoch would be 10 ms off after 20 ms.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
    )]
    fn instants_convert_through_the_present_not_the_epoch() {
        let (mock_clock, mock) = quanta::Clock::mock();
        let c = SessionClock::on(mock_clock);
        std::thread::sleep(Duration::from_millis(20));
        mock.increment(Duration::from_millis(10));
        // The mock fast clock stands still; std's runs on, and each conversion reads it
        // once. Each check brackets the conversion with std readings and allows exactly
        // the time between them (plus 0.1 ms), so a preemption of the test thread widens
        // the window instead of failing it, while an epoch-based conversion stays 10 ms
        // off.
        let slack = 100_000;
        let ns_of = |d: Duration| u64::try_from(d.as_nanos()).expect("a test's duration");
        // A capture time 2 ms ago on the std clock is 2 ms before the fast clock's now.
        let before = Instant::now();
        let captured = before
            .checked_sub(Duration::from_millis(2))
            .expect("the process runs longer than 2 ms");
        let ns = c.ns_since_epoch(captured);
        let taken = ns_of(before.elapsed());
        let now_ns = c.now_ns();
        let age = now_ns.saturating_sub(ns);
        assert!(
            (2_000_000 - slack..=2_000_000 + taken + slack).contains(&age),
            "a 2 ms old capture converts to {age} ns old ({taken} ns between the reads)"
        );
        // And back: the fast clock's now is std's now, as the conversion read it.
        let before = Instant::now();
        let back = c.instant(now_ns);
        let after = Instant::now();
        let slack_d = Duration::from_nanos(slack);
        assert!(
            back + slack_d >= before && back <= after + slack_d,
            "now converts to {back:?}, outside {before:?}..{after:?}"
        );
        // A time ahead on the std clock stays ahead.
        let before = Instant::now();
        let ahead = c.ns_since_epoch(before + Duration::from_millis(3));
        let taken = ns_of(before.elapsed());
        let lead = ahead.saturating_sub(c.now_ns());
        assert!(
            (3_000_000u64.saturating_sub(taken + slack)..=3_000_000 + slack).contains(&lead),
            "a time 3 ms ahead converts to {lead} ns ahead ({taken} ns between the reads)"
        );
    }

    /// std's clock read through a script: `readings` in order, counting the reads.
    fn scripted(readings: Vec<Instant>, reads: &std::cell::Cell<usize>) -> impl FnMut() -> Instant {
        let mut it = readings.into_iter();
        move || {
            reads.set(reads.get() + 1);
            it.next().expect("the script has a reading for every read")
        }
    }

    /// A thread preempted between its two std reads (40 µs, as on the loaded CI machine
    /// where a forwarded capture time came back 40 µs off) reads the pair again, and the
    /// tight second pair gives the moment: its midpoint, not the first pair's.
    #[test]
    fn a_pair_read_across_a_preemption_is_read_again() {
        let (mock_clock, mock) = quanta::Clock::mock();
        let c = SessionClock::on(mock_clock);
        mock.increment(Duration::from_millis(5));
        let base = Instant::now();
        let us = Duration::from_micros;
        let reads = std::cell::Cell::new(0);
        let script = vec![
            base,
            base + us(40),
            base + us(41),
            base + us(41) + us(1) / 2,
        ];
        let (ns, at) = c.pair_with(scripted(script, &reads));
        assert_eq!(ns, 5_000_000);
        assert_eq!(at, base + us(41) + us(1) / 4);
        assert_eq!(reads.get(), 4, "two pairs read");
    }

    /// When every pair is wide, the narrowest of `PAIR_TRIES` gives the moment.
    #[test]
    fn when_every_pair_is_wide_the_narrowest_is_taken() {
        let (mock_clock, _mock) = quanta::Clock::mock();
        let c = SessionClock::on(mock_clock);
        let base = Instant::now();
        let us = Duration::from_micros;
        let widths = [30, 10, 20, 50, 40, 60, 70, 80];
        assert_eq!(widths.len(), PAIR_TRIES);
        let script: Vec<Instant> = widths
            .iter()
            .enumerate()
            .flat_map(|(k, &w)| {
                let before = base + us(100) * u32::try_from(k).unwrap();
                [before, before + us(w)]
            })
            .collect();
        let reads = std::cell::Cell::new(0);
        let (_, at) = c.pair_with(scripted(script, &reads));
        assert_eq!(at, base + us(100) + us(5), "the 10 µs pair's midpoint");
        assert_eq!(reads.get(), 2 * PAIR_TRIES);
    }

    /// The cross-process conversions bracket `CLOCK_MONOTONIC`'s nanoseconds the same way:
    /// the inner reading of the tight second pair, with its outer midpoint.
    #[test]
    fn nanosecond_readings_are_bracketed_too() {
        let mut outer = [100_u64, 40_100, 41_000, 41_400].into_iter();
        let mut inner = [7_u32, 9].into_iter();
        let (at, ns) = read_as_one_moment(|| outer.next().unwrap(), || inner.next().unwrap());
        assert_eq!((at, ns), (9, 41_200));
        assert_eq!(outer.next(), None, "two pairs read");
    }
}
