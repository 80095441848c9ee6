//! What crosses between the processes: the per-frame slot descriptor (through iceoryx2),
//! the handshake on the topic's socket (once per subscriber, with the segments'
//! descriptors as `SCM_RIGHTS`), and the layout of the control segment's words.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use iceoryx2::prelude::ZeroCopySend;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use crate::spec::{DType, MAX_TENSOR_RANK};
use crate::{Error, ErrorCode, MemoryKind, Result};

/// The first word of every handshake message and of the control segment.
pub(crate) const MAGIC: u64 = 0x686f_6c6f_6970_6331; // "holoipc1"
/// The wire version: a peer of another version is refused at attach.
pub(crate) const VERSION: u32 = 2;
/// The longest topic name (as `compile` enforces).
pub(crate) const TOPIC_BYTES: usize = 128;

/// The fence of a descriptor's slot.
pub(crate) mod fence {
    /// Host memory written on the host: the exporter's CPU wrote the descriptor's fence
    /// value into the slot's fence word before it sent the descriptor.
    pub(crate) const HOST: u8 = 0;
    /// Written on a device stream: the writer's stream writes the fence value into the
    /// slot's fence word after its writes (`cuStreamWriteValue64_v2`); the subscriber's
    /// stream waits for it (`cuStreamWaitValue64_v2`, at least the value).
    pub(crate) const STREAM: u8 = 1;
    /// What a watchdog writes into the fence words of an exporter that died: past every
    /// fence value, so that no stream waits for a write that will not come. Not
    /// `u64::MAX`: `cuStreamWaitValue64`'s `GEQ` is wrap-aware — it holds when
    /// `(int64_t)(*addr - value) >= 0` — so the word must be less than 2⁶³ past the value
    /// (a fence value's high half counts wraps of a slot's 32-bit generation: it never
    /// comes near 2⁶²).
    pub(crate) const ABANDONED: u64 = 1 << 62;
}

/// One slot of a shared pool, published to one subscriber: fixed-size and `#[repr(C)]`,
/// carried by iceoryx2.
#[derive(Debug, Clone, Copy, ZeroCopySend)]
#[repr(C)]
pub(crate) struct SlotDescriptor {
    /// The exporter's incarnation (a restarted exporter is a new one).
    pub(crate) incarnation: u64,
    /// The pool's id (a hash of its name).
    pub(crate) pool: u64,
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    /// The slot's byte offset in the payload segment, and the tensor's bytes.
    pub(crate) offset: u64,
    pub(crate) byte_size: u64,
    pub(crate) shape: [u64; MAX_TENSOR_RANK as usize],
    pub(crate) rank: u8,
    /// The dtype's index in [`DType::ALL`].
    pub(crate) dtype: u8,
    /// The memory kind's index in [`KINDS`].
    pub(crate) memory_kind: u8,
    /// A [`fence`] kind.
    pub(crate) fence: u8,
    pub(crate) _pad: [u8; 4],
    /// The device's UUID (zero for host memory).
    pub(crate) device_uuid: [u8; 16],
    /// What the slot's fence word holds once this use's bytes are complete, and what the
    /// subscriber writes into its release word when it is done: host memory,
    /// [`use_word`]`(generation)`; device memory, a per-slot 64-bit count whose low 32
    /// bits are that (it grows past a wrap of the generation, as a `GEQ` wait needs).
    pub(crate) fence_value: u64,
    /// The frame id, capture time and publish time (`CLOCK_MONOTONIC` nanoseconds, one
    /// clock for every process of the machine; capture 0: none).
    pub(crate) frame: u64,
    pub(crate) capture_ns: u64,
    pub(crate) publish_ns: u64,
}

// The descriptor's size is part of the wire (and of the raw baseline `ipc_hop` and
// `ipc_device_hop` compare against): 160 bytes.
const _: () = assert!(size_of::<SlotDescriptor>() == 160);

/// The value a fence or release word holds for a use of a slot of host memory: its
/// generation plus one, so that a zeroed word names no use.
pub(crate) fn use_word(generation: u32) -> u64 {
    u64::from(generation) + 1
}

/// The fence value of a use of a device slot whose last fence value was `last`: the next
/// value above `last` whose low 32 bits are the use's generation plus one (wrapping), so
/// that values only grow. `last` itself when it already names the use.
pub(crate) fn next_fence_value(last: u64, generation: u32) -> u64 {
    let low = u64::from(generation.wrapping_add(1));
    if last != 0 && last & 0xffff_ffff == low {
        return last;
    }
    let high = last >> 32;
    let high = if low <= last & 0xffff_ffff {
        high + 1
    } else {
        high
    };
    (high << 32) | low
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// The contract a subscriber attaches against, as it crosses the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct WireContract {
    /// Index in [`KINDS`].
    pub(crate) memory_kind: u8,
    /// Index in [`DType::ALL`], or `NONE`.
    pub(crate) dtype: u8,
    /// Exact rank, or `NONE`.
    pub(crate) rank: u8,
    pub(crate) max_rank: u8,
    pub(crate) depth: u32,
    pub(crate) max_bytes: u64,
    pub(crate) holds: u32,
    /// An import: the slots each publisher may have loaned (0 for an export).
    pub(crate) loans: u32,
}

pub(crate) const NONE: u8 = u8::MAX;

/// The importer's first message.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(crate) struct Hello {
    pub(crate) magic: u64,
    pub(crate) version: u32,
    pub(crate) topic_len: u32,
    pub(crate) topic: [u8; TOPIC_BYTES],
    /// The contract the importer's catalog gives the topic.
    pub(crate) contract: WireContract,
}

/// The exporter's answer: a seat, or a refusal with its code and reason.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(crate) struct Welcome {
    pub(crate) magic: u64,
    /// 0: attached; else 1 + the index of the refusal's code in [`ErrorCode::ALL`].
    pub(crate) status: u32,
    pub(crate) seat: u32,
    pub(crate) incarnation: u64,
    pub(crate) pool: u64,
    pub(crate) slot_count: u32,
    pub(crate) seats: u32,
    pub(crate) per_slot_bytes: u64,
    pub(crate) payload_len: u64,
    pub(crate) control_len: u64,
    pub(crate) message_len: u32,
    /// The payload's memory kind (index in [`KINDS`]): host (a memfd) or CUDA device (an
    /// exported virtual-memory allocation).
    pub(crate) memory_kind: u8,
    pub(crate) _pad: [u8; 3],
    /// The exporter's device (zero for host memory).
    pub(crate) device_uuid: [u8; 16],
    pub(crate) message: [u8; 256],
}

impl Welcome {
    /// The control segment's layout this welcome describes, if it is consistent: the seat
    /// is one of its `seats` (`with_seats`: a subscriber's welcome; a publisher's has
    /// none), the control segment holds the layout and the payload holds every slot, all
    /// without overflow (the counts come from the peer: a layout of `1 << 29` slots and
    /// `u32::MAX` seats wrapped to 64 bytes in release builds). `None`: a `ProtocolError`.
    pub(crate) fn checked_layout(&self, with_seats: bool) -> Option<ControlLayout> {
        let layout = ControlLayout {
            slots: self.slot_count as usize,
            seats: if with_seats { self.seats as usize } else { 0 },
        };
        let sized = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let consistent = (!with_seats || (self.seat as usize) < layout.seats)
            && layout
                .bytes()
                .is_some_and(|bytes| bytes <= sized(self.control_len))
            && self
                .per_slot_bytes
                .checked_mul(u64::from(self.slot_count))
                .is_some_and(|bytes| bytes <= self.payload_len);
        consistent.then_some(layout)
    }
}

/// One byte after the handshake: the importer's subscriber exists (`READY`), the seat is
/// attached (`ACTIVE`, the answer), or the exporter stops serving the topic (`BYE`); the
/// socket's end without `BYE` means the peer died.
pub(crate) const READY: u8 = 1;
pub(crate) const BYE: u8 = 2;
/// The exporter's answer to `READY`: the seat is attached, the output sends into it.
pub(crate) const ACTIVE: u8 = 3;

/// The control segment: a header, then one fence word per slot, then one release word per
/// slot for each seat.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ControlLayout {
    pub(crate) slots: usize,
    pub(crate) seats: usize,
}

impl ControlLayout {
    /// Header words: the magic and the incarnation (words 0 and 1); the rest reserved.
    const HEADER: usize = 8;

    /// The segment's size in words; `None` if it does not fit a `usize` (the counts
    /// come from a peer's welcome).
    pub(crate) fn words(&self) -> Option<usize> {
        self.seats
            .checked_add(1)
            .and_then(|per_slot| self.slots.checked_mul(per_slot))
            .and_then(|w| w.checked_add(Self::HEADER))
    }

    /// The segment's size in bytes; `None` if it does not fit a `usize`.
    pub(crate) fn bytes(&self) -> Option<usize> {
        self.words()?.checked_mul(8)
    }

    pub(crate) fn fence(slot: usize) -> usize {
        Self::HEADER + slot
    }

    pub(crate) fn release(&self, seat: usize, slot: usize) -> usize {
        Self::HEADER + self.slots + seat * self.slots + slot
    }
}

/// The bytes of a plain `#[repr(C)]` message.
fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: the handshake messages are plain `#[repr(C)]` data of integers and byte
    // arrays; their padding is explicit fields, so every byte is initialized.
    unsafe { std::slice::from_raw_parts(std::ptr::from_ref(v).cast::<u8>(), size_of::<T>()) }
}

/// A zeroed message (every handshake message is valid all-zero).
pub(crate) fn zeroed<T: Copy>() -> T {
    // SAFETY: as above: integers and byte arrays, for which zero is valid.
    unsafe { MaybeUninit::<T>::zeroed().assume_init() }
}

fn peer_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorCode::PeerLost, format!("{what}: {e}"))
}

/// Sends `msg` with `fds` attached.
pub(crate) fn send<T: Copy>(sock: BorrowedFd<'_>, msg: &T, fds: &[BorrowedFd<'_>]) -> Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(Error::new(
            ErrorCode::Internal,
            "the handshake's descriptors do not fit",
        ));
    }
    let bytes = bytes_of(msg);
    let sent = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )
    .map_err(|e| {
        peer_error(
            "the topic's socket refused a message",
            std::io::Error::from(e),
        )
    })?;
    if sent != bytes.len() {
        return Err(peer_error("the topic's socket", "a short send"));
    }
    Ok(())
}

/// Receives one `T` (the socket's receive timeout bounds the wait) and up to two
/// descriptors. The end of the stream is `PeerLost`.
pub(crate) fn recv<T: Copy>(sock: BorrowedFd<'_>) -> Result<(T, Vec<OwnedFd>)> {
    let mut msg: T = zeroed();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    // SAFETY: `msg` is plain data (see `bytes_of`), valid for any bytes written into it.
    let buf = unsafe {
        std::slice::from_raw_parts_mut(std::ptr::from_mut(&mut msg).cast::<u8>(), size_of::<T>())
    };
    let mut got = 0;
    let mut fds = Vec::new();
    while got < buf.len() {
        let r = rustix::net::recvmsg(
            sock,
            &mut [IoSliceMut::new(&mut buf[got..])],
            &mut control,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::WAITALL,
        )
        .map_err(|e| peer_error("the topic's socket", std::io::Error::from(e)))?;
        got += taken(r.bytes, &mut control, &mut fds)?;
    }
    Ok((msg, fds))
}

/// What one `recvmsg` of `bytes` brought: its descriptors kept in `fds`; no byte at all is
/// the peer closing the socket (`PeerLost`).
fn taken(
    bytes: usize,
    control: &mut RecvAncillaryBuffer<'_>,
    fds: &mut Vec<OwnedFd>,
) -> Result<usize> {
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    if bytes == 0 {
        return Err(peer_error(
            "the topic's socket",
            "the peer closed it mid-handshake",
        ));
    }
    Ok(bytes)
}

/// Receives one `T` by `deadline` on a server's thread, however slowly the peer sends
/// it, giving up (`Cancelled`) as soon as `stop` says the topic stops being served: it
/// waits for bytes in slices of 20 ms and reads only what arrived, so a client that
/// stalls mid-handshake, or trickles its message a byte at a time, holds a session's
/// teardown for one slice, not for the socket timeout of every byte. Past the deadline:
/// `PeerLost`.
pub(crate) fn recv_by<T: Copy>(
    sock: BorrowedFd<'_>,
    deadline: std::time::Instant,
    stop: &dyn Fn() -> bool,
) -> Result<(T, Vec<OwnedFd>)> {
    let mut msg: T = zeroed();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    // SAFETY: `msg` is plain data (see `bytes_of`), valid for any bytes written into it.
    let buf = unsafe {
        std::slice::from_raw_parts_mut(std::ptr::from_mut(&mut msg).cast::<u8>(), size_of::<T>())
    };
    let slice = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 20_000_000,
    };
    let mut got = 0;
    let mut fds = Vec::new();
    while got < buf.len() {
        if stop() {
            return Err(Error::new(
                ErrorCode::Cancelled,
                "the topic stops being served: the handshake is abandoned",
            ));
        }
        if std::time::Instant::now() >= deadline {
            return Err(peer_error(
                "the topic's socket",
                "the peer did not send its handshake message in time",
            ));
        }
        let mut poll = [rustix::event::PollFd::new(
            &sock,
            rustix::event::PollFlags::IN,
        )];
        if !matches!(rustix::event::poll(&mut poll, Some(&slice)), Ok(n) if n > 0) {
            continue;
        }
        let r = match rustix::net::recvmsg(
            sock,
            &mut [IoSliceMut::new(&mut buf[got..])],
            &mut control,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
        ) {
            Ok(r) => r,
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::INTR => continue,
            Err(e) => return Err(peer_error("the topic's socket", std::io::Error::from(e))),
        };
        got += taken(r.bytes, &mut control, &mut fds)?;
    }
    Ok((msg, fds))
}

/// Sets the socket's send and receive timeouts.
pub(crate) fn set_timeouts(sock: BorrowedFd<'_>, timeout: Duration) -> Result<()> {
    use rustix::net::sockopt::{Timeout, set_socket_timeout};
    for which in [Timeout::Recv, Timeout::Send] {
        set_socket_timeout(sock, which, Some(timeout)).map_err(|e| {
            peer_error(
                "cannot set the topic socket's timeout",
                std::io::Error::from(e),
            )
        })?;
    }
    Ok(())
}

/// The abstract socket address a topic is served at.
pub(crate) fn socket_address(namespace: &str, topic: &str) -> Result<rustix::net::SocketAddrUnix> {
    rustix::net::SocketAddrUnix::new_abstract_name(format!("holo/{namespace}/{topic}").as_bytes())
        .map_err(|e| {
            Error::invalid_argument(format!(
                "the namespace {namespace:?} and topic {topic:?} make no socket name: {}",
                std::io::Error::from(e)
            ))
        })
}

/// Whether `fd` (a pidfd or a socket) is readable now: the process exited, or the peer
/// sent a byte or closed its end.
pub(crate) fn readable(fd: BorrowedFd<'_>) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
}

/// A code from a refusal's status.
pub(crate) fn code_of(status: u32) -> ErrorCode {
    ErrorCode::ALL
        .get(status as usize - 1)
        .copied()
        .unwrap_or(ErrorCode::Internal)
}

/// The status of a refusal with `code`.
pub(crate) fn status_of(code: ErrorCode) -> u32 {
    ErrorCode::ALL
        .iter()
        .position(|&c| c == code)
        .map_or(u32::MAX, |i| u32::try_from(i + 1).unwrap_or(u32::MAX))
}

/// The index of a dtype or memory kind on the wire.
pub(crate) fn dtype_index(d: DType) -> u8 {
    DType::ALL
        .iter()
        .position(|&x| x == d)
        .map_or(NONE, |i| u8::try_from(i).unwrap_or(NONE))
}

/// The memory kinds, in their wire order.
pub(crate) const KINDS: [MemoryKind; 6] = [
    MemoryKind::Host,
    MemoryKind::PinnedHost,
    MemoryKind::CudaDevice,
    MemoryKind::CudaManaged,
    MemoryKind::OpenClDevice,
    MemoryKind::Device,
];

pub(crate) fn kind_index(k: MemoryKind) -> u8 {
    KINDS
        .iter()
        .position(|&x| x == k)
        .map_or(NONE, |i| u8::try_from(i).unwrap_or(NONE))
}

/// A name of at most [`TOPIC_BYTES`] bytes into a fixed array.
pub(crate) fn name_bytes(name: &str) -> Result<([u8; TOPIC_BYTES], u32)> {
    let b = name.as_bytes();
    if b.len() > TOPIC_BYTES {
        return Err(Error::invalid_argument(format!(
            "the topic name {name:?} is longer than {TOPIC_BYTES} bytes"
        )));
    }
    let mut out = [0u8; TOPIC_BYTES];
    out[..b.len()].copy_from_slice(b);
    Ok((out, u32::try_from(b.len()).unwrap_or(0)))
}

/// A client's handshake up to the welcome: connected, greeted, welcomed.
pub(crate) struct Greeted {
    pub(crate) conn: OwnedFd,
    /// The serving process (a pidfd), and its id.
    pub(crate) server: OwnedFd,
    pub(crate) server_pid: i32,
    pub(crate) welcome: Welcome,
    /// The welcome's two descriptors: the payload, then the control segment.
    pub(crate) payload: OwnedFd,
    pub(crate) control: OwnedFd,
}

/// Connects to `topic` in `namespace` (retrying until `wait` runs out, else `NotFound`
/// with `hint`), says hello with `contract`, and takes the welcome: a refusal is its code
/// and message; the end of the socket `PeerLost`. `server` names the serving role in
/// messages (`exporter`, `session`).
pub(crate) fn connect_and_greet(
    namespace: &str,
    topic: &str,
    contract: WireContract,
    wait: Option<Duration>,
    handshake_timeout: Duration,
    server: &str,
    hint: &str,
) -> Result<Greeted> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let at = format!("topic {topic:?}");
    if handshake_timeout.is_zero() {
        // The socket's timeout cannot be zero (the kernel reads it as "none"; rustix
        // refuses it): it failed later as a lost peer.
        return Err(Error::invalid_argument(
            "a handshake_timeout of zero: each handshake step needs some time (the default is 2 s)",
        )
        .at(at));
    }
    let address = socket_address(namespace, topic)?;
    let deadline = wait.and_then(|w| std::time::Instant::now().checked_add(w));
    let conn = loop {
        let sock = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| {
            Error::new(
                ErrorCode::ResourceExhausted,
                format!("cannot make a socket: {}", std::io::Error::from(e)),
            )
        })?;
        match rustix::net::connect(&sock, &address) {
            Ok(()) => break sock,
            Err(_) if deadline.is_some_and(|d| std::time::Instant::now() < d) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!(
                        "no session serves topic {topic:?} in namespace {namespace:?} ({}); {hint}",
                        std::io::Error::from(e)
                    ),
                )
                .at(at));
            }
        }
    };
    set_timeouts(conn.as_fd(), handshake_timeout)?;
    let pid = rustix::net::sockopt::socket_peercred(&conn)
        .map_err(|e| Error::new(ErrorCode::PeerLost, std::io::Error::from(e).to_string()))?
        .pid;
    let server_fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
        .map_err(|e| {
            Error::new(
                ErrorCode::PeerLost,
                format!(
                    "the {server}'s process is gone: {}",
                    std::io::Error::from(e)
                ),
            )
            .at(at.clone())
        })?;
    let (name, len) = name_bytes(topic)?;
    let mut hello: Hello = zeroed();
    hello.magic = MAGIC;
    hello.version = VERSION;
    hello.topic = name;
    hello.topic_len = len;
    hello.contract = contract;
    send(conn.as_fd(), &hello, &[])?;
    let (welcome, mut fds) = recv::<Welcome>(conn.as_fd()).map_err(|e| e.at(at.clone()))?;
    if welcome.magic != MAGIC {
        return Err(Error::new(
            ErrorCode::ProtocolError,
            format!("the {server}'s answer is not holo's"),
        )
        .at(at));
    }
    if welcome.status != 0 {
        let n = (welcome.message_len as usize).min(welcome.message.len());
        let message = String::from_utf8_lossy(&welcome.message[..n]).into_owned();
        return Err(Error::new(code_of(welcome.status), message).at(at));
    }
    let (Some(control), Some(payload), true) = (fds.pop(), fds.pop(), fds.is_empty()) else {
        return Err(Error::new(
            ErrorCode::ProtocolError,
            format!("the {server}'s welcome carries other than 2 descriptors"),
        )
        .at(at));
    };
    Ok(Greeted {
        conn,
        server: server_fd,
        server_pid: pid.as_raw_nonzero().get(),
        welcome,
        payload,
        control,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn welcome(slots: u32, seats: u32, control_len: u64) -> Welcome {
        Welcome {
            slot_count: slots,
            seats,
            seat: 0,
            per_slot_bytes: 64,
            payload_len: u64::from(slots) * 64,
            control_len,
            ..zeroed()
        }
    }

    #[test]
    fn a_welcome_is_checked_without_overflow() {
        // 4 slots, 2 seats: 8 header words + 4 × 3 = 20 words, 160 bytes.
        let layout = welcome(4, 2, 160).checked_layout(true).unwrap();
        assert_eq!(
            (layout.slots, layout.seats, layout.bytes()),
            (4, 2, Some(160))
        );
        assert!(welcome(4, 2, 159).checked_layout(true).is_none());
        // A publisher's welcome has no seats: 8 + 4 words.
        assert_eq!(
            welcome(4, 2, 96).checked_layout(false).unwrap().bytes(),
            Some(96)
        );
        // The seat must be one of the seats.
        let mut w = welcome(4, 2, 160);
        w.seat = 2;
        assert!(w.checked_layout(true).is_none());
        // The payload must hold every slot.
        let mut w = welcome(4, 2, 160);
        w.payload_len = 255;
        assert!(w.checked_layout(true).is_none());
        w.per_slot_bytes = u64::MAX;
        assert!(w.checked_layout(true).is_none());
        // A hostile peer's counts: 8 + 2^29 × 2^32 words is 2^64 + 64 bytes, which wrapped
        // to 64 in a release build and passed a 64-byte control segment.
        let mut w = welcome(1 << 29, u32::MAX, 64);
        w.per_slot_bytes = 0;
        w.payload_len = 0;
        assert_eq!(w.checked_layout(true).map(|l| l.bytes()), None);
        assert_eq!(
            ControlLayout {
                slots: 1 << 29,
                seats: u32::MAX as usize
            }
            .bytes(),
            None
        );
    }
}
