//! Zero heap allocations per frame in steady state on the device path, on every backend
//! `test_backends()` returns: a fenced fork (readiness records, consumer stream waits,
//! release registration, retirement polling) and a fused chain, counted process-wide with a
//! counting global allocator. One test function: the count is process-wide.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holo_runtime::__test_support::test_backends;
use holo_runtime::device::DeviceBackend;
use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph,
    Input, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, compile, operator,
};

#[global_allocator]
static GLOBAL: holo_tests::counting::Counting = holo_tests::counting::Counting;

/// Fills each frame, by turns through the operator's device access
/// (`ctx.cuda()?.memset_async`, no handle check) and through the backend's checked call.
#[operator]
struct Fill {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    out: Output<Tensor>,
    turn: bool,
}

impl Operator for Fill {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let cuda = ctx.cuda()?;
        let loan = match self.out.allocate_tensor(TensorLoanRequest {
            shape: &[256],
            dtype: DType::U8,
        }) {
            Ok(l) => l,
            Err(e) if e.code() == ErrorCode::ResourceExhausted => return Ok(()),
            Err(e) => return Err(e),
        };
        let w = loan.write(cuda.stream())?;
        self.turn = !self.turn;
        // SAFETY: the writer owns the slot; the fill stays inside it.
        unsafe {
            if self.turn {
                cuda.memset_async(w.device_ptr(), 1, w.byte_size())?;
            } else {
                cuda.backend()
                    .memset_async(w.device_ptr(), 1, w.byte_size(), w.stream())?;
            }
        }
        match self.out.emit(w.commit()?, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// Receives on its own stream and drops (the release path).
#[operator]
struct Take {
    #[input(memory = device)]
    input: Input<Tensor>,
    seen: Arc<AtomicU64>,
}

impl Operator for Take {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.input.receive() {
            drop(t);
            self.seen.fetch_add(1, Ordering::Release);
        }
        Ok(())
    }
}

fn wait_until(counter: &AtomicU64, at_least: u64) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while counter.load(Ordering::Acquire) < at_least {
        assert!(
            Instant::now() < deadline,
            "the pipeline stopped making progress"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn allocations_per_2000_frames(device: &Arc<dyn DeviceBackend>, consumers: usize) -> u64 {
    let mut g = Graph::new();
    let f = g
        .add_operator(
            "fill",
            Fill {
                out: Output::default(),
                turn: false,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let counters: Vec<Arc<AtomicU64>> = (0..consumers)
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect();
    for (i, seen) in counters.iter().enumerate() {
        let t = g
            .add_operator(
                &format!("take{i}"),
                Take {
                    input: Input::default(),
                    seen: Arc::clone(seen),
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(
            f.out,
            t.input,
            ConnectionOptions::default().with_queue_depth(2),
        );
    }
    let mut options = CompileOptions::default();
    options
        .deployment
        .bind_tensor_output_device("fill", "out", device.device_id());
    let plan = compile(&g, options).unwrap();
    assert_eq!(
        plan.edges().iter().filter(|e| e.fusion.is_some()).count(),
        usize::from(consumers == 1)
    );
    let session = RunSession::start(
        g,
        &plan,
        SessionOptions::default().on_device(Arc::clone(device)),
    )
    .unwrap();
    for c in &counters {
        wait_until(c, 300);
    }
    let mut marks = Vec::with_capacity(counters.len());
    let before = holo_tests::counting::allocations();
    marks.extend(counters.iter().map(|c| c.load(Ordering::Acquire) + 2_000));
    for (c, m) in counters.iter().zip(&marks) {
        wait_until(c, *m);
    }
    let after = holo_tests::counting::allocations();
    session.stop();
    session.join().unwrap();
    after - before
}

#[test]
fn steady_state_device_frames_allocate_nothing() {
    holo_tests::counting::assert_counting();
    for device in test_backends() {
        let name = device.backend_kind().name();
        assert_eq!(
            allocations_per_2000_frames(&device, 1),
            0,
            "{name}: fused chain"
        );
        assert_eq!(
            allocations_per_2000_frames(&device, 2),
            0,
            "{name}: fenced fork"
        );
    }
}
