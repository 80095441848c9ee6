//! A kernel author's pipeline on CUDA: an operator loads a PTX module in `start` and
//! launches its kernel with `cuLaunchKernel` on `ctx.cuda()?.raw_stream()` in `compute`,
//! with no driver call of its own to make the context current (the session made the
//! device's context current on the partition thread, and around `start` and `stop`); a
//! consumer on another stream checks every byte the kernel wrote. Runs where CUDA device
//! 0 opens (and must, with `HOLO_REQUIRE_DEVICE=cuda`); elsewhere there is nothing to run.
#![cfg(feature = "cuda")]

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys;
use holo_runtime::__test_support::test_backends;
use holo_runtime::device::BackendKind;
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, Error, ErrorCode, ExecutionContext,
    Graph, Input, LifecycleContext, Operator, Output, ParamSet, Result, RunSession, SessionOptions,
    Tensor, TensorLoanRequest, compile, operator,
};

/// `fill(p, n, seed)`: `p[i] = (i * 3 + seed) mod 256` for `i < n`.
const PTX: &str = "
.version 8.0
.target sm_80
.address_size 64

.visible .entry fill(.param .u64 p, .param .u32 n, .param .u32 seed)
{
    .reg .pred %done;
    .reg .b32 %i, %b, %t, %nn, %s, %v;
    .reg .b64 %base, %off, %addr;
    ld.param.u64 %base, [p];
    ld.param.u32 %nn, [n];
    ld.param.u32 %s, [seed];
    mov.u32 %i, %tid.x;
    mov.u32 %b, %ctaid.x;
    mov.u32 %t, %ntid.x;
    mad.lo.u32 %i, %b, %t, %i;
    setp.ge.u32 %done, %i, %nn;
    @%done bra END;
    mad.lo.u32 %v, %i, 3, %s;
    cvta.to.global.u64 %base, %base;
    cvt.u64.u32 %off, %i;
    add.u64 %addr, %base, %off;
    st.global.u8 [%addr], %v;
END:
    ret;
}
\0";

const LEN: u32 = 256;

fn check(call: &str, r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::new(
            ErrorCode::Internal,
            format!("{call} failed: {r:?}"),
        ))
    }
}

#[operator]
struct Kernel {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
    module: usize,
    function: usize,
    seed: u32,
}

impl Operator for Kernel {
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        assert!(cuda.raw_context().is_some());
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `PTX` is NUL-terminated text; the context is current (the session made
        // it so around `start`).
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&raw mut module, PTX.as_ptr().cast())
        })?;
        let mut function: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: `module` was just loaded; the name is NUL-terminated.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&raw mut function, module, c"fill".as_ptr())
        })?;
        self.module = module as usize;
        self.function = function as usize;
        Ok(())
    }

    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        let loan = match self.out.allocate_tensor(TensorLoanRequest {
            shape: &[u64::from(LEN)],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let guard = loan.write(cuda.stream())?;
        let mut ptr = guard.device_ptr().raw();
        let mut n = LEN;
        let mut seed = self.seed;
        let mut params = [
            (&raw mut ptr).cast::<c_void>(),
            (&raw mut n).cast::<c_void>(),
            (&raw mut seed).cast::<c_void>(),
        ];
        // SAFETY: the function was loaded in `start` with three parameters of these types;
        // the kernel writes `LEN` bytes inside the loaned slot, on the operator's stream,
        // before commit records the readiness event there. No call made the context
        // current here: the session did.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.function as sys::CUfunction,
                1,
                1,
                1,
                LEN,
                1,
                1,
                0,
                cuda.raw_stream() as sys::CUstream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })?;
        let committed = guard.commit()?;
        match self.out.emit(committed, EmitOptions::default()) {
            Ok(()) => self.seed = self.seed.wrapping_add(1),
            Err(e) if e.code() == ErrorCode::Backpressured => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        // SAFETY: loaded in `start`; `stop` runs after the partition threads joined, so no
        // launch is being made, and CUDA keeps a module's code alive for launches still
        // in flight.
        check("cuModuleUnload", unsafe {
            sys::cuModuleUnload(self.module as sys::CUmodule)
        })
    }
}

#[operator]
struct Verify {
    #[input(memory = cuda_device, dtype = u8, rank = 1)]
    input: Input<Tensor>,
    next_seed: u32,
    checked: Arc<AtomicU64>,
    bad: Arc<Mutex<Vec<(u32, usize, u8)>>>,
}

impl Operator for Verify {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        while let Some(t) = self.input.receive() {
            let mut host = vec![0u8; t.byte_size()];
            t.copy_to_host(&mut host, stream)?;
            let seed = self.next_seed;
            self.next_seed = seed.wrapping_add(1);
            if let Some((i, &b)) = host.iter().enumerate().find(|&(i, &b)| {
                u32::try_from(i).map_or(true, |i| u32::from(b) != (i * 3 + seed) % 256)
            }) {
                self.bad.lock().unwrap().push((seed, i, b));
            }
            self.checked.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[test]
fn an_operator_launches_its_own_ptx_kernel_on_its_stream() {
    let Some(device) = test_backends()
        .into_iter()
        .find(|d| d.backend_kind() == BackendKind::Cuda)
    else {
        return;
    };
    let checked = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(Mutex::new(Vec::new()));
    let mut g = Graph::new();
    let d = || ParamSet::defaults().unwrap();
    let k = g
        .add_operator(
            "kernel",
            Kernel {
                out: Output::default(),
                module: 0,
                function: 0,
                seed: 0,
            },
            d(),
        )
        .unwrap();
    let v = g
        .add_operator(
            "verify",
            Verify {
                input: Input::default(),
                next_seed: 0,
                checked: Arc::clone(&checked),
                bad: Arc::clone(&bad),
            },
            d(),
        )
        .unwrap();
    g.add_flow(
        k.out,
        v.input,
        ConnectionOptions::default().with_queue_depth(4),
    );
    // Two partitions: the kernel's thread and the verifier's are not the thread that
    // started the session, so neither has the context current unless the session made it.
    let mut options =
        CompileOptions::default().with_partitioning(holo_runtime::Partitioning::Authored(vec![
            holo_runtime::PartitionSpec::new("launch", vec!["kernel"]),
            holo_runtime::PartitionSpec::new("check", vec!["verify"]),
        ]));
    options
        .deployment
        .bind_tensor_output_device("kernel", "out", device.ordinal());
    let plan = compile(&g, options).unwrap();
    let session =
        RunSession::start(g, &plan, SessionOptions::frames(200).on_device(device)).unwrap();
    assert!(session.wait_idle(Duration::from_mins(1)));
    session.join().unwrap();
    assert_eq!(
        *bad.lock().unwrap(),
        Vec::new(),
        "(seed, index, byte) the kernel did not write"
    );
    assert!(checked.load(Ordering::Relaxed) > 0);
}
