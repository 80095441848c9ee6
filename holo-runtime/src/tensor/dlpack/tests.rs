use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::channel::pool::{Pool, PoolOwner, PoolSpec};
use crate::channel::retire::Retirer;
use crate::device::{StreamHandle, StreamOrQueue};
use crate::tensor::{TensorLoanRequest, TensorOutputLoan, TensorReadiness};
use crate::{ErrorCode, Tensor};

/// A tensor made by "another library": the managed struct first, then what it points to.
#[repr(C)]
struct Foreign {
    managed: DLManagedTensorVersioned,
    shape: [i64; 9],
    strides: [i64; 9],
    _data: Vec<u8>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_foreign(m: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `foreign` below; DLPack calls the deleter once.
    let f = unsafe { Box::from_raw(m.cast::<Foreign>()) };
    f.deleted.fetch_add(1, Ordering::SeqCst);
}

struct Spec<'a> {
    shape: &'a [i64],
    strides: Option<&'a [i64]>,
    dtype: DLDataType,
    device: DLDevice,
    version: DLPackVersion,
    null_data: bool,
}

const CPU: DLDevice = DLDevice {
    device_type: DLDeviceType::CPU,
    device_id: 0,
};

fn spec(shape: &[i64]) -> Spec<'_> {
    Spec {
        shape,
        strides: None,
        dtype: dtype_to_dlpack(DType::U8),
        device: CPU,
        version: DLPACK_VERSION,
        null_data: false,
    }
}

/// A host buffer of `0..n` bytes described by `s`, and its deletion counter.
fn foreign(s: &Spec<'_>) -> (*mut DLManagedTensorVersioned, Arc<AtomicUsize>) {
    let elems: i64 = s.shape.iter().product::<i64>().max(1);
    let bytes = usize::try_from(elems).unwrap() * usize::from(s.dtype.bits / 8).max(1);
    #[allow(clippy::cast_possible_truncation)]
    let mut data: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut shape = [0; 9];
    shape[..s.shape.len()].copy_from_slice(s.shape);
    let mut strides = [0; 9];
    let explicit = s.strides.map_or_else(
        || {
            let mut st = vec![1; s.shape.len()];
            for i in (0..s.shape.len().saturating_sub(1)).rev() {
                st[i] = st[i + 1] * s.shape[i + 1];
            }
            st
        },
        <[i64]>::to_vec,
    );
    strides[..explicit.len()].copy_from_slice(&explicit);
    let data_ptr = if s.null_data {
        std::ptr::null_mut()
    } else {
        data.as_mut_ptr().cast()
    };
    let f = Box::new(Foreign {
        managed: DLManagedTensorVersioned {
            version: s.version,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_foreign),
            flags: DlpackFlags::empty(),
            dl_tensor: DLTensor {
                data: data_ptr,
                device: s.device,
                ndim: i32::try_from(s.shape.len()).unwrap(),
                dtype: s.dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape,
        strides,
        _data: data,
        deleted: Arc::clone(&deleted),
    });
    // The shape and strides point into the box: taken from the raw pointer, after
    // `Box::into_raw` (a pointer taken through the box before it is invalidated when the
    // box is turned into a raw pointer: Miri's Stacked Borrows reject the import's read).
    let f = Box::into_raw(f);
    // SAFETY: `f` is the live allocation just leaked; nothing else refers to it yet.
    unsafe {
        (*f).managed.dl_tensor.shape = (&raw mut (*f).shape).cast();
        if s.strides.is_some() || s.version.minor >= 2 {
            (*f).managed.dl_tensor.strides = (&raw mut (*f).strides).cast();
        }
    }
    (f.cast(), deleted)
}

fn import(s: &Spec<'_>) -> (Result<Tensor>, Arc<AtomicUsize>) {
    let (ptr, deleted) = foreign(s);
    // SAFETY: `foreign` hands over a valid, owned tensor.
    (unsafe { Tensor::from_dlpack_raw(ptr, None) }, deleted)
}

fn host_pool(slots: u32) -> PoolOwner {
    Pool::materialize(
        PoolSpec {
            name: "p.out".into(),
            location: "p.out",
            kind: crate::MemoryKind::Host,
            dtype: None,
            rank: None,
            max_rank: 4,
            per_slot_bytes: 64,
            slot_count: slots,
            release_capacity: 0,
            shared_memory: false,
        },
        None,
    )
    .unwrap()
}

fn committed(p: &Arc<Pool>, shape: &[u64], dtype: DType) -> Tensor {
    TensorOutputLoan::new(p, TensorLoanRequest { shape, dtype })
        .unwrap()
        .write_host_and_commit(|b| {
            for (i, x) in b.iter_mut().enumerate() {
                #[allow(clippy::cast_possible_truncation)]
                {
                    *x = i as u8;
                }
            }
        })
        .unwrap()
        .into()
}

#[test]
fn every_dtype_maps_both_ways_and_the_rest_is_not_supported() {
    for d in DType::ALL {
        assert_eq!(dtype_from_dlpack(dtype_to_dlpack(d)).unwrap(), d);
        assert_eq!(u64::from(dtype_to_dlpack(d).bits) / 8, d.size_bytes());
    }
    let refused = [
        DLDataType {
            code: DLDataTypeCode::BOOL,
            bits: 8,
            lanes: 1,
        },
        DLDataType {
            code: DLDataTypeCode::FLOAT,
            bits: 32,
            lanes: 4,
        },
        DLDataType {
            code: DLDataTypeCode::COMPLEX,
            bits: 64,
            lanes: 1,
        },
        DLDataType {
            code: DLDataTypeCode::INT,
            bits: 4,
            lanes: 1,
        },
    ];
    for t in refused {
        assert_eq!(
            dtype_from_dlpack(t).unwrap_err().code(),
            ErrorCode::NotSupported
        );
    }
}

#[test]
fn an_export_is_versioned_read_only_with_explicit_compact_strides() {
    let p = host_pool(1);
    let t = committed(&p, &[2, 3, 4], DType::U16);
    let d = t.to_dlpack(None).unwrap();
    assert_eq!(d.version(), DLPACK_VERSION);
    assert_eq!(d.version().major, 1);
    assert_eq!(d.flags(), DlpackFlags::READ_ONLY);
    // SAFETY: the descriptor is not mutated while read.
    let dl = unsafe { d.tensor() };
    assert_eq!(dl.ndim, 3);
    assert_eq!(dl.device, CPU);
    assert_eq!(dl.dtype, dtype_to_dlpack(DType::U16));
    assert_eq!(dl.byte_offset, 0);
    assert_eq!(
        dl.data.cast::<u8>().cast_const(),
        t.data().unwrap().as_ptr()
    );
    assert!(
        !dl.strides.is_null(),
        "explicit strides, as DLPack 1.2 requires"
    );
    // SAFETY: as above; both point to `ndim` values inside the capsule.
    let (shape, strides) = unsafe {
        (
            std::slice::from_raw_parts(dl.shape, 3),
            std::slice::from_raw_parts(dl.strides, 3),
        )
    };
    assert_eq!(shape, [2, 3, 4]);
    assert_eq!(strides, [12, 4, 1]);
    // dlpark's own export check agrees.
    let view = d.validate_export().unwrap();
    assert_eq!(view.shape(), &[2, 3, 4]);
}

#[test]
fn a_legacy_only_consumer_is_refused() {
    let p = host_pool(1);
    let t = committed(&p, &[4], DType::U8);
    for max in [None, Some(DLPackVersion { major: 0, minor: 8 })] {
        let e = t
            .export_dlpack(&ExportRequest::new(None).with_max_version(max))
            .err()
            .unwrap();
        assert_eq!(e.code(), ErrorCode::NotSupported, "{max:?}");
        assert!(e.message().contains("legacy"), "{e}");
    }
    drop(t);
    assert_eq!(p.free_slots(), 1, "a refused export holds nothing");
}

#[test]
fn the_export_deleter_releases_the_slot_from_any_thread() {
    let p = host_pool(2);
    let t = committed(&p, &[8], DType::U8);
    let a = t.to_dlpack(None).unwrap();
    let b = t.to_dlpack(None).unwrap();
    drop(t);
    assert_eq!(p.free_slots(), 1, "two capsules hold the slot");
    std::thread::spawn(move || drop(a)).join().unwrap();
    assert_eq!(p.free_slots(), 1, "one capsule still holds it");
    // Through the raw pointer, as a C consumer does.
    let raw = b.into_raw().expose_provenance();
    // SAFETY: `raw` is an owned capsule; its deleter is called once.
    std::thread::spawn(move || unsafe {
        let raw = std::ptr::with_exposed_provenance_mut::<DLManagedTensorVersioned>(raw);
        ((*raw).deleter.unwrap())(raw);
    })
    .join()
    .unwrap();
    assert_eq!(
        p.free_slots(),
        2,
        "the last capsule's deleter returned the slot"
    );
}

#[test]
fn export_orders_the_consumer_stream_and_registers_its_release() {
    let backend: Arc<dyn crate::device::DeviceBackend> = crate::device::SoftwareDevice::new();
    let retirer = Retirer::new();
    let p = Pool::materialize(
        PoolSpec {
            name: "d.out".into(),
            location: "d.out",
            kind: crate::MemoryKind::CudaDevice,
            dtype: Some(DType::U8),
            rank: None,
            max_rank: 1,
            per_slot_bytes: 16,
            slot_count: 1,
            release_capacity: 2,
            shared_memory: false,
        },
        Some((&backend, &retirer)),
    )
    .unwrap();
    let (producer, consumer) = (
        backend.create_stream().unwrap(),
        backend.create_stream().unwrap(),
    );
    p.bind_loan_streams(crate::channel::pool::LoanStreams {
        planned: Some(producer),
        fused: None,
    });
    let guard = TensorOutputLoan::new(
        &p,
        TensorLoanRequest {
            shape: &[16],
            dtype: DType::U8,
        },
    )
    .unwrap()
    .write(producer)
    .unwrap();
    // SAFETY: the guard owns the slot; the fill stays inside it.
    unsafe {
        backend
            .memset_async(guard.device_ptr(), 9, 16, producer)
            .unwrap();
    }
    let t: Tensor = guard.commit().unwrap().into();
    let before = backend.counters().snapshot();
    let d = t.to_dlpack(Some(consumer.into())).unwrap();
    let calls = backend.counters().snapshot() - before;
    assert_eq!(
        calls.stream_wait, 1,
        "the consumer stream waits on readiness"
    );
    assert_eq!(t.release_stream_count(), 1, "and is a release stream");
    // SAFETY: read-only look at the descriptor.
    let dl = unsafe { d.tensor() };
    assert_eq!(dl.device.device_type, DLDeviceType::CUDA);
    assert_eq!(dl.device.device_id, 0);
    // No stream (DLPack's -1) orders nothing.
    let before = backend.counters().snapshot();
    let n = t.to_dlpack(None).unwrap();
    assert_eq!((backend.counters().snapshot() - before).stream_wait, 0);
    // A stream the backend does not know is the backend's error.
    let unknown = StreamOrQueue::Backend(StreamHandle::from_raw(0xdead));
    assert_eq!(
        t.to_dlpack(Some(unknown)).err().unwrap().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        t.release_stream_count(),
        1,
        "a refused stream is not registered"
    );
    drop((t, n));
    assert_eq!(p.free_slots(), 0);
    drop(d);
    assert_eq!(p.free_slots(), 1, "no worker: returned at once");
    // Drained before the pool's memory is freed (a session synchronizes at teardown).
    backend.destroy_stream(producer).unwrap();
    backend.destroy_stream(consumer).unwrap();
    drop(p);
}

#[test]
fn imports_refuse_what_holo_cannot_hold_and_release_it() {
    let neg = [2_i64, -1];
    let cases: Vec<(Spec<'_>, ErrorCode, &str)> = vec![
        (
            Spec {
                null_data: true,
                ..spec(&[4])
            },
            ErrorCode::InvalidArgument,
            "null",
        ),
        (
            spec(&[1, 1, 1, 1, 1, 1, 1, 1, 2]),
            ErrorCode::NotSupported,
            "at most 8",
        ),
        (
            Spec {
                strides: Some(&[1, 2]),
                ..spec(&[2, 2])
            },
            ErrorCode::NotSupported,
            "not compact",
        ),
        (
            Spec {
                dtype: DLDataType {
                    code: DLDataTypeCode::BOOL,
                    bits: 8,
                    lanes: 1,
                },
                ..spec(&[4])
            },
            ErrorCode::NotSupported,
            "no holo dtype",
        ),
        (
            Spec {
                strides: Some(&[1, 1]),
                ..spec(&neg)
            },
            ErrorCode::InvalidArgument,
            "negative",
        ),
        (
            Spec {
                device: DLDevice {
                    device_type: DLDeviceType::CUDA,
                    device_id: 0,
                },
                ..spec(&[4])
            },
            ErrorCode::InvalidArgument,
            "name the device backend",
        ),
        (
            Spec {
                device: DLDevice {
                    device_type: DLDeviceType::ROCM,
                    device_id: 0,
                },
                ..spec(&[4])
            },
            ErrorCode::InvalidArgument,
            "never copies across devices",
        ),
    ];
    for (s, code, words) in cases {
        let (r, deleted) = import(&s);
        let e = r.unwrap_err();
        assert_eq!((e.code(), e.message().contains(words)), (code, true), "{e}");
        assert_eq!(deleted.load(Ordering::SeqCst), 1, "released once: {e}");
    }
    // Null strides: compact before DLPack 1.2, malformed from 1.2 on.
    let mut old = spec(&[2, 2]);
    old.version.minor = 1;
    let (r, deleted) = import(&old);
    assert_eq!(r.unwrap().data().unwrap(), &[0, 1, 2, 3]);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    let (ptr, deleted) = foreign(&spec(&[2, 2]));
    // SAFETY: owned, valid; only the strides pointer is cleared.
    let r = unsafe {
        (*ptr).dl_tensor.strides = std::ptr::null_mut();
        Tensor::from_dlpack_raw(ptr, None)
    };
    assert_eq!(r.unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    // An extent of 1 may carry any stride; a tensor with no element any strides.
    let (r, _) = import(&Spec {
        strides: Some(&[99, 1]),
        ..spec(&[1, 4])
    });
    assert_eq!(r.unwrap().shape(), &[1, 4]);
    let (r, _) = import(&Spec {
        strides: Some(&[5, 7]),
        ..spec(&[0, 4])
    });
    assert_eq!(r.unwrap().byte_size(), 0);
}

#[test]
fn another_major_version_is_refused_after_its_deleter_ran_and_null_is_refused() {
    let mut s = spec(&[4]);
    s.version = DLPackVersion { major: 2, minor: 0 };
    let (r, deleted) = import(&s);
    let e = r.unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotSupported);
    assert!(e.message().contains("2.0"), "{e}");
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    // SAFETY: null is allowed by the contract.
    let e = unsafe { Tensor::from_dlpack_raw(std::ptr::null_mut(), None) }.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
}

#[test]
fn an_import_is_read_only_and_its_deleter_runs_once_with_its_last_handle() {
    let (r, deleted) = import(&spec(&[2, 3]));
    let mut t = r.unwrap();
    assert!(t.is_dlpack_import());
    assert_eq!(t.pool_name(), None);
    assert_eq!(t.memory_kind(), crate::MemoryKind::Host);
    assert_eq!(t.readiness(), TensorReadiness::Host);
    assert!(t.has_readiness_stream_contract());
    assert_eq!(
        t.mutable_data().unwrap_err().code(),
        ErrorCode::PermissionDenied
    );
    assert_eq!(
        t.set_readiness_stream(StreamHandle::from_raw(5))
            .unwrap_err()
            .code(),
        ErrorCode::NotSupported
    );
    let c = t.clone();
    let lease = t.read_lease();
    drop(t);
    drop(c);
    assert_eq!(deleted.load(Ordering::SeqCst), 0, "the lease holds it");
    assert_eq!(lease.data().unwrap(), &[0, 1, 2, 3, 4, 5]);
    drop(lease);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn a_runtime_tensor_refuses_set_readiness_stream() {
    let p = host_pool(1);
    let t = committed(&p, &[4], DType::U8);
    assert!(!t.is_dlpack_import());
    assert!(t.has_readiness_stream_contract());
    assert_eq!(
        t.set_readiness_stream(StreamHandle::from_raw(5))
            .unwrap_err()
            .code(),
        ErrorCode::NotSupported
    );
}

#[test]
fn released_imports_are_recycled_and_a_stale_slot_ref_is_refused() {
    let (r, _) = import(&spec(&[4]));
    let t = r.unwrap();
    let first = Arc::as_ptr(&t.pool);
    let old = t.slot_ref();
    drop(t);
    // Another test may take the recycled pool first: try a few imports.
    let mut seen = false;
    let mut held = Vec::new();
    for _ in 0..64 {
        let (r, _) = import(&spec(&[2, 2]));
        let t = r.unwrap();
        if Arc::as_ptr(&t.pool) == first {
            seen = true;
            assert_eq!(t.shape(), &[2, 2]);
            assert_eq!(t.data().unwrap(), &[0, 1, 2, 3]);
            assert_ne!(t.slot_ref(), old);
            assert_eq!(
                t.pool.check_slot_ref(old).unwrap_err().code(),
                ErrorCode::InvalidArgument
            );
            break;
        }
        held.push(t);
    }
    assert!(seen, "a released import's pool is reused");
}

/// A foreign (DLPack) tensor of 8 bytes in pinned host memory of `backend`, imported:
/// the tensor, the allocation (the caller frees it after the deleter ran) and the
/// deleter's run count.
fn pinned_import(
    backend: &Arc<dyn crate::device::DeviceBackend>,
) -> (Tensor, crate::device::DevicePtr, Arc<AtomicUsize>) {
    let ptr = backend
        .alloc(crate::device::AllocKind::PinnedHost, 8)
        .unwrap();
    let (raw, deleted) = foreign(&Spec {
        device: DLDevice {
            device_type: DLDeviceType::CUDAHOST,
            device_id: 0,
        },
        ..spec(&[8])
    });
    // SAFETY: the descriptor is owned; its data now points at the pinned allocation,
    // which outlives the tensor (the caller frees it after the deleter ran).
    let t = unsafe {
        (*raw).dl_tensor.data = ptr.as_host_ptr().cast();
        Tensor::from_dlpack_raw(raw, Some(backend)).unwrap()
    };
    (t, ptr, deleted)
}

#[test]
fn a_device_import_has_no_contract_until_its_stream_is_recorded() {
    let backend: Arc<dyn crate::device::DeviceBackend> = crate::device::SoftwareDevice::new();
    let bytes = 8;
    let stream = backend.create_stream().unwrap();
    let (t, ptr, deleted) = pinned_import(&backend);
    assert_eq!(t.memory_kind(), crate::MemoryKind::PinnedHost);
    assert!(!t.has_readiness_stream_contract());
    assert_eq!(t.readiness(), TensorReadiness::Uncontracted);
    for e in [
        t.data().map(|_| ()).unwrap_err(),
        t.synchronize_for_host().unwrap_err(),
        t.synchronize_for_consumer_stream(stream).unwrap_err(),
    ] {
        assert_eq!(e.code(), ErrorCode::ProtocolError, "{e}");
        assert!(e.message().contains("set_readiness_stream"), "{e}");
        assert_eq!(e.location(), Some("a tensor imported through DLPack"));
    }
    t.set_readiness_stream(stream).unwrap();
    assert!(t.has_readiness_stream_contract());
    assert_eq!(t.readiness(), TensorReadiness::Recorded);
    t.synchronize_for_host().unwrap();
    assert_eq!(t.data().unwrap().len(), 8);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    backend.destroy_stream(stream).unwrap();
    // SAFETY: the import was released and no stream uses the memory.
    unsafe {
        backend
            .free(crate::device::AllocKind::PinnedHost, ptr, bytes)
            .unwrap();
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Dlpack>();
    send_sync::<ExportRequest>();
};

/// Kills `record_foreign_readiness`'s `state != RECORDING && compare_exchange` → `||` and
/// `readiness_event_slow`'s deleted `UNCONTRACTED` arm: while a foreign producer's stream
/// is being recorded the slot reads "recording", so a consumer on another thread waits for
/// the record instead of refusing an uncontracted tensor; before it, the readiness is
/// refused with the contract's code.
#[test]
fn a_consumer_waits_for_a_foreign_readiness_being_recorded() {
    use crate::device::{CallKind, FaultInjecting, SoftwareDevice};
    let faults = FaultInjecting::new(SoftwareDevice::new());
    let backend: Arc<dyn crate::device::DeviceBackend> = Arc::clone(&faults) as _;
    let bytes = 8;
    let (producer, consumer) = (
        backend.create_stream().unwrap(),
        backend.create_stream().unwrap(),
    );
    let (t, ptr, deleted) = pinned_import(&backend);
    let refused = t.pool.readiness_event(t.slot).map(|_| ()).unwrap_err();
    assert_eq!(refused.code(), ErrorCode::ProtocolError, "{refused}");
    faults.slow_nth(
        CallKind::RecordEvent,
        1,
        std::time::Duration::from_millis(300),
    );
    let calls = faults.calls(CallKind::RecordEvent);
    std::thread::scope(|scope| {
        scope.spawn(|| t.set_readiness_stream(producer).unwrap());
        while faults.calls(CallKind::RecordEvent) == calls {
            std::thread::yield_now();
        }
        // The recorder is inside its (slow) record now.
        t.synchronize_for_consumer_stream(consumer).unwrap();
    });
    assert_eq!(t.readiness(), TensorReadiness::Recorded);
    drop(t);
    // The consumer's stream is a release stream: the foreign retirement worker runs the
    // deleter once it passed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while deleted.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    for s in [producer, consumer] {
        backend.destroy_stream(s).unwrap();
    }
    // SAFETY: the import was released and no stream uses the memory.
    unsafe {
        backend
            .free(crate::device::AllocKind::PinnedHost, ptr, bytes)
            .unwrap();
    }
}
