//! The CUDA device hop across processes beside the raw sequence of driver calls it is made
//! of, in the same run (DESIGN.md, "Performance method"; docs/IPC.md, device memory): the
//! device counterpart of `ipc_hop`.
//!
//! Frames are 1 MiB (1,048,576 bytes) of `cuda_device` memory on GPU 0, frame n filled with
//! the byte `n % 251 + 1` (`cuMemsetD8Async`). A second process (this binary, `--role …`)
//! reads a frame's last 8 bytes back into an 8-byte pinned host buffer on its stream and
//! checks them. Every time is `CLOCK_MONOTONIC`, the clock both processes share.
//!
//! 1. **Hop latency**: one frame every 200 µs, 10,000 frames after 2,000 of warm-up, 3
//!    interleaved raw/holo pairs.
//!    - *raw*: this process allocates 8 slots of 1 MiB as one exportable allocation
//!      (`DeviceIpc::alloc_exportable`: `cuMemCreate` with POSIX fd handles) and a shared
//!      control page (a memfd: 8 fence words, then 8 release words, host-registered), and
//!      hands both descriptors to the second process (`--role raw`) by inheritance. Per
//!      frame n (slot n % 8, value n + 1): wait (CPU) until the slot's release word names
//!      its previous use; t0; the fill on a stream; `cuStreamWriteValue64` of the value into
//!      the slot's fence word; a 160-byte `#[repr(C)]` descriptor (t0, slot, value; the size
//!      of holo's slot descriptor) through an iceoryx2 publish-subscribe service, and an
//!      iceoryx2 event notified. The second process maps the allocation (`import_fd`) and
//!      the control page and, per descriptor, as `ProcessSubscriber` waits (`receive`, else
//!      the listener's `timed_wait`): `cuStreamWaitValue64` (≥ the value) on the fence word,
//!      the 8-byte read-back, `cuStreamSynchronize`, t1, the byte check, then
//!      `cuStreamWriteValue64` of the value into the release word. Records t1 − t0.
//!    - *holo*: a session in this process whose source (its output bound to CUDA device 0)
//!      takes t0 just before it enqueues the fill and emits the frame with that capture
//!      time exports it across processes (depth 4, 2 holds per subscriber); the second
//!      process (`--role holo`) attaches a `ProcessSubscriber` (which opens the GPU
//!      itself), reads the received tensor's last 8 bytes back on the subscriber's stream,
//!      synchronizes it, takes t1, checks the bytes and drops the tensor (its stream
//!      writes the release word). Records t1 − capture.
//!
//!    Printed per pair: both p50/p99, the p50 and p99 ratios holo/raw, and allocations per
//!    frame in each process (a counting allocator in both, over the measured frames; the
//!    CUDA driver's own `malloc`s are not Rust allocations and are not counted). Target:
//!    median p50 ratio ≤ 1.2.
//! 2. **Sustained throughput** (holo only): the source emits 1 MiB frames unpaced — as fast
//!    as the pool and the subscriber's releases allow (the topic's default `Block` queue) —
//!    for 3 s or 30,000 frames; the second process (`--role holo-sustained`) drops each
//!    tensor at once, and every 100th frame first reads its last 8 bytes back (copy +
//!    synchronize) and checks them. Printed: frames/s received (first to last receipt in
//!    the second process) and emitted, received vs emitted (equal: nothing dropped), and
//!    how often the source found no room. Target ≥ 10,000 frames/s.
//! 3. **Fence round trip** (raw, this process): two streams of one device and one
//!    registered control page: t0; `cuStreamWriteValue64(s1, fence, v)`;
//!    `cuStreamWaitValue64(s2, fence, ≥ v)`; `cuStreamWriteValue64(s2, release, v)`; the
//!    CPU spins until the release word is ≥ v; t1. 10,000 iterations after 1,000 of
//!    warm-up; p50/p99. A slot of a depth-limited pipeline comes back no sooner than this,
//!    which bounds its throughput.
//!
//! Without a CUDA device, or one that cannot share memory across processes (or built
//! without the `cuda` feature), it prints `ipc_device_hop: skipped: <why>` and exits 0. A
//! frame whose bytes were wrong, or a frame lost, is reported at the end and the run exits
//! 1.
//!
//! ```text
//! cargo bench -p holo-runtime --bench ipc_device_hop
//! ```

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "bench arithmetic on nanosecond timings and frame counts"
)]

#[path = "common/counting.rs"]
mod counting;
#[cfg(feature = "cuda")]
#[path = "common/raw_iox.rs"]
mod raw_iox;
#[cfg(feature = "cuda")]
#[path = "common/timing.rs"]
mod timing;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    #[cfg(feature = "cuda")]
    cuda::main(&args);
    #[cfg(not(feature = "cuda"))]
    println!("ipc_device_hop: skipped: built without the `cuda` feature");
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
    use std::path::PathBuf;
    use std::process::{Child, ChildStdout, Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use holo_runtime::device::{
        AllocKind, CudaDevice, DeviceBackend, DeviceId, DeviceIpc, DevicePtr, StreamHandle,
    };
    use holo_runtime::ipc::{EndpointCatalog, ProcessSubscriber, ProcessSubscriberOptions};
    use holo_runtime::{
        CompileOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph, Operator, Output,
        ParamSet, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest, TopicOptions,
        compile, operator,
    };
    use iceoryx2::prelude::*;
    use rustix::fs::MemfdFlags;
    use rustix::io::FdFlags;
    use rustix::mm::{MapFlags, ProtFlags};

    use super::counting::ALLOCATIONS;
    use super::raw_iox::raw_services;
    use super::timing::{mono_ns, pace, percentiles};

    /// Bytes per frame (1 MiB; the source's `bounds`).
    const FRAME: usize = 1 << 20;
    /// Measured frames per run of the hop latency.
    const FRAMES: u64 = 10_000;
    /// Warm-up frames before them.
    const WARMUP: u64 = 2_000;
    /// Frames sent after the measured ones, neither timed nor counted: the other process
    /// is still attached when a side's allocation count ends (its detach is not a frame's
    /// work).
    const TAIL: u64 = 100;
    /// One frame every `PERIOD` in the hop latency.
    const PERIOD: Duration = Duration::from_micros(200);
    /// Interleaved raw/holo pairs.
    const PAIRS: usize = 3;
    /// Slots of the raw ring.
    const SLOTS: usize = 8;
    /// The sustained run: this long, or this many frames, whichever ends first.
    const SUSTAIN_FOR: Duration = Duration::from_secs(3);
    const SUSTAIN_FRAMES: u64 = 30_000;
    /// The sustained run's second process checks every `CHECK_EVERY`th frame's bytes.
    const CHECK_EVERY: u64 = 100;
    /// Fence round trips measured, after `ROUND_TRIP_WARMUP`.
    const ROUND_TRIPS: u64 = 10_000;
    const ROUND_TRIP_WARMUP: u64 = 1_000;
    /// The control page: fence words `0..SLOTS`, release words `SLOTS..2 * SLOTS`.
    const CONTROL_BYTES: usize = 4096;
    /// The bytes read back per frame: the frame's last 8.
    const READ_BACK: usize = 8;
    /// The holo topic's name.
    const TOPIC: &str = "bench";
    /// How long anything here waits for the other process before it gives up.
    const PATIENCE: Duration = Duration::from_secs(10);
    /// How long a CPU wait on a control word spins before it yields.
    const SPIN_FOR: Duration = Duration::from_micros(200);

    /// The raw descriptor: t0, the slot, its fence value, padded to the size of holo's slot
    /// descriptor (160 bytes).
    #[derive(Debug, Clone, Copy, ZeroCopySend)]
    #[repr(C)]
    struct RawDesc {
        t0: u64,
        slot: u64,
        seq: u64,
        rest: [u64; 17],
    }

    /// The byte every byte of frame `n` holds (never 0, so a never-written slot shows).
    fn fill_byte(n: u64) -> u8 {
        (n % 251) as u8 + 1
    }

    /// Spins (then yields) until `word` is at least `value`; panics after `PATIENCE`.
    fn wait_word(word: &AtomicU64, value: u64, what: &str) {
        if word.load(Ordering::Acquire) >= value {
            return;
        }
        let start = Instant::now();
        let mut spins = 0u32;
        while word.load(Ordering::Acquire) < value {
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            let waited = start.elapsed();
            assert!(
                waited < PATIENCE,
                "{what}: the word is still below {value} after {PATIENCE:?}"
            );
            if waited > SPIN_FOR {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// A page of shared host memory (a memfd mapped read-write) registered with the device:
    /// fence words `0..SLOTS`, release words `SLOTS..2 * SLOTS`.
    struct Control {
        base: *mut u64,
        device: DevicePtr,
    }

    impl Control {
        /// A new page and its descriptor (close-on-exec).
        fn create(ipc: &dyn DeviceIpc) -> (Self, OwnedFd) {
            let fd = rustix::fs::memfd_create("holo-bench-control", MemfdFlags::CLOEXEC)
                .expect("a memfd for the control page");
            rustix::fs::ftruncate(&fd, CONTROL_BYTES as u64).expect("the control page's size");
            (Self::map(&fd, ipc), fd)
        }

        /// Maps the page `fd` holds and registers it.
        fn map(fd: impl AsFd, ipc: &dyn DeviceIpc) -> Self {
            // SAFETY: a new shared mapping at an address the kernel picks, of a memfd at
            // least `CONTROL_BYTES` long; unmapped only by `close`.
            let base = unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    CONTROL_BYTES,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    fd,
                    0,
                )
            }
            .expect("the control page's mapping")
            .cast::<u64>();
            // SAFETY: the page (page-aligned) stays mapped until `close`, which unregisters
            // it first.
            let device = unsafe { ipc.register_host(base.cast(), CONTROL_BYTES) }
                .expect("the control page registered with the device");
            Self { base, device }
        }

        /// Word `i` of the page, for the CPU.
        fn word(&self, i: usize) -> &AtomicU64 {
            assert!(i < CONTROL_BYTES / 8, "word {i} is past the control page");
            // SAFETY: the word is 8-aligned (the mapping is page-aligned) and inside the
            // mapping, which lives as long as `self`; every access to it, on both sides and
            // by the device, is atomic.
            unsafe { AtomicU64::from_ptr(self.base.add(i)) }
        }

        /// Word `i` of the page, for the device's streams.
        fn device_word(&self, i: usize) -> DevicePtr {
            DevicePtr::from_raw(self.device.raw() + 8 * i as u64)
        }

        /// Unregisters and unmaps the page. Every stream that used it has been synchronized.
        fn close(self, ipc: &dyn DeviceIpc) {
            // SAFETY: the caller synchronized every stream that wrote or waited on the page.
            unsafe { ipc.unregister_host(self.base.cast()) }
                .expect("the control page unregistered");
            // SAFETY: the mapping `map` made, no longer used by anyone in this process.
            unsafe { rustix::mm::munmap(self.base.cast(), CONTROL_BYTES) }
                .expect("the control page unmapped");
        }
    }

    fn fence_word(slot: usize) -> usize {
        slot
    }

    fn release_word(slot: usize) -> usize {
        SLOTS + slot
    }

    /// An 8-byte pinned host buffer to read frames back into (freed by `free_pinned`).
    fn pinned(device: &dyn DeviceBackend) -> (DevicePtr, *mut u8) {
        let ptr = device
            .alloc(AllocKind::PinnedHost, READ_BACK)
            .expect("a pinned read-back buffer");
        let addr = usize::try_from(ptr.raw()).expect("a 64-bit target");
        (ptr, std::ptr::with_exposed_provenance_mut(addr))
    }

    /// Enqueues the read-back of the last 8 bytes of the `bytes` at `frame` into `buf` on
    /// `stream`, synchronizes the stream and tells whether every byte is `want`.
    fn read_back(
        device: &dyn DeviceBackend,
        stream: StreamHandle,
        frame: DevicePtr,
        bytes: usize,
        buf: *mut u8,
        want: u8,
    ) -> bool {
        let last = DevicePtr::from_raw(frame.raw() + (bytes - READ_BACK) as u64);
        // SAFETY: `buf` is a live pinned buffer of `READ_BACK` bytes nobody else touches,
        // and `last..last + READ_BACK` lies in the frame, kept mapped and unreused by the
        // caller until the stream is synchronized just below.
        unsafe { device.copy_to_host_async(buf, last, READ_BACK, stream) }.expect("the read-back");
        device
            .synchronize_stream(stream)
            .expect("the read-back's stream synchronized");
        // SAFETY: the copy into `buf` has completed (the stream is synchronized) and
        // nothing writes it now.
        let got = unsafe { std::ptr::read_volatile(buf.cast::<[u8; READ_BACK]>()) };
        got.iter().all(|&b| b == want)
    }

    fn say_ready() {
        println!("ready");
        let _ = std::io::stdout().flush();
    }

    // ---- the second process -----------------------------------------------------------

    /// A descriptor the parent cleared `FD_CLOEXEC` on and named on the command line.
    fn inherited(number: &str) -> OwnedFd {
        let fd: i32 = number.parse().expect("a descriptor number");
        // SAFETY: the parent made `fd` inheritable and passed its number; nothing else in
        // this process owns or closes it.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    fn raw_child(slots_fd: &str, control_fd: &str, service: &str) {
        let device = CudaDevice::open(0).expect("CUDA device 0");
        let ipc = device.ipc().expect("CUDA device memory across processes");
        let slots_fd = inherited(slots_fd);
        let slots = ipc
            .import_fd(slots_fd.as_fd(), SLOTS * FRAME)
            .expect("the parent's slots mapped");
        drop(slots_fd);
        let control_fd = inherited(control_fd);
        let control = Control::map(&control_fd, ipc);
        drop(control_fd);
        let stream = device.create_stream().expect("a stream");
        let (buf_ptr, buf) = pinned(device.as_ref());
        let (_node, svc, ev) = raw_services::<RawDesc>(service, SLOTS);
        let sub = svc.subscriber_builder().create().expect("a subscriber");
        let listener = ev.listener_builder().create().expect("a listener");
        say_ready();
        let mut lat = Vec::with_capacity(FRAMES as usize);
        let (mut allocs, mut end, mut bad) = (0u64, 0u64, 0u64);
        let mut heard = Instant::now();
        loop {
            let Some(s) = sub.receive().expect("receive") else {
                assert!(heard.elapsed() < PATIENCE, "no descriptor for {PATIENCE:?}");
                listener
                    .timed_wait(|_| {}, Duration::from_millis(20))
                    .expect("wait");
                continue;
            };
            let desc = *s.payload();
            drop(s);
            heard = Instant::now();
            let (slot, seq) = (desc.slot as usize, desc.seq);
            let n = seq - 1;
            // SAFETY: the fence word lies in the control page, registered until `close`
            // after the stream is synchronized.
            unsafe { ipc.wait_value_geq(stream, control.device_word(fence_word(slot)), seq) }
                .expect("the fence wait");
            let frame = DevicePtr::from_raw(slots.raw() + (slot * FRAME) as u64);
            // The slot is not reused before this process writes its release word below.
            let good = read_back(device.as_ref(), stream, frame, FRAME, buf, fill_byte(n));
            let t1 = mono_ns();
            if !good {
                bad += 1;
            }
            // SAFETY: as the fence wait.
            unsafe { ipc.write_value(stream, control.device_word(release_word(slot)), seq) }
                .expect("the release write");
            if n == WARMUP {
                allocs = ALLOCATIONS.load(Ordering::Relaxed);
            }
            if (WARMUP..WARMUP + FRAMES).contains(&n) {
                lat.push(t1.saturating_sub(desc.t0));
            }
            if seq == WARMUP + FRAMES {
                end = ALLOCATIONS.load(Ordering::Relaxed);
            }
            if seq >= WARMUP + FRAMES + TAIL {
                break;
            }
        }
        let allocs = end - allocs;
        device
            .synchronize_stream(stream)
            .expect("the stream synchronized");
        // SAFETY: the stream that read the buffer and the mapping is synchronized; nothing
        // uses either any more.
        unsafe {
            device
                .free(AllocKind::PinnedHost, buf_ptr, READ_BACK)
                .expect("the read-back buffer freed");
            ipc.release_import(slots).expect("the slots unmapped");
        }
        control.close(ipc);
        device.destroy_stream(stream).expect("the stream destroyed");
        let (p50, p99) = percentiles(lat);
        println!("{p50} {p99} {} {bad}", allocs as f64 / FRAMES as f64);
    }

    fn attach(catalog: &str) -> (ProcessSubscriber, Arc<dyn DeviceBackend>, StreamHandle) {
        let catalog = EndpointCatalog::read(catalog).expect("the catalog");
        let sub = ProcessSubscriber::attach(
            &catalog,
            TOPIC,
            ProcessSubscriberOptions::DEFAULT.with_wait_for_exporter(PATIENCE),
        )
        .expect("attach");
        let device = Arc::clone(sub.device().expect("a topic in device memory"));
        let stream = sub.stream().expect("the subscriber's stream");
        (sub, device, stream)
    }

    fn holo_child(catalog: &str) {
        let (mut sub, device, stream) = attach(catalog);
        let (buf_ptr, buf) = pinned(device.as_ref());
        say_ready();
        let mut lat = Vec::with_capacity(FRAMES as usize);
        let (mut n, mut allocs, mut end, mut bad) = (0u64, 0u64, 0u64, 0u64);
        while n < WARMUP + FRAMES + TAIL {
            let t = sub
                .receive(PATIENCE)
                .expect("receive")
                .expect("a frame within the patience");
            let info = sub.last_info();
            // The tensor keeps its slot mapped and unreused until it drops, after the read.
            let good = read_back(
                device.as_ref(),
                stream,
                t.device_ptr(),
                t.byte_size(),
                buf,
                fill_byte(info.frame),
            );
            let t1 = mono_ns();
            drop(t);
            if !good {
                bad += 1;
            }
            let capture = info.capture_ns.expect("a capture time");
            if n == WARMUP {
                allocs = ALLOCATIONS.load(Ordering::Relaxed);
            }
            if (WARMUP..WARMUP + FRAMES).contains(&n) {
                lat.push(t1.saturating_sub(capture));
            }
            n += 1;
            if n == WARMUP + FRAMES {
                end = ALLOCATIONS.load(Ordering::Relaxed);
            }
        }
        let allocs = end - allocs;
        device
            .synchronize_stream(stream)
            .expect("the stream synchronized");
        // SAFETY: the stream that wrote the buffer is synchronized.
        unsafe { device.free(AllocKind::PinnedHost, buf_ptr, READ_BACK) }
            .expect("the read-back buffer freed");
        let (p50, p99) = percentiles(lat);
        println!("{p50} {p99} {} {bad}", allocs as f64 / FRAMES as f64);
    }

    /// Receives until the exporter goes quiet: drops each tensor at once, reads back and
    /// checks every `CHECK_EVERY`th. Prints: received, first-to-last receipt (ns), frames
    /// missing from the sequence, frames with wrong bytes, frames checked.
    fn sustained_child(catalog: &str) {
        let (mut sub, device, stream) = attach(catalog);
        let (buf_ptr, buf) = pinned(device.as_ref());
        say_ready();
        let (mut received, mut missing, mut bad, mut checked) = (0u64, 0u64, 0u64, 0u64);
        let (mut first, mut last) = (0u64, 0u64);
        let mut next = 0u64;
        loop {
            let wait = if received == 0 {
                PATIENCE
            } else {
                Duration::from_secs(2)
            };
            let t = match sub.receive(wait) {
                Ok(Some(t)) => t,
                Ok(None) if received > 0 => break,
                Ok(None) => panic!("no frame within {PATIENCE:?}"),
                Err(e) if e.code() == ErrorCode::Cancelled => break,
                Err(e) => panic!("receive: {e}"),
            };
            let now = mono_ns();
            let frame = sub.last_info().frame;
            if frame % CHECK_EVERY == 0 {
                checked += 1;
                let good = read_back(
                    device.as_ref(),
                    stream,
                    t.device_ptr(),
                    t.byte_size(),
                    buf,
                    fill_byte(frame),
                );
                if !good {
                    bad += 1;
                }
            }
            drop(t);
            if received == 0 {
                first = now;
            }
            last = now;
            missing += frame.saturating_sub(next);
            next = frame + 1;
            received += 1;
        }
        device
            .synchronize_stream(stream)
            .expect("the stream synchronized");
        // SAFETY: the stream that wrote the buffer is synchronized.
        unsafe { device.free(AllocKind::PinnedHost, buf_ptr, READ_BACK) }
            .expect("the read-back buffer freed");
        println!(
            "{received} {} {missing} {bad} {checked}",
            last.saturating_sub(first)
        );
    }

    // ---- this process -----------------------------------------------------------------

    /// The second process and its first line (`ready`).
    fn spawn(args: &[&str]) -> (Child, BufReader<ChildStdout>) {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the second process");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        out.read_line(&mut line).expect("ready");
        assert_eq!(
            line.trim(),
            "ready",
            "the second process did not start (its stderr says why)"
        );
        (child, out)
    }

    /// The second process's result line, split.
    fn result(mut child: Child, mut out: BufReader<ChildStdout>) -> Vec<String> {
        let mut line = String::new();
        out.read_line(&mut line).expect("the result");
        assert!(
            child.wait().expect("exit").success(),
            "the second process failed"
        );
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// A hop run: p50, p99 (ns), allocations per frame here and in the second process,
    /// frames with wrong bytes.
    struct Hop {
        p50: u64,
        p99: u64,
        allocs: f64,
        child_allocs: f64,
        bad: u64,
    }

    fn hop(allocs: f64, v: &[String]) -> Hop {
        Hop {
            p50: v[0].parse().expect("p50"),
            p99: v[1].parse().expect("p99"),
            allocs,
            child_allocs: v[2].parse().expect("allocations"),
            bad: v[3].parse().expect("wrong frames"),
        }
    }

    fn raw_run(pair: usize, device: &Arc<CudaDevice>) -> Hop {
        let ipc = device.ipc().expect("CUDA device memory across processes");
        let stream = device.create_stream().expect("a stream");
        let slots = ipc.alloc_exportable(SLOTS * FRAME).expect("the raw slots");
        let slots_fd = ipc.export_fd(slots).expect("the slots' descriptor");
        let (control, control_fd) = Control::create(ipc);
        for fd in [&slots_fd, &control_fd] {
            rustix::io::fcntl_setfd(fd, FdFlags::empty()).expect("an inheritable descriptor");
        }
        let service = format!("holo-bench/raw-device/{}/{pair}", std::process::id());
        let (_node, svc, ev) = raw_services::<RawDesc>(&service, SLOTS);
        let publisher = svc.publisher_builder().create().expect("a publisher");
        let notifier = ev.notifier_builder().create().expect("a notifier");
        let (child, out) = spawn(&[
            "--role",
            "raw",
            &slots_fd.as_raw_fd().to_string(),
            &control_fd.as_raw_fd().to_string(),
            &service,
        ]);
        // The second process has mapped both; no later one inherits them.
        drop(slots_fd);
        drop(control_fd);
        std::thread::sleep(Duration::from_millis(50));
        let mut last = [0u64; SLOTS];
        let mut deadline = Instant::now();
        let (mut allocs, mut end) = (0, 0);
        for n in 0..WARMUP + FRAMES + TAIL {
            deadline += PERIOD;
            pace(deadline);
            if n == WARMUP {
                allocs = ALLOCATIONS.load(Ordering::Relaxed);
            }
            if n == WARMUP + FRAMES {
                end = ALLOCATIONS.load(Ordering::Relaxed);
            }
            let (slot, seq) = ((n % SLOTS as u64) as usize, n + 1);
            wait_word(
                control.word(release_word(slot)),
                last[slot],
                "a raw slot's release",
            );
            let t0 = mono_ns();
            let frame = DevicePtr::from_raw(slots.raw() + (slot * FRAME) as u64);
            // SAFETY: the slot lies in the live allocation, freed only after the stream is
            // synchronized; its last reader released it (the release word, written by the
            // reader's stream after its read-back ran).
            unsafe { device.memset_async(frame, fill_byte(n), FRAME, stream) }.expect("the fill");
            // SAFETY: the fence word lies in the control page, registered until `close`
            // after the stream is synchronized.
            unsafe { ipc.write_value(stream, control.device_word(fence_word(slot)), seq) }
                .expect("the fence write");
            publisher
                .send_copy(RawDesc {
                    t0,
                    slot: slot as u64,
                    seq,
                    rest: [0; 17],
                })
                .expect("send");
            notifier.notify().expect("notify");
            last[slot] = seq;
        }
        let allocs = (end - allocs) as f64 / FRAMES as f64;
        let v = result(child, out);
        device
            .synchronize_stream(stream)
            .expect("the stream synchronized");
        // SAFETY: the stream that wrote the slots is synchronized and the second process,
        // which read them, has exited.
        unsafe { device.free(AllocKind::Device, slots, SLOTS * FRAME) }
            .expect("the raw slots freed");
        control.close(ipc);
        device.destroy_stream(stream).expect("the stream destroyed");
        hop(allocs, &v)
    }

    /// What a [`DeviceSource`] did.
    #[derive(Debug, Default)]
    struct SourceStats {
        /// Frames emitted.
        emitted: AtomicU64,
        /// Activations that found no room (a full queue or no free slot) and emitted nothing.
        no_room: AtomicU64,
        /// Emits refused (`Backpressured`): frames filled and never published.
        refused: AtomicU64,
        /// From the first emit to the last (ns).
        span_ns: AtomicU64,
        /// Set once the source has emitted all it will.
        done: AtomicBool,
    }

    /// Emits 1 MiB device frames once `go` is set — frame k filled with `fill_byte(k)` on
    /// the operator's stream, its capture time taken just before the fill is enqueued —
    /// one every `period` (or as fast as it finds room, without one) until it emitted
    /// `limit` or `budget` passed since its first.
    #[operator]
    struct DeviceSource {
        #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 1048576)]
        out: Output<Tensor>,
        period: Option<Duration>,
        limit: u64,
        budget: Duration,
        next: Option<Instant>,
        first: Option<Instant>,
        go: Arc<AtomicBool>,
        stats: Arc<SourceStats>,
    }

    impl DeviceSource {
        fn new(
            period: Option<Duration>,
            limit: u64,
            budget: Duration,
        ) -> (Self, Arc<AtomicBool>, Arc<SourceStats>) {
            let go = Arc::new(AtomicBool::new(false));
            let stats = Arc::new(SourceStats::default());
            (
                Self {
                    out: Output::default(),
                    period,
                    limit,
                    budget,
                    next: None,
                    first: None,
                    go: Arc::clone(&go),
                    stats: Arc::clone(&stats),
                },
                go,
                stats,
            )
        }

        fn idle(&self) {
            self.stats.no_room.fetch_add(1, Ordering::Relaxed);
            std::thread::yield_now();
        }
    }

    impl Operator for DeviceSource {
        fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
            if !self.go.load(Ordering::Acquire) || self.stats.done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(200));
                return Ok(());
            }
            let k = self.stats.emitted.load(Ordering::Relaxed);
            if k >= self.limit || self.first.is_some_and(|f| f.elapsed() >= self.budget) {
                self.stats.done.store(true, Ordering::Release);
                return Ok(());
            }
            if let Some(period) = self.period {
                pace(*self.next.get_or_insert_with(|| Instant::now() + period));
            }
            if !self.out.has_room() {
                self.idle();
                return Ok(());
            }
            let loan = match self.out.allocate_tensor(TensorLoanRequest {
                shape: &[FRAME as u64],
                dtype: DType::U8,
            }) {
                Ok(l) => l,
                Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                    self.idle();
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let fill = fill_byte(k);
            let t0 = Instant::now();
            let t = loan.write_and_commit(ctx.cuda_stream()?, |b, ptr, n, s| {
                // SAFETY: the loan's slot, written only on this stream until committed.
                unsafe { b.memset_async(ptr, fill, n, s) }
            })?;
            match self.out.emit(
                t,
                EmitOptions::default().with_frame(k).with_capture_time(t0),
            ) {
                Ok(()) => {
                    let first = *self.first.get_or_insert(t0);
                    self.stats
                        .span_ns
                        .store(first.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    self.stats.emitted.fetch_add(1, Ordering::Release);
                    if let (Some(period), Some(next)) = (self.period, self.next) {
                        self.next = Some(next + period);
                    }
                    Ok(())
                }
                Err(e) if e.code() == ErrorCode::Backpressured => {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
    }

    /// A session exporting `source` as `TOPIC` (depth 4, 2 holds per subscriber) from CUDA
    /// device 0, and the path of its catalog.
    fn start_session(
        source: DeviceSource,
        device: &Arc<CudaDevice>,
        tag: &str,
    ) -> (RunSession, PathBuf) {
        let mut graph = Graph::new();
        let src = graph
            .add_operator("src", source, ParamSet::defaults().expect("defaults"))
            .expect("the source");
        graph.export_topic(
            src.out,
            TOPIC,
            TopicOptions::DEFAULT
                .with_depth(4)
                .with_holds_per_subscriber(2)
                .across_processes(),
        );
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "out", DeviceId::cuda(0));
        let plan = compile(&graph, options).expect("the plan");
        let pid = std::process::id();
        let backend: Arc<dyn DeviceBackend> = device.clone();
        let session = RunSession::start(
            graph,
            &plan,
            SessionOptions::default()
                .on_device(backend)
                .with_ipc_namespace(format!("bench{pid}-{tag}")),
        )
        .expect("the session");
        let path = std::env::temp_dir().join(format!("holo-bench-ipc-device-{pid}-{tag}.toml"));
        session
            .endpoint_catalog()
            .write(&path)
            .expect("the catalog");
        (session, path)
    }

    /// Sleeps until `done`; panics when the session stops first or `limit` passes.
    fn wait_until(session: &RunSession, limit: Duration, what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                !session.is_stopping(),
                "the session stopped while waiting for {what}"
            );
            assert!(start.elapsed() < limit, "no {what} after {limit:?}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn holo_run(pair: usize, device: &Arc<CudaDevice>) -> Hop {
        let (source, go, stats) =
            DeviceSource::new(Some(PERIOD), WARMUP + FRAMES + TAIL, Duration::MAX);
        let (session, path) = start_session(source, device, &format!("p{pair}"));
        let (child, out) = spawn(&["--role", "holo", path.to_str().expect("utf-8")]);
        wait_until(&session, PATIENCE, "the second process's attach", || {
            session.topic_attachments(TOPIC) == Some((1, 1))
        });
        go.store(true, Ordering::Release);
        let emitted = || stats.emitted.load(Ordering::Acquire);
        // The allocations of this process over the measured frames.
        let run = PERIOD * (WARMUP + FRAMES) as u32 + PATIENCE;
        wait_until(&session, run, "the warm-up frames", || emitted() >= WARMUP);
        let start = ALLOCATIONS.load(Ordering::Relaxed);
        wait_until(&session, run, "the measured frames", || {
            emitted() >= WARMUP + FRAMES
        });
        let allocs = (ALLOCATIONS.load(Ordering::Relaxed) - start) as f64 / FRAMES as f64;
        let v = result(child, out);
        session.stop();
        session.join().expect("the session ends");
        let _ = std::fs::remove_file(path);
        hop(allocs, &v)
    }

    /// The sustained run; its failures go to `failures`.
    fn sustained(device: &Arc<CudaDevice>, failures: &mut Vec<String>) {
        let (source, go, stats) = DeviceSource::new(None, SUSTAIN_FRAMES, SUSTAIN_FOR);
        let (session, path) = start_session(source, device, "sustained");
        let (child, out) = spawn(&["--role", "holo-sustained", path.to_str().expect("utf-8")]);
        wait_until(&session, PATIENCE, "the second process's attach", || {
            session.topic_attachments(TOPIC) == Some((1, 1))
        });
        go.store(true, Ordering::Release);
        wait_until(
            &session,
            SUSTAIN_FOR + PATIENCE,
            "the end of the source",
            || stats.done.load(Ordering::Acquire),
        );
        let v = result(child, out);
        session.stop();
        session.join().expect("the session ends");
        let _ = std::fs::remove_file(path);
        let field = |i: usize, what: &str| -> u64 { v[i].parse().expect(what) };
        let (received, span, missing, bad, checked) = (
            field(0, "received"),
            field(1, "span"),
            field(2, "missing"),
            field(3, "wrong frames"),
            field(4, "checked"),
        );
        let emitted = stats.emitted.load(Ordering::Acquire);
        let rate =
            |frames: u64, ns: u64| frames.saturating_sub(1) as f64 / (ns.max(1) as f64 / 1e9);
        println!(
            "sustained: {:.0} frames/s received ({:.0} frames/s emitted); received {received} of {emitted} emitted ({}); the source found no room {} times, {} emits refused; {checked} frames checked, {bad} wrong (target ≥ 10000 frames/s)",
            rate(received, span),
            rate(emitted, stats.span_ns.load(Ordering::Relaxed)),
            if received == emitted && missing == 0 {
                "no drop".to_owned()
            } else {
                format!("{missing} missing from the sequence")
            },
            stats.no_room.load(Ordering::Relaxed),
            stats.refused.load(Ordering::Relaxed),
        );
        if received != emitted || missing > 0 {
            failures.push(format!(
                "sustained: received {received} of {emitted} emitted, {missing} missing"
            ));
        }
        if bad > 0 {
            failures.push(format!(
                "sustained: {bad} of {checked} checked frames had wrong bytes"
            ));
        }
    }

    /// The fence round trip on two streams of `device`: p50, p99 (ns).
    fn round_trip(device: &Arc<CudaDevice>) -> (u64, u64) {
        let ipc = device.ipc().expect("CUDA device memory across processes");
        let s1 = device.create_stream().expect("a stream");
        let s2 = device.create_stream().expect("a stream");
        let (control, control_fd) = Control::create(ipc);
        drop(control_fd);
        let (fence, release) = (
            control.device_word(fence_word(0)),
            control.device_word(release_word(0)),
        );
        let released = control.word(release_word(0));
        let mut lat = Vec::with_capacity(ROUND_TRIPS as usize);
        for i in 0..ROUND_TRIP_WARMUP + ROUND_TRIPS {
            let v = i + 1;
            let t0 = mono_ns();
            // SAFETY (all three): both words lie in the control page, registered until
            // `close` after both streams are synchronized.
            unsafe {
                ipc.write_value(s1, fence, v).expect("the fence write");
                ipc.wait_value_geq(s2, fence, v).expect("the fence wait");
                ipc.write_value(s2, release, v).expect("the release write");
            }
            wait_word(released, v, "the round trip's release");
            let t1 = mono_ns();
            if i >= ROUND_TRIP_WARMUP {
                lat.push(t1 - t0);
            }
        }
        for s in [s1, s2] {
            device
                .synchronize_stream(s)
                .expect("the stream synchronized");
        }
        control.close(ipc);
        for s in [s1, s2] {
            device.destroy_stream(s).expect("the stream destroyed");
        }
        percentiles(lat)
    }

    /// Whether `device` can share memory across processes: the error that says why not.
    fn ipc_unavailable(device: &CudaDevice) -> Option<String> {
        let Some(ipc) = device.ipc() else {
            return Some("the CUDA backend has no device memory across processes".to_owned());
        };
        match ipc.alloc_exportable(FRAME) {
            Ok(ptr) => {
                // SAFETY: nothing ever used the allocation.
                unsafe { device.free(AllocKind::Device, ptr, FRAME) }
                    .expect("the probe allocation freed");
                None
            }
            Err(e) => Some(e.to_string()),
        }
    }

    pub(super) fn main(args: &[String]) {
        if let Some(i) = args.iter().position(|a| a == "--role") {
            let role: Vec<&str> = args[i + 1..].iter().map(String::as_str).collect();
            match role.as_slice() {
                ["raw", slots_fd, control_fd, service, ..] => {
                    raw_child(slots_fd, control_fd, service);
                }
                ["holo", catalog, ..] => holo_child(catalog),
                ["holo-sustained", catalog, ..] => sustained_child(catalog),
                _ => panic!(
                    "--role raw <slots fd> <control fd> <service> | --role holo <catalog> | --role holo-sustained <catalog>"
                ),
            }
            return;
        }
        let device = match CudaDevice::open(0) {
            Ok(d) => d,
            Err(e) => {
                println!("ipc_device_hop: skipped: {e}");
                return;
            }
        };
        if let Some(why) = ipc_unavailable(&device) {
            println!("ipc_device_hop: skipped: {why}");
            return;
        }
        let mut failures = Vec::new();
        println!(
            "ipc_device_hop: CUDA device hop across processes, {} KiB frames, {FRAMES} frames every {PERIOD:?} after {WARMUP} of warm-up, {PAIRS} interleaved pairs",
            FRAME >> 10
        );
        println!(
            "{:>4} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9} {:>14} {:>14}",
            "pair",
            "raw p50",
            "raw p99",
            "holo p50",
            "holo p99",
            "p50 ×",
            "p99 ×",
            "holo allocs",
            "raw allocs"
        );
        let mut ratios = Vec::new();
        for pair in 0..PAIRS {
            let raw = raw_run(pair, &device);
            let holo = holo_run(pair, &device);
            let r50 = holo.p50 as f64 / raw.p50 as f64;
            let r99 = holo.p99 as f64 / raw.p99 as f64;
            ratios.push(r50);
            println!(
                "{pair:>4} {:>9.1} µs {:>9.1} µs {:>9.1} µs {:>9.1} µs {r50:>9.2} {r99:>9.2} {:>6.2} / {:<5.2} {:>6.2} / {:<5.2}",
                raw.p50 as f64 / 1e3,
                raw.p99 as f64 / 1e3,
                holo.p50 as f64 / 1e3,
                holo.p99 as f64 / 1e3,
                holo.allocs,
                holo.child_allocs,
                raw.allocs,
                raw.child_allocs,
            );
            for (side, h) in [("raw", &raw), ("holo", &holo)] {
                if h.bad > 0 {
                    failures.push(format!(
                        "pair {pair}, {side}: {} frames read back with wrong bytes",
                        h.bad
                    ));
                }
            }
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "median p50 ratio holo/raw: {:.2} (target ≤ 1.2); allocations per frame: exporter / subscriber",
            ratios[ratios.len() / 2]
        );
        sustained(&device, &mut failures);
        let (p50, p99) = round_trip(&device);
        println!(
            "fence round trip (write s1 → wait s2 → write s2 → CPU sees it), {ROUND_TRIPS} after {ROUND_TRIP_WARMUP}: p50 {:.1} µs, p99 {:.1} µs",
            p50 as f64 / 1e3,
            p99 as f64 / 1e3
        );
        if !failures.is_empty() {
            for f in &failures {
                println!("FAILED: {f}");
            }
            std::process::exit(1);
        }
    }
}
