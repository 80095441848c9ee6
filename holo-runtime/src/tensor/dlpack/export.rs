//! DLPack export: a capsule around a handle of the tensor's slot.
//!
//! A capsule is a `DLManagedTensorVersioned` followed by the shape and strides it points
//! into and the slot handle it keeps, in one heap block that lives until the consumer calls
//! the deleter. Blocks are recycled through a bounded process-wide queue, so an export
//! allocates nothing once warm (the first exports, and any beyond the queue's reserve,
//! allocate one block each; a full queue frees the block instead).

use std::ffi::c_void;
use std::sync::OnceLock;

use crossbeam_queue::ArrayQueue;

use super::{DLPACK_VERSION, Dlpack, DlpackFlags, ExportRequest, dl_device};
use crate::device::{DevicePtr, StreamOrQueue};
use crate::spec::MAX_TENSOR_RANK;
use crate::tensor::{DeviceArray, Tensor};
use crate::{Error, ErrorCode, Result};

use dlpark::ffi::{DLManagedTensorVersioned, DLTensor};

const RANK: usize = MAX_TENSOR_RANK as usize;

/// Capsule blocks kept for reuse.
const RECYCLED_CAPSULES: usize = 1024;

/// One export. `repr(C)` with the managed tensor first: the pointer DLPack hands to the
/// deleter is the capsule's.
#[repr(C)]
struct Capsule {
    managed: DLManagedTensorVersioned,
    shape: [i64; RANK],
    strides: [i64; RANK],
    /// What the consumer holds; `None` while the block is recycled.
    holder: Option<Holder>,
}

/// What a capsule keeps until its deleter runs.
#[allow(dead_code, reason = "never read: kept for what its drop releases")]
enum Holder {
    /// The tensor handed to the consumer's stream: dropping it records the release there.
    Array(DeviceArray<'static>),
    /// A slot handle, for a consumer that synchronizes itself.
    Tensor(Tensor),
}

/// A capsule block: a one-element boxed slice, reserved fallibly.
struct Block(Box<[Capsule]>);

// SAFETY: a capsule's raw pointers point into its own block (or are null), and its holder
// is a `Tensor` or a `DeviceArray` (both Send + Sync; an array may drop on any thread):
// nothing in it is tied to a thread. A block in the queue is
// owned by the queue alone; a live capsule's block by its consumer alone.
unsafe impl Send for Block {}
// SAFETY: as above; a shared block is only ever read.
unsafe impl Sync for Block {}

fn recycled() -> &'static ArrayQueue<Block> {
    static CAPSULES: OnceLock<ArrayQueue<Block>> = OnceLock::new();
    CAPSULES.get_or_init(|| ArrayQueue::new(RECYCLED_CAPSULES))
}

fn empty_capsule() -> Capsule {
    Capsule {
        managed: DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: None,
            flags: DlpackFlags::empty(),
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: dl_device(crate::MemoryKind::Host, 0),
                ndim: 0,
                dtype: super::dtype_to_dlpack(crate::spec::DType::U8),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: [0; RANK],
        strides: [0; RANK],
        holder: None,
    }
}

/// A recycled block, or a new one (fallibly reserved).
fn take_block() -> Result<Block> {
    if let Some(block) = recycled().pop() {
        return Ok(block);
    }
    let mut v = crate::cold::vec_with_capacity::<Capsule>(1).map_err(|e| {
        Error::new(
            ErrorCode::ResourceExhausted,
            format!("a DLPack capsule: {e}"),
        )
    })?;
    v.push(empty_capsule());
    Ok(Block(v.into_boxed_slice()))
}

/// The deleter of every capsule holo exports: returns the block and drops what it held
/// (an array records its release on the consumer's stream; the slot then returns to its
/// pool, or goes to retirement), on whichever thread the consumer calls it from.
unsafe extern "C" fn delete_capsule(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    let capsule = managed.cast::<Capsule>();
    // SAFETY: `managed` is the first field of a live `Capsule` block made by `export`
    // (only capsules carry this deleter), and DLPack calls the deleter exactly once, so
    // this is the block's sole owner now.
    let mut block = Block(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(capsule, 1)) });
    let holder = block.0[0].holder.take();
    block.0[0].managed.deleter = None;
    drop(recycled().push(block));
    drop(holder);
}

/// Row-major strides in elements for `shape`, written into `strides`; `false` if one
/// overflows `i64`.
fn compact_strides(shape: &[i64], strides: &mut [i64]) -> bool {
    let mut stride = 1_i64;
    for (s, &e) in strides.iter_mut().zip(shape).rev() {
        *s = stride;
        match stride.checked_mul(e.max(1)) {
            Some(next) => stride = next,
            None => return false,
        }
    }
    true
}

impl Tensor {
    /// Exports the tensor as a versioned DLPack tensor for a consumer on `stream`
    /// (`None`: the consumer synchronizes itself); see [`export_dlpack`](Self::export_dlpack).
    pub fn to_dlpack(&self, stream: Option<StreamOrQueue>) -> Result<Dlpack> {
        self.export_dlpack(&ExportRequest::new(stream))
    }

    /// Exports the tensor as a DLPack 1.x `DLManagedTensorVersioned`: flagged
    /// `READ_ONLY`, with its device, dtype, shape and explicit compact row-major strides
    /// (in elements; DLPack 1.2 requires them). The capsule keeps the tensor's slot out of
    /// its pool until its deleter runs (from any thread: drop the [`Dlpack`], or call the
    /// deleter of the pointer [`into_raw`](dlpark::Managed::into_raw) gives).
    ///
    /// The request's stream is handed the tensor as by [`device_array`](Self::device_array),
    /// whose [`DeviceArray`] the capsule keeps: the stream waits on the readiness (no host
    /// wait; nothing for the tensor's own stream or host bytes) and is a release stream of
    /// the slot until the deleter drops the array, which records the release on it. A
    /// stream of another context or device is `InvalidArgument`, a slot at its
    /// release-stream cap `ResourceExhausted`, and a DLPack import without a readiness
    /// stream contract `ProtocolError`. With no stream (DLPack's `-1`) nothing is ordered.
    ///
    /// A consumer that knows only the legacy unversioned `DLManagedTensor`
    /// (`max_version` `None` or below 1.0) is refused with `NotSupported`: that struct
    /// cannot carry `READ_ONLY`, and holo does not copy behind the caller's back — copy
    /// into a tensor the consumer owns instead.
    pub fn export_dlpack(&self, request: &ExportRequest) -> Result<Dlpack> {
        if request.max_version.is_none_or(|v| v.major < 1) {
            return Err(legacy_refused());
        }
        if let Some(d) = self.pool.device()
            && d.backend.backend_kind() == crate::device::BackendKind::OpenCl
        {
            // Its bytes are a cl_mem and an offset, never a CUDA address: no CUDA device
            // type may name them.
            return Err(Error::new(
                ErrorCode::NotSupported,
                "a tensor of an OpenCL device is not exported through DLPack (its bytes are a cl_mem, not a CUDA address): hand it over with Tensor::device_array on an OpenCL queue",
            ));
        }
        let meta = *self.meta();
        let rank = usize::from(meta.rank);
        let mut block = take_block()?;
        let c = &mut block.0[0];
        for (d, &e) in c.shape.iter_mut().zip(meta.shape()) {
            let Ok(e) = i64::try_from(e) else {
                drop(recycled().push(block));
                return Err(Error::invalid_argument(format!(
                    "the tensor's extent {e} does not fit DLPack's int64 shape"
                )));
            };
            *d = e;
        }
        if !compact_strides(&c.shape[..rank], &mut c.strides[..rank]) {
            drop(recycled().push(block));
            return Err(Error::new(
                ErrorCode::ArithmeticOverflow,
                "the tensor's strides overflow DLPack's int64",
            ));
        }
        let pool = &*self.pool;
        let ordinal = pool.device().map_or(0, |d| d.backend.ordinal());
        let holder = match request.stream {
            None => Holder::Tensor(self.clone()),
            Some(stream) => match self.clone().into_device_array(stream) {
                Ok(array) => Holder::Array(array),
                Err(e) => {
                    drop(recycled().push(block));
                    return Err(e);
                }
            },
        };
        let data: DevicePtr = self.device_ptr();
        let c = &mut block.0[0];
        c.managed = DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_capsule),
            flags: DlpackFlags::READ_ONLY,
            dl_tensor: DLTensor {
                data: data.as_host_ptr().cast::<c_void>(),
                device: dl_device(pool.kind, ordinal),
                ndim: i32::from(meta.rank),
                dtype: super::dtype_to_dlpack(meta.dtype),
                // Set from the raw pointer below: a pointer taken through the box now
                // would be invalidated when the box becomes a raw pointer, and the
                // consumer's reads through it undefined (Miri's Stacked Borrows).
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        };
        c.holder = Some(holder);
        let raw = Box::into_raw(block.0).cast::<Capsule>();
        // SAFETY: `raw` is a live, initialized capsule whose first field is the managed
        // tensor; the shape and strides it points to live in the same block until the
        // deleter runs; the deleter may run once from any thread and does not unwind.
        unsafe {
            (*raw).managed.manager_ctx = raw.cast::<c_void>();
            (*raw).managed.dl_tensor.shape = (&raw mut (*raw).shape).cast::<i64>();
            (*raw).managed.dl_tensor.strides = (&raw mut (*raw).strides).cast::<i64>();
            Dlpack::from_raw(raw.cast::<DLManagedTensorVersioned>())
        }
        .map_err(|e| Error::new(ErrorCode::Internal, format!("holo's DLPack capsule: {e}")))
    }
}

#[cold]
fn legacy_refused() -> Error {
    Error::new(
        ErrorCode::NotSupported,
        "a holo tensor is read-only and is never exported as a legacy (unversioned) DLManagedTensor, which cannot carry READ_ONLY: ask for DLPack 1.x (max_version >= 1.0), or copy it into a tensor you own",
    )
}
