//! What `ipc_producer` and `ipc_consumer` share: the topic, the frames' bytes, and the
//! consumer.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use holo_runtime::ipc::{EndpointCatalog, ProcessSubscriber, ProcessSubscriberOptions};
use holo_runtime::{Error, ErrorCode, Result, Tensor};

/// The topic the producer's camera frames are exported under.
pub const TOPIC: &str = "camera/frames";

/// Frame k: k in its first 8 bytes (little-endian), `k % 251` in every other byte.
pub fn fill_frame(k: u64, bytes: &mut [u8]) {
    bytes.fill(u8::try_from(k % 251).unwrap_or(0));
    let n = bytes.len().min(8);
    bytes[..n].copy_from_slice(&k.to_le_bytes()[..n]);
}

/// Device frame k: `k % 251 + 1` in every byte (never 0, so a slot never written shows).
pub fn device_fill(k: u64) -> u8 {
    u8::try_from(k % 251).unwrap_or(0) + 1
}

/// The bytes of a received frame, on the host: host memory as it is (no copy); device
/// memory copied on the subscriber's stream, which waited for the frame's fence.
fn host_bytes<'a>(
    frames: &ProcessSubscriber,
    frame: &'a Tensor,
    copy: &'a mut Vec<u8>,
) -> Result<&'a [u8]> {
    let Some(stream) = frames.stream() else {
        return frame.data();
    };
    copy.resize(frame.byte_size(), 0);
    frame.copy_to_host(copy, stream)?;
    Ok(copy)
}

/// The consumer: attaches to [`TOPIC`] through the catalog at `path` (waiting up to 10 s
/// for the producer), prints `consumer (pid …): attached …` as its first line, then
/// receives until the producer stops serving, checking every frame's bytes and that the
/// ids follow each other — a frame whose producer died before its fence
/// (`Tensor::fence_abandoned`) is counted and skipped, not taken for the frame — and
/// prints what it received.
pub fn consume(path: &Path) -> Result<()> {
    let say = |line: std::fmt::Arguments<'_>| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let catalog = EndpointCatalog::read(path)?;
    let mut frames = ProcessSubscriber::attach(
        &catalog,
        TOPIC,
        ProcessSubscriberOptions::DEFAULT.with_wait_for_exporter(Duration::from_secs(10)),
    )?;
    say(format_args!(
        "consumer (pid {}): attached to {TOPIC:?} of the producer (pid {}), seat {}",
        std::process::id(),
        frames.exporter_pid(),
        frames.seat()
    ));
    let (mut received, mut abandoned, mut first, mut next) = (0u64, 0u64, None, None);
    let (mut expect, mut copy) = (Vec::new(), Vec::new());
    let ended = loop {
        match frames.receive_with_info(Duration::from_secs(10)) {
            Ok(Some((frame, info))) => {
                if let Some(n) = next
                    && info.frame < n
                {
                    return Err(Error::new(
                        ErrorCode::ProtocolError,
                        format!("frame {} came after frame {}", info.frame, n - 1),
                    ));
                }
                first.get_or_insert(info.frame);
                next = Some(info.frame + 1);
                let bytes = host_bytes(&frames, &frame, &mut copy)?;
                // The copy ran behind the frame's fence: a producer that died before
                // writing it left bytes that are not the frame's, and the tensor says so.
                if frame.fence_abandoned() {
                    abandoned += 1;
                    continue;
                }
                expect.resize(bytes.len(), 0);
                if frames.device().is_some() {
                    expect.fill(device_fill(info.frame));
                } else {
                    fill_frame(info.frame, &mut expect);
                }
                if let Some(i) = bytes.iter().zip(&expect).position(|(a, b)| a != b) {
                    return Err(Error::new(
                        ErrorCode::ProtocolError,
                        format!(
                            "byte {i} of frame {} is {}, expected {}",
                            info.frame, bytes[i], expect[i]
                        ),
                    ));
                }
                received += 1;
                // `frame` drops here: the producer may reuse its slot.
            }
            Ok(None) => break "no frame for 10 s".to_owned(),
            Err(e) if matches!(e.code(), ErrorCode::Cancelled | ErrorCode::PeerLost) => {
                break format!("{}: {}", e.code().name(), e.message());
            }
            Err(e) => return Err(e),
        }
    };
    say(format_args!(
        "consumer: {received} frames received from another process{}, every byte checked ({}){}; then {ended}",
        first.map_or(String::new(), |f| format!(" (from frame {f})")),
        if frames.device().is_some() {
            "device memory, read on the consumer's stream behind each frame's fence"
        } else {
            "in the shared slot, no copy"
        },
        if abandoned > 0 {
            format!("; {abandoned} abandoned by a producer that died before their fence, skipped")
        } else {
            String::new()
        },
    ));
    Ok(())
}
