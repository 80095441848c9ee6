//! DLPack import of arbitrary `DLManagedTensorVersioned` headers: any version, flags,
//! device, ndim, dtype, extents, strides, data pointer (null or a real buffer),
//! byte offset and deleter (or none), with or without a (software) backend, through
//! `Tensor::from_dlpack_raw`.
//!
//! The header is arbitrary, the memory behind it honest: `shape` and `strides` point to
//! `ndim` readable values (when `ndim` is at most [`MAX_NDIM`]), and bytes are read back
//! only when the header's size lies inside the buffer. Checked: a refusal is a typed
//! error and has run the deleter exactly once; an accepted tensor has the header's shape,
//! is read-only, reads the buffer's bytes, and runs the deleter exactly once after its
//! last handle drops.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Bytes;
use holo_runtime::device::{DeviceBackend, SoftwareDevice};
use holo_runtime::dlpack::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensorVersioned, DLPackVersion,
    DLTensor, DlpackFlags,
};
use holo_runtime::{ErrorCode, MemoryKind, Tensor};

/// The largest `ndim` whose `shape` and `strides` arrays the target allocates.
pub const MAX_NDIM: usize = 40;
const _: () = assert!(MAX_NDIM == 40, "the ndim draw below is `% 41`");

/// A producer's tensor: the managed struct first, then what its pointers point to.
#[repr(C)]
struct Foreign {
    managed: DLManagedTensorVersioned,
    shape: [i64; MAX_NDIM],
    strides: [i64; MAX_NDIM],
    data: Vec<u8>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_foreign(m: *mut DLManagedTensorVersioned) {
    // SAFETY: `m` is the head of a boxed `Foreign` made by `dlpack_import`; DLPack calls
    // the deleter at most once, and the counter checks that.
    let f = unsafe { Box::from_raw(m.cast::<Foreign>()) };
    f.deleted.fetch_add(1, Ordering::SeqCst);
}

fn device_type(b: &mut Bytes<'_>) -> DLDeviceType {
    match b.byte() % 6 {
        0 | 1 => DLDeviceType::CPU,
        2 => DLDeviceType::CUDA,
        3 => DLDeviceType::CUDAHOST,
        4 => DLDeviceType::CUDAMANAGED,
        _ => DLDeviceType(u32::from(b.byte())),
    }
}

fn dtype(b: &mut Bytes<'_>) -> DLDataType {
    let code = match b.byte() % 5 {
        0 => DLDataTypeCode::UINT,
        1 => DLDataTypeCode::INT,
        2 => DLDataTypeCode::FLOAT,
        3 => DLDataTypeCode::BFLOAT,
        _ => DLDataTypeCode(b.byte()),
    };
    let bits = match b.byte() % 5 {
        0 => 8,
        1 => 16,
        2 => 32,
        3 => 64,
        _ => b.byte(),
    };
    let lanes = if b.byte().is_multiple_of(4) {
        u16::from_le_bytes([b.byte(), b.byte()])
    } else {
        1
    };
    DLDataType { code, bits, lanes }
}

/// `dlpack_import`: see the module.
pub fn dlpack_import(data: &[u8]) {
    let mut b = Bytes::new(data);
    let version = DLPackVersion {
        major: match b.byte() % 4 {
            0 => 0,
            3 => u32::from(b.byte()),
            _ => 1,
        },
        minor: u32::from(b.byte() % 4),
    };
    let flags = DlpackFlags::from_bits_retain(b.u64());
    let device = DLDevice {
        device_type: device_type(&mut b),
        device_id: i32::from(b.byte().cast_signed() % 3),
    };
    let ndim: i32 = match b.byte() % 8 {
        0 => -(i32::from(b.byte())),
        1 => i32::MIN,
        2 => i32::from(b.byte()) % 41, // 0..=MAX_NDIM
        _ => i32::from(b.byte() % 5),
    };
    let dtype = dtype(&mut b);
    let mut shape = [0_i64; MAX_NDIM];
    let rank = usize::try_from(ndim).unwrap_or(0).min(MAX_NDIM);
    for e in &mut shape[..rank] {
        *e = if b.byte().is_multiple_of(4) {
            b.i64()
        } else {
            i64::from(b.byte() % 5)
        };
    }
    let mut strides = [0_i64; MAX_NDIM];
    let strides_kind = b.byte() % 4;
    match strides_kind {
        0 => {} // null
        1 => {
            for s in &mut strides[..rank] {
                *s = b.i64();
            }
        }
        _ => {
            let mut expected = 1_i64;
            for (s, &e) in strides[..rank].iter_mut().zip(&shape[..rank]).rev() {
                *s = expected;
                expected = expected.wrapping_mul(e);
            }
        }
    }
    let buffer_len = usize::from(b.byte());
    let null_data = b.byte().is_multiple_of(8);
    let byte_offset = match b.byte() % 4 {
        0 => b.u64(),
        1 => u64::from(b.byte() % 16),
        _ => 0,
    };
    let has_deleter = !b.byte().is_multiple_of(8);
    let backend: Option<Arc<dyn DeviceBackend>> = if b.byte().is_multiple_of(2) {
        Some(SoftwareDevice::new())
    } else {
        None
    };
    let fill = b.rest();
    let buffer: Vec<u8> = (0..buffer_len)
        .map(|i| fill.get(i).copied().unwrap_or(i.to_le_bytes()[0]))
        .collect();

    let deleted = Arc::new(AtomicUsize::new(0));
    let mut f = Box::new(Foreign {
        managed: DLManagedTensorVersioned {
            version,
            manager_ctx: std::ptr::null_mut(),
            deleter: has_deleter.then_some(delete_foreign as unsafe extern "C" fn(_)),
            flags,
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device,
                ndim,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset,
            },
        },
        shape,
        strides,
        data: buffer,
        deleted: Arc::clone(&deleted),
    });
    if !null_data {
        f.managed.dl_tensor.data = f.data.as_mut_ptr().cast::<c_void>();
        if f.data.is_empty() {
            // A dangling but non-null pointer: nothing is read from an empty buffer.
            f.managed.dl_tensor.data = std::ptr::NonNull::<u64>::dangling().as_ptr().cast();
        }
    }
    f.managed.dl_tensor.shape = f.shape.as_mut_ptr();
    if strides_kind != 0 {
        f.managed.dl_tensor.strides = f.strides.as_mut_ptr();
    }
    let expected_bytes: Option<Vec<u8>> = {
        let off = usize::try_from(byte_offset).ok();
        off.map(|o| f.data.get(o..).map(<[u8]>::to_vec).unwrap_or_default())
    };
    let raw = Box::into_raw(f).cast::<DLManagedTensorVersioned>();
    // SAFETY: `raw` is a valid, owned, versioned tensor (whatever its header says, its
    // pointers point to what `Foreign` holds); its deleter, if any, frees it once; without
    // one this function frees it after the tensor's last handle is gone.
    let result = unsafe { Tensor::from_dlpack_raw(raw, backend.as_ref()) };
    let wait_deleted = || {
        let deadline = Instant::now() + Duration::from_secs(5);
        while deleted.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        }
    };
    match result {
        Ok(mut t) => {
            assert_eq!(
                version.major, 1,
                "a major version other than 1 was imported"
            );
            assert!(!null_data, "a null data pointer was imported");
            let want_shape: Vec<u64> = shape[..rank].iter().map(|&e| e.unsigned_abs()).collect();
            assert_eq!(t.shape(), &want_shape[..]);
            assert!(shape[..rank].iter().all(|&e| e >= 0));
            assert_eq!(
                t.mutable_data().map(|_| ()).unwrap_err().code(),
                ErrorCode::PermissionDenied
            );
            assert!(t.is_dlpack_import());
            if t.memory_kind() == MemoryKind::Host {
                assert_eq!(device.device_type, DLDeviceType::CPU);
                if let Some(bytes) = &expected_bytes
                    && t.byte_size() <= bytes.len()
                {
                    let data = t.data().expect("a host import is readable");
                    assert_eq!(
                        data,
                        &bytes[..t.byte_size()],
                        "the import reads other bytes"
                    );
                }
            }
            let clone = t.clone();
            drop(t);
            assert_eq!(
                deleted.load(Ordering::SeqCst),
                0,
                "deleted while a handle lives"
            );
            drop(clone);
            if has_deleter {
                wait_deleted();
                assert_eq!(
                    deleted.load(Ordering::SeqCst),
                    1,
                    "the deleter ran {} times",
                    deleted.load(Ordering::SeqCst)
                );
            }
        }
        Err(e) => {
            assert!(
                matches!(
                    e.code(),
                    ErrorCode::InvalidArgument
                        | ErrorCode::NotSupported
                        | ErrorCode::ArithmeticOverflow
                ),
                "{e}"
            );
            if has_deleter {
                assert_eq!(
                    deleted.load(Ordering::SeqCst),
                    1,
                    "a refused import's deleter ran {} times: {e}",
                    deleted.load(Ordering::SeqCst)
                );
            }
        }
    }
    if !has_deleter {
        // SAFETY: no deleter: the tensor's last handle is gone (an accepted tensor was
        // dropped above) and holo never frees what it does not own, so `raw` is still
        // the box made above.
        drop(unsafe { Box::from_raw(raw.cast::<Foreign>()) });
    }
}
