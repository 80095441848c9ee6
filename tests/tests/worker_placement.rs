//! holo's worker threads do not inherit the CPU pin of the thread that starts them (the
//! seed: the retirement workers "restore the process CPU set captured when their
//! libraries load, excluding kernel-isolated CPUs (isolcpus) when any other CPU remains,
//! rather than inheriting an importing operator's CPU pin").
//!
//! A thread pinned to one CPU starts, in turn, the process's foreign retirement worker
//! (by a device-memory DLPack import) and a session's retirement worker (by starting a
//! session with a device pool), and a cross-process export's listener thread; each worker's allowed CPUs, read from
//! `/proc/self/task/<tid>/status`, are the process's set, not the pin. Linux only.
#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::time::Duration;

use holo_runtime::{RunSession, SessionOptions, Tensor};
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// A kernel CPU list (`0-3,8`), as `/proc` and `/sys` write it.
fn parse_list(text: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

fn cpus(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
}

/// The CPUs a worker must run on: this process's set (nothing here pinned the test's
/// thread before it read it), less the kernel-isolated CPUs unless none would remain.
fn expected() -> Vec<usize> {
    let all = cpus(&sched_getaffinity(None).unwrap());
    let isolated = std::fs::read_to_string("/sys/devices/system/cpu/isolated")
        .map(|s| parse_list(&s))
        .unwrap_or_default();
    let rest: Vec<usize> = all
        .iter()
        .copied()
        .filter(|c| !isolated.contains(c))
        .collect();
    if rest.is_empty() { all } else { rest }
}

/// The allowed CPUs of every thread of this process named `name`.
fn threads_named(name: &str) -> Vec<Vec<usize>> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        found.push(parse_list(list));
    }
    found
}

/// Runs `f` on a thread pinned to the first CPU of this process's set.
fn on_a_pinned_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let first = cpus(&sched_getaffinity(None).unwrap())[0];
    std::thread::spawn(move || {
        let mut one = CpuSet::new();
        one.set(first);
        sched_setaffinity(None, &one).unwrap();
        f()
    })
    .join()
    .unwrap()
}

#[test]
fn worker_threads_run_on_the_process_cpus_not_on_their_starters_pin() {
    let expected = expected();
    assert_eq!(
        holo_runtime::cpus::worker_cpus(),
        Some(expected.clone()),
        "the placement holo reports"
    );
    // CUDA device 0 where it opens, else the software device.
    let device = holo_tests::ipc_frames::cuda_or_software();

    // 1. The process's foreign retirement worker, started by the first device-memory
    //    import, on a pinned thread.
    let d = Arc::clone(&device);
    let imported = on_a_pinned_thread(move || {
        let stream = d.create_stream().unwrap();
        let (dl, _deleted) =
            holo_tests::foreign::foreign_device_bytes(&d, 64, stream, Duration::ZERO, 0, 1);
        Tensor::from_dlpack(dl, Some(&d)).unwrap()
    });
    assert_eq!(
        threads_named("holo-retire"),
        vec![expected.clone()],
        "the foreign retirement worker, started from a thread pinned to one CPU"
    );

    // 2. A session's retirement worker, the session started on a pinned thread.
    let d = Arc::clone(&device);
    let session = on_a_pinned_thread(move || holo_tests::device_pipeline::device_session(&d));
    let workers = threads_named("holo-retire");
    assert_eq!(
        workers,
        vec![expected.clone(), expected.clone()],
        "the foreign and the session's retirement workers"
    );
    session.stop();
    session.join().unwrap();
    drop(imported);

    // 3. A cross-process export's listener thread, the exporting session started on a
    //    pinned thread.
    let session = on_a_pinned_thread(|| {
        let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (graph, plan, _) = holo_tests::ipc_frames::exporting_graph(
            "cam",
            0,
            go,
            holo_runtime::TopicOptions::DEFAULT,
        )
        .unwrap();
        let namespace = format!("holo-worker-placement-{}", std::process::id());
        RunSession::start(
            graph,
            &plan,
            SessionOptions::default().with_ipc_namespace(namespace),
        )
        .unwrap()
    });
    assert_eq!(
        threads_named("holo-ipc-cam"),
        vec![expected],
        "the export's listener thread"
    );
    session.stop();
    session.join().unwrap();
}
