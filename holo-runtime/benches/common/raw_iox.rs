//! The raw iceoryx2 baseline's services, shared by the cross-process benches
//! (`#[path = "common/raw_iox.rs"] mod raw_iox;`): a node with no signal handling of its
//! own, and a publish-subscribe service of the bench's descriptor type `D` (no history)
//! beside an event service of the same name — what holo's seats use, built by hand.

use iceoryx2::prelude::*;

pub(crate) type Node = iceoryx2::node::Node<ipc_threadsafe::Service>;
pub(crate) type RawPubSub<D> =
    iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc_threadsafe::Service, D, ()>;
pub(crate) type RawEvent =
    iceoryx2::service::port_factory::event::PortFactory<ipc_threadsafe::Service>;

/// A node of this process, iceoryx2 logging errors only.
pub(crate) fn node() -> Node {
    set_log_level_from_env_or(LogLevel::Error);
    NodeBuilder::new()
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc_threadsafe::Service>()
        .expect("an iceoryx2 node")
}

/// The raw baseline's node and its publish-subscribe (a subscriber buffer of `buffer`
/// descriptors) and event services named `service`.
pub(crate) fn raw_services<D: ZeroCopySend + std::fmt::Debug + 'static>(
    service: &str,
    buffer: usize,
) -> (Node, RawPubSub<D>, RawEvent) {
    let node = node();
    let name: ServiceName = service.try_into().expect("a service name");
    let svc = node
        .service_builder(&name)
        .publish_subscribe::<D>()
        .subscriber_max_buffer_size(buffer)
        .history_size(0)
        .open_or_create()
        .expect("the raw service");
    let ev = node
        .service_builder(&name)
        .event()
        .open_or_create()
        .expect("the raw event");
    (node, svc, ev)
}
