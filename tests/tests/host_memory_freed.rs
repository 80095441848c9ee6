//! A pool's host memory is given back: a live-bytes counting allocator shows a session's
//! host pools and pass-through host tensors (`Tensor::from_host_vec`) freed once their
//! last handle is gone. Found by cargo-mutants (RELIABILITY.md, "Mutation check"): an
//! empty `Drop for Pool`, or one that skipped the pass-through bytes, survived every other
//! test, because nothing counted freed host memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use holo_runtime::{
    CompileOptions, ConnectionOptions, DType, EmitOptions, ExecutionContext, Graph, Input,
    Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor, TensorLoanRequest,
    compile, operator,
};

/// Bytes the process holds from the allocator, across every thread.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

#[allow(
    clippy::cast_possible_wrap,
    reason = "allocation sizes are far below isize::MAX"
)]
// SAFETY: every call forwards to `System` with the caller's arguments; the counter only
// observes the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const MIB: u64 = 1 << 20;

/// Emits 1 MiB host frames.
#[operator]
struct Big {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, bounds = 1048576)]
    frames: Output<Tensor>,
}

impl Operator for Big {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        if let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[MIB],
            dtype: DType::U8,
        }) {
            let frame = loan.write_host_and_commit(|b| b.fill(3))?;
            let _ = self.frames.emit(frame, EmitOptions::default());
        }
        Ok(())
    }
}

#[operator]
struct Drain {
    #[input(memory = host, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
}

impl Operator for Drain {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

fn run_once() -> u64 {
    let mut g = Graph::new();
    let big = g
        .add_operator(
            "big",
            Big {
                frames: Output::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let drain = g
        .add_operator(
            "drain",
            Drain {
                frames: Input::default(),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(
        big.frames,
        drain.frames,
        ConnectionOptions::DEFAULT.with_queue_depth(8),
    );
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let pool_bytes = plan
        .tensor_allocation("big.frames")
        .unwrap()
        .aggregate_bytes;
    let session = RunSession::start(g, &plan, SessionOptions::frames(20)).unwrap();
    assert!(session.wait_idle(Duration::from_mins(1)));
    session.join().unwrap();
    pool_bytes
}

// One test in this binary: the counter is process-wide, and another test's allocations on
// another thread would show in it.
#[test]
fn host_pools_and_pass_through_host_tensors_give_their_memory_back() {
    // Warm up what a first session makes once (thread-locals, lazy statics).
    run_once();
    let before = LIVE.load(Ordering::Relaxed);
    let pool_bytes = run_once();
    assert!(
        pool_bytes >= 8 * MIB,
        "the pool is big enough to see: {pool_bytes}"
    );
    let grown = LIVE.load(Ordering::Relaxed) - before;
    assert!(
        grown < isize::try_from(MIB).unwrap(),
        "{grown} bytes still held after a session whose pool had {pool_bytes}"
    );

    let before = LIVE.load(Ordering::Relaxed);
    for _ in 0..16 {
        let t = Tensor::from_host_vec(&[MIB], DType::U8, vec![1; 1 << 20]).unwrap();
        let copy = t.clone();
        drop(t);
        assert!(copy.data().unwrap().iter().all(|&b| b == 1));
    }
    let grown = LIVE.load(Ordering::Relaxed) - before;
    assert!(
        grown < isize::try_from(MIB).unwrap(),
        "{grown} bytes still held after 16 pass-through tensors of 1 MiB were dropped"
    );
}
