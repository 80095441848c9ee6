//! Operators shared by the runtime integration tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use holo_runtime::{
    CompileOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Input, Operator, Output,
    PartitionSpec, Partitioning, Result, Tensor, TensorLoanRequest, operator,
};

/// Emits a 1-D u8 tensor of `len` bytes, all `fill`, from a 4-slot-capable pool; counts
/// emits, exhaustion and backpressure instead of failing on them.
#[operator]
pub struct ByteSource {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 256)]
    pub frames: Output<Tensor>,
    pub len: u64,
    pub fill: u8,
    pub stats: Arc<SourceStats>,
}

#[derive(Debug, Default)]
pub struct SourceStats {
    pub emitted: AtomicU64,
    pub exhausted: AtomicU64,
    pub backpressured: AtomicU64,
}

impl ByteSource {
    pub fn new(len: u64, fill: u8) -> (Self, Arc<SourceStats>) {
        let stats = Arc::new(SourceStats::default());
        (
            Self {
                frames: Output::default(),
                len,
                fill,
                stats: Arc::clone(&stats),
            },
            stats,
        )
    }
}

impl Operator for ByteSource {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let loan = match self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[self.len],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => {
                self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let fill = self.fill;
        let committed = loan.write_host_and_commit(|b| b.fill(fill))?;
        match self.frames.emit(committed, EmitOptions::default()) {
            Ok(()) => {
                self.stats.emitted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) if e.code() == ErrorCode::Backpressured => {
                self.stats.backpressured.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// Receives tensors, checks every byte equals `expect`, counts them; optionally keeps
/// the last `hold` tensors (to pin slots).
#[operator]
pub struct ByteSink {
    #[input(memory = host, dtype = u8, rank = 1)]
    pub frames: Input<Tensor>,
    pub expect: u8,
    pub hold: usize,
    pub held: Vec<Tensor>,
    pub stats: Arc<SinkStats>,
}

#[derive(Debug, Default)]
pub struct SinkStats {
    pub received: AtomicU64,
    pub bad_bytes: AtomicU64,
}

impl ByteSink {
    pub fn new(expect: u8, hold: usize) -> (Self, Arc<SinkStats>) {
        let stats = Arc::new(SinkStats::default());
        (
            Self {
                frames: Input::default(),
                expect,
                hold,
                held: Vec::with_capacity(hold),
                stats: Arc::clone(&stats),
            },
            stats,
        )
    }
}

impl Operator for ByteSink {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            if t.data()?.iter().any(|&b| b != self.expect) {
                self.stats.bad_bytes.fetch_add(1, Ordering::Relaxed);
            }
            self.stats.received.fetch_add(1, Ordering::Relaxed);
            if self.hold > 0 {
                if self.held.len() == self.hold {
                    self.held.remove(0);
                }
                self.held.push(t);
            }
        }
        Ok(())
    }
}

/// Forwards every received tensor unchanged through a pass-through output (declared, so
/// the origin pool is sized for what follows it).
#[operator]
pub struct Forward {
    pub input: Input<Tensor>,
    #[output(storage = pass_through, forwards = input)]
    pub output: Output<Tensor>,
}

impl Forward {
    pub fn new() -> Self {
        Self {
            input: Input::default(),
            output: Output::default(),
        }
    }
}

impl Operator for Forward {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            self.output.emit(t, EmitOptions::default())?;
        }
        Ok(())
    }
}

/// Compile options whose execution partitions are `groups` (each named after its first
/// operator), or the automatic partitioning when `groups` is empty.
pub fn partitioned(groups: &[&[&str]]) -> CompileOptions {
    let partitioning = if groups.is_empty() {
        Partitioning::Automatic
    } else {
        Partitioning::Authored(
            groups
                .iter()
                .map(|ops| {
                    PartitionSpec::new(
                        ops.first().map_or("empty", |o| *o).to_owned(),
                        ops.iter().copied(),
                    )
                })
                .collect(),
        )
    };
    CompileOptions::default().with_partitioning(partitioning)
}

/// Emits its activation number (1, 2, 3, …) as a message.
#[operator]
pub struct Counter {
    pub out: Output<u64>,
    pub n: u64,
}

impl Operator for Counter {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.n += 1;
        self.out.emit(self.n, EmitOptions::default())
    }
}

/// Threads of this process whose name starts with `holo-` (Linux: `/proc/self/task`).
pub fn holo_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("holo-"))
        .count()
}

/// [`holo_threads`] once it is back to `expected`, or after 5 s. A joined thread can stay
/// listed for a moment: `pthread_join` returns when the kernel clears the thread id, before
/// the task is reaped from `/proc/self/task`. A thread still running stays counted.
pub fn holo_threads_settled(expected: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n = holo_threads();
        if n == expected || std::time::Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
