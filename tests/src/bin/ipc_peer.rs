//! The peer process of the cross-process tests (`tests/tests/ipc.rs`); not for users.
//!
//! - `ipc_peer subscribe <catalog> <topic> <frames> [hold]`: attaches (waiting up to 10 s
//!   for the exporter), prints `attached <seat>`, receives `<frames>` frames checking each
//!   one's bytes and that the ids follow each other, prints `ok <frames>`. With `hold`: after
//!   the first frame prints `holding <slot>` and keeps it until killed; `hold-detached`
//!   drops the subscriber (closing its socket) first.
//! - `ipc_peer export <catalog> <namespace> <topic>`: starts a session exporting `<topic>`
//!   across processes in `<namespace>`, writes its catalog to `<catalog>`, prints `serving`
//!   and produces frames — from its first subscriber's attach on — until killed.
//!
//! - `ipc_peer import <catalog> <namespace> <topic> <frames> [<bytes>]`: starts a session
//!   importing `<topic>` from publishers in other processes (in CUDA device memory of
//!   frames up to `<bytes>` when given), writes its catalog, prints `serving`, and prints
//!   `ok <frames>` once its sink checked that many frames.
//!
//! - `ipc_peer leaks <namespace>`: an exporting session and a subscriber in this process,
//!   twice; prints `ok` when the second round left no descriptor or `memfd:holo` mapping.
//!
//! - `ipc_peer export-device <catalog> <namespace> <topic> <bytes> <delay_us> <frames>`:
//!   as `export`, with device frames (`IpcDeviceFrames`: `<delay_us>` of the stream
//!   idling before each fill) — `<frames>` of them from the first subscriber's attach on,
//!   then it stops serving and prints `done <emitted>`.
//! - `ipc_peer subscribe-device <catalog> <topic> <frames> [hold]`: as `subscribe`, for
//!   device frames: reads each frame back on the subscriber's stream (all of it up to
//!   64 KiB; else 4 KiB at its start, middle and end) and checks every byte; prints
//!   `ok <frames> abandoned <n>`. With `hold`: after the first frame its stream reads the
//!   slot for a long time (a 20 s spin kernel, then a copy), prints `holding <slot>`, and waits
//!   to be killed.
//!
//! - `ipc_peer subscribe-pinned <catalog> <topic> <frames> <host|stream>`: as `subscribe`,
//!   for pinned frames written on the host (each frame's bytes readable at once:
//!   `data()` without `synchronize_for_host`) or on a stream (`synchronize_for_host`
//!   first); checks every byte; prints `ok <frames>`.
//!
//! - `ipc_peer publish <catalog> <topic> <frames> [hold]`: attaches a `ProcessPublisher`
//!   (waiting up to 10 s for the session), prints `attached`, publishes `<frames>` frames
//!   of `fill_frame` (numbered 0, 1, …) in place, prints `ok <frames>`. With `hold`: loans
//!   one slot, writes it, prints `holding`, and waits to be killed without publishing.
//!
//! - `ipc_peer publish-device <catalog> <topic> <frames> <bytes> <delay_us> <host|stream>
//!   [die]`: as `publish`, into a topic the session imports in pinned or CUDA device
//!   memory: frame k is `device_fill(k)` in each of its `<bytes>` bytes, written on the
//!   publisher's stream after `<delay_us>` of a spin kernel (`stream`), or on the host
//!   (`host`, pinned only). With `die`: after publishing its `<frames>` prints
//!   `published` and waits to be killed (its stream still spins: the fences are not
//!   written yet).
//!
//! Every failure prints `error <code> <message>` and exits 1.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use holo_runtime::ipc::{
    EndpointCatalog, ProcessPublisher, ProcessPublisherOptions, ProcessSubscriber,
    ProcessSubscriberOptions,
};
use holo_runtime::{Error, RunSession, SessionOptions, TopicOptions};
use holo_tests::ipc_frames::{
    IpcDeviceFrames, check_device_frame, check_frame, exporting_device_graph, exporting_graph,
};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Says `line`, then keeps `held` (a tensor, a loan) until the process is killed.
fn hold_until_killed<T>(held: T, line: &str) -> ! {
    say(line);
    let _held = held;
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Attaches a publisher to `topic` of the catalog at `catalog` (waiting up to 10 s for the
/// session) and says `attached`.
fn attach_publisher(catalog: &str, topic: &str) -> Result<ProcessPublisher, Error> {
    let catalog = EndpointCatalog::read(catalog)?;
    let publisher = ProcessPublisher::attach(
        &catalog,
        topic,
        ProcessPublisherOptions::DEFAULT.with_wait_for_session(Duration::from_secs(10)),
    )?;
    say("attached");
    Ok(publisher)
}

/// Attaches to `topic` of the catalog at `catalog`, waiting up to 10 s for the exporter,
/// and says `attached <seat>`.
fn attach(catalog: &str, topic: &str) -> Result<ProcessSubscriber, Error> {
    let catalog = EndpointCatalog::read(catalog)?;
    let sub = ProcessSubscriber::attach(
        &catalog,
        topic,
        ProcessSubscriberOptions::DEFAULT.with_wait_for_exporter(Duration::from_secs(10)),
    )?;
    say(&format!("attached {}", sub.seat()));
    Ok(sub)
}

/// The next frame, which must come within 10 s and follow the one before (`next`).
fn next_in_order(
    sub: &mut ProcessSubscriber,
    next: &mut Option<u64>,
) -> Result<(holo_runtime::Tensor, holo_runtime::ipc::RemoteFrameInfo), Error> {
    let Some((t, info)) = sub.receive_with_info(Duration::from_secs(10))? else {
        return Err(Error::new(
            holo_runtime::ErrorCode::Cancelled,
            "no frame in 10 s",
        ));
    };
    if let Some(n) = *next
        && info.frame != n
    {
        return Err(Error::invalid_argument(format!(
            "frame {} came after {}",
            info.frame,
            n - 1
        )));
    }
    *next = Some(info.frame + 1);
    Ok((t, info))
}

fn subscribe(catalog: &str, topic: &str, frames: u64, hold: Option<&str>) -> Result<(), Error> {
    let mut sub = attach(catalog, topic)?;
    let mut next = None;
    for _ in 0..frames {
        let (t, info) = next_in_order(&mut sub, &mut next)?;
        check_frame(info.frame, t.data()?).map_err(Error::invalid_argument)?;
        if let Some(how) = hold {
            if how == "hold-detached" {
                // Closes the socket: the exporter frees the seat, keeps the slot.
                drop(sub);
            }
            hold_until_killed(t, &format!("holding {}", info.slot.slot));
        }
    }
    say(&format!("ok {frames}"));
    Ok(())
}

/// A session importing `topic` from publishers in other processes (2 loans each), in host
/// memory or, with `bytes`, in CUDA device memory (CUDA device 0 where it opens, else the
/// software device) of frames up to `bytes`; waits for `frames` frames, each checked.
fn import(
    catalog: &str,
    namespace: &str,
    topic: &str,
    frames: u64,
    bytes: Option<&str>,
) -> Result<(), Error> {
    let options = TopicOptions::DEFAULT.with_loans_per_publisher(2);
    let mut session_options = SessionOptions::default().with_ipc_namespace(namespace);
    let (graph, plan, stats) = match bytes {
        None => holo_tests::ipc_frames::importing_graph(topic, options)?,
        Some(b) => {
            session_options = session_options.on_device(holo_tests::ipc_frames::cuda_or_software());
            holo_tests::ipc_frames::importing_device_graph(
                topic,
                holo_runtime::MemoryKind::CudaDevice,
                number(b, "bytes")?,
                options,
            )?
        }
    };
    let session = RunSession::start(graph, &plan, session_options)?;
    session.endpoint_catalog().write(catalog)?;
    say("serving");
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    while stats.received.load(std::sync::atomic::Ordering::Relaxed) < frames {
        if let Some(wrong) = stats
            .wrong
            .lock()
            .map_err(|_| Error::invalid_argument("poisoned"))?
            .clone()
        {
            return Err(Error::invalid_argument(wrong));
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::new(
                holo_runtime::ErrorCode::Cancelled,
                "the frames stopped coming",
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    say(&format!("ok {frames}"));
    session.stop();
    session.join().map(|_| ())
}

fn export(catalog: &str, namespace: &str, topic: &str) -> Result<(), Error> {
    let go = Arc::new(AtomicBool::new(false));
    let (graph, plan, _stats) = exporting_graph(
        topic,
        u64::MAX,
        Arc::clone(&go),
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
    // Frames from the first subscriber's attach on (frame 0 is its first).
    while session
        .topic_attachments(topic)
        .is_some_and(|(n, _)| n == 0)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    go.store(true, std::sync::atomic::Ordering::Release);
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

fn subscribe_device(
    catalog: &str,
    topic: &str,
    frames: u64,
    hold: Option<&str>,
) -> Result<(), Error> {
    let mut sub = attach(catalog, topic)?;
    let (Some(device), Some(stream)) = (sub.device().cloned(), sub.stream()) else {
        return Err(Error::invalid_argument("the topic is not in device memory"));
    };
    let mut buf = vec![0u8; 3 * 4096];
    let mut next = None;
    for _ in 0..frames {
        let (t, info) = next_in_order(&mut sub, &mut next)?;
        let n = t.byte_size();
        let spans: Vec<(usize, usize)> = if n <= 64 << 10 {
            buf.resize(n.max(buf.len()), 0);
            vec![(0, n)]
        } else {
            vec![(0, 4096), (n / 2, 4096), (n - 4096, 4096)]
        };
        let mut at = 0;
        for &(offset, len) in &spans {
            // SAFETY: `buf[at..at + len]` is ours until the stream is synchronized below;
            // the tensor keeps the slot mapped and unreused meanwhile.
            unsafe {
                device.copy_to_host_async(
                    buf[at..].as_mut_ptr(),
                    holo_runtime::device::DevicePtr::from_raw(t.device_ptr().raw() + offset as u64),
                    len,
                    stream,
                )?;
            }
            at += len;
        }
        device.synchronize_stream(stream)?;
        check_device_frame(info.frame, &buf[..at]).map_err(Error::invalid_argument)?;
        if hold.is_some() {
            // The stream goes on reading the slot long after this process is killed.
            device.bind_to_thread()?;
            holo_tests::ipc_frames::idle(device.as_ref(), stream, Duration::from_secs(20))?;
            // SAFETY: as above; the process is killed before the copy runs.
            unsafe {
                device.copy_to_host_async(buf.as_mut_ptr(), t.device_ptr(), 16, stream)?;
            }
            hold_until_killed(t, &format!("holding {}", info.slot.slot));
        }
    }
    say(&format!("ok {frames} abandoned {}", sub.abandoned_frames()));
    Ok(())
}

fn subscribe_pinned(catalog: &str, topic: &str, frames: u64, writer: &str) -> Result<(), Error> {
    let mut sub = attach(catalog, topic)?;
    let mut next = None;
    for _ in 0..frames {
        let (t, info) = next_in_order(&mut sub, &mut next)?;
        if writer == "stream" {
            t.synchronize_for_host()?;
        }
        // A host-written pinned frame is complete on arrival: no wait before `data()`.
        check_device_frame(info.frame, t.data()?).map_err(Error::invalid_argument)?;
    }
    say(&format!("ok {frames}"));
    Ok(())
}

fn publish(catalog: &str, topic: &str, frames: u64, hold: bool) -> Result<(), Error> {
    let publisher = attach_publisher(catalog, topic)?;
    if hold {
        hold_until_killed(holo_tests::ipc_frames::granted(&publisher)?, "holding");
    }
    holo_tests::ipc_frames::publish_host_frames(&publisher, 0..frames)?;
    say(&format!("ok {frames}"));
    Ok(())
}

fn publish_device(
    catalog: &str,
    topic: &str,
    frames: u64,
    bytes: u64,
    delay: Duration,
    host_writer: bool,
    die: bool,
) -> Result<(), Error> {
    let publisher = attach_publisher(catalog, topic)?;
    let publish = |range| {
        holo_tests::ipc_frames::publish_device_frames(&publisher, range, bytes, delay, host_writer)
    };
    if die {
        publish(0..frames)?;
        hold_until_killed((), "published");
    }
    publish(0..frames)?;
    say(&format!("ok {frames}"));
    Ok(())
}

fn export_device(
    catalog: &str,
    namespace: &str,
    topic: &str,
    bytes: u64,
    delay_us: u64,
    frames: u64,
) -> Result<(), Error> {
    let go = Arc::new(AtomicBool::new(false));
    let (source, stats) = IpcDeviceFrames::new(
        frames,
        bytes,
        Duration::from_micros(delay_us),
        Arc::clone(&go),
    );
    let (graph, plan) = exporting_device_graph(
        topic,
        source,
        TopicOptions::DEFAULT
            .with_depth(2)
            .with_holds_per_subscriber(2),
    )?;
    let session = RunSession::start(
        graph,
        &plan,
        SessionOptions::default()
            .on_device(holo_tests::ipc_frames::cuda_or_software())
            .with_ipc_namespace(namespace),
    )?;
    session.endpoint_catalog().write(catalog)?;
    say("serving");
    // Frames from the first subscriber's attach on (none go to nobody meanwhile).
    while session
        .topic_attachments(topic)
        .is_some_and(|(n, _)| n == 0)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    go.store(true, std::sync::atomic::Ordering::Release);
    while stats.emitted.load(std::sync::atomic::Ordering::Relaxed) < frames {
        std::thread::sleep(Duration::from_millis(5));
        if session.is_stopping() {
            break;
        }
    }
    // Let the subscriber take the last frames before the topic ends.
    std::thread::sleep(Duration::from_millis(500));
    session.join()?;
    say(&format!(
        "done {}",
        stats.emitted.load(std::sync::atomic::Ordering::Relaxed)
    ));
    Ok(())
}

fn number(s: &str, what: &str) -> Result<u64, Error> {
    s.parse()
        .map_err(|e| Error::invalid_argument(format!("{what}: {e}")))
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
        ["import", catalog, namespace, topic, frames, rest @ ..] => number(frames, "frames")
            .and_then(|n| import(catalog, namespace, topic, n, rest.first().copied())),
        ["leaks", namespace] => leaks(namespace),
        ["publish", catalog, topic, frames, rest @ ..] => number(frames, "frames")
            .and_then(|n| publish(catalog, topic, n, rest.first() == Some(&"hold"))),
        ["subscribe-pinned", catalog, topic, frames, writer] => {
            number(frames, "frames").and_then(|n| subscribe_pinned(catalog, topic, n, writer))
        }
        ["subscribe-device", catalog, topic, frames, rest @ ..] => number(frames, "frames")
            .and_then(|n| subscribe_device(catalog, topic, n, rest.first().copied())),
        [
            "publish-device",
            catalog,
            topic,
            frames,
            bytes,
            delay_us,
            writer,
            rest @ ..,
        ] => match (
            number(frames, "frames"),
            number(bytes, "bytes"),
            number(delay_us, "delay_us"),
        ) {
            (Ok(f), Ok(b), Ok(d)) => publish_device(
                catalog,
                topic,
                f,
                b,
                Duration::from_micros(d),
                *writer == "host",
                rest.first() == Some(&"die"),
            ),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e),
        },
        [
            "export-device",
            catalog,
            namespace,
            topic,
            bytes,
            delay_us,
            frames,
        ] => {
            match (
                number(bytes, "bytes"),
                number(delay_us, "delay_us"),
                number(frames, "frames"),
            ) {
                (Ok(b), Ok(d), Ok(f)) => export_device(catalog, namespace, topic, b, d, f),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e),
            }
        }
        _ => Err(Error::invalid_argument(format!(
            "usage: see src/bin/ipc_peer.rs; got {args:?}"
        ))),
    };
    if let Err(e) = r {
        say(&format!("error {} {}", e.code().name(), e));
        std::process::exit(1);
    }
}
