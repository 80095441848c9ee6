//! A software stream: a worker thread running a bounded FIFO of operations, and the
//! completion counter that events and other streams observe.

use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::device::handle::addr_usize;
use crate::{Error, ErrorCode, Result};

/// Operations queued per stream before an enqueue waits for the worker (CUDA's launch
/// queue is bounded too).
pub(super) const QUEUE_DEPTH: usize = 4096;

/// How far a stream's worker has got: the sequence number of the last operation it ran.
/// Events hold a `(Progress, seq)` pair; an event is complete once `completed >= seq`.
pub(super) struct Progress {
    completed: AtomicU64,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    wakeup: Condvar,
}

impl Progress {
    fn new() -> Self {
        Self {
            completed: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wakeup: Condvar::new(),
        }
    }

    /// Whether the operation numbered `seq` has run. Acquire: what it wrote is visible.
    pub(super) fn reached(&self, seq: u64) -> bool {
        self.completed.load(Ordering::Acquire) >= seq
    }

    /// Blocks the calling thread (a host caller or another stream's worker) until `seq` ran.
    pub(super) fn wait_until(&self, seq: u64) {
        if self.reached(seq) {
            return;
        }
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // SeqCst on `waiters` and `completed` (here and in `complete`): either the worker
        // sees this waiter and notifies under the lock, or this load sees its store.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        while self.completed.load(Ordering::SeqCst) < seq {
            guard = self
                .wakeup
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Marks `seq` as run (worker only; sequence numbers arrive in increasing order).
    fn complete(&self, seq: u64) {
        self.completed.store(seq, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.wakeup.notify_all();
        }
    }
}

/// One queued operation. Addresses are plain integers so the job is `Send`; the worker
/// rebuilds pointers from them (their provenance was exposed when they were handed out).
pub(super) enum Op {
    Fill {
        dst: u64,
        value: u8,
        bytes: usize,
    },
    Copy {
        dst: u64,
        src: u64,
        bytes: usize,
    },
    /// An event recording: running it is all it takes to complete its sequence number.
    Marker,
    /// Wait until another (or this) stream has reached `seq`.
    Wait {
        progress: Arc<Progress>,
        seq: u64,
    },
    Delay(Duration),
    /// `cuStreamWriteValue64`: store `value` into the 8-byte word at `addr`, after every
    /// operation before it (a release store).
    WriteValue {
        addr: u64,
        value: u64,
    },
    /// `cuStreamWaitValue64` with `GEQ`: wait until the word at `addr` is at least `value`
    /// in CUDA's wrap-aware comparison (`(int64)(*addr - value) >= 0`).
    WaitValueGeq {
        addr: u64,
        value: u64,
    },
}

struct Job {
    seq: u64,
    op: Op,
}

/// The queue and its bookkeeping, under one lock. Waits are on condition variables, so
/// neither side allocates: the ring is preallocated to `QUEUE_DEPTH` and never grows
/// (crossbeam's channel allocated a per-thread context and a waker entry on a thread's
/// first blocking wait, which a warm-up could not force deterministically: the
/// allocation-free test saw it land in its measured window 8 times in 100).
struct Submit {
    /// Sequence number of the last enqueued operation.
    last_seq: u64,
    jobs: std::collections::VecDeque<Job>,
    /// Set once the stream is destroyed: nothing more is enqueued, and the worker drains
    /// what is queued and exits.
    closed: bool,
    /// The worker waits for a job (only then does an enqueue notify it).
    worker_waiting: bool,
    /// Threads waiting for room.
    submitters_waiting: usize,
}

pub(super) struct SoftStream {
    progress: Arc<Progress>,
    submit: Arc<(Mutex<Submit>, Condvar, Condvar)>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl SoftStream {
    pub(super) fn spawn(name: String, completion_delay: Duration) -> Result<Self> {
        let submit = Arc::new((
            Mutex::new(Submit {
                last_seq: 0,
                jobs: std::collections::VecDeque::with_capacity(QUEUE_DEPTH),
                closed: false,
                worker_waiting: false,
                submitters_waiting: 0,
            }),
            // A job was queued (or the stream closed).
            Condvar::new(),
            // Room was made.
            Condvar::new(),
        ));
        let progress = Arc::new(Progress::new());
        let worker_progress = Arc::clone(&progress);
        let worker_submit = Arc::clone(&submit);
        // The worker's thread start-up (std allocates its name for the stack-overflow
        // handler there) happens before `spawn` returns, never later in a steady-state run.
        let started = Arc::new(std::sync::Barrier::new(2));
        let worker_started = Arc::clone(&started);
        let worker = thread::Builder::new()
            .name(name)
            .spawn(move || {
                worker_started.wait();
                run_worker(&worker_submit, &worker_progress, completion_delay);
            })
            .map_err(|error| {
                Error::new(
                    ErrorCode::ResourceExhausted,
                    format!("cannot start a software stream worker thread: {error}"),
                )
            })?;
        started.wait();
        Ok(Self {
            progress,
            submit,
            worker: Mutex::new(Some(worker)),
        })
    }

    pub(super) fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// Enqueues `op` and returns its sequence number. No allocation: the queue is a
    /// preallocated ring. Waits only if `QUEUE_DEPTH` operations are already queued.
    pub(super) fn enqueue(&self, op: Op) -> Result<u64> {
        let (lock, queued, room) = &*self.submit;
        // The lock makes sequence numbers follow FIFO order when threads enqueue at once.
        let mut submit = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while !submit.closed && submit.jobs.len() >= QUEUE_DEPTH {
            submit.submitters_waiting += 1;
            submit = room.wait(submit).unwrap_or_else(PoisonError::into_inner);
            submit.submitters_waiting -= 1;
        }
        if submit.closed {
            return Err(Error::invalid_argument("the stream was destroyed"));
        }
        let seq = submit.last_seq + 1;
        submit.jobs.push_back(Job { seq, op });
        submit.last_seq = seq;
        if submit.worker_waiting {
            queued.notify_one();
        }
        Ok(seq)
    }

    /// Sequence number of the last enqueued operation.
    pub(super) fn last_seq(&self) -> u64 {
        self.submit
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_seq
    }

    /// Closes the queue, lets the worker run what is queued, and joins it.
    pub(super) fn shut_down(&self) {
        {
            let (lock, queued, room) = &*self.submit;
            let mut submit = lock.lock().unwrap_or_else(PoisonError::into_inner);
            submit.closed = true;
            queued.notify_all();
            room.notify_all();
        }
        let worker = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(worker) = worker {
            // A worker runs no user code and cannot panic; a join error has nothing to report.
            let _ = worker.join();
        }
    }
}

impl Drop for SoftStream {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The next job, waiting for one; `None` once the stream is closed and drained (a
/// destroyed stream runs what was queued first).
fn next_job(submit: &(Mutex<Submit>, Condvar, Condvar)) -> Option<Job> {
    let (lock, queued, room) = submit;
    let mut s = lock.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(job) = s.jobs.pop_front() {
            if s.submitters_waiting > 0 {
                room.notify_all();
            }
            return Some(job);
        }
        if s.closed {
            return None;
        }
        s.worker_waiting = true;
        s = queued.wait(s).unwrap_or_else(PoisonError::into_inner);
        s.worker_waiting = false;
    }
}

fn run_worker(
    submit: &(Mutex<Submit>, Condvar, Condvar),
    progress: &Progress,
    completion_delay: Duration,
) {
    while let Some(Job { seq, op }) = next_job(submit) {
        if !completion_delay.is_zero() {
            thread::sleep(completion_delay);
        }
        match op {
            Op::Fill { dst, value, bytes } => {
                // SAFETY: `enqueue` callers checked that `dst..dst + bytes` lies in a live
                // allocation, and `memset_async`'s contract keeps it live and unaliased
                // until this operation has run.
                unsafe {
                    ptr::write_bytes(
                        ptr::with_exposed_provenance_mut::<u8>(addr_usize(dst)),
                        value,
                        bytes,
                    );
                }
            }
            Op::Copy { dst, src, bytes } => {
                // SAFETY: the copy methods' contracts keep both ranges valid for `bytes`
                // bytes until this operation has run; `copy` tolerates overlap.
                unsafe {
                    ptr::copy(
                        ptr::with_exposed_provenance::<u8>(addr_usize(src)),
                        ptr::with_exposed_provenance_mut::<u8>(addr_usize(dst)),
                        bytes,
                    );
                }
            }
            Op::Marker => {}
            Op::Wait { progress, seq } => progress.wait_until(seq),
            Op::Delay(duration) => thread::sleep(duration),
            Op::WriteValue { addr, value } => {
                // SAFETY: `write_value`'s contract: an 8-aligned word of registered memory
                // that stays registered until this operation has run.
                let word = unsafe { &*ptr::with_exposed_provenance::<AtomicU64>(addr_usize(addr)) };
                word.store(value, Ordering::Release);
            }
            Op::WaitValueGeq { addr, value } => {
                // SAFETY: as for `WriteValue` (`wait_value_geq`'s contract).
                let word = unsafe { &*ptr::with_exposed_provenance::<AtomicU64>(addr_usize(addr)) };
                let mut spins = 0u32;
                #[allow(
                    clippy::cast_possible_wrap,
                    reason = "CUDA's GEQ compares the difference as a signed 64-bit value"
                )]
                while (word.load(Ordering::Acquire).wrapping_sub(value) as i64) < 0 {
                    spins = spins.saturating_add(1);
                    if spins < 1000 {
                        std::hint::spin_loop();
                    } else {
                        thread::sleep(Duration::from_micros(20));
                    }
                }
            }
        }
        progress.complete(seq);
    }
}
