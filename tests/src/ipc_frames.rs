//! The frames of the cross-process tests (`tests/tests/ipc.rs`) and their peer process
//! (`src/bin/ipc_peer.rs`): a host source whose frame k carries k in its first 8 bytes and
//! `k % 251` in every other byte, so a reader can tell a frame's bytes from another's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use holo_runtime::device::{DeviceBackend, StreamHandle};
use holo_runtime::plan::ExecutionPlan;
use holo_runtime::{
    CommittedTensor, CompileOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Operator, Output, ParamSet, Result, Tensor, TensorLoanRequest, TensorOutputLoan, TopicOptions,
    compile, operator,
};

/// Bytes per frame.
pub const FRAME_BYTES: u64 = 4096;

/// Emits frame k per activation (up to `limit`), while `go` is set; counts what it emitted
/// and what its pool or queue refused.
#[operator]
pub struct IpcFrames {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 4096)]
    out: Output<Tensor>,
    frames: Frames,
}

/// What an [`IpcFrames`] source did.
#[derive(Debug, Default)]
pub struct IpcStats {
    /// Frames emitted.
    pub emitted: AtomicU64,
    /// Loans refused (`ResourceExhausted`).
    pub exhausted: AtomicU64,
    /// Emits refused (`Backpressured`).
    pub backpressured: AtomicU64,
}

/// What every source here counts: the frame number, its limit, the gate, the stats; and
/// the loan and emit every one of them makes, a refusal counted and the activation ended.
#[derive(Debug)]
pub struct Frames {
    k: u64,
    limit: u64,
    go: Arc<AtomicBool>,
    stats: Arc<IpcStats>,
}

impl Frames {
    fn new(limit: u64, go: Arc<AtomicBool>) -> (Self, Arc<IpcStats>) {
        let stats = Arc::new(IpcStats::default());
        let frames = Self {
            k: 0,
            limit,
            go,
            stats: Arc::clone(&stats),
        };
        (frames, stats)
    }

    /// A loan of `bytes` for the next frame; `None` when the source is done or gated, or
    /// its pool is empty (counted).
    fn loan(&self, out: &mut Output<Tensor>, bytes: u64) -> Result<Option<TensorOutputLoan>> {
        if self.k >= self.limit || !self.go.load(Ordering::Acquire) {
            std::thread::yield_now();
            return Ok(None);
        }
        match out.allocate_tensor(TensorLoanRequest {
            shape: &[bytes],
            dtype: DType::U8,
        }) {
            Ok(l) => Ok(Some(l)),
            Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                std::thread::yield_now();
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Emits frame k; a backpressured emit is counted and the frame tried again.
    fn emit(&mut self, out: &mut Output<Tensor>, t: CommittedTensor) -> Result<()> {
        match out.emit(t, EmitOptions::default().with_frame(self.k)) {
            Ok(()) => {
                self.k += 1;
                self.stats.emitted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) if e.code() == ErrorCode::Backpressured => {
                self.stats.backpressured.fetch_add(1, Ordering::Relaxed);
                std::thread::yield_now();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl IpcFrames {
    /// A source of `limit` frames that waits for `go`.
    pub fn new(limit: u64, go: Arc<AtomicBool>) -> (Self, Arc<IpcStats>) {
        let (frames, stats) = Frames::new(limit, go);
        let out = Output::default();
        (Self { out, frames }, stats)
    }
}

/// Writes frame `k` into `bytes`.
pub fn fill_frame(k: u64, bytes: &mut [u8]) {
    #[allow(clippy::cast_possible_truncation, reason = "k % 251 < 256")]
    bytes.fill((k % 251) as u8);
    bytes[..8].copy_from_slice(&k.to_le_bytes());
}

/// Checks that `bytes` are frame `k`'s: `Err` names the first byte that is not.
pub fn check_frame(k: u64, bytes: &[u8]) -> std::result::Result<(), String> {
    if bytes.len() as u64 != FRAME_BYTES {
        return Err(format!("frame {k} has {} bytes", bytes.len()));
    }
    let got = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
    if got != k {
        return Err(format!("frame {k} carries the number {got}"));
    }
    #[allow(clippy::cast_possible_truncation, reason = "k % 251 < 256")]
    let fill = (k % 251) as u8;
    match bytes[8..].iter().position(|&b| b != fill) {
        Some(i) => Err(format!(
            "frame {k}: byte {} is {} where {fill} belongs",
            i + 8,
            bytes[i + 8]
        )),
        None => Ok(()),
    }
}

impl Operator for IpcFrames {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(loan) = self.frames.loan(&mut self.out, FRAME_BYTES)? else {
            return Ok(());
        };
        let k = self.frames.k;
        let t = loan.write_host_and_commit(|b| fill_frame(k, b))?;
        self.frames.emit(&mut self.out, t)
    }
}

/// A graph of one [`IpcFrames`] source exporting `topic` across processes with `options`
/// (`across_processes` is set here), and its plan.
pub fn exporting_graph(
    topic: &str,
    limit: u64,
    go: Arc<AtomicBool>,
    options: TopicOptions,
) -> Result<(Graph, ExecutionPlan, Arc<IpcStats>)> {
    let mut graph = Graph::new();
    let (op, stats) = IpcFrames::new(limit, go);
    let camera = graph.add_operator("camera", op, ParamSet::defaults()?)?;
    graph.export_topic(camera.out, topic, options.across_processes());
    let plan = compile(&graph, CompileOptions::default())?;
    Ok((graph, plan, stats))
}

/// The largest device frame of the cross-process device tests (4 MiB).
pub const DEVICE_FRAME_MAX: u64 = 4 << 20;

/// The byte every byte of device frame `k` holds (never 0, so a never-written slot shows).
pub fn device_fill(k: u64) -> u8 {
    #[allow(clippy::cast_possible_truncation, reason = "k % 251 < 256")]
    let b = (k % 251) as u8;
    b + 1
}

/// A device source: frame k (`bytes` long) is `device_fill(k)` in every byte, written on
/// the operator's stream after `delay` of the stream doing nothing (on CUDA a spin kernel,
/// `crate::spin`), so that a reader that is not ordered behind the write reads an older
/// frame.
#[operator]
pub struct IpcDeviceFrames {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 4194304)]
    out: Output<Tensor>,
    frames: Frames,
    bytes: u64,
    delay: std::time::Duration,
}

impl IpcDeviceFrames {
    /// A source of `limit` frames of `bytes` bytes with `delay` before each fill.
    pub fn new(
        limit: u64,
        bytes: u64,
        delay: std::time::Duration,
        go: Arc<AtomicBool>,
    ) -> (Self, Arc<IpcStats>) {
        let (frames, stats) = Frames::new(limit, go);
        let out = Output::default();
        let source = Self {
            out,
            frames,
            bytes,
            delay,
        };
        (source, stats)
    }
}

/// The device of the cross-process device tests: CUDA device 0 where it opens, else the
/// software device (whose `DeviceIpc` stands in for CUDA's: memfd "device memory",
/// stream-ordered words in its worker threads) — unless `HOLO_REQUIRE_DEVICE=cuda`, where
/// CUDA's absence panics (the test fails rather than pass on the stand-in).
///
/// # Panics
/// As said, with `HOLO_REQUIRE_DEVICE=cuda` and no CUDA device 0.
pub fn cuda_or_software() -> Arc<dyn DeviceBackend> {
    match holo_runtime::device::CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            assert!(
                std::env::var("HOLO_REQUIRE_DEVICE").as_deref() != Ok("cuda"),
                "HOLO_REQUIRE_DEVICE=cuda but CUDA device 0 does not open: {e}"
            );
            holo_runtime::device::SoftwareDevice::new()
        }
    }
}

/// Enqueues `delay` of `stream` doing nothing: on CUDA a spin kernel (it dies with its
/// process), elsewhere a host function.
pub fn idle(b: &dyn DeviceBackend, s: StreamHandle, delay: std::time::Duration) -> Result<()> {
    if delay.is_zero() {
        Ok(())
    } else if b.backend_kind() == holo_runtime::device::BackendKind::Cuda {
        crate::spin::spin(s.raw(), delay)
    } else {
        b.enqueue_delay(s, delay)
    }
}

impl Operator for IpcDeviceFrames {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(loan) = self.frames.loan(&mut self.out, self.bytes)? else {
            return Ok(());
        };
        let (fill, delay) = (device_fill(self.frames.k), self.delay);
        let t = loan.write_and_commit(ctx.cuda_stream()?, |b, ptr, n, s| {
            idle(b, s, delay)?;
            // SAFETY: the loan's slot, written only on this stream until committed.
            unsafe { b.memset_async(ptr, fill, n, s) }
        })?;
        self.frames.emit(&mut self.out, t)
    }
}

/// A graph of one [`IpcDeviceFrames`] source (operator `camera`, its output bound to CUDA
/// device 0) exporting `topic` across processes, and its plan.
pub fn exporting_device_graph(
    topic: &str,
    source: IpcDeviceFrames,
    options: TopicOptions,
) -> Result<(Graph, ExecutionPlan)> {
    let mut graph = Graph::new();
    let camera = graph.add_operator("camera", source, ParamSet::defaults()?)?;
    bound_export(graph, camera.out, topic, options)
}

/// Exports `out` (operator `camera`'s port `out`) as `topic` across processes, its output
/// bound to CUDA device 0, and compiles.
fn bound_export(
    mut graph: Graph,
    out: holo_runtime::OutPort<Tensor>,
    topic: &str,
    options: TopicOptions,
) -> Result<(Graph, ExecutionPlan)> {
    graph.export_topic(out, topic, options.across_processes());
    let mut compile_options = CompileOptions::default();
    compile_options.deployment.bind_tensor_output_device(
        "camera",
        "out",
        holo_runtime::device::DeviceId::cuda(0),
    );
    let plan = compile(&graph, compile_options)?;
    Ok((graph, plan))
}

/// Checks a device frame's bytes read back to the host (all of them, or samples).
pub fn check_device_frame(k: u64, bytes: &[u8]) -> std::result::Result<(), String> {
    let want = device_fill(k);
    match bytes.iter().position(|&b| b != want) {
        Some(i) => Err(format!(
            "frame {k}: byte {i} is {} where {want} belongs (frame {} was read before its fence)",
            bytes[i],
            (0..251u64)
                .find(|j| device_fill(*j) == bytes[i])
                .map_or("?".to_owned(), |j| format!("≡{j} mod 251"))
        )),
        None => Ok(()),
    }
}

/// A pinned-host source: frame k (`bytes` long) is `device_fill(k)` in every byte, written
/// either on the host (`write_host_and_commit`: no fence to wait for) or on the operator's
/// stream after a `delay` spin kernel (`write_and_commit`: the stream fences it).
#[operator]
pub struct IpcPinnedFrames {
    #[output(storage = runtime_pool, memory = pinned, dtype = u8, rank = 1, bounds = 65536)]
    out: Output<Tensor>,
    frames: Frames,
    bytes: u64,
    delay: std::time::Duration,
    host_writer: bool,
}

impl IpcPinnedFrames {
    /// A source of `limit` frames of `bytes` bytes; `host_writer` picks the writer.
    pub fn new(
        limit: u64,
        bytes: u64,
        delay: std::time::Duration,
        host_writer: bool,
        go: Arc<AtomicBool>,
    ) -> (Self, Arc<IpcStats>) {
        let (frames, stats) = Frames::new(limit, go);
        let out = Output::default();
        let source = Self {
            out,
            frames,
            bytes,
            delay,
            host_writer,
        };
        (source, stats)
    }
}

impl Operator for IpcPinnedFrames {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let Some(loan) = self.frames.loan(&mut self.out, self.bytes)? else {
            return Ok(());
        };
        let (fill, delay) = (device_fill(self.frames.k), self.delay);
        let t = if self.host_writer {
            loan.write_host_and_commit(|b| b.fill(fill))?
        } else {
            loan.write_and_commit(ctx.cuda_stream()?, |b, ptr, n, s| {
                idle(b, s, delay)?;
                // SAFETY: the loan's slot, written only on this stream until committed.
                unsafe { b.memset_async(ptr, fill, n, s) }
            })?
        };
        self.frames.emit(&mut self.out, t)
    }
}

/// A graph of one [`IpcPinnedFrames`] source (operator `camera`, bound to CUDA device 0)
/// exporting `topic` across processes, and its plan.
pub fn exporting_pinned_graph(
    topic: &str,
    source: IpcPinnedFrames,
    options: TopicOptions,
) -> Result<(Graph, ExecutionPlan)> {
    let mut graph = Graph::new();
    let camera = graph.add_operator("camera", source, ParamSet::defaults()?)?;
    bound_export(graph, camera.out, topic, options)
}

/// What an [`IpcSink`] received: frames in order with their own bytes, and the first
/// thing that was wrong.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Frames received with their bytes right and in order.
    pub received: AtomicU64,
    /// The first frame that was wrong, and why.
    pub wrong: std::sync::Mutex<Option<String>>,
    /// Frames whose writer died before their fence (`Tensor::fence_abandoned`): not
    /// checked, their bytes are not the frame's.
    pub abandoned: AtomicU64,
}

/// Receives host frames of [`fill_frame`] (k in the first 8 bytes) from an imported topic,
/// checking each one's bytes and that their numbers follow each other (`frame` ids too).
#[operator]
pub struct IpcSink {
    #[input(memory = host, dtype = u8, rank = 1)]
    frames: holo_runtime::Input<Tensor>,
    next: u64,
    stats: Arc<SinkStats>,
}

impl IpcSink {
    /// A sink counting into `stats`.
    pub fn new(stats: Arc<SinkStats>) -> Self {
        Self {
            frames: holo_runtime::Input::default(),
            next: 0,
            stats,
        }
    }
}

impl Operator for IpcSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some((t, info)) = self.frames.receive_with_info() {
            let bytes = t.data()?;
            let k = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
            let wrong = if k != self.next || info.frame != k {
                Some(format!(
                    "frame {k} (id {}) came where {} belongs",
                    info.frame, self.next
                ))
            } else {
                check_frame(k, bytes).err()
            };
            self.stats.record(wrong);
            self.next = k + 1;
        }
        Ok(())
    }
}

/// A graph of one [`IpcSink`] (operator `sink`) importing `topic` across processes with
/// `options` (4096-byte frames), and its plan.
pub fn importing_graph(
    topic: &str,
    options: TopicOptions,
) -> Result<(Graph, ExecutionPlan, Arc<SinkStats>)> {
    let mut graph = Graph::new();
    let stats = Arc::new(SinkStats::default());
    let sink = IpcSink::new(Arc::clone(&stats));
    let s = graph.add_operator("sink", sink, ParamSet::defaults()?)?;
    graph.import_topic(
        s.frames,
        topic,
        options.with_max_bytes(FRAME_BYTES).across_processes(),
    );
    let plan = compile(&graph, CompileOptions::default())?;
    Ok((graph, plan, stats))
}

/// Receives frames of [`device_fill`] from a topic imported across processes in device
/// or pinned memory: reads each one back on the operator's stream (the whole frame) and
/// checks every byte and that the frame ids follow each other.
macro_rules! device_sink {
    ($name:ident, $kind:ident) => {
        /// A device-frame sink (see `device_sink!`).
        #[operator]
        pub struct $name {
            #[input(memory = $kind, dtype = u8, rank = 1)]
            frames: holo_runtime::Input<Tensor>,
            next: u64,
            buf: Vec<u8>,
            stats: Arc<SinkStats>,
        }

        impl $name {
            /// A sink counting into `stats`.
            pub fn new(stats: Arc<SinkStats>) -> Self {
                Self {
                    frames: holo_runtime::Input::default(),
                    next: 0,
                    buf: Vec::new(),
                    stats,
                }
            }
        }

        impl Operator for $name {
            fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
                while let Some((t, info)) = self.frames.receive_with_info() {
                    let n = t.byte_size();
                    self.buf.resize(n, 0);
                    t.copy_to_host(&mut self.buf[..n], ctx.cuda_stream()?)?;
                    // The copy ran behind the fence's wait: an abandoned fence shows now.
                    if t.fence_abandoned() {
                        self.stats.abandoned.fetch_add(1, Ordering::Relaxed);
                        self.next = info.frame + 1;
                        continue;
                    }
                    let wrong = if info.frame != self.next {
                        Some(format!(
                            "frame {} came where {} belongs",
                            info.frame, self.next
                        ))
                    } else {
                        check_device_frame(info.frame, &self.buf[..n]).err()
                    };
                    self.stats.record(wrong);
                    self.next = info.frame + 1;
                }
                Ok(())
            }
        }
    };
}

device_sink!(IpcDeviceSink, cuda_device);
device_sink!(IpcPinnedSink, pinned);

impl SinkStats {
    /// Counts a frame received right, or keeps the first thing that was wrong.
    fn record(&self, wrong: Option<String>) {
        if let Some(w) = wrong {
            let mut first = self
                .wrong
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            first.get_or_insert(w);
        } else {
            self.received.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A graph of one device-frame sink (operator `sink`, `cuda_device` or `pinned` memory)
/// importing `topic` across processes on CUDA device 0 with frames of `max_bytes` at most,
/// and its plan.
pub fn importing_device_graph(
    topic: &str,
    kind: holo_runtime::MemoryKind,
    max_bytes: u64,
    options: TopicOptions,
) -> Result<(Graph, ExecutionPlan, Arc<SinkStats>)> {
    let mut graph = Graph::new();
    let stats = Arc::new(SinkStats::default());
    let params = ParamSet::defaults()?;
    let frames = if kind == holo_runtime::MemoryKind::PinnedHost {
        let sink = IpcPinnedSink::new(Arc::clone(&stats));
        graph.add_operator("sink", sink, params)?.frames
    } else {
        let sink = IpcDeviceSink::new(Arc::clone(&stats));
        graph.add_operator("sink", sink, params)?.frames
    };
    graph.import_topic(
        frames,
        topic,
        options.with_max_bytes(max_bytes).across_processes(),
    );
    let mut compile_options = CompileOptions::default();
    compile_options
        .deployment
        .bind_imported_topic_device(topic, holo_runtime::device::DeviceId::cuda(0));
    let plan = compile(&graph, compile_options)?;
    Ok((graph, plan, stats))
}

/// A slot the session granted `publisher`, waiting up to 10 s for one.
///
/// # Errors
/// `Cancelled` when none is granted in 10 s; the loan's errors.
pub fn granted(
    publisher: &holo_runtime::ipc::ProcessPublisher,
) -> Result<holo_runtime::ipc::RemoteLoan<'_>> {
    publisher
        .loan(std::time::Duration::from_secs(10))?
        .ok_or_else(|| holo_runtime::Error::new(ErrorCode::Cancelled, "no slot granted in 10 s"))
}

/// Publishes frames `frames` of [`fill_frame`] (4 KiB, written on the host) through
/// `publisher`, each into a slot the session granted (waiting up to 10 s for one).
///
/// # Errors
/// `Cancelled` when no slot is granted in 10 s; the loan's and the publish's errors.
pub fn publish_host_frames(
    publisher: &holo_runtime::ipc::ProcessPublisher,
    frames: std::ops::Range<u64>,
) -> Result<()> {
    for k in frames {
        let mut loan = granted(publisher)?;
        #[allow(clippy::cast_possible_truncation, reason = "FRAME_BYTES is 4096")]
        fill_frame(k, &mut loan.bytes_mut()?[..FRAME_BYTES as usize]);
        loan.publish(&[FRAME_BYTES], DType::U8, k)?;
    }
    Ok(())
}

/// Publishes device frames `frames` of [`device_fill`], `bytes` each, through `publisher`
/// (a topic in device or pinned memory): on the publisher's stream after `delay` of it
/// idling, or on the host (`host_writer`, pinned memory).
///
/// # Errors
/// As [`publish_host_frames`]; `InvalidArgument` when the topic is not in device memory.
pub fn publish_device_frames(
    publisher: &holo_runtime::ipc::ProcessPublisher,
    frames: std::ops::Range<u64>,
    bytes: u64,
    delay: std::time::Duration,
    host_writer: bool,
) -> Result<()> {
    let (Some(device), Some(stream)) = (publisher.device().cloned(), publisher.stream()) else {
        return Err(holo_runtime::Error::invalid_argument(
            "the topic is not in device memory",
        ));
    };
    device.bind_to_thread()?;
    let n =
        usize::try_from(bytes).map_err(|e| holo_runtime::Error::invalid_argument(e.to_string()))?;
    for k in frames {
        let mut loan = granted(publisher)?;
        if host_writer {
            loan.bytes_mut()?[..n].fill(device_fill(k));
            loan.publish_written_on_host(&[bytes], DType::U8, k)?;
        } else {
            let ptr = loan
                .device_ptr()
                .ok_or_else(|| holo_runtime::Error::invalid_argument("no device_ptr"))?;
            idle(device.as_ref(), stream, delay)?;
            // SAFETY: the granted slot, `bytes` ≤ its capacity, written only on this stream
            // until the session's stream waits for the fence `publish` enqueues after it.
            unsafe { device.memset_async(ptr, device_fill(k), n, stream)? };
            loan.publish(&[bytes], DType::U8, k)?;
        }
    }
    Ok(())
}
