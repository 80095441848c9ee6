//! Every example as a user runs it: a process with the standard flags.
//!
//! A flag that prints a document prints exactly that document on stdout (`--plan-json`
//! parses as one JSON value, `--plan-dot` is one `digraph { … }`, `--print-plan` is the
//! plan's text and nothing else), with or without a run;
//! human text goes to stderr then. A bad flag value is a usage error, never a panic.
//!
//! `cargo test` builds every example before it runs any test, and this test runs the
//! binaries it built (`target/<profile>/examples/<name>`). Selecting this test alone
//! (`--test cli`) does not build the examples: build them first with
//! `cargo build -p holo-examples --examples`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every example, as named in `Cargo.toml`.
const EXAMPLES: [&str; 11] = [
    "params",
    "ipc_producer",
    "cudarc_interop",
    "device_array_handoff",
    "device_array_opencl",
    "dlpack_roundtrip",
    "tensors_in_depth",
    "tensors_in_depth_cuda",
    "fork_streams",
    "derived_tensor_pool_capacity",
    "rate_aware_ports",
];

/// Examples behind a cargo feature, with their own command line: not built by
/// `cargo test`, so not run here (`trace_timeline`: `--features trace`; CI lints it).
const FEATURE_EXAMPLES: [&str; 1] = ["trace_timeline"];

/// Examples that are no graph, with their own command line (`ipc_consumer <catalog>`: the
/// consumer `ipc_producer` starts, which its run here exercises).
const CLIENT_EXAMPLES: [&str; 1] = ["ipc_consumer"];

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("{name}.rs"))
}

/// The example's binary beside this test's (`…/deps/cli-HASH` → `…/examples/NAME`).
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lies in <target>/<profile>/deps");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let built = std::fs::metadata(&path).and_then(|m| m.modified());
    let Ok(built) = built else {
        panic!(
            "the example binary {} is missing: `cargo test` builds every example, but a \
             single `--test` does not; run `cargo build -p holo-examples --examples` first",
            path.display()
        );
    };
    let edited = std::fs::metadata(source(name))
        .and_then(|m| m.modified())
        .expect("the example's source");
    assert!(
        built >= edited,
        "the example binary {} is older than {}.rs; run `cargo build -p holo-examples --examples`",
        path.display(),
        name
    );
    path
}

fn run(name: &str, args: &[&str]) -> Output {
    let out = Command::new(binary(name))
        .args(args)
        // What goes where on stdout does not depend on the device: run on whichever opens
        // (CUDA device 0, else the software device), even under HOLO_REQUIRE_DEVICE=cuda.
        .env_remove("HOLO_REQUIRE_DEVICE")
        .output()
        .expect("the example starts");
    assert_ne!(
        out.status.code(),
        Some(101),
        "{name} {args:?} panicked:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("UTF-8 output")
}

#[test]
fn the_list_names_every_example() {
    let mut found: Vec<String> = std::fs::read_dir(env!("CARGO_MANIFEST_DIR"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            (path.extension()? == "rs").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    found.sort();
    let mut listed: Vec<String> = EXAMPLES
        .iter()
        .chain(&FEATURE_EXAMPLES)
        .chain(&CLIENT_EXAMPLES)
        .map(|&s| s.to_owned())
        .collect();
    listed.sort();
    assert_eq!(found, listed);
}

fn assert_one_json_document(name: &str, args: &[&str]) -> serde_json::Value {
    let out = run(name, args);
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        text(&out.stderr)
    );
    match serde_json::from_str::<serde_json::Value>(text(&out.stdout)) {
        Ok(plan) => plan,
        Err(e) => panic!(
            "{name} {args:?}: stdout is not one JSON document ({e}):\n{}",
            text(&out.stdout)
        ),
    }
}

fn assert_one_dot_document(name: &str, args: &[&str]) {
    let out = run(name, args);
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        text(&out.stderr)
    );
    let dot = text(&out.stdout);
    assert!(
        dot.starts_with("digraph") && dot.trim_end().ends_with('}'),
        "{name} {args:?}: stdout is not one DOT graph:\n{dot}"
    );
    assert_eq!(
        dot.matches("digraph").count(),
        1,
        "{name} {args:?}: one graph:\n{dot}"
    );
}

#[test]
fn plan_json_prints_exactly_the_plan_on_stdout() {
    for name in EXAMPLES {
        let plan = assert_one_json_document(name, &["--plan-json"]);
        assert!(plan.is_object(), "{name}: {plan}");
    }
}

#[test]
fn plan_dot_prints_exactly_the_graph_on_stdout() {
    for name in EXAMPLES {
        assert_one_dot_document(name, &["--plan-dot"]);
    }
}

#[test]
fn with_a_run_the_document_stays_alone_on_stdout_and_the_summary_goes_to_stderr() {
    for name in EXAMPLES {
        assert_one_json_document(name, &["--plan-json", "--frames", "3"]);
        assert_one_dot_document(name, &["--plan-dot", "--frames", "3"]);
        let out = run(name, &["--plan-json", "--frames", "3"]);
        assert!(
            text(&out.stderr).contains("run summary: "),
            "{name}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn print_plan_prints_exactly_the_plan_text_on_stdout() {
    for name in EXAMPLES {
        let alone = run(name, &["--print-plan"]);
        assert!(alone.status.success(), "{name}: {}", text(&alone.stderr));
        let plan = text(&alone.stdout);
        assert!(
            plan.starts_with("execution plan "),
            "{name}: stdout is not the plan:\n{plan}"
        );
        assert_eq!(
            plan.matches("execution plan ").count(),
            1,
            "{name}:\n{plan}"
        );
        // With a run, stdout is the same document, byte for byte: the title, the device
        // line and the summary went to stderr.
        let with_run = run(name, &["--print-plan", "--frames", "3"]);
        assert!(
            with_run.status.success(),
            "{name}: {}",
            text(&with_run.stderr)
        );
        assert_eq!(text(&with_run.stdout), plan, "{name}");
        assert!(
            text(&with_run.stderr).contains("run summary: "),
            "{name}: {}",
            text(&with_run.stderr)
        );
    }
}

/// The examples whose configuration binds their device (`[deployment] device = N`).
const DEVICE_BOUND: [&str; 6] = [
    "cudarc_interop",
    "device_array_handoff",
    "dlpack_roundtrip",
    "fork_streams",
    "tensors_in_depth_cuda",
    "device_array_opencl",
];

#[test]
fn a_device_this_machine_lacks_is_an_error_naming_the_config_field() {
    let config = std::env::temp_dir().join(format!("holo-device-99-{}.toml", std::process::id()));
    std::fs::write(&config, "[deployment]\ndevice = 99\n").unwrap();
    let path = config.to_str().unwrap();
    for name in DEVICE_BOUND {
        // Without an OpenCL device the OpenCL example runs on the software device, which
        // it says: a machine without OpenCL, not a wrong ordinal.
        if name == "device_array_opencl"
            && !holo_runtime::device::opencl_device_count().is_ok_and(|n| n > 0)
        {
            continue;
        }
        let out = run(name, &["--config", path, "--frames", "2"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.starts_with("error: DeviceUnavailable: ")
                && err.contains(&format!("(at {path}: deployment.device"))
                && err.contains("99"),
            "{name}: {err}"
        );
        assert!(
            !err.contains("run summary"),
            "{name}: nothing ran on another device: {err}"
        );
    }
    let _ = std::fs::remove_file(&config);
}

#[test]
fn two_documents_on_stdout_are_a_usage_error_naming_both_flags() {
    for name in EXAMPLES {
        let out = run(name, &["--plan-json", "--plan-dot"]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(out.stdout.is_empty(), "{name}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(
            err.contains("InvalidArgument")
                && err.contains("--plan-json")
                && err.contains("--plan-dot"),
            "{name}: {err}"
        );
    }
}

#[test]
fn an_out_of_range_duration_is_a_usage_error_not_a_panic() {
    for name in EXAMPLES {
        for secs in ["1e300", "1e19", "NaN", "-1"] {
            let out = run(name, &["--duration", secs]);
            assert_eq!(out.status.code(), Some(1), "{name} --duration {secs}");
            let err = text(&out.stderr);
            assert!(
                err.starts_with("error: InvalidArgument: --duration "),
                "{name} --duration {secs}: {err}"
            );
        }
    }
}

#[test]
fn params_takes_the_standard_flags() {
    let out = run("params", &["--print-plan", "--frames", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("run summary: "),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("resize"),
        "{}",
        text(&out.stdout)
    );

    let out = run("params", &["--duration", "0.05"]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let config = std::env::temp_dir().join(format!("holo-params-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        "[resize]\noutput_shape = [2, 2, 3]\n[resize.geometry]\nwidth = 2\nheight = 2\n",
    )
    .unwrap();
    let out = run(
        "params",
        &["--config", config.to_str().unwrap(), "--plan-json"],
    );
    let _ = std::fs::remove_file(&config);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_str(text(&out.stdout)).unwrap();
    assert!(plan.to_string().contains("resize"), "{plan}");

    // The example's own flag prints its own document, alone.
    let out = run("params", &["--schema"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let schema: serde_json::Value = serde_json::from_str(text(&out.stdout)).unwrap();
    assert!(
        schema.to_string().contains("com.example.ResizeParams"),
        "{schema}"
    );
}

/// `run` with OS-string arguments and extra environment.
fn run_os(name: &str, args: &[&std::ffi::OsStr], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(binary(name));
    cmd.args(args).env_remove("HOLO_REQUIRE_DEVICE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the example starts");
    assert_ne!(
        out.status.code(),
        Some(101),
        "{name} {args:?} panicked:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A path need not be UTF-8: `std::env::args` panicked on one (exit 101).
#[test]
fn a_path_that_is_not_utf8_is_an_error_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::OsStr::from_bytes(b"/nonexistent/\xff.toml");
    let out = run_os("ipc_consumer", &[path], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("error: "),
        "{}",
        text(&out.stderr)
    );
    let out = run_os(
        "ipc_producer",
        &[std::ffi::OsStr::new("--consume"), path],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("consumer: error: "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The producer could not write the catalog its consumer reads: it said so and exited 0.
#[test]
fn ipc_producer_fails_when_its_consumer_cannot_start() {
    let out = run_os(
        "ipc_producer",
        &[std::ffi::OsStr::new("--frames"), std::ffi::OsStr::new("20")],
        &[
            ("TMPDIR", "/nonexistent/holo-dir"),
            ("HOLO_DEVICE", "software"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cannot write the endpoint catalog"),
        "{}",
        text(&out.stderr)
    );
}

/// `--schema` prints the same document whatever the run flags: giving one is refused.
#[test]
fn params_schema_refuses_the_run_flags_it_would_ignore() {
    for flags in [
        &["--schema", "--frames", "3"][..],
        &["--schema", "--duration", "1"],
    ] {
        let out = run("params", flags);
        assert_eq!(out.status.code(), Some(1), "{flags:?}");
        assert!(
            text(&out.stderr).contains("--schema prints the parameter schema"),
            "{}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
}

/// The client's stream is a holo backend's: the slot's last handle records its release
/// on it again, so it must outlive the session. The example destroyed it when its time
/// ran out, while the session still ran, and failed about one run in two with
/// `InvalidArgument` ("not a live stream").
#[test]
fn device_array_handoff_ends_cleanly_when_its_time_runs_out() {
    for _ in 0..6 {
        let out = run("device_array_handoff", &["--duration", "0.1"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
}
