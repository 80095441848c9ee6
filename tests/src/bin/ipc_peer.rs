//! The peer process of the cross-process tests (`tests/tests/ipc.rs`); not for users.
//!
//! - `ipc_peer subscribe <catalog> <topic> <frames> [hold]`: attaches (waiting up to 10 s
//!   for the exporter), prints `attached <seat>`, receives `<frames>` frames checking each
//!   one's bytes and that the ids follow each other, prints `ok <frames>`. With `hold`: after
//!   the first frame prints `holding <slot>` and keeps it until killed; `hold-detached`
//!   drops the subscriber (closing its socket) first.
//! - `ipc_peer export <catalog> <namespace> <topic>`: starts a session exporting `<topic>`
//!   across processes in `<namespace>`, writes its catalog to `<catalog>`, prints `serving`
//!   and produces frames until killed.
//!
//! - `ipc_peer leaks <namespace>`: an exporting session and a subscriber in this process,
//!   twice; prints `ok` when the second round left no descriptor or `memfd:holo` mapping.
//!
//! Every failure prints `error <code> <message>` and exits 1.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use holo_runtime::ipc::{EndpointCatalog, ProcessSubscriber, ProcessSubscriberOptions};
use holo_runtime::{Error, RunSession, SessionOptions, TopicOptions};
use holo_tests::ipc_frames::{check_frame, exporting_graph};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn subscribe(catalog: &str, topic: &str, frames: u64, hold: Option<&str>) -> Result<(), Error> {
    let catalog = EndpointCatalog::read(catalog)?;
    let mut sub = ProcessSubscriber::attach(
        &catalog,
        topic,
        ProcessSubscriberOptions::DEFAULT.with_wait_for_exporter(Duration::from_secs(10)),
    )?;
    say(&format!("attached {}", sub.seat()));
    let mut next = None;
    for _ in 0..frames {
        let Some((t, info)) = sub.receive_with_info(Duration::from_secs(10))? else {
            return Err(Error::new(
                holo_runtime::ErrorCode::Cancelled,
                "no frame in 10 s",
            ));
        };
        if let Some(n) = next
            && info.frame != n
        {
            return Err(Error::invalid_argument(format!(
                "frame {} came after {}",
                info.frame,
                n - 1
            )));
        }
        next = Some(info.frame + 1);
        check_frame(info.frame, t.data()?).map_err(Error::invalid_argument)?;
        if let Some(how) = hold {
            if how == "hold-detached" {
                // Closes the socket: the exporter frees the seat, keeps the slot.
                drop(sub);
            }
            say(&format!("holding {}", info.slot.slot));
            let _held = t;
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
    say(&format!("ok {frames}"));
    Ok(())
}

fn export(catalog: &str, namespace: &str, topic: &str) -> Result<(), Error> {
    let go = Arc::new(AtomicBool::new(true));
    let (graph, plan, _stats) = exporting_graph(
        topic,
        u64::MAX,
        go,
        TopicOptions::DEFAULT
            .with_depth(2)
            .with_holds_per_subscriber(2),
    )?;
    let session = RunSession::start(
        graph,
        &plan,
        SessionOptions::default().with_ipc_namespace(namespace),
    )?;
    session.endpoint_catalog().write(catalog)?;
    say("serving");
    loop {
        std::thread::sleep(Duration::from_secs(1));
        if session.is_stopping() {
            return session.join().map(|_| ());
        }
    }
}

/// Open descriptors and holo's shared mappings of this process.
fn resources() -> (usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    (
        fds,
        maps.lines().filter(|l| l.contains("memfd:holo")).count(),
    )
}

/// Two rounds of an exporting session and a subscriber in this process; after the second,
/// the descriptors and mappings are the ones before it (the first warms up what a process
/// keeps once: iceoryx2's config, the foreign-pool recycler).
fn leaks(namespace: &str) -> Result<(), Error> {
    for round in 0..2 {
        let before = resources();
        let go = Arc::new(AtomicBool::new(false));
        let (graph, plan, _stats) = exporting_graph(
            "cam",
            50,
            Arc::clone(&go),
            TopicOptions::DEFAULT.with_depth(2),
        )?;
        let session = RunSession::start(
            graph,
            &plan,
            SessionOptions::default().with_ipc_namespace(format!("{namespace}{round}")),
        )?;
        let catalog = session.endpoint_catalog();
        let mut sub =
            ProcessSubscriber::attach(&catalog, "cam", ProcessSubscriberOptions::DEFAULT)?;
        go.store(true, std::sync::atomic::Ordering::Release);
        for _ in 0..50 {
            let t = sub
                .receive(Duration::from_secs(10))?
                .ok_or_else(|| Error::invalid_argument("no frame in 10 s"))?;
            check_frame(sub.last_info().frame, t.data()?).map_err(Error::invalid_argument)?;
        }
        drop(sub);
        session.join()?;
        let after = resources();
        if round == 1 && after != before {
            return Err(Error::invalid_argument(format!(
                "(descriptors, memfd:holo mappings) were {before:?} before the round and {after:?} after"
            )));
        }
    }
    say("ok");
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = match args.as_slice() {
        ["subscribe", catalog, topic, frames, rest @ ..] => match frames.parse() {
            Ok(n) => subscribe(catalog, topic, n, rest.first().copied()),
            Err(e) => Err(Error::invalid_argument(format!("frames: {e}"))),
        },
        ["export", catalog, namespace, topic] => export(catalog, namespace, topic),
        ["leaks", namespace] => leaks(namespace),
        _ => Err(Error::invalid_argument(format!(
            "usage: see src/bin/ipc_peer.rs; got {args:?}"
        ))),
    };
    if let Err(e) = r {
        say(&format!("error {} {}", e.code().name(), e));
        std::process::exit(1);
    }
}
