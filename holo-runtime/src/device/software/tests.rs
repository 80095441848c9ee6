use std::time::{Duration, Instant};

use super::*;

fn read_back(device: &SoftwareDevice, src: DevicePtr, bytes: usize) -> Vec<u8> {
    let stream = device.create_stream().unwrap();
    let mut host = vec![0_u8; bytes];
    // SAFETY: `src` is a live allocation of `bytes` bytes; `host` outlives the synchronize.
    unsafe { device.copy_to_host_async(host.as_mut_ptr(), src, bytes, stream) }.unwrap();
    device.synchronize_stream(stream).unwrap();
    device.destroy_stream(stream).unwrap();
    host
}

#[test]
fn completion_delay_holds_back_every_operation() {
    let delay = Duration::from_millis(100);
    let device = SoftwareDevice::with_completion_delay(delay);
    assert_eq!(device.completion_delay(), delay);
    let stream = device.create_stream().unwrap();
    let event = device.create_event().unwrap();
    let buffer = device.alloc(AllocKind::Device, 64).unwrap();
    let started = Instant::now();
    // SAFETY: `buffer` is live and 64 bytes long until it is freed below.
    unsafe { device.memset_async(buffer, 7, 64, stream) }.unwrap();
    device.record_event(event, stream).unwrap();
    // Less than one delay: enqueueing did not wait for the fill (a bound with room for a
    // loaded machine; a wait would take at least the delay).
    assert!(started.elapsed() < delay, "enqueue did not wait");
    assert!(!device.query_event(event).unwrap());
    device.synchronize_event(event).unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(60),
        "two delayed operations"
    );
    assert!(read_back(&device, buffer, 64).iter().all(|&b| b == 7));
    // SAFETY: every stream that used `buffer` has finished.
    unsafe { device.free(AllocKind::Device, buffer, 64) }.unwrap();
}

#[test]
fn destroying_a_stream_drains_its_queue() {
    let device = SoftwareDevice::new();
    let stream = device.create_stream().unwrap();
    let buffer = device.alloc(AllocKind::Managed, 32).unwrap();
    device
        .enqueue_delay(stream, Duration::from_millis(50))
        .unwrap();
    // SAFETY: `buffer` stays live until the end of the test.
    unsafe { device.memset_async(buffer, 0x5A, 32, stream) }.unwrap();
    device.destroy_stream(stream).unwrap();
    // SAFETY: the destroyed stream drained; managed memory is host-accessible.
    let first = unsafe { *buffer.as_host_ptr() };
    assert_eq!(first, 0x5A);
    assert_eq!(
        device
            .enqueue_delay(stream, Duration::ZERO)
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn handles_of_another_device_are_rejected() {
    let one = SoftwareDevice::new();
    let other = SoftwareDevice::new();
    let stream = one.create_stream().unwrap();
    let event = one.create_event().unwrap();
    assert_eq!(
        other.synchronize_stream(stream).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        other.query_event(event).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn fills_and_copies_outside_an_allocation_are_rejected() {
    let device = SoftwareDevice::new();
    let stream = device.create_stream().unwrap();
    let buffer = device.alloc(AllocKind::Device, 256).unwrap();
    assert_eq!(buffer.raw() % 256, 0, "256-byte alignment");
    let tail = buffer.checked_add(200).unwrap();
    let mut host = [0_u8; 64];
    // SAFETY: each call is rejected before anything is enqueued; `host` is live.
    unsafe {
        assert_eq!(
            device.memset_async(tail, 0, 64, stream).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            device
                .copy_async(buffer, tail, 64, stream)
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            device
                .copy_to_host_async(host.as_mut_ptr(), DevicePtr::from_raw(8), 8, stream)
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            device
                .copy_to_host_async(std::ptr::null_mut(), buffer, 8, stream)
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        // In bounds: the last 56 bytes.
        device.memset_async(tail, 1, 56, stream).unwrap();
    }
    // `read_back` copies on a stream of its own: the fill must have run first (without
    // this wait the copy could read the poison, as it did once under load).
    device.synchronize_stream(stream).unwrap();
    assert_eq!(read_back(&device, buffer, 256)[255], 1);
    // SAFETY: the streams that used `buffer` finished; the mismatched frees are rejected.
    unsafe {
        assert_eq!(
            device
                .free(AllocKind::PinnedHost, buffer, 256)
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            device
                .free(AllocKind::Device, buffer, 128)
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        device.free(AllocKind::Device, buffer, 256).unwrap();
    }
}

#[test]
fn fresh_allocations_are_poisoned() {
    let device = SoftwareDevice::new();
    let buffer = device.alloc(AllocKind::Device, 16).unwrap();
    assert!(
        read_back(&device, buffer, 16)
            .iter()
            .all(|&b| b == FRESH_BYTE)
    );
}

#[test]
fn a_wait_on_a_later_rerecorded_event_keeps_its_first_target() {
    // CUDA semantics: a wait captures the recording current at the call; re-recording the
    // event elsewhere afterwards neither releases nor extends that wait.
    let device = SoftwareDevice::new();
    let slow = device.create_stream().unwrap();
    let fast = device.create_stream().unwrap();
    let waiter = device.create_stream().unwrap();
    let event = device.create_event().unwrap();
    let done = device.create_event().unwrap();
    device
        .enqueue_delay(slow, Duration::from_millis(80))
        .unwrap();
    device.record_event(event, slow).unwrap();
    device.wait_event(waiter, event).unwrap();
    device.record_event(done, waiter).unwrap();
    device.record_event(event, fast).unwrap();
    device.synchronize_event(event).unwrap();
    assert!(
        !device.query_event(done).unwrap(),
        "the wait still follows the slow stream"
    );
    device.synchronize_event(done).unwrap();
    assert!(device.query_event(done).unwrap());
}

#[test]
fn dropping_the_device_joins_streams_and_frees_memory() {
    let device = SoftwareDevice::new();
    let stream = device.create_stream().unwrap();
    let buffer = device.alloc(AllocKind::PinnedHost, 1024).unwrap();
    device
        .enqueue_delay(stream, Duration::from_millis(20))
        .unwrap();
    // SAFETY: the device's drop drains the stream before it frees `buffer`.
    unsafe { device.memset_async(buffer, 3, 1024, stream) }.unwrap();
    drop(device);
}
