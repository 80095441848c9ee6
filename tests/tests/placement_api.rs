//! Graphs on either device API (docs/OPENCL.md, "Graphs on OpenCL"): a device is named in
//! the deployment binding as `cuda:N` or `opencl:N`; the neutral `memory = device` becomes
//! that API's kind in the plan; a kind of one API never lands on the other's device
//! (`PLACEMENT_API_MISMATCH` at compile, `DeviceUnavailable` at session start); the plan,
//! its JSON and its DOT show the device, its context and its queues; and one operator that
//! calls no API-specific function runs unchanged on the software device and on OpenCL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holo_runtime::device::{DeviceApi, DeviceBackend, DeviceId, SoftwareDevice};
use holo_runtime::plan::{DeviceContextRecord, ExecutionPlan};
use holo_runtime::{
    CompileOptions, DType, Diagnostics, EmitOptions, ErrorCode, ExecutionContext, Graph, Input,
    MemoryKind, Operator, Output, ParamSet, Result, RunSession, SessionOptions, Tensor,
    TensorLoanRequest, codes, compile, operator,
};

/// Fills frame k with `k % 200` on its compute stream or queue: calls nothing of one API.
#[operator]
struct Camera {
    #[output(storage = runtime_pool, memory = device, dtype = u8, rank = 1, bounds = 256)]
    frames: Output<Tensor>,
    k: u64,
}

impl Operator for Camera {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        let device = Arc::clone(ctx.device().expect("a device-active operator has a device"));
        let Ok(loan) = self.frames.allocate_tensor(TensorLoanRequest {
            shape: &[256],
            dtype: DType::U8,
        }) else {
            return Ok(());
        };
        let guard = loan.write(ctx.cuda_stream()?)?;
        #[allow(clippy::cast_possible_truncation, reason = "k % 200 fits in a byte")]
        let value = (self.k % 200) as u8;
        // SAFETY: the guard owns the slot until commit; the fill stays inside it and is
        // ordered before the readiness commit records.
        unsafe { device.memset_async(guard.device_ptr(), value, 256, guard.stream())? };
        let frame = guard.commit()?;
        self.k += 1;
        let _ = self.frames.emit(frame, EmitOptions::default());
        Ok(())
    }
}

/// Copies every frame to the host on its own stream or queue and checks its bytes.
#[operator]
struct Check {
    #[input(memory = device, dtype = u8, rank = 1)]
    frames: Input<Tensor>,
    host: Vec<u8>,
    good: Arc<AtomicU64>,
    bad: Arc<AtomicU64>,
}

impl Operator for Check {
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while let Some(t) = self.frames.receive() {
            t.copy_to_host(&mut self.host, ctx.cuda_stream()?)?;
            let first = self.host[0];
            if self.host.iter().all(|&b| b == first) && first < 200 {
                self.good.fetch_add(1, Ordering::Relaxed);
            } else {
                self.bad.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

/// A consumer that requires CUDA device memory.
#[operator]
struct CudaOnly {
    #[input(memory = cuda_device)]
    frames: Input<Tensor>,
}

impl Operator for CudaOnly {
    fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
        while self.frames.receive().is_some() {}
        Ok(())
    }
}

/// A source whose memory kind is fixed by its declaration (one operator type per kind).
macro_rules! fixed_source {
    ($name:ident, $kind:ident) => {
        #[operator]
        struct $name {
            #[output(storage = runtime_pool, memory = $kind, dtype = u8, rank = 1, bounds = 64)]
            frames: Output<Tensor>,
        }

        impl Operator for $name {
            fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
                Ok(())
            }
        }
    };
}
fixed_source!(CudaDeviceSource, cuda_device);
fixed_source!(CudaManagedSource, cuda_managed);
fixed_source!(PinnedSource, pinned);
fixed_source!(OpenClSource, opencl_device);

struct Counts {
    good: Arc<AtomicU64>,
    bad: Arc<AtomicU64>,
}

/// camera → check, the camera bound to `device`.
fn camera_graph(device: DeviceId) -> (Graph, CompileOptions, Counts) {
    let mut g = Graph::new();
    let cam = g
        .add_operator(
            "camera",
            Camera {
                frames: Output::default(),
                k: 0,
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    let counts = Counts {
        good: Arc::default(),
        bad: Arc::default(),
    };
    let check = g
        .add_operator(
            "check",
            Check {
                frames: Input::default(),
                host: vec![0; 256],
                good: Arc::clone(&counts.good),
                bad: Arc::clone(&counts.bad),
            },
            ParamSet::defaults().unwrap(),
        )
        .unwrap();
    g.add_flow(
        cam.frames,
        check.frames,
        holo_runtime::ConnectionOptions::default(),
    );
    let mut options =
        CompileOptions::default().with_partitioning(holo_runtime::Partitioning::Authored(vec![
            holo_runtime::PartitionSpec::new("cam", ["camera"]),
            holo_runtime::PartitionSpec::new("check", ["check"]),
        ]));
    options
        .deployment
        .bind_tensor_output_device("camera", "frames", device);
    (g, options, counts)
}

fn only(d: &Diagnostics, code: holo_runtime::DiagnosticCode) -> String {
    assert!(
        d.items.iter().all(|i| i.code == code),
        "expected only {code}: {d}"
    );
    assert!(d.has(code), "{d}");
    d.items[0].message.clone()
}

#[test]
fn a_neutral_device_output_becomes_the_bound_apis_kind_in_the_plan() {
    for (device, kind) in [
        (DeviceId::opencl(0), MemoryKind::OpenClDevice),
        (DeviceId::cuda(0), MemoryKind::CudaDevice),
    ] {
        let (g, options, _) = camera_graph(device);
        let plan = compile(&g, options).unwrap();
        let pool = plan.tensor_allocation("camera.frames").unwrap();
        assert_eq!((pool.memory_kind, pool.device), (kind, Some(device)));
        assert_eq!(plan.operator("camera").unwrap().device, Some(device));
        assert_eq!(plan.operator("check").unwrap().device, Some(device));
        let streams = plan.cuda_compute_streams();
        assert_eq!(streams.len(), 2, "one per partition");
        assert!(streams.iter().all(|s| s.device == device));
        let [record] = plan.devices() else {
            panic!("one device: {:?}", plan.devices())
        };
        assert_eq!((record.device, record.api), (device, device.api));
        assert_eq!(record.streams, [0, 1]);
        assert_eq!(record.pools, ["camera.frames"]);
        assert_eq!(
            (record.context, record.ordering_domain),
            match device.api {
                DeviceApi::OpenCl => (DeviceContextRecord::OpenClOwnUnlessGiven, "queue"),
                DeviceApi::Cuda => (DeviceContextRecord::CudaPrimaryUnlessGiven, "stream"),
            }
        );
    }
}

/// The JSON's device record, its pool and its streams, as a reader of `--plan-json` sees
/// them.
fn json_devices(plan: &ExecutionPlan) -> serde_json::Value {
    let json: serde_json::Value = serde_json::from_str(&plan.json()).unwrap();
    assert_eq!(
        json["tensor_allocations"][0]["memory_kind"],
        "opencl_device"
    );
    assert_eq!(json["tensor_allocations"][0]["device"], "opencl:0");
    assert_eq!(json["cuda_compute_streams"][0]["device"], "opencl:0");
    assert_eq!(json["operators"][0]["device"], "opencl:0");
    json["devices"].clone()
}

#[test]
fn the_plan_its_json_and_its_dot_show_the_device_its_context_and_its_queues() {
    let (g, options, _) = camera_graph(DeviceId::opencl(0));
    let plan = compile(&g, options).unwrap();
    assert_eq!(
        json_devices(&plan),
        serde_json::json!([{
            "device": "opencl:0",
            "api": "opencl",
            "context": "opencl_own_unless_given",
            "ordering_domain": "queue",
            "streams": [0, 1],
            "operators": [0, 1],
            "pools": ["camera.frames"]
        }])
    );
    let human = plan.render_human();
    assert!(
        human.contains(
            "devices:\n  opencl:0: context a cl_context holo creates (OpenClDevice::open), or the caller's (OpenClDevice::from_context); queues S0, S1; pools camera.frames\n"
        ),
        "{human}"
    );
    assert!(human.contains("streams S0 (queue) on opencl:0"), "{human}");
    assert!(
        human.contains("camera.frames: opencl_device u8 on opencl:0"),
        "{human}"
    );
    let dot = plan.dot();
    assert!(
        dot.contains("label=\"devices:\\lopencl:0: context a cl_context holo creates"),
        "{dot}"
    );
    assert!(dot.contains("S0 (queue) on opencl:0"), "{dot}");
    // CUDA keeps its words.
    let (g, options, _) = camera_graph(DeviceId::cuda(0));
    let human = compile(&g, options).unwrap().render_human();
    assert!(human.contains("streams S0 on cuda:0"), "{human}");
    assert!(
        human.contains("cuda:0: context the device's primary CUcontext"),
        "{human}"
    );
}

#[test]
fn a_kind_of_one_api_bound_to_the_others_device_is_refused_at_compile() {
    fn source<O: Operator + holo_runtime::OperatorPorts>(
        op: O,
        device: DeviceId,
    ) -> std::result::Result<ExecutionPlan, Diagnostics> {
        let mut g = Graph::new();
        g.add_operator("src", op, ParamSet::defaults().unwrap())
            .unwrap();
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("src", "frames", device);
        compile(&g, options)
    }
    let opencl = DeviceId::opencl(0);
    let cases = [
        (
            source(
                CudaDeviceSource {
                    frames: Output::default(),
                },
                opencl,
            ),
            "cuda_device",
        ),
        (
            source(
                CudaManagedSource {
                    frames: Output::default(),
                },
                opencl,
            ),
            "cuda_managed",
        ),
        (
            source(
                PinnedSource {
                    frames: Output::default(),
                },
                opencl,
            ),
            "pinned",
        ),
        (
            source(
                OpenClSource {
                    frames: Output::default(),
                },
                DeviceId::cuda(0),
            ),
            "opencl_device",
        ),
    ];
    for (result, kind) in cases {
        let d = result.unwrap_err();
        let message = only(&d, codes::PLACEMENT_API_MISMATCH);
        assert!(
            message.starts_with(&format!("the output is {kind} memory, which its device")),
            "{message}"
        );
        assert_eq!(d.items[0].operator.as_deref(), Some("src"));
        assert_eq!(d.items[0].port.as_deref(), Some("frames"));
    }
    // Each kind on its own API compiles.
    for plan in [
        source(
            CudaDeviceSource {
                frames: Output::default(),
            },
            DeviceId::cuda(0),
        ),
        source(
            PinnedSource {
                frames: Output::default(),
            },
            DeviceId::cuda(0),
        ),
        source(
            OpenClSource {
                frames: Output::default(),
            },
            opencl,
        ),
    ] {
        plan.unwrap();
    }
}

#[test]
fn a_cuda_consumer_fed_by_a_device_output_placed_on_opencl_is_refused() {
    let build = |device: DeviceId| {
        let mut g = Graph::new();
        let cam = g
            .add_operator(
                "camera",
                Camera {
                    frames: Output::default(),
                    k: 0,
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        let sink = g
            .add_operator(
                "cuda_sink",
                CudaOnly {
                    frames: Input::default(),
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(
            cam.frames,
            sink.frames,
            holo_runtime::ConnectionOptions::default(),
        );
        let mut options = CompileOptions::default();
        options
            .deployment
            .bind_tensor_output_device("camera", "frames", device);
        compile(&g, options)
    };
    let d = build(DeviceId::opencl(0)).unwrap_err();
    let message = only(&d, codes::PLACEMENT_API_MISMATCH);
    assert_eq!(
        message,
        "camera.frames is `device` memory placed on opencl:0, so it delivers opencl_device where cuda_device is required"
    );
    assert_eq!(d.items[0].operator.as_deref(), Some("cuda_sink"));
    // On CUDA the same graph compiles: `device` became `cuda_device`.
    build(DeviceId::cuda(0)).unwrap();
}

#[test]
fn a_session_refuses_a_plan_for_the_other_api_before_anything_starts() {
    // An OpenCL plan on the software device (which stands in for CUDA).
    let (g, options, _) = camera_graph(DeviceId::opencl(0));
    let plan = compile(&g, options).unwrap();
    let software: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let e = RunSession::start(
        g,
        &plan,
        SessionOptions::frames(1).on_device(Arc::clone(&software)),
    )
    .expect_err("refused");
    assert_eq!(e.code(), ErrorCode::DeviceUnavailable);
    assert_eq!(
        e.message(),
        "the plan places work on device opencl:0, but the session's device is software 0: one session drives one device"
    );
    let live = software.counters().snapshot();
    assert_eq!(
        (live.stream_create, live.event_create, live.alloc),
        (0, 0, 0),
        "nothing was created"
    );
}

#[test]
fn one_operator_runs_unchanged_on_the_software_device_and_on_opencl() {
    let mut devices: Vec<Arc<dyn DeviceBackend>> = vec![SoftwareDevice::new()];
    match holo_runtime::device::OpenClDevice::open(0) {
        Ok(cl) => devices.push(cl),
        Err(e) => assert_ne!(
            std::env::var("HOLO_REQUIRE_DEVICE").as_deref(),
            Ok("opencl"),
            "HOLO_REQUIRE_DEVICE=opencl but OpenCL device 0 did not open: {e}"
        ),
    }
    for device in devices {
        let id = device.device_id();
        let (g, options, counts) = camera_graph(id);
        let plan = compile(&g, options).unwrap();
        assert_eq!(
            plan.tensor_allocation("camera.frames").unwrap().memory_kind,
            id.api.resolve(MemoryKind::Device)
        );
        let session = RunSession::start(
            g,
            &plan,
            SessionOptions::frames(40).on_device(Arc::clone(&device)),
        )
        .unwrap();
        assert!(session.wait_idle(Duration::from_mins(1)), "{id}");
        session.join().unwrap();
        let good = counts.good.load(Ordering::Relaxed);
        assert!(good > 0, "{id}: no frame arrived");
        assert_eq!(counts.bad.load(Ordering::Relaxed), 0, "{id}");
    }
}

#[test]
fn an_opencl_session_refuses_a_cuda_plan() {
    let Ok(cl) = holo_runtime::device::OpenClDevice::open(0) else {
        return;
    };
    let (g, options, _) = camera_graph(DeviceId::cuda(0));
    let plan = compile(&g, options).unwrap();
    let e =
        RunSession::start(g, &plan, SessionOptions::frames(1).on_device(cl)).expect_err("refused");
    assert_eq!(e.code(), ErrorCode::DeviceUnavailable);
    assert!(
        e.message().starts_with(
            "the plan places work on device cuda:0, but the session's device is opencl 0"
        ),
        "{e}"
    );
}
