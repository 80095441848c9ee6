//! Host work ordered on a command queue — OpenCL's counterpart of `cuLaunchHostFunc`, for
//! what a queue cannot do itself: a copy or fill of host memory (pinned and managed pools
//! are host memory here), and the test and bench delay.
//!
//! The recipe: a marker on the queue, a user event, and a barrier on the user event; a
//! callback on the marker (`clSetEventCallback`, `CL_COMPLETE`) does the host work when the
//! queue reaches it and then completes the user event, so the queue's later work waits for
//! it. A delay hands the user event to one timer thread per device, which completes it when
//! the delay has passed since the queue reached it: the queue is really busy meanwhile,
//! and nothing blocks an OpenCL callback thread.

use std::collections::BinaryHeap;
use std::ffi::c_void;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::ffi::{self, check, cl, cl_command_queue, cl_context, cl_event, cl_int};
use crate::Result;

/// The host work.
pub(super) enum Action {
    /// `ptr::copy_nonoverlapping(src, dst, len)`.
    Copy { dst: u64, src: u64, len: usize },
    /// `ptr::write_bytes(dst, value, len)`.
    Fill { dst: u64, value: u8, len: usize },
    /// Keep the queue busy this long from when it reaches the call.
    Delay(Duration),
}

struct HostCall {
    action: Action,
    /// The user event the queue's later work waits on.
    done: u64,
    timer: Sender<Timed>,
}

/// A user event to complete at a deadline.
#[derive(PartialEq, Eq)]
pub(super) struct Timed {
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

/// Starts the device's timer thread; it ends when the returned sender (and every clone
/// in a pending call) drops, completing what it still holds at once.
pub(super) fn start_timer() -> Result<Sender<Timed>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("holo-opencl-timer".into())
        .spawn(move || timer_loop(&rx))
        .map_err(|e| {
            crate::Error::new(
                crate::ErrorCode::ResourceExhausted,
                format!("starting the OpenCL delay timer thread: {e}"),
            )
        })?;
    Ok(tx)
}

/// The sender type the device keeps.
pub(super) type TimerSender = Sender<Timed>;

fn timer_loop(rx: &Receiver<Timed>) {
    let mut pending = BinaryHeap::new();
    loop {
        let next = match pending.peek() {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(Timed { at, .. }) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match next {
            Ok(timed) => pending.push(timed),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                for timed in pending.drain() {
                    complete(timed.event, ffi::CL_COMPLETE);
                }
                return;
            }
        }
        let now = Instant::now();
        while pending.peek().is_some_and(|t| t.at <= now) {
            let timed = pending.pop().expect("peeked");
            complete(timed.event, ffi::CL_COMPLETE);
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
    // SAFETY: `data` is the `Box<HostCall>` leaked by `enqueue`, handed to exactly this
    // one callback.
    let call = unsafe { Box::from_raw(data.cast::<HostCall>()) };
    if let Ok(lib) = ffi::library() {
        // This side's reference to the marker, handed over by `enqueue`.
        let _ = lib.clReleaseEvent(marker);
    }
    if status != ffi::CL_COMPLETE {
        // The queue's earlier work failed: fail the later work too, do nothing on the host.
        complete(call.done, status.min(-1));
        return;
    }
    match call.action {
        Action::Copy { dst, src, len } => {
            // SAFETY: the enqueuer's contract (`copy_*_async`): both ranges are live host
            // memory, unaliased, until the queue has passed this call.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    std::ptr::with_exposed_provenance::<u8>(crate::device::handle::addr_usize(src)),
                    std::ptr::with_exposed_provenance_mut::<u8>(crate::device::handle::addr_usize(
                        dst,
                    )),
                    len,
                );
            }
        }
        Action::Fill { dst, value, len } => {
            // SAFETY: the enqueuer's contract (`memset_async`): the range is live host memory
            // nothing else accesses until the queue has passed this call.
            unsafe {
                std::ptr::write_bytes(
                    std::ptr::with_exposed_provenance_mut::<u8>(crate::device::handle::addr_usize(
                        dst,
                    )),
                    value,
                    len,
                );
            }
        }
        Action::Delay(duration) => {
            let timed = Timed {
                at: Instant::now() + duration,
                event: call.done,
            };
            if let Err(unsent) = call.timer.send(timed) {
                complete(unsent.0.event, ffi::CL_COMPLETE);
            }
            return;
        }
    }
    complete(call.done, ffi::CL_COMPLETE);
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
    timer: &TimerSender,
) -> Result<()> {
    let lib = ffi::library()?;
    let mut status: cl_int = 0;
    let done = cl!(lib, clCreateUserEvent(context, &raw mut status));
    check("clCreateUserEvent", status)?;
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
        return Err(error);
    }
    let call = Box::into_raw(Box::new(HostCall {
        action,
        done: ffi::raw(done),
        timer: timer.clone(),
    }));
    let status = cl!(
        lib,
        clSetEventCallback(marker, ffi::CL_COMPLETE, Some(on_reached), call.cast())
    );
    if status != ffi::CL_SUCCESS {
        // SAFETY: the callback was not registered, so this is the box's only owner.
        let call = unsafe { Box::from_raw(call) };
        complete(call.done, ffi::CL_COMPLETE);
        let _ = lib.clReleaseEvent(marker);
        return Err(ffi::cl_error("clSetEventCallback", status));
    }
    Ok(())
}
