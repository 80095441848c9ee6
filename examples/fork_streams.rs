//! `fork_streams`: the seed's fork, A → {B, C}, and the streams the plan gives it.
//!
//! The automatic partitioner splits a fork's successor legs into partitions of their own,
//! and the default `PerPartitionDevice` policy gives the three partitions three streams
//! (S_A, S_B, S_C) on the bound device, so B and C can submit independently. The example
//! prints the partitions and streams under both policies — the default and
//! `SharedProcessDevice` (one stream per device) — then runs the configured one: A fills a
//! device frame on S_A; B and C each wait for it on their own stream and check it there.
//! Under `SharedProcessDevice` the three partitions submit on one stream, so the plan gives
//! them one thread (serial GPU submission: several threads on one stream would serialize
//! in the driver) and fuses A's fan-out — both legs are on A's stream, so no event orders
//! anything.
//! With no CUDA device it says so and runs on holo's software device.
//!
//! ```text
//! cargo run -p holo-examples --example fork_streams -- [--config FILE.toml] [--frames N] …
//! ```

use std::process::ExitCode;

use holo_runtime::app::{App, AppArgs, HumanOutput};
use holo_runtime::plan::{CudaComputeStreamPolicy, ExecutionPlan};
use holo_runtime::{
    CompileOptions, ConnectionOptions, CudaExecutionOptions, DType, EmitOptions, Error, ErrorCode,
    ExecutionContext, Graph, Input, Operator, Output, ParamSchema, ParamSet, Result, Tensor,
    TensorLoanRequest, compile, operator,
};

/// Placement and stream policy.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.ForkStreams.Deployment", version = 1)]
struct DeploymentParams {
    /// The CUDA device ordinal A's pool is bound to.
    #[param(default = 0)]
    device: u32,
    /// Use one stream per device instead of one per partition.
    #[param(default = false)]
    shared_process_device: bool,
}

/// A's parameters.
#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.ForkStreams.A", version = 1)]
struct AParams {
    /// The fill byte.
    #[param(default = 7)]
    fill: u8,
}

/// A: fills a 256-byte device frame on its stream.
#[operator(params = AParams)]
struct A {
    #[output(storage = runtime_pool, memory = cuda_device, dtype = u8, rank = 1, bounds = 256)]
    frame: Output<Tensor>,
    fill: u8,
}

impl Operator for A {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let stream = ctx.cuda_stream()?;
        let device = ctx
            .device()
            .ok_or_else(|| Error::new(ErrorCode::DeviceUnavailable, "no device"))?;
        let Ok(loan) = self.frame.allocate_tensor(TensorLoanRequest {
            shape: &[256],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let w = loan.write(stream)?;
        // SAFETY: the writer owns the slot until commit; the fill stays inside it.
        unsafe { device.memset_async(w.device_ptr(), self.fill, w.byte_size(), w.stream())? };
        match self.frame.emit(w.commit()?, EmitOptions::default()) {
            Err(e) if e.code() == ErrorCode::Backpressured => Ok(()),
            other => other,
        }
    }
}

/// B and C: check each frame on their own stream.
#[operator]
struct Leg {
    #[input(memory = cuda_device)]
    frame: Input<Tensor>,
    expect: u8,
    host: Vec<u8>,
}

impl Operator for Leg {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frame.receive() {
            let n = t.byte_size();
            t.copy_to_host(&mut self.host[..n], ctx.cuda_stream()?)?;
            if self.host[..n].iter().any(|&b| b != self.expect) {
                return Err(Error::new(
                    ErrorCode::ProtocolError,
                    "a leg saw bytes other than A's fill",
                ));
            }
        }
        Ok(())
    }
}

fn graph(fill: u8, a_params: ParamSet<AParams>) -> Result<Graph> {
    let mut g = Graph::new();
    let a = g.add_operator(
        "A",
        A {
            frame: Output::default(),
            fill,
        },
        a_params,
    )?;
    for name in ["B", "C"] {
        let leg = g.add_operator(
            name,
            Leg {
                frame: Input::default(),
                expect: fill,
                host: vec![0; 256],
            },
            ParamSet::defaults()?,
        )?;
        g.add_flow(a.frame, leg.frame, ConnectionOptions::default());
    }
    Ok(g)
}

fn options(device: u32, policy: CudaComputeStreamPolicy) -> CompileOptions {
    let mut o = CompileOptions::default()
        .with_cuda_execution(CudaExecutionOptions::default().with_compute_stream_policy(policy));
    o.deployment.bind_tensor_output_device("A", "frame", device);
    o
}

fn print_streams(title: &str, plan: &ExecutionPlan, out: HumanOutput) {
    out.println(format_args!(
        "{title}: {} streams",
        plan.cuda_compute_streams().len()
    ));
    for p in plan.partitions() {
        let ops: Vec<&str> = p
            .operators
            .iter()
            .map(|&o| plan.operators()[o as usize].name.as_str())
            .collect();
        let streams: Vec<String> = plan
            .cuda_compute_streams()
            .iter()
            .filter(|s| s.partitions.contains(&p.id))
            .map(|s| format!("S{} on {}", s.id, s.device))
            .collect();
        out.println(format_args!(
            "  partition {} ({}): {} → {}, thread {}",
            p.name,
            p.reason,
            ops.join(", "),
            streams.join(", "),
            p.thread
        ));
    }
}

fn build(app: &mut App) -> Result<(Graph, CompileOptions)> {
    let deployment = app.params::<DeploymentParams>("deployment")?;
    app.device_binding_from("deployment.device");
    let a = app.params::<AParams>("a")?;
    let fill = a.values().fill;
    let device = deployment.values().device;
    let compile_err =
        |d: holo_runtime::Diagnostics| Error::new(ErrorCode::InvalidArgument, d.to_string());
    let (policy, other) = if deployment.values().shared_process_device {
        (
            CudaComputeStreamPolicy::SharedProcessDevice,
            CudaComputeStreamPolicy::PerPartitionDevice,
        )
    } else {
        (
            CudaComputeStreamPolicy::PerPartitionDevice,
            CudaComputeStreamPolicy::SharedProcessDevice,
        )
    };
    // The other policy is compiled here only to be shown; the configured one is the plan
    // the application compiles and runs, printed from there.
    let alternative =
        compile(&graph(fill, a.clone())?, options(device, other)).map_err(compile_err)?;
    print_streams(
        &format!("{other:?} (not run)"),
        &alternative,
        app.human_output(),
    );
    app.on_plan(move |plan, out| {
        print_streams(&format!("{policy:?} (configured, runs)"), plan, out);
    });
    Ok((graph(fill, a)?, options(device, policy)))
}

fn main() -> ExitCode {
    App::main(
        AppArgs::from_env(),
        include_str!("config/fork_streams.toml"),
        build,
    )
}
