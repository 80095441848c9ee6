//! Where holo's own worker threads run.
//!
//! The seed ("Stream roles", on the retirement workers): they "restore the process CPU set
//! captured when their libraries load, excluding kernel-isolated CPUs (isolcpus) when any
//! other CPU remains, rather than inheriting an importing operator's CPU pin".
//!
//! A thread inherits the CPU mask of the thread that spawns it. holo spawns its workers —
//! the retirement workers (a session's, and the process's foreign one, started by the
//! first device-memory DLPack import), the cross-process listener, connection and bridge
//! threads — from whatever thread calls it: `RunSession::start` (which also runs every
//! operator's `start`), or an operator's `compute` on a partition thread. A real-time
//! application pins such threads to a core of their own, often a kernel-isolated one; a
//! worker that inherited that pin would compete with them for it. So each worker, as its
//! first act, moves itself to [`worker_cpus`]: the CPUs the process could use when this
//! library was loaded (read before `main`, before any user code could pin a thread), less
//! the kernel-isolated ones unless nothing else remains.
//!
//! Partition threads are not workers: they run operator code and keep the mask of the
//! thread that starts the session (pin that thread, or pin a partition from its operator's
//! first `compute`). There is no worker-placement option, as in the seed.

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::OnceLock;

    use rustix::thread::CpuSet;

    /// The process's CPU set when the library was loaded (`None`: it could not be read).
    static AT_LOAD: OnceLock<Option<CpuSet>> = OnceLock::new();

    fn read_mask() -> Option<CpuSet> {
        rustix::thread::sched_getaffinity(None).ok()
    }

    /// Runs before `main` (the dynamic loader calls the `.init_array` entries of every
    /// object it loads, the executable's own included): no user code has pinned a thread
    /// yet. It makes one system call and stores the result; it allocates nothing.
    extern "C" fn capture_at_load() {
        let _ = AT_LOAD.set(read_mask());
    }

    #[used]
    #[unsafe(link_section = ".init_array")]
    static CAPTURE_AT_LOAD: extern "C" fn() = capture_at_load;

    /// The mask captured at load; read now if the loader did not run the capture (an
    /// object linked in a way that dropped its `.init_array` entry).
    pub(super) fn at_load() -> Option<CpuSet> {
        *AT_LOAD.get_or_init(read_mask)
    }

    /// The kernel-isolated CPUs (`isolcpus=`), from `/sys/devices/system/cpu/isolated`;
    /// none if the file is absent or empty.
    pub(super) fn isolated() -> Vec<usize> {
        std::fs::read_to_string("/sys/devices/system/cpu/isolated")
            .ok()
            .and_then(|s| super::parse_cpu_list(&s))
            .unwrap_or_default()
    }

    /// `set` less the `isolated` CPUs, unless that leaves none: then `set` itself.
    pub(super) fn without_isolated(set: CpuSet, isolated: &[usize]) -> CpuSet {
        let mut out = set;
        for &cpu in isolated {
            if cpu < CpuSet::MAX_CPU {
                out.unset(cpu);
            }
        }
        if out.count() == 0 { set } else { out }
    }

    /// The workers' set: the mask at load less the isolated CPUs, worked out once (the
    /// sysfs file is read once, not at every worker's start: a cross-process topic starts
    /// a thread per connection).
    pub(super) fn worker_set() -> Option<CpuSet> {
        static SET: OnceLock<Option<CpuSet>> = OnceLock::new();
        *SET.get_or_init(|| Some(without_isolated(at_load()?, &isolated())))
    }

    pub(super) fn place(set: &CpuSet) -> rustix::io::Result<()> {
        rustix::thread::sched_setaffinity(None, set)
    }
}

/// The CPUs holo's worker threads run on: the process's CPU set when the library was
/// loaded, less the kernel-isolated CPUs unless none would remain. `None` where the set
/// cannot be read (or off Linux).
#[cfg(target_os = "linux")]
pub fn worker_cpus() -> Option<Vec<usize>> {
    let set = linux::worker_set()?;
    Some(
        (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
    )
}

/// The CPUs holo's worker threads run on: unknown off Linux.
#[cfg(not(target_os = "linux"))]
pub fn worker_cpus() -> Option<Vec<usize>> {
    None
}

/// Moves the calling thread (a holo worker, at its start) to [`worker_cpus`]. Best
/// effort: if the mask cannot be set (a cgroup took those CPUs away since the library
/// was loaded), the thread keeps the one it inherited, and a `tracing` event says so.
pub(crate) fn place_worker_thread(worker: &str) {
    #[cfg(target_os = "linux")]
    if let Some(set) = linux::worker_set()
        && let Err(e) = linux::place(&set)
    {
        crate::trace::event!(
            warn,
            worker,
            error = %e,
            "a holo worker thread keeps the CPU mask it inherited"
        );
        let _ = (worker, e);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = worker;
}

/// Spawns a holo worker thread named `name` that first moves itself to [`worker_cpus`]
/// ([`place_worker_thread`]; `worker` names it in the event a failure emits) and then runs
/// `f`. Returns once the thread has placed itself: by then it is named and on the workers'
/// CPUs, so whoever started it — and anyone reading `/proc` right after — never sees it on
/// the starter's pin. (Without the wait, `worker_placement` found no thread of the
/// export's listener's name right after `RunSession::start` — the listener had not started
/// yet — in two runs of two of the whole suite beside three CPU hogs on a 2-vCPU VM.)
pub(crate) fn spawn_worker<T: Send + 'static>(
    name: String,
    worker: &'static str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    let (placed, is_placed) = std::sync::mpsc::sync_channel::<()>(1);
    let handle = std::thread::Builder::new().name(name).spawn(move || {
        place_worker_thread(worker);
        let _ = placed.send(());
        f()
    })?;
    // An error only if the thread ended without sending, which it cannot before `f`.
    let _ = is_placed.recv();
    Ok(handle)
}

/// Parses a kernel CPU list (`"0-3,8,10-11\n"`; empty: none). `None` if malformed.
fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("\n"), Some(vec![]));
        assert_eq!(parse_cpu_list("3\n"), Some(vec![3]));
        assert_eq!(parse_cpu_list("0-2,5,7-8\n"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse_cpu_list("2-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
        assert_eq!(parse_cpu_list("1-"), None);
    }

    /// The allowed CPUs of the threads of this process named `name` (`/proc`).
    #[cfg(target_os = "linux")]
    fn threads_named(name: &str) -> Vec<Vec<usize>> {
        let mut found = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let dir = task.unwrap().path();
            match std::fs::read_to_string(dir.join("comm")) {
                Ok(comm) if comm.trim() == name => {}
                _ => continue,
            }
            let status = std::fs::read_to_string(dir.join("status")).unwrap();
            let list = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap();
            found.push(parse_cpu_list(list).unwrap());
        }
        found
    }

    /// `spawn_worker` returns once the worker is named and placed, even when its starter
    /// is pinned to one CPU and keeps it (the child cannot run there before the starter
    /// blocks). Fails without the wait: the read right after the spawn finds no thread
    /// of that name, or one on the starter's CPU.
    #[cfg(target_os = "linux")]
    #[test]
    #[cfg_attr(miri, ignore = "reads /proc and pins threads: Miri runs neither")]
    fn a_spawned_worker_is_named_and_placed_when_spawn_returns() {
        use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
        let Some(expected) = super::worker_cpus() else {
            return;
        };
        let all = sched_getaffinity(None).unwrap();
        let first = (0..CpuSet::MAX_CPU).find(|&c| all.is_set(c)).unwrap();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (worker, seen) = std::thread::spawn(move || {
            let mut one = CpuSet::new();
            one.set(first);
            sched_setaffinity(None, &one).unwrap();
            let worker = super::spawn_worker("holo-test-place".to_owned(), "test", move || {
                let _ = released.recv();
            })
            .unwrap();
            (worker, threads_named("holo-test-place"))
        })
        .join()
        .unwrap();
        release.send(()).unwrap();
        worker.join().unwrap();
        assert_eq!(seen, vec![expected]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn isolated_cpus_are_left_out_unless_none_would_remain() {
        use rustix::thread::CpuSet;

        use super::linux::without_isolated;
        let mut set = CpuSet::new();
        for c in [0, 1, 2, 3] {
            set.set(c);
        }
        let out = without_isolated(set, &[2, 3]);
        assert_eq!(
            (0..8).filter(|&c| out.is_set(c)).collect::<Vec<_>>(),
            vec![0, 1]
        );
        // Every CPU of the set isolated: the set itself, not an empty mask.
        let out = without_isolated(set, &[0, 1, 2, 3, 9]);
        assert_eq!(
            (0..8).filter(|&c| out.is_set(c)).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_mask_is_the_one_at_load_not_the_callers_pin() {
        use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
        let cpus = |s: &CpuSet| {
            (0..CpuSet::MAX_CPU)
                .filter(|&c| s.is_set(c))
                .collect::<Vec<_>>()
        };
        let process = sched_getaffinity(None).unwrap();
        // A thread pinned to one CPU asks: it gets the set captured at load, not its pin
        // (read lazily, it would get its pin).
        let seen = std::thread::spawn(move || {
            let mut one = CpuSet::new();
            one.set(cpus(&process)[0]);
            sched_setaffinity(None, &one).unwrap();
            super::linux::at_load().expect("read at load")
        })
        .join()
        .unwrap();
        assert_eq!(cpus(&seen), cpus(&process));
    }
}
