//! A foreign library's tensors, as DLPack hands them to holo: a compact
//! `DLManagedTensorVersioned` over another library's buffer, whose deleter frees it once
//! (`tests/tests/dlpack.rs`, `dlpack_no_alloc.rs`, `ipc_boundary.rs`).
#![allow(
    clippy::missing_panics_doc,
    reason = "test fixtures: a failure to make one is the test's failure"
)]

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holo_runtime::DType;
use holo_runtime::device::{AllocKind, DeviceBackend, StreamHandle};
use holo_runtime::dlpack::{
    DLDataType, DLDevice, DLDeviceType, DLManagedTensorVersioned, DLPACK_VERSION, DLTensor, Dlpack,
    DlpackFlags, dtype_to_dlpack,
};

/// What "another library" exports: the managed struct first, then its shape and strides,
/// then how to free the buffer.
#[repr(C)]
struct Foreign {
    managed: DLManagedTensorVersioned,
    shape: [i64; 8],
    strides: [i64; 8],
    free: Option<Box<dyn FnOnce() + Send>>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_foreign(m: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `foreign_tensor`; DLPack calls the deleter once.
    let mut f = unsafe { Box::from_raw(m.cast::<Foreign>()) };
    if let Some(free) = f.free.take() {
        free();
    }
    f.deleted.fetch_add(1, Ordering::SeqCst);
}

/// A compact foreign tensor over `data` on `device`; `free` runs in its deleter.
pub fn foreign_tensor(
    data: *mut c_void,
    shape: &[i64],
    dtype: DLDataType,
    device: DLDevice,
    free: Option<Box<dyn FnOnce() + Send>>,
) -> (Dlpack, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut f = Box::new(Foreign {
        managed: DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_foreign),
            flags: DlpackFlags::empty(),
            dl_tensor: DLTensor {
                data,
                device,
                ndim: i32::try_from(shape.len()).unwrap(),
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: [0; 8],
        strides: [0; 8],
        free,
        deleted: Arc::clone(&deleted),
    });
    f.shape[..shape.len()].copy_from_slice(shape);
    let mut stride = 1;
    for i in (0..shape.len()).rev() {
        f.strides[i] = stride;
        stride *= shape[i];
    }
    // The shape and strides point into the box: set from the raw pointer, as a pointer
    // taken through the box is revoked when the box becomes a raw pointer (Miri's Stacked
    // Borrows; RELIABILITY.md, "Miri").
    let f = Box::into_raw(f);
    // SAFETY: `f` is the allocation just leaked; nothing else refers to it yet.
    unsafe {
        (*f).managed.dl_tensor.shape = (&raw mut (*f).shape).cast();
        (*f).managed.dl_tensor.strides = (&raw mut (*f).strides).cast();
    }
    let raw = f.cast::<DLManagedTensorVersioned>();
    // SAFETY: a valid, owned, versioned tensor whose deleter frees it once.
    (unsafe { Dlpack::from_raw(raw) }.unwrap(), deleted)
}

pub fn cuda_device(id: i32) -> DLDevice {
    DLDevice {
        device_type: DLDeviceType::CUDA,
        device_id: id,
    }
}

/// A device buffer of `len` bytes another library made on `device`: `poison` in every byte
/// and complete, then — on `stream`, after `delay` — filled with `value`. Freed by the
/// tensor's deleter.
pub fn foreign_device_bytes(
    device: &Arc<dyn DeviceBackend>,
    len: usize,
    stream: StreamHandle,
    delay: Duration,
    poison: u8,
    value: u8,
) -> (Dlpack, Arc<AtomicUsize>) {
    let ptr = device.alloc(AllocKind::Device, len).unwrap();
    // SAFETY: a live allocation of `len` bytes; the stream is synchronized before the
    // delayed fill is enqueued, and the deleter frees it only after the tensor's last use.
    unsafe {
        device.memset_async(ptr, poison, len, stream).unwrap();
        device.synchronize_stream(stream).unwrap();
        if !delay.is_zero() {
            device.enqueue_delay(stream, delay).unwrap();
        }
        device.memset_async(ptr, value, len, stream).unwrap();
    }
    let backend = Arc::clone(device);
    let free = move || {
        // Freed in stream order, as a library's allocator does: after its own stream's
        // writes (holo ordered its consumers' reads before running the deleter).
        let _ = backend.synchronize_stream(stream);
        // SAFETY: the tensor is released, and every stream that used it has passed it.
        unsafe { backend.free(AllocKind::Device, ptr, len).unwrap() };
    };
    foreign_tensor(
        ptr.as_host_ptr().cast(),
        &[i64::try_from(len).unwrap()],
        dtype_to_dlpack(DType::U8),
        cuda_device(i32::try_from(device.ordinal()).unwrap()),
        Some(Box::new(free)),
    )
}
