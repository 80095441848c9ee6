//! Publishers in other processes (issue 15; docs/IPC.md): a session imports a host topic
//! across processes, a `ProcessPublisher` in another process (the `ipc_peer` binary)
//! writes granted slots of the session's shared pool in place and publishes them.
//!
//! Provoked here: every frame reaches the importing operator in order with its bytes; a
//! publisher killed while it holds a granted, unpublished slot gives it back (and not
//! before it died); attaching the wrong kind of client, or one publisher too many, is
//! refused with its code; a frame of the wrong dtype or rank is refused at the publisher;
//! a publisher of a session that stopped gets `Cancelled`.

#[path = "common/ipc_peer.rs"]
mod ipc_peer;

use std::time::Duration;

use holo_runtime::ipc::{
    ProcessPublisher, ProcessPublisherOptions, ProcessSubscriber, ProcessSubscriberOptions,
};
use holo_runtime::{ErrorCode, RunSession, SessionOptions, TopicOptions};
use holo_tests::ipc_frames::{SinkStats, importing_graph};
use ipc_peer::{Peer, catalog_path, eventually, serve_in};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A session importing "cam" across processes into an `IpcSink`, its catalog written; the
/// session, the sink's stats and the topic pool's slot count.
fn importer(test: &str, options: TopicOptions) -> (RunSession, Arc<SinkStats>, u32) {
    let (graph, plan, stats) = importing_graph("cam", options).expect("the graph compiles");
    let (session, slots) = serve_in(test, graph, &plan, SessionOptions::default(), "topic:cam");
    (session, stats, slots)
}

#[test]
fn every_frame_a_publisher_in_another_process_writes_reaches_the_importer_in_order() {
    let test = "publish_frames";
    let (session, stats, _) = importer(test, TopicOptions::DEFAULT.with_loans_per_publisher(2));
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&["publish", catalog.to_str().unwrap(), "cam", "2000"]);
    peer.expect("attached");
    assert_eq!(peer.expect("ok"), "2000");
    peer.wait_success();
    eventually("every frame is received", || {
        stats.received.load(Ordering::Relaxed) == 2000
    });
    assert_eq!(*stats.wrong.lock().unwrap(), None);
    session.stop();
    session.join().expect("the session ends cleanly");
}

#[test]
fn a_killed_publisher_gives_back_the_slot_it_held_and_not_before() {
    let test = "publish_killed";
    let (session, stats, slots) = importer(test, TopicOptions::DEFAULT.with_loans_per_publisher(2));
    let catalog = catalog_path(test);
    let mut peer = Peer::spawn(&["publish", catalog.to_str().unwrap(), "cam", "1", "hold"]);
    peer.expect("attached");
    peer.expect("holding");
    // Both granted slots (one loaned and written, one waiting) stay out of the pool.
    eventually("the grants are out", || {
        session.pool_free_slots("topic:cam").unwrap() == slots - 2
    });
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        session.pool_free_slots("topic:cam").unwrap(),
        slots - 2,
        "a slot a live publisher was granted went back"
    );
    peer.kill();
    eventually(
        "the killed publisher's slots come back and its seat is free",
        || {
            session.pool_free_slots("topic:cam").unwrap() == slots
                && session.topic_attachments("cam") == Some((0, 1))
        },
    );
    // Nothing it did not publish was received, and the seat is free for another.
    assert_eq!(stats.received.load(Ordering::Relaxed), 0);
    let mut next = Peer::spawn(&["publish", catalog.to_str().unwrap(), "cam", "10"]);
    next.expect("attached");
    assert_eq!(next.expect("ok"), "10");
    next.wait_success();
    eventually("the new publisher's frames are received", || {
        stats.received.load(Ordering::Relaxed) == 10
    });
    session.stop();
    session.join().expect("the session ends cleanly");
}

#[test]
fn the_wrong_client_or_one_publisher_too_many_is_refused_and_a_stopped_session_cancels() {
    let test = "publish_errors";
    let (session, _stats, _) = importer(test, TopicOptions::DEFAULT);
    let catalog = session.endpoint_catalog();
    let entry = catalog.topic("cam").unwrap();
    assert_eq!(
        (
            entry.direction.as_str(),
            entry.publishers,
            entry.loans_per_publisher
        ),
        ("import", 1, 1)
    );
    // A subscriber of an imported topic.
    let e = ProcessSubscriber::attach(&catalog, "cam", ProcessSubscriberOptions::DEFAULT)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let d = ProcessPublisherOptions::DEFAULT;
    // A handshake step with no time at all (it failed as `PeerLost`).
    let e = ProcessPublisher::attach(&catalog, "cam", d.with_handshake_timeout(Duration::ZERO))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let first = ProcessPublisher::attach(&catalog, "cam", d).expect("the publisher attaches");
    // One declared publisher: the second is refused while the first holds the seat.
    let e = ProcessPublisher::attach(&catalog, "cam", d)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{e}");
    // A shape past the slot's bytes is refused here, and nothing is sent.
    let loan = first
        .loan(Duration::from_secs(10))
        .unwrap()
        .expect("a grant");
    let e = loan
        .publish(&[4097], holo_runtime::DType::U8, 0)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    // So is a dtype or rank the topic (`u8`, rank 1) does not admit, though its bytes fit:
    // it was sent, the session dropped it, and the publisher heard nothing.
    for (shape, dtype) in [
        (&[4][..], holo_runtime::DType::F32),
        (&[2, 2][..], holo_runtime::DType::U8),
    ] {
        let loan = first
            .loan(Duration::from_secs(10))
            .unwrap()
            .expect("a grant");
        let e = loan.publish(shape, dtype, 0).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
        assert!(
            e.to_string().contains("the topic's contract: u8, rank 1"),
            "{e}"
        );
    }
    session.stop();
    session.join().expect("the session ends cleanly");
    // The session said BYE: the publisher's next loan is `Cancelled`.
    let e = loop {
        match first.loan(Duration::from_millis(100)) {
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert_eq!(e.code(), ErrorCode::Cancelled, "{e}");
}
