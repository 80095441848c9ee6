//! A partition thread that cannot be spawned fails `RunSession::start` with
//! `ResourceExhausted`, after every started operator was stopped and the retirement worker
//! was shut down: nothing ran `compute`, no holo thread is left. Its own test binary: the
//! fault hook is process-wide.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{holo_threads, holo_threads_settled};
use holo_runtime::device::{DeviceBackend, SoftwareDevice};
use holo_runtime::{
    ConnectionOptions, DType, EmitOptions, ErrorCode, ExecutionContext, Graph, Input,
    LifecycleContext, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, compile, operator,
};

#[derive(Default)]
struct Calls {
    start: AtomicU64,
    compute: AtomicU64,
    stop: AtomicU64,
}

#[operator]
struct DevSource {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 64)]
    frames: Output<Tensor>,
    calls: Arc<Calls>,
}

impl Operator for DevSource {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.calls.start.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.calls.compute.fetch_add(1, Ordering::SeqCst);
        let stream = ctx.cuda_stream()?;
        let loan = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[64],
            dtype: DType::U8,
        })?;
        let _ = self
            .frames
            .emit(loan.write(stream)?.commit()?, EmitOptions::default());
        Ok(())
    }
    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.calls.stop.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[operator]
struct Drain {
    #[input(memory = cuda_device)]
    frames: Input<Tensor>,
    calls: Arc<Calls>,
}

impl Operator for Drain {
    fn start(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.calls.start.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        self.calls.compute.fetch_add(1, Ordering::SeqCst);
        while self.frames.receive().is_some() {}
        Ok(())
    }
    fn stop(&mut self, _ctx: &mut LifecycleContext<'_>) -> Result<()> {
        self.calls.stop.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn a_partition_thread_that_cannot_spawn_stops_everything_started() {
    let device: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    for failing in [0, 1, 2] {
        let calls = Arc::new(Calls::default());
        let mut g = Graph::new();
        let d = || ParamSet::defaults().unwrap();
        let s = g
            .add_operator(
                "src",
                DevSource {
                    frames: Output::default(),
                    calls: Arc::clone(&calls),
                },
                d(),
            )
            .unwrap();
        for i in 0..2 {
            let k = g
                .add_operator(
                    &format!("drain{i}"),
                    Drain {
                        frames: Input::default(),
                        calls: Arc::clone(&calls),
                    },
                    d(),
                )
                .unwrap();
            g.add_flow(s.frames, k.frames, ConnectionOptions::default());
        }
        let mut options = common::partitioned(&[&["src"], &["drain0"], &["drain1"]]);
        options
            .deployment
            .bind_tensor_output_device("src", "frames", device.ordinal());
        let plan = compile(&g, options).unwrap();
        let threads_before = holo_threads();
        holo_runtime::__test_support::fail_partition_spawn(Some(failing));
        let e = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(10).on_device(Arc::clone(&device)),
        )
        .unwrap_err();
        holo_runtime::__test_support::fail_partition_spawn(None);
        assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{e}");
        assert!(
            e.to_string()
                .contains("cannot spawn the thread of partition"),
            "{e}"
        );
        assert_eq!(calls.start.load(Ordering::SeqCst), 3);
        assert_eq!(
            calls.stop.load(Ordering::SeqCst),
            3,
            "every started operator stopped"
        );
        assert_eq!(
            calls.compute.load(Ordering::SeqCst),
            0,
            "nothing ran compute"
        );
        assert_eq!(
            holo_threads_settled(threads_before),
            threads_before,
            "no partition thread and no retirement worker left running"
        );
    }
}
