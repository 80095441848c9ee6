//! Host work ordered on a command queue — OpenCL's counterpart of `cuLaunchHostFunc`, for
//! what a queue cannot do itself: a copy or fill of host memory (pinned and managed pools
//! are host memory here), and the test and bench delay.
//!
//! The recipe: a marker on the queue, a user event, and a barrier on the user event; a
//! callback on the marker (`clSetEventCallback`, `CL_COMPLETE`) does the host work when the
//! queue reaches it and then completes the user event, so the queue's later work waits for
//! it. A delay hands the user event to one timer thread, which completes it when the delay
//! has passed since the queue reached it: the queue is really busy meanwhile, and nothing
//! blocks an OpenCL callback thread.
//!
//! Nothing here allocates on the enqueuing thread: pending calls sit in a process-wide,
//! preallocated table ([`PENDING`] entries; past it, `ResourceExhausted`), the callback's
//! argument is the entry's index, and delays reach the timer through a bounded queue.

use std::collections::BinaryHeap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use super::ffi::{self, check, cl, cl_command_queue, cl_context, cl_event, cl_int};
use crate::{Error, ErrorCode, Result};

/// Host calls pending at once over every OpenCL queue of the process.
const PENDING: usize = 4096;

/// The host work.
#[derive(Clone, Copy)]
pub(super) enum Action {
    /// `ptr::copy_nonoverlapping(src, dst, len)`.
    Copy { dst: u64, src: u64, len: usize },
    /// `ptr::write_bytes(dst, value, len)`.
    Fill { dst: u64, value: u8, len: usize },
    /// Keep the queue busy this long from when it reaches the call.
    Delay(Duration),
}

/// A pending call: its work and the user event the queue's later work waits on.
type Call = (Action, u64);

/// A user event to complete at a deadline.
#[derive(PartialEq, Eq)]
struct Timed {
    at: Instant,
    event: u64,
}

impl Ord for Timed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Earliest deadline first out of a max-heap.
        other.at.cmp(&self.at).then(other.event.cmp(&self.event))
    }
}

impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

struct Table {
    calls: Box<[Mutex<Option<Call>>]>,
    free: ArrayQueue<usize>,
    timed: ArrayQueue<Timed>,
    timer: Thread,
}

fn table() -> Result<&'static Table> {
    static TABLE: OnceLock<std::result::Result<Table, String>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let timer = std::thread::Builder::new()
            .name("holo-opencl-timer".into())
            .spawn(timer_loop)
            .map_err(|e| format!("starting the OpenCL delay timer thread: {e}"))?;
        let free = ArrayQueue::new(PENDING);
        for i in 0..PENDING {
            let _ = free.push(i);
        }
        Ok(Table {
            calls: (0..PENDING).map(|_| Mutex::new(None)).collect(),
            free,
            timed: ArrayQueue::new(PENDING),
            timer: timer.thread().clone(),
        })
    });
    table
        .as_ref()
        .map_err(|e| Error::new(ErrorCode::ResourceExhausted, e.clone()))
}

/// The timer thread: completes each delay's user event at its deadline; parks when idle.
fn timer_loop() {
    let mut pending = BinaryHeap::with_capacity(PENDING);
    loop {
        if let Ok(table) = table() {
            while let Some(timed) = table.timed.pop() {
                pending.push(timed);
            }
        }
        let now = Instant::now();
        while pending.peek().is_some_and(|t: &Timed| t.at <= now) {
            let timed = pending.pop().expect("peeked");
            complete(timed.event, ffi::CL_COMPLETE);
        }
        match pending.peek() {
            None => std::thread::park(),
            Some(next) => std::thread::park_timeout(next.at.saturating_duration_since(now)),
        }
    }
}

/// Completes (or fails) a user event and drops this side's reference.
fn complete(event: u64, status: cl_int) {
    let Ok(lib) = ffi::library() else { return };
    let event: cl_event = ffi::handle(event);
    // The event is a live user event this module created and still holds; errors have no
    // caller to report to.
    let _ = lib.clSetUserEventStatus(event, status);
    let _ = lib.clReleaseEvent(event);
}

/// The marker's callback: runs the host work, then completes the user event.
unsafe extern "C" fn on_reached(marker: cl_event, status: cl_int, data: *mut c_void) {
    if let Ok(lib) = ffi::library() {
        // This side's reference to the marker, handed over by `enqueue`.
        let _ = lib.clReleaseEvent(marker);
    }
    let Ok(table) = table() else { return };
    let index = data.addr();
    let Some((action, done)) = table.calls[index]
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    let _ = table.free.push(index);
    if status != ffi::CL_COMPLETE {
        // The queue's earlier work failed: fail the later work too, do nothing on the host.
        complete(done, status.min(-1));
        return;
    }
    let host = |raw: u64| crate::device::handle::addr_usize(raw);
    match action {
        Action::Copy { dst, src, len } => {
            // SAFETY: the enqueuer's contract (`copy_*_async`): both ranges are live host
            // memory, unaliased, until the queue has passed this call.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    std::ptr::with_exposed_provenance::<u8>(host(src)),
                    std::ptr::with_exposed_provenance_mut::<u8>(host(dst)),
                    len,
                );
            }
        }
        Action::Fill { dst, value, len } => {
            // SAFETY: the enqueuer's contract (`memset_async`): the range is live host memory
            // nothing else accesses until the queue has passed this call.
            unsafe {
                std::ptr::write_bytes(
                    std::ptr::with_exposed_provenance_mut::<u8>(host(dst)),
                    value,
                    len,
                );
            }
        }
        Action::Delay(duration) => {
            // `enqueue_delay` refused a delay whose end the clock cannot represent; this
            // callback must not panic either way (a panic here aborts the process).
            let now = Instant::now();
            let timed = Timed {
                at: now.checked_add(duration).unwrap_or(now),
                event: done,
            };
            match table.timed.push(timed) {
                Ok(()) => table.timer.unpark(),
                // Cannot happen (no more delays than entries); never leave the queue stuck.
                Err(timed) => complete(timed.event, ffi::CL_COMPLETE),
            }
            return;
        }
    }
    complete(done, ffi::CL_COMPLETE);
}

/// Orders `action` on `queue`: marker, user event, barrier on it, flush, callback.
///
/// # Safety
/// `queue` is a live queue of `context`; a copy or fill's ranges are live host memory that
/// nothing accesses without queue ordering until the queue has passed the call.
pub(super) unsafe fn enqueue(
    queue: cl_command_queue,
    context: cl_context,
    action: Action,
) -> Result<()> {
    let lib = ffi::library()?;
    let table = table()?;
    let index = table.free.pop().ok_or_else(|| {
        Error::new(
            ErrorCode::ResourceExhausted,
            format!("{PENDING} host calls (delays, host-memory copies) are already pending on OpenCL queues"),
        )
    })?;
    let mut status: cl_int = 0;
    let done = lib.clCreateUserEvent(context, &raw mut status);
    let done = match (done, status) {
        (Some(done), ffi::CL_SUCCESS) => done,
        (Some(_), status) => {
            let _ = table.free.push(index);
            return Err(ffi::cl_error("clCreateUserEvent", status));
        }
        (None, _) => {
            let _ = table.free.push(index);
            return Err(ffi::missing("clCreateUserEvent"));
        }
    };
    let mut marker: cl_event = std::ptr::null_mut();
    let result = (|| {
        check(
            "clEnqueueMarkerWithWaitList",
            cl!(
                lib,
                clEnqueueMarkerWithWaitList(queue, 0, std::ptr::null(), &raw mut marker)
            ),
        )?;
        check(
            "clEnqueueBarrierWithWaitList",
            cl!(
                lib,
                clEnqueueBarrierWithWaitList(queue, 1, &raw const done, std::ptr::null_mut())
            ),
        )?;
        check("clFlush", cl!(lib, clFlush(queue)))
    })();
    if let Err(error) = result {
        // Nothing waits on the user event unless the barrier went in: complete it either way.
        complete(ffi::raw(done), ffi::CL_COMPLETE);
        if !marker.is_null() {
            let _ = lib.clReleaseEvent(marker);
        }
        let _ = table.free.push(index);
        return Err(error);
    }
    *table.calls[index]
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some((action, ffi::raw(done)));
    let status = cl!(
        lib,
        clSetEventCallback(
            marker,
            ffi::CL_COMPLETE,
            Some(on_reached),
            std::ptr::without_provenance_mut(index)
        )
    );
    if status != ffi::CL_SUCCESS {
        table.calls[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let _ = table.free.push(index);
        complete(ffi::raw(done), ffi::CL_COMPLETE);
        let _ = lib.clReleaseEvent(marker);
        return Err(ffi::cl_error("clSetEventCallback", status));
    }
    Ok(())
}
