//! The public types a user shares between threads: a session can be stopped or watched
//! from another thread (`Send + Sync`), a plan and a tensor shared freely, a graph moved
//! to the thread that starts it, a standalone client to the thread that uses it. These fail to compile if a field ever takes that away
//! (stepping's operators made `RunSession` `!Sync` until they went behind a mutex).

fn send<T: Send>() {}
fn sync<T: Sync>() {}

#[test]
fn sessions_plans_graphs_and_tensors_cross_threads() {
    send::<holo_runtime::RunSession>();
    sync::<holo_runtime::RunSession>();
    send::<holo_runtime::plan::ExecutionPlan>();
    sync::<holo_runtime::plan::ExecutionPlan>();
    send::<holo_runtime::Graph>();
    send::<holo_runtime::Tensor>();
    sync::<holo_runtime::Tensor>();
    send::<holo_runtime::RunReport>();
    send::<holo_runtime::Error>();
    sync::<holo_runtime::Error>();
    // A standalone client moves to the thread that uses it.
    send::<holo_runtime::ChannelSubscriber>();
    send::<holo_runtime::ChannelSubscriber<u64>>();
    send::<holo_runtime::ChannelPublisher>();
    send::<holo_runtime::PublisherLoan>();
    send::<holo_runtime::PublisherWriteGuard>();
    // The clients in another process too.
    send::<holo_runtime::ipc::ProcessSubscriber>();
    send::<holo_runtime::ipc::ProcessPublisher>();
}

#[test]
fn the_const_default_topic_options_are_the_default() {
    assert_eq!(
        holo_runtime::TopicOptions::DEFAULT,
        holo_runtime::TopicOptions::default()
    );
    assert_eq!(
        holo_runtime::SubscriberOptions::DEFAULT,
        holo_runtime::SubscriberOptions::default()
    );
    assert_eq!(
        holo_runtime::PublisherOptions::DEFAULT,
        holo_runtime::PublisherOptions::default()
    );
}

#[test]
fn the_const_default_connection_options_are_the_default() {
    assert_eq!(
        holo_runtime::ConnectionOptions::DEFAULT,
        holo_runtime::ConnectionOptions::default()
    );
}

#[test]
fn a_session_is_stopped_from_another_thread() {
    use holo_runtime::{
        CompileOptions, EmitOptions, ExecutionContext, Graph, Operator, Output, Result, RunSession,
        SessionOptions, compile, operator,
    };
    use std::time::Duration;
    #[operator]
    struct Forever {
        out: Output<u64>,
    }
    impl Operator for Forever {
        fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
            let _ = self.out.try_emit(1u64, EmitOptions::default());
            Ok(())
        }
    }
    let mut g = Graph::new();
    g.add_operator_with_defaults(
        "forever",
        Forever {
            out: Output::default(),
        },
    )
    .unwrap();
    let plan = compile(&g, CompileOptions::default()).unwrap();
    let session = RunSession::start(g, &plan, SessionOptions::default()).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            session.stop();
        });
        assert!(
            !session.wait_idle(Duration::from_secs(10)),
            "stopped, not idle"
        );
    });
    assert!(session.is_stopping());
    session.join().unwrap();
}
