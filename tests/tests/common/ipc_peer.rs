//! The peer process of the cross-process tests (`src/bin/ipc_peer.rs`), driven from a
//! test: spawned, read line by line, killed. Shared by `ipc.rs` and `ipc_device.rs`.
#![allow(dead_code, reason = "each test file uses a part")]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The peer binary: `HOLO_IPC_PEER` (a bundle run elsewhere), else the one cargo built.
pub(crate) fn peer_exe() -> String {
    std::env::var("HOLO_IPC_PEER").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ipc_peer").to_owned())
}
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// A namespace of this test alone (tests run in parallel, and so may two test runs).
pub(crate) fn namespace(test: &str) -> String {
    format!("t{}-{test}", std::process::id())
}

/// A catalog path of this test alone.
pub(crate) fn catalog_path(test: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("holo-ipc-{}.toml", namespace(test)))
}

/// A peer process and its stdout's lines.
pub(crate) struct Peer {
    pub(crate) child: Child,
    out: BufReader<ChildStdout>,
}

impl Peer {
    pub(crate) fn spawn(args: &[&str]) -> Peer {
        let mut child = Command::new(peer_exe())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the ipc_peer binary starts");
        let out = BufReader::new(child.stdout.take().expect("piped"));
        Peer { child, out }
    }

    /// The peer's next line, which must start with `prefix`; returns the rest.
    pub(crate) fn expect(&mut self, prefix: &str) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("the peer's stdout");
        let line = line.trim_end();
        assert!(
            line.starts_with(prefix),
            "the peer said {line:?} where {prefix:?} was expected"
        );
        line[prefix.len()..].trim().to_owned()
    }

    pub(crate) fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the peer");
        self.child.wait().expect("reap the peer");
    }

    pub(crate) fn wait_success(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("the peer's status") {
                assert!(status.success(), "the peer exited with {status}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the peer did not finish in {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `f` holds, for up to `WAIT`.
pub(crate) fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Starts `graph` (compiled to `plan`) with `options` in `test`'s namespace and writes its
/// catalog to `test`'s path; the session, and the slot count of its pool `pool`.
pub(crate) fn serve_in(
    test: &str,
    graph: holo_runtime::Graph,
    plan: &holo_runtime::plan::ExecutionPlan,
    options: holo_runtime::SessionOptions,
    pool: &str,
) -> (holo_runtime::RunSession, u32) {
    let slots = plan
        .tensor_allocations()
        .iter()
        .find(|a| a.pool == pool)
        .expect("the served topic's pool")
        .slot_count;
    let session =
        holo_runtime::RunSession::start(graph, plan, options.with_ipc_namespace(namespace(test)))
            .expect("the session starts");
    session
        .endpoint_catalog()
        .write(catalog_path(test))
        .expect("the catalog is written");
    (session, slots)
}
