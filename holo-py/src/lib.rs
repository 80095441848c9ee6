//! `holo_py`: a minimal Python extension over holo's DLPack export and import — the other
//! side of the CuPy test (`holo-py/tests/test_cupy.py`, run on the GPU machine).
//!
//! - `FrameSource(nbytes, delay_ms)` runs a holo session on CUDA device 0 whose source, per
//!   frame, holds its runtime stream back `delay_ms` and then fills the frame with
//!   `k + 1` (frame k, mod 256) on that stream. `next()` hands a frame to Python as a
//!   `HoloTensor`, which speaks the DLPack protocol (`__dlpack__`, `__dlpack_device__`):
//!   `cupy.from_dlpack(t)` passes CuPy's current stream, which holo orders after the
//!   delayed fill with no host wait; a CuPy read that was not ordered would see the
//!   pool's earlier bytes. `free_slots()` shows the slot coming back once CuPy drops the
//!   array (the capsule's deleter releases holo's handle).
//! - `import_and_read(array, stream, nbytes)` takes another library's array through its
//!   `__dlpack__(stream=-1)` (no synchronization by the producer), imports it as a
//!   read-only holo tensor, shows that a stream-aware read without a readiness contract
//!   is refused (`ProtocolError`), calls `set_readiness_stream(stream)` with the stream the
//!   producer wrote on, and reads the first `nbytes` on a stream of holo's own: holo's
//!   read is ordered after the producer's writes on the device.
//!
//! Errors come back as Python exceptions whose message starts with holo's error code:
//! `BufferError` for `NotSupported` (DLPack's convention), `ValueError` for
//! `InvalidArgument`, `RuntimeError` otherwise.

use std::ffi::{CStr, c_void};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use holo_runtime::device::{CudaDevice, CudaStreamPtr, DeviceBackend, StreamOrQueue};
use holo_runtime::dlpack::ExportRequest;
use holo_runtime::dlpack::dlpark::ffi::{DLManagedTensorVersioned, DLPackVersion};
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, MemoryKind, Operator, Output, ParamSet, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, operator,
};
use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

const CAPSULE: &CStr = c"dltensor_versioned";
const USED_CAPSULE: &CStr = c"used_dltensor_versioned";

fn py_err(e: &Error) -> PyErr {
    let text = format!("{}: {}", e.code().name(), e.message());
    match e.code() {
        ErrorCode::NotSupported => PyBufferError::new_err(text),
        ErrorCode::InvalidArgument => PyValueError::new_err(text),
        _ => PyRuntimeError::new_err(text),
    }
}

/// CUDA device 0 on its primary context (CuPy's context), opened once.
fn cuda() -> PyResult<Arc<dyn DeviceBackend>> {
    static DEVICE: OnceLock<Result<Arc<CudaDevice>, Error>> = OnceLock::new();
    match DEVICE.get_or_init(|| CudaDevice::open(0)) {
        Ok(d) => Ok(d.clone()),
        Err(e) => Err(py_err(e)),
    }
}

/// The source pool's slot: the largest frame (its `bounds`).
const MAX_FRAME_BYTES: u64 = 1 << 20;

/// The longest delay before a frame (a minute).
const MAX_DELAY_MS: u64 = 60_000;

/// Frame k: `delay` on the runtime stream, then every byte `k + 1` (mod 256).
#[operator]
struct Source {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 1048576)]
    frames: Output<Tensor>,
    nbytes: u64,
    delay: Duration,
    k: u64,
}

impl Operator for Source {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> holo_runtime::Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = Arc::clone(
            ctx.device()
                .ok_or_else(|| Error::new(ErrorCode::DeviceUnavailable, "no device"))?,
        );
        let loan = match self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[self.nbytes],
            dtype: DType::U8,
        }) {
            Ok(loan) => loan,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let guard = loan.write(stream)?;
        device.enqueue_delay(guard.stream(), self.delay)?;
        let fill = u8::try_from((self.k + 1) % 256).unwrap_or(0);
        // SAFETY: the guard owns the slot until commit; the fill stays inside it.
        unsafe {
            device.memset_async(guard.device_ptr(), fill, guard.byte_size(), guard.stream())?;
        }
        self.k += 1;
        let _ = self.frames.emit(guard.commit()?, EmitOptions::default());
        Ok(())
    }
}

/// Hands every received frame to Python.
#[operator]
struct Tap {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    out: Mutex<Sender<Tensor>>,
}

impl Operator for Tap {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> holo_runtime::Result<()> {
        while let Some(t) = self.frames.receive() {
            let _ = self.out.lock().map(|out| out.send(t));
        }
        Ok(())
    }
}

/// A running holo session producing device frames (see the module docs).
#[pyclass(module = "holo_py")]
struct FrameSource {
    session: Option<RunSession>,
    frames: Mutex<Option<Receiver<Tensor>>>,
    slot_count: u32,
}

#[pymethods]
impl FrameSource {
    #[new]
    #[pyo3(signature = (nbytes, delay_ms, frames = 8))]
    fn new(nbytes: u64, delay_ms: u64, frames: u64) -> PyResult<Self> {
        // Checked here, naming the argument: past these the session would start and fail
        // on its first frame, seen only as a `next()` that times out.
        if !(1..=MAX_FRAME_BYTES).contains(&nbytes) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "nbytes is {nbytes}: a frame is 1 to {MAX_FRAME_BYTES} bytes (the source pool's slot)"
            )));
        }
        if delay_ms > MAX_DELAY_MS {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "delay_ms is {delay_ms}: at most {MAX_DELAY_MS} ms before each frame"
            )));
        }
        let device = cuda()?;
        let (tx, rx) = channel();
        let mut g = Graph::new();
        let params = || ParamSet::defaults().map_err(|e| py_err(&e));
        let source = Source {
            frames: Output::default(),
            nbytes,
            delay: Duration::from_millis(delay_ms),
            k: 0,
        };
        let src = g
            .add_operator("src", source, params()?)
            .map_err(|e| py_err(&e))?;
        let tap = Tap {
            frames: Input::default(),
            out: Mutex::new(tx),
        };
        let tap = g
            .add_operator("tap", tap, params()?)
            .map_err(|e| py_err(&e))?;
        g.add_flow(src.frames, tap.frames, ConnectionOptions::default());
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "frames", device.ordinal());
        let plan = holo_runtime::compile(&g, options).map_err(|d| py_err(&Error::from(d)))?;
        let slot_count = plan
            .tensor_allocations()
            .iter()
            .find(|a| a.pool == "src.frames")
            .map_or(0, |a| a.slot_count);
        let session = RunSession::start(g, &plan, SessionOptions::frames(frames).on_device(device))
            .map_err(|e| py_err(&e))?;
        Ok(Self {
            session: Some(session),
            frames: Mutex::new(Some(rx)),
            slot_count,
        })
    }

    /// The next frame (waits up to 30 s, without the GIL).
    fn next(&self, py: Python<'_>) -> PyResult<HoloTensor> {
        let tensor = py.detach(|| {
            let frames = self
                .frames
                .lock()
                .map_err(|_| "the frame channel is poisoned".to_owned())?;
            let rx = frames.as_ref().ok_or("the source is closed")?;
            rx.recv_timeout(Duration::from_secs(30))
                .map_err(|e| format!("no frame within 30 s: {e}"))
        });
        let tensor = tensor.map_err(PyRuntimeError::new_err)?;
        Ok(HoloTensor { tensor })
    }

    /// Slots of the source's pool (the plan's count).
    #[getter]
    fn slot_count(&self) -> u32 {
        self.slot_count
    }

    /// Free slots of the source's pool now.
    fn free_slots(&self) -> Option<u32> {
        self.session
            .as_ref()
            .and_then(|s| s.pool_free_slots("src.frames"))
    }

    /// Stops and joins the session; returns its summary line.
    fn close(&mut self, py: Python<'_>) -> PyResult<String> {
        let Some(session) = self.session.take() else {
            return Ok(String::new());
        };
        session.stop();
        if let Ok(mut frames) = self.frames.lock() {
            frames.take();
        }
        let report = py.detach(|| session.join()).map_err(|e| py_err(&e))?;
        Ok(holo_runtime::app::summary(&report))
    }
}

/// A holo frame, exported through DLPack on request.
#[pyclass(module = "holo_py")]
struct HoloTensor {
    tensor: Tensor,
}

/// Runs a capsule's deleter unless a consumer took the tensor (renamed the capsule).
unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, CAPSULE.as_ptr()) == 1 {
            let managed = pyo3::ffi::PyCapsule_GetPointer(capsule, CAPSULE.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        }
    }
}

#[pymethods]
impl HoloTensor {
    /// `(kDLCUDA, ordinal)` for device memory (DLPack's device pair).
    fn __dlpack_device__(&self) -> (i32, i32) {
        // Every frame of a FrameSource lives on CUDA device 0.
        match self.tensor.memory_kind() {
            MemoryKind::CudaDevice => (2, 0),
            MemoryKind::PinnedHost => (3, 0),
            MemoryKind::CudaManaged => (13, 0),
            MemoryKind::Host => (1, 0),
            // kDLOpenCL: never a FrameSource's memory (it runs on CUDA), and a pool's
            // kind is never the neutral `device`.
            MemoryKind::OpenClDevice | MemoryKind::Device => (4, 0),
        }
    }

    /// The DLPack export: a `dltensor_versioned` capsule, ordered on the consumer's
    /// `stream` (DLPack's argument), read-only.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "NotSupported: holo exports without a copy (copy=True was asked)",
            ));
        }
        if dl_device.is_some_and(|d| d != self.__dlpack_device__()) {
            return Err(PyBufferError::new_err(
                "NotSupported: holo never copies a tensor to another device",
            ));
        }
        // SAFETY: the consumer's stream argument is its live stream (DLPack's contract).
        let stream =
            unsafe { StreamOrQueue::from_dlpack_stream(stream) }.map_err(|e| py_err(&e))?;
        let request = ExportRequest::new(stream)
            .with_max_version(max_version.map(|(major, minor)| DLPackVersion { major, minor }));
        let managed = self
            .tensor
            .export_dlpack(&request)
            .map_err(|e| py_err(&e))?
            .into_raw();
        // SAFETY: `managed` is an owned DLPack tensor; the capsule's destructor runs its
        // deleter unless a consumer renames the capsule (and then owns it).
        unsafe {
            let capsule = pyo3::ffi::PyCapsule_New(
                managed.cast::<c_void>(),
                CAPSULE.as_ptr(),
                Some(capsule_destructor),
            );
            if capsule.is_null() {
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
                return Err(PyErr::fetch(py));
            }
            Ok(Bound::from_owned_ptr(py, capsule).unbind())
        }
    }

    /// The byte size.
    #[getter]
    fn nbytes(&self) -> usize {
        self.tensor.byte_size()
    }
}

/// Imports `array` through `__dlpack__(stream=-1)`, refuses a read before the readiness
/// contract (returns that error's code name), records `stream` as its readiness stream,
/// and reads its first `nbytes` on a holo stream. Returns `(code, bytes)`.
///
/// `stream` is a raw `CUstream` (CuPy's `Stream.ptr`), live for the call: like DLPack's
/// `stream` argument it cannot be checked before the driver sees it. `nbytes` past the
/// array's size is `ValueError`.
#[pyfunction]
fn import_and_read(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    stream: u64,
    nbytes: usize,
) -> PyResult<(String, Vec<u8>)> {
    let device = cuda()?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("stream", -1)?;
    kwargs.set_item("max_version", (1, 3))?;
    let capsule = array.call_method("__dlpack__", (), Some(&kwargs))?;
    // SAFETY: `capsule` is a live object; a capsule of another name gives null.
    let managed = unsafe {
        let raw = capsule.as_ptr();
        let managed = pyo3::ffi::PyCapsule_GetPointer(raw, CAPSULE.as_ptr())
            .cast::<DLManagedTensorVersioned>();
        if managed.is_null() {
            return Err(PyErr::fetch(py));
        }
        // The tensor is ours now: the capsule must not run its deleter.
        if pyo3::ffi::PyCapsule_SetName(raw, USED_CAPSULE.as_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        managed
    };
    // SAFETY: an owned DLPack tensor handed over by its producer (CuPy).
    let tensor =
        unsafe { Tensor::from_dlpack_raw(managed, Some(&device)) }.map_err(|e| py_err(&e))?;
    // Before the buffer is allocated: a huge `nbytes` panicked (capacity overflow) or
    // aborted the interpreter (a failed allocation).
    if nbytes > tensor.byte_size() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "nbytes is {nbytes}: the array holds {} bytes",
            tensor.byte_size()
        )));
    }
    let holo_stream = device.create_stream().map_err(|e| py_err(&e))?;
    let mut bytes = vec![0_u8; nbytes];
    let refused = tensor
        .copy_to_host(&mut bytes, holo_stream)
        .err()
        .map_or_else(|| "none".to_owned(), |e| e.code().name().to_owned());
    // SAFETY: the producer's stream, live for this call (the caller's contract).
    let producer = unsafe { CudaStreamPtr::from_raw(stream) };
    let read = tensor
        .set_readiness_stream(producer)
        .and_then(|()| py.detach(|| tensor.copy_to_host(&mut bytes, holo_stream)));
    let _ = device.destroy_stream(holo_stream);
    read.map_err(|e| py_err(&e))?;
    Ok((refused, bytes))
}

/// The Python module.
#[pymodule]
fn holo_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FrameSource>()?;
    m.add_class::<HoloTensor>()?;
    m.add_function(wrap_pyfunction!(import_and_read, m)?)?;
    Ok(())
}
