//! The release ledger of a device slot, one rule per test: which release events are
//! recorded, on which stream, how many times, and when the slot goes back. Written for
//! the survivors of cargo-mutants (RELIABILITY.md, "Mutation check"): each test names the
//! mutants it kills. Counts are exact: a clean mark exists to spare a record, so a record
//! too many is a broken rule, not a harmless one.
//!
//! The slot under test is slot 1 wherever the slot matters, so that `slot × capacity + i`
//! differs from `slot + capacity + i`, `capacity + i`, `i` and `slot × capacity − i`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::*;
use crate::device::{CallKind, FaultInjecting, SoftwareDevice};

/// A device pool on a backend, with its retirement worker running.
struct Rig {
    backend: Arc<dyn DeviceBackend>,
    retirer: Arc<Retirer>,
    worker: Option<JoinHandle<()>>,
    pool: PoolOwner,
}

impl Rig {
    fn new(backend: Arc<dyn DeviceBackend>, slots: u32, capacity: u32) -> Rig {
        Rig::build(backend, slots, capacity, true)
    }

    /// With `worker` false, the worker's queue but no worker: slots handed over stay
    /// there until a producer's [`Retirer::assist`] takes them (a worker off its CPU).
    fn build(backend: Arc<dyn DeviceBackend>, slots: u32, capacity: u32, worker: bool) -> Rig {
        let retirer = Retirer::new();
        let worker = if worker {
            Some(retirer.start(slots as usize, Duration::ZERO).unwrap())
        } else {
            retirer.install_queue(slots as usize);
            None
        };
        let spec = PoolSpec {
            release_capacity: capacity,
            shared_memory: false,
            ..super::tests::spec(MemoryKind::CudaDevice, slots)
        };
        let pool = Pool::materialize(spec, Some((&backend, &retirer))).unwrap();
        Rig {
            backend,
            retirer,
            worker,
            pool,
        }
    }

    fn software(slots: u32, capacity: u32) -> Rig {
        Rig::new(SoftwareDevice::new(), slots, capacity)
    }

    fn stream(&self) -> StreamHandle {
        self.backend.create_stream().unwrap()
    }

    fn records(&self) -> u64 {
        self.backend.counters().snapshot().event_record
    }

    /// Loans a slot written on `producer` and committed there.
    fn committed(&self, producer: StreamHandle) -> u32 {
        let slot = self.pool.loan(&[16], DType::U8).unwrap();
        let writer = OrderingDomain::partition(producer);
        self.pool.set_writer(slot, writer);
        self.pool.commit(slot, writer, false).unwrap();
        slot
    }

    /// Loans slot 0 and slot 1 of a two-slot pool and commits both; returns slot 1 (slot 0
    /// stays loaned until [`Self::release_other`]).
    fn slot_one(&self, producer: StreamHandle) -> u32 {
        let a = self.committed(producer);
        let b = self.committed(producer);
        assert_eq!((a.min(b), a.max(b)), (0, 1));
        1
    }

    /// Registers each of `streams` as a partition's release stream of `slot` and enters
    /// its domain (a consumer partition receiving the slot): their holders, in order.
    fn receive(&self, slot: u32, streams: &[StreamHandle]) -> Vec<Holder> {
        for &s in streams {
            self.pool
                .register_release(slot, OrderingDomain::partition(s))
                .unwrap();
        }
        streams
            .iter()
            .map(|&s| self.pool.enter_domain(slot, s))
            .collect()
    }

    fn release_other(&self) {
        Pool::release(&self.pool, 0, Holder::NONE);
    }

    /// Release position `i`'s event of `slot`.
    fn event(&self, slot: u32, i: usize) -> EventHandle {
        let d = self.pool.device().unwrap();
        d.release_events[slot as usize * d.release_capacity as usize + i]
    }

    fn clean(&self, slot: u32) -> u64 {
        self.pool.slots[slot as usize]
            .release_clean
            .load(Ordering::Acquire)
    }

    /// Waits (5 s at most) until `n` slots are free.
    fn wait_free(&self, n: u32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.pool.free_slots() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.pool.free_slots() == n
    }

    /// An event recorded on `stream` now: complete once the stream's work before it ran.
    fn probe(&self, stream: StreamHandle) -> EventHandle {
        let e = self.backend.create_event().unwrap();
        self.backend.record_event(e, stream).unwrap();
        e
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.retirer.close();
        self.retirer.shutdown();
        if let Some(w) = self.worker.take() {
            // A worker that panicked (a broken ledger) already failed its test.
            let _ = w.join();
        }
    }
}

/// Kills `release`'s `release_count > 1` → `>= 1`: with one release stream, the slot's
/// last handle records it, and an earlier handle of the same holder records nothing.
#[test]
fn one_holder_with_two_handles_records_its_only_release_stream_once() {
    let rig = Rig::software(2, 2);
    let (producer, s0) = (rig.stream(), rig.stream());
    let slot = rig.committed(producer);
    let h = rig.receive(slot, &[s0])[0];
    assert_eq!(h, Holder(0));
    rig.pool.retain(slot);
    let before = rig.records();
    Pool::release(&rig.pool, slot, h);
    assert_eq!(rig.records() - before, 0, "not the last handle");
    Pool::release(&rig.pool, slot, h);
    assert_eq!(rig.records() - before, 1, "the last handle records once");
    assert!(rig.wait_free(2));
}

/// Kills `record_own_release`'s failure branch mutants (`fetch_and(!(1 << i))` →
/// `fetch_and(1 << i)` or `!(1 >> i)`) and its `base + i` → `base × i` (stream and event):
/// a holder dropping a handle that is not the last records its own stream's release on
/// that stream, with that position's event; one whose own record failed leaves its
/// position unclean — even one an earlier handle of its own marked clean — so the last
/// handle records it again, and the failure is noted for the session.
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn a_failed_own_release_record_leaves_the_position_to_the_last_handle() {
    let faults = FaultInjecting::new(SoftwareDevice::new());
    let rig = Rig::new(Arc::clone(&faults) as Arc<dyn DeviceBackend>, 2, 2);
    let (producer, s0, s1) = (rig.stream(), rig.stream(), rig.stream());
    let slot = rig.slot_one(producer);
    let [h0, h1] = rig.receive(slot, &[s0, s1])[..] else {
        unreachable!("two streams")
    };
    assert_eq!((h0, h1), (Holder(0), Holder(1)));
    rig.pool.retain(slot);
    rig.pool.retain(slot);
    // h1 holds two handles: the first drop records s1's release behind s1's work and
    // marks it clean …
    rig.backend
        .enqueue_delay(s1, Duration::from_millis(300))
        .unwrap();
    let before = rig.records();
    Pool::release(&rig.pool, slot, h1);
    assert_eq!(rig.records() - before, 1);
    assert_eq!(rig.clean(slot), 0b10);
    rig.backend.synchronize_stream(s0).unwrap();
    assert!(
        !rig.backend.query_event(rig.event(slot, 1)).unwrap(),
        "position 1's event, on s1, behind its 300 ms of work"
    );
    // … the second drop's record fails: the mark goes, and nothing else changes.
    faults.fail_nth(CallKind::RecordEvent, 1, ErrorCode::DeviceUnavailable);
    Pool::release(&rig.pool, slot, h1);
    assert_eq!(faults.injected(CallKind::RecordEvent), 1);
    assert_eq!(rig.clean(slot), 0);
    // The last handle records both positions.
    let before = rig.records();
    Pool::release(&rig.pool, slot, h0);
    assert_eq!(rig.records() - before, 2, "s0 and the unclean s1");
    assert_eq!(
        rig.retirer.take_error().map(|e| e.code()),
        Some(ErrorCode::DeviceUnavailable)
    );
    rig.release_other();
    assert!(rig.wait_free(2));
}

/// Kills `record_release_at`'s `base + i` → `base − i` / `base × i` (the stream looked up
/// when the hand-off names none), `fetch_or(1 << i)` → `fetch_or(1 >> i)` and
/// `mark_clean && …` → `||`: a hand-off's release is recorded on its own stream, behind its
/// work, and marked clean — unless the stream is one the backend runs itself — so the
/// slot's last handle records only the other positions.
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn a_hand_off_records_its_release_on_its_stream_and_marks_it_clean() {
    let rig = Rig::software(2, 3);
    let (producer, s0, s1, s2) = (rig.stream(), rig.stream(), rig.stream(), rig.stream());
    let slot = rig.slot_one(producer);
    let h0 = rig.receive(slot, &[s0])[0];
    let hb = rig.pool.enter_borrowed(slot, s1, true).unwrap();
    assert_eq!((h0, hb), (Holder(0), Holder(1)));
    rig.pool.retain(slot); // the hand-off's handle
    rig.backend
        .enqueue_delay(s1, Duration::from_millis(300))
        .unwrap();
    let before = rig.records();
    rig.pool.record_release_at(slot, hb, None, true).unwrap();
    assert_eq!(rig.records() - before, 1);
    rig.backend.synchronize_stream(s0).unwrap();
    assert!(
        !rig.backend.query_event(rig.event(slot, 1)).unwrap(),
        "recorded on s1, behind its 300 ms of work"
    );
    assert_eq!(rig.clean(slot), 0b10);
    // A hand-off on a stream the backend runs: recorded, not marked.
    let hc = rig.pool.enter_borrowed(slot, s2, false).unwrap();
    assert_eq!(hc, Holder(2));
    rig.pool.record_release_at(slot, hc, None, false).unwrap();
    assert_eq!(rig.records() - before, 2);
    assert_eq!(rig.clean(slot), 0b10);
    Pool::release(&rig.pool, slot, Holder::NONE);
    Pool::release(&rig.pool, slot, h0);
    assert_eq!(
        rig.records() - before,
        4,
        "the last handle records s0 and s2, not the clean s1"
    );
    rig.release_other();
    assert!(rig.wait_free(2));
}

/// Kills `mark_release_clean`'s `1 << i` → `1 >> i` and `i < CLEAN_BITS` → `<=`: a
/// hand-off that waited for its stream on the host marks the position clean, so the last
/// handle does not record on it; a position past the clean marks marks nothing.
#[test]
fn a_release_marked_clean_spares_the_last_handle_its_record() {
    let rig = Rig::software(2, 3);
    let (producer, s0, s1) = (rig.stream(), rig.stream(), rig.stream());
    let slot = rig.slot_one(producer);
    let h0 = rig.receive(slot, &[s0])[0];
    let hb = rig.pool.enter_borrowed(slot, s1, true).unwrap();
    assert_eq!(hb, Holder(1));
    rig.pool.retain(slot);
    rig.pool.mark_release_clean(slot, hb);
    rig.pool.mark_release_clean(slot, Holder(64));
    assert_eq!(rig.clean(slot), 0b10);
    Pool::release(&rig.pool, slot, Holder::NONE);
    let before = rig.records();
    Pool::release(&rig.pool, slot, h0);
    assert_eq!(rig.records() - before, 1, "s0 only");
    rig.release_other();
    assert!(rig.wait_free(2));
}

/// Kills `enter_borrowed`'s `!hand_offs_only` → `hand_offs_only` and `enter_position`'s
/// seven mutants of the clean-mark test and clear: a stream's domain entered again
/// clears its clean mark (its earlier record no longer covers the new work) and leaves
/// the other positions' marks; a caller's raw stream, which only hand-offs use, keeps it
/// (each hand-off records its own release when it ends).
#[test]
fn entering_a_domain_again_clears_its_clean_mark_and_only_that() {
    let rig = Rig::software(2, 3);
    let (producer, s0, s1) = (rig.stream(), rig.stream(), rig.stream());
    let slot = rig.slot_one(producer);
    let [h0, h1] = rig.receive(slot, &[s0, s1])[..] else {
        unreachable!("two streams")
    };
    rig.pool.retain(slot);
    Pool::release(&rig.pool, slot, h1);
    assert_eq!(rig.clean(slot), 0b10, "h1 recorded s1");
    // A hand-off on s1 as a caller's raw stream keeps the mark …
    assert_eq!(rig.pool.enter_borrowed(slot, s1, true).unwrap(), Holder(1));
    assert_eq!(rig.clean(slot), 0b10);
    // … one on s1 as a stream the backend runs clears it.
    assert_eq!(rig.pool.enter_borrowed(slot, s1, false).unwrap(), Holder(1));
    assert_eq!(rig.clean(slot), 0);
    // Both marks set, then s0 entered again: s1's stays.
    rig.pool.mark_release_clean(slot, Holder(0));
    rig.pool.mark_release_clean(slot, Holder(1));
    assert_eq!(rig.pool.enter_domain(slot, s0), Holder(0));
    assert_eq!(rig.clean(slot), 0b10);
    // The last handle, s0's holder, records s0 (its own) and not the clean s1.
    let before = rig.records();
    Pool::release(&rig.pool, slot, h0);
    assert_eq!(rig.records() - before, 1);
    rig.release_other();
    assert!(rig.wait_free(2));
}

/// Kills `retire`'s `i < CLEAN_BITS` → `<=` and `register_release`'s sticky-mark bound
/// (`i < CLEAN_BITS` → `<=`): a slot with more release streams than clean marks (66 > 64)
/// records every one at its last handle.
#[test]
fn a_slot_with_more_release_streams_than_clean_marks_records_every_one() {
    let rig = Rig::software(1, 70);
    let producer = rig.stream();
    let slot = rig.committed(producer);
    let streams: Vec<StreamHandle> = (0..66).map(|_| rig.stream()).collect();
    for &s in &streams {
        rig.pool
            .register_release(slot, OrderingDomain::caller(s))
            .unwrap();
    }
    assert_eq!(rig.pool.release_stream_count(slot), 66);
    let before = rig.records();
    Pool::release(&rig.pool, slot, Holder::NONE);
    assert_eq!(rig.records() - before, 66);
    assert!(rig.wait_free(1));
}

/// Kills `release_after_teardown`'s ten mutants (the slot's base, the sticky filter, the
/// stream and the event looked up) and `register_release`'s `owner == Caller` → `!=`, its
/// sticky-mark mutants, `base × …` → `base / …`, `base + i` → `base × i` in the duplicate
/// search and `base + n` → `base × n`, and `device_backing`'s `n × r` → `n + r`: a slot
/// whose last handle drops after its session's teardown records and waits on the host
/// for each stream a caller registered — exactly those, each on its own event — and
/// touches no other slot's events.
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn a_release_after_teardown_waits_on_the_host_for_each_callers_stream() {
    let rig = Rig::software(2, 3);
    let (producer, s0, s1, s2, other) = (
        rig.stream(),
        rig.stream(),
        rig.stream(),
        rig.stream(),
        rig.stream(),
    );
    let slot = rig.slot_one(producer);
    rig.receive(slot, &[s0]);
    for s in [s1, s2, s1] {
        rig.pool
            .register_release(slot, OrderingDomain::caller(s))
            .unwrap();
    }
    assert_eq!(rig.pool.release_stream_count(slot), 3, "s1 once");
    assert_eq!(
        rig.pool.slots[slot as usize]
            .release_sticky
            .load(Ordering::Acquire),
        0b110,
        "the caller's streams are sticky"
    );
    // Slot 0's events 1 and 2 are pending behind a second of work on another stream.
    rig.backend
        .enqueue_delay(other, Duration::from_secs(1))
        .unwrap();
    for i in [1, 2] {
        rig.backend.record_event(rig.event(0, i), other).unwrap();
    }
    // The callers' streams have work; a probe after it on each.
    let mut probes = Vec::new();
    for s in [s1, s2] {
        rig.backend
            .enqueue_delay(s, Duration::from_millis(200))
            .unwrap();
        probes.push(rig.probe(s));
    }
    rig.retirer.close();
    let before = rig.backend.counters().snapshot();
    Pool::release(&rig.pool, slot, Holder::NONE);
    let made = rig.backend.counters().snapshot() - before;
    // Recorded on s1 and s2, not on the session's s0; every release event of the slot is
    // waited for (s0's completed with the teardown: at once), so that a hand-off's,
    // recorded on a caller's stream when it ended, covers that stream's work too.
    assert_eq!(
        (made.event_record, made.event_synchronize),
        (2, 3),
        "s1 and s2, not the session's s0"
    );
    for p in probes {
        assert!(
            rig.backend.query_event(p).unwrap(),
            "waited for the caller's stream"
        );
    }
    for i in [1, 2] {
        assert!(
            !rig.backend.query_event(rig.event(0, i)).unwrap(),
            "slot 0's event {i} was not recorded again"
        );
    }
    assert_eq!(rig.pool.free_slots(), 1, "slot 1 is back");
    rig.backend.synchronize_stream(other).unwrap();
}

/// Kills `wait_release`'s `Ok(())` replacement, `slot × capacity` → `+` / `/` and
/// `base + i` → `×` / `−`: when polling a slot's release fails, the worker notes the error
/// and waits on the host for each of the slot's release events before the slot goes back.
#[test]
fn a_failed_poll_waits_on_the_host_for_every_release_event() {
    let faults = FaultInjecting::new(SoftwareDevice::new());
    let rig = Rig::new(Arc::clone(&faults) as Arc<dyn DeviceBackend>, 2, 2);
    let (producer, s0, s1) = (rig.stream(), rig.stream(), rig.stream());
    let slot = rig.slot_one(producer);
    rig.receive(slot, &[s0, s1]);
    rig.backend
        .enqueue_delay(s1, Duration::from_millis(300))
        .unwrap();
    let probe = rig.probe(s1);
    faults.fail_from(CallKind::QueryEvent, 1, ErrorCode::DeviceUnavailable);
    Pool::release(&rig.pool, slot, Holder::NONE);
    assert!(rig.wait_free(1), "slot 1 back after the host wait");
    faults.heal(CallKind::QueryEvent);
    assert!(
        rig.backend.query_event(probe).unwrap(),
        "the slot went back only after s1's work"
    );
    assert_eq!(
        rig.retirer.take_error().map(|e| e.code()),
        Some(ErrorCode::DeviceUnavailable)
    );
    rig.release_other();
}

/// Kills `Retirer::outstanding` → 0: a retiring slot is outstanding until it is back.
/// The worker returns the slot to its pool first and counts it off after, so a teardown
/// that sees nothing outstanding sees the slot back; the test waits on the count and
/// then checks the pool, in that order. (Checking the count right after seeing the slot
/// free raced the worker's two steps: Miri's scheduler lost that race.)
#[test]
fn a_retiring_slot_is_outstanding_until_it_is_back() {
    let rig = Rig::software(1, 1);
    let (producer, s0) = (rig.stream(), rig.stream());
    let slot = rig.committed(producer);
    rig.receive(slot, &[s0]);
    rig.backend
        .enqueue_delay(s0, Duration::from_millis(200))
        .unwrap();
    assert_eq!(rig.retirer.outstanding(), 0);
    Pool::release(&rig.pool, slot, Holder::NONE);
    assert_eq!(rig.retirer.outstanding(), 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while rig.retirer.outstanding() != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rig.retirer.outstanding(), 0);
    assert_eq!(rig.pool.free_slots(), 1, "counted off before it was back");
}

/// Kills `Retirer::withhold` → `()` and `Retirer::set_on_error` → `()`: a slot whose
/// release can be neither recorded nor waited for is withheld — never back on the free
/// list, its pool count kept, no longer outstanding — and each failure calls the
/// session's error hook.
#[test]
fn a_release_that_can_be_neither_recorded_nor_waited_is_withheld() {
    let faults = FaultInjecting::new(SoftwareDevice::new());
    let rig = Rig::new(Arc::clone(&faults) as Arc<dyn DeviceBackend>, 2, 1);
    let hooked = Arc::new(AtomicUsize::new(0));
    let calls = Arc::clone(&hooked);
    rig.retirer.set_on_error(Box::new(move || {
        calls.fetch_add(1, Ordering::SeqCst);
    }));
    let (producer, s0) = (rig.stream(), rig.stream());
    let slot = rig.committed(producer);
    rig.receive(slot, &[s0]);
    let counts = Arc::strong_count(&rig.pool);
    faults.fail_from(CallKind::RecordEvent, 1, ErrorCode::DeviceUnavailable);
    faults.fail_from(CallKind::SynchronizeStream, 1, ErrorCode::DeviceUnavailable);
    Pool::release(&rig.pool, slot, Holder::NONE);
    assert_eq!(hooked.load(Ordering::SeqCst), 2, "the record and the wait");
    assert_eq!(rig.retirer.outstanding(), 0);
    assert_eq!(rig.pool.free_slots(), 1, "the slot is not back");
    assert_eq!(
        Arc::strong_count(&rig.pool),
        counts,
        "its count is withheld with it"
    );
    faults.heal(CallKind::RecordEvent);
    faults.heal(CallKind::SynchronizeStream);
}

/// Kills `poll_pending`'s `i += 1` → `i *= 1` and `release_complete`'s `slot × capacity`
/// → `slot / capacity`: a slot whose release completed goes back while one retired before
/// it still waits for its stream, each polled on its own events.
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn a_completed_slot_goes_back_while_an_earlier_one_still_waits() {
    let rig = Rig::software(2, 2);
    let (producer, slow, fast) = (rig.stream(), rig.stream(), rig.stream());
    assert_eq!(rig.slot_one(producer), 1);
    let (a, b) = (0, 1);
    rig.receive(a, &[slow]);
    rig.receive(b, &[fast]);
    rig.backend
        .enqueue_delay(slow, Duration::from_secs(2))
        .unwrap();
    let probe = rig.probe(slow);
    Pool::release(&rig.pool, a, Holder::NONE);
    // The worker has `a` pending before `b` arrives.
    std::thread::sleep(Duration::from_millis(20));
    Pool::release(&rig.pool, b, Holder::NONE);
    let deadline = Instant::now() + Duration::from_millis(1500);
    while rig.pool.free_slots() < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rig.pool.free_slots(), 1, "b is back");
    assert!(
        !rig.backend.query_event(probe).unwrap(),
        "while a's stream is still busy"
    );
    assert!(rig.wait_free(2));
}

/// Kills `release`'s `!pass_through` and `!closed` deletions and
/// `claim_free_list` → `()`: a slot the owner thread releases goes on its private stack,
/// last in first out, ahead of the shared queue.
#[test]
fn the_owner_threads_releases_are_reused_last_in_first_out() {
    let p = Pool::materialize(host_spec(3), None).unwrap();
    p.claim_free_list();
    let (a, b) = (p.borrow_slot().unwrap(), p.borrow_slot().unwrap());
    Pool::release(&p, a, Holder::NONE);
    Pool::release(&p, b, Holder::NONE);
    assert_eq!(p.borrow_slot().unwrap(), b);
    assert_eq!(p.borrow_slot().unwrap(), a);
    p.give_back_free_list();
}

/// Kills `give_back_free_list` → `()`: the owner's private slots go back to the shared
/// queue when it gives the list up, so another thread can loan every slot.
#[test]
fn slots_the_owner_gave_back_are_loaned_by_another_thread() {
    let p = Pool::materialize(host_spec(2), None).unwrap();
    p.claim_free_list();
    let (a, b) = (p.borrow_slot().unwrap(), p.borrow_slot().unwrap());
    Pool::release(&p, a, Holder::NONE);
    Pool::release(&p, b, Holder::NONE);
    p.give_back_free_list();
    let pool = Arc::clone(&p);
    let loaned = std::thread::spawn(move || {
        let slots = [pool.borrow_slot(), pool.borrow_slot()];
        let ok = slots.iter().filter(|s| s.is_ok()).count();
        for s in slots.into_iter().flatten() {
            Pool::release(&pool, s, Holder::NONE);
        }
        ok
    })
    .join()
    .unwrap();
    assert_eq!(loaned, 2);
}

/// Kills `readiness_event_slow`'s deleted `HOST`, `RECORDED` and `ELIDED` arms and
/// `set_writer` → `()`: a fused (elided) commit's readiness is recorded lazily on the
/// writer's stream, once, the first time a consumer asks; a host commit has none.
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn an_elided_readiness_is_recorded_once_on_the_writers_stream() {
    let rig = Rig::software(2, 1);
    let producer = rig.stream();
    let slot = rig.pool.loan(&[16], DType::U8).unwrap();
    let writer = OrderingDomain::partition(producer);
    rig.pool.set_writer(slot, writer);
    rig.pool.commit(slot, writer, true).unwrap();
    assert_eq!(rig.pool.readiness_state(slot), readiness::ELIDED);
    rig.backend
        .enqueue_delay(producer, Duration::from_millis(300))
        .unwrap();
    let before = rig.records();
    let (event, _) = rig.pool.readiness_event(slot).unwrap().expect("recorded");
    assert_eq!(rig.records() - before, 1);
    assert!(
        !rig.backend.query_event(event).unwrap(),
        "on the writer's stream, behind its work"
    );
    assert!(rig.pool.readiness_event(slot).unwrap().is_some());
    assert_eq!(rig.records() - before, 1, "recorded once");
    assert_eq!(rig.pool.writer_stream(slot), Some(producer));
    Pool::release(&rig.pool, slot, Holder::NONE);
    // A host commit on a device pool: complete bytes, no event.
    let host = rig.pool.loan(&[16], DType::U8).unwrap();
    rig.pool.commit(host, OrderingDomain::Host, false).unwrap();
    assert!(rig.pool.readiness_event(host).unwrap().is_none());
    Pool::release(&rig.pool, host, Holder::NONE);
    rig.backend.synchronize_stream(producer).unwrap();
}

fn host_spec(slots: u32) -> PoolSpec {
    PoolSpec {
        release_capacity: 0,
        shared_memory: false,
        ..super::tests::spec(MemoryKind::Host, slots)
    }
}

/// A committed device tensor of 16 bytes, written on `producer` (bound as the pool's
/// planned stream, as a session binds its output's).
fn device_tensor(rig: &Rig, producer: StreamHandle) -> crate::Tensor {
    rig.pool.bind_loan_streams(LoanStreams {
        planned: Some(producer),
        fused: None,
    });
    written_tensor(&rig.pool, &[16], producer)
}

/// Kills `DeviceArray::drop`'s `synchronize_stream(..).is_ok() && mark_clean` → `||`: an
/// array whose release record failed waits for its stream on the host, and then marks
/// the position clean only on a caller's raw stream — a stream the backend runs may go
/// on carrying work on the slot, so its position stays for the last handle to record.
#[test]
fn a_failed_hand_off_record_marks_clean_only_a_callers_raw_stream() {
    use crate::device::{CudaStreamPtr, StreamOrQueue};
    let faults = FaultInjecting::new(SoftwareDevice::new());
    let rig = Rig::new(Arc::clone(&faults) as Arc<dyn DeviceBackend>, 1, 2);
    let producer = rig.stream();
    let t = device_tensor(&rig, producer);
    let backend_stream = rig.stream();
    for (stream, marked) in [
        (StreamOrQueue::Backend(backend_stream), 0b00),
        // The software device's default stream stands for a caller's raw stream.
        (StreamOrQueue::Cuda(CudaStreamPtr::LEGACY), 0b10),
    ] {
        let array = t.device_array(stream).unwrap();
        faults.fail_nth(CallKind::RecordEvent, 1, ErrorCode::DeviceUnavailable);
        let synchronized = faults.calls(CallKind::SynchronizeStream);
        drop(array);
        assert_eq!(
            faults.injected(CallKind::RecordEvent),
            u64::from(marked != 0) + 1
        );
        assert_eq!(
            faults.calls(CallKind::SynchronizeStream),
            synchronized + 1,
            "the failed record fell back to a host wait"
        );
        assert_eq!(rig.clean(0), marked, "{stream:?}");
    }
    drop(t);
    assert!(rig.wait_free(1));
}

/// Kills `hand_off`'s `stream == PER_THREAD` → `!=` (which stream a hand-off's release is
/// recorded on when its array is dropped on another thread): an array on a stream other
/// than CUDA's per-thread default stream records its release on that stream, whichever
/// thread drops it.
#[test]
fn an_array_dropped_on_another_thread_records_on_its_own_stream() {
    use crate::device::{DeviceCall, Observed, StreamOrQueue};
    let recorded: Arc<std::sync::Mutex<Vec<u64>>> = Arc::default();
    let sink = Arc::clone(&recorded);
    let observed = Observed::new(SoftwareDevice::new(), move |call, _| {
        if let DeviceCall::RecordEvent { stream, .. } = call {
            sink.lock().unwrap().push(stream.raw());
        }
    });
    let rig = Rig::new(observed, 1, 2);
    let producer = rig.stream();
    let t = device_tensor(&rig, producer);
    let caller = rig.stream();
    let array = t
        .clone()
        .into_device_array(StreamOrQueue::Backend(caller))
        .unwrap();
    recorded.lock().unwrap().clear();
    std::thread::spawn(move || drop(array)).join().unwrap();
    assert_eq!(*recorded.lock().unwrap(), vec![caller.raw()]);
    drop(t);
    assert!(rig.wait_free(1));
}

/// Kills `Drop for HostCopy` → `()` and its `pending && …` → `||`: a copy to the host
/// dropped before it was synchronized waits for the array's stream (its destination must
/// outlive the copy), once; one already synchronized waits no more.
#[test]
fn an_unsynchronized_host_copy_waits_for_its_stream_when_dropped() {
    use crate::device::StreamOrQueue;
    let rig = Rig::software(1, 2);
    let producer = rig.stream();
    let t = device_tensor(&rig, producer);
    let caller = rig.stream();
    let array = t.device_array(StreamOrQueue::Backend(caller)).unwrap();
    let waits = || rig.backend.counters().snapshot().stream_synchronize;
    rig.backend
        .enqueue_delay(caller, Duration::from_millis(100))
        .unwrap();
    let before = waits();
    let copy = array.copy_to_host_async(vec![0; 16]).unwrap();
    let probe = rig.probe(caller);
    drop(copy);
    assert_eq!(waits() - before, 1, "the unsynchronized copy waited once");
    assert!(
        rig.backend.query_event(probe).unwrap(),
        "the stream ran the copy before its destination was freed"
    );
    let before = waits();
    let bytes = array
        .copy_to_host_async(vec![0; 16])
        .unwrap()
        .synchronize_stream()
        .unwrap();
    assert_eq!(bytes.len(), 16);
    assert_eq!(waits() - before, 1, "synchronized once, not again at drop");
    drop(array);
    drop(t);
    assert!(rig.wait_free(1));
}

/// Fails when the worker's count of a slot's completed events starts again at 0 each pass
/// (checked: 5595 queries against 1505): a release event the worker found complete is not
/// queried again while it keeps polling the slot's other, still pending, event. (Every query takes the CUDA
/// driver's context lock, which the partitions' submissions need.)
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn the_worker_does_not_query_a_completed_release_event_again() {
    use crate::device::{DeviceCall, Observed};
    let queries: Arc<std::sync::Mutex<std::collections::HashMap<u64, u64>>> = Arc::default();
    let sink = Arc::clone(&queries);
    let inner = SoftwareDevice::new();
    let observed = Observed::new(
        Arc::clone(&inner) as Arc<dyn DeviceBackend>,
        move |call, _| {
            if let DeviceCall::QueryEvent { event } = call {
                *sink.lock().unwrap().entry(event.raw()).or_default() += 1;
            }
        },
    );
    let rig = Rig::new(observed, 2, 2);
    let (producer, idle, delayed) = (rig.stream(), rig.stream(), rig.stream());
    let slot = rig.slot_one(producer);
    rig.receive(slot, &[idle, delayed]);
    rig.backend
        .enqueue_delay(delayed, Duration::from_secs(2))
        .unwrap();
    Pool::release(&rig.pool, slot, Holder::NONE);
    let (done, pending) = (rig.event(slot, 0), rig.event(slot, 1));
    let count = |e: EventHandle| queries.lock().unwrap().get(&e.raw()).copied().unwrap_or(0);
    // Unobserved (the inner device): the idle stream's release completes at once, the
    // delayed one's only after its delay.
    let deadline = Instant::now() + Duration::from_secs(1);
    while !inner.query_event(done).unwrap() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    // The worker's passes (one every few µs) see it complete...
    std::thread::sleep(Duration::from_millis(100));
    let (seen, polled) = (count(done), count(pending));
    // ...and keep polling the pending one, never the completed one again.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !inner.query_event(pending).unwrap(),
        "the delayed stream's delay still runs"
    );
    assert!(seen >= 1, "the completed event was queried");
    assert_eq!(
        count(done),
        seen,
        "a completed release event was queried again"
    );
    assert!(count(pending) > polled, "the pending event is still polled");
    rig.release_other();
    assert!(rig.wait_free(2));
}

/// Kills `release_complete`'s `busy` check and insert: slots whose release events wait on
/// one busy stream cost the worker one query per pass (the first slot's), not one per
/// slot. The later slots' events are not queried until the stream is done; then every
/// slot goes back.
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn the_worker_queries_one_event_per_busy_stream_per_pass() {
    use crate::device::{DeviceCall, Observed};
    let queries: Arc<std::sync::Mutex<std::collections::HashMap<u64, u64>>> = Arc::default();
    let sink = Arc::clone(&queries);
    let observed = Observed::new(
        SoftwareDevice::new() as Arc<dyn DeviceBackend>,
        move |call, _| {
            if let DeviceCall::QueryEvent { event } = call {
                *sink.lock().unwrap().entry(event.raw()).or_default() += 1;
            }
        },
    );
    let rig = Rig::new(observed, 3, 1);
    let (producer, slow) = (rig.stream(), rig.stream());
    let slots: Vec<u32> = (0..3).map(|_| rig.committed(producer)).collect();
    rig.backend
        .enqueue_delay(slow, Duration::from_millis(400))
        .unwrap();
    for &slot in &slots {
        rig.receive(slot, &[slow]);
    }
    // Handed over in this order, each with its release event recorded on `slow` behind
    // the delay.
    for &slot in &slots {
        Pool::release(&rig.pool, slot, Holder::NONE);
    }
    std::thread::sleep(Duration::from_millis(150));
    let count = |slot: u32| {
        queries
            .lock()
            .unwrap()
            .get(&rig.event(slot, 0).raw())
            .copied()
            .unwrap_or(0)
    };
    let (first, later) = (count(slots[0]), count(slots[1]) + count(slots[2]));
    assert!(first > 0, "the first slot's event is polled");
    assert_eq!(later, 0, "the later slots' events wait for the busy stream");
    assert!(
        rig.wait_free(3),
        "every slot goes back once the stream is done"
    );
}

/// A producer whose pool is empty polls the slots waiting on the retirement worker
/// itself (`Pool::reclaim`, `Retirer::assist`): a slot whose release events completed is
/// loaned again at once, whether or not the worker came round to it; one whose events
/// have not completed is not waited for (`ResourceExhausted` at once, the event still
/// incomplete after the refusal). Here there is no worker at all. Fails with the
/// reclaim removed from `borrow_slot`: the first loan after the release is refused.
#[test]
#[cfg_attr(
    miri,
    ignore = "timing window calibrated for native speed: Miri runs the code thousands of times slower"
)]
fn an_empty_pool_takes_back_a_retired_slot_whose_release_completed() {
    let rig = Rig::build(SoftwareDevice::new(), 1, 1, false);
    let (producer, consumer) = (rig.stream(), rig.stream());
    let slot = rig.committed(producer);
    rig.receive(slot, &[consumer]);
    Pool::release(&rig.pool, slot, Holder::NONE);
    assert_eq!(
        rig.retirer.outstanding(),
        1,
        "the slot went to the worker's queue"
    );
    rig.backend.synchronize_stream(consumer).unwrap();
    let again = rig.pool.loan(&[16], DType::U8).unwrap();
    assert_eq!(again, slot);
    assert_eq!(rig.retirer.outstanding(), 0);

    // Its release now behind a delay: refused at once, not waited for.
    let writer = OrderingDomain::partition(producer);
    rig.pool.set_writer(again, writer);
    rig.pool.commit(again, writer, false).unwrap();
    rig.backend
        .enqueue_delay(consumer, Duration::from_millis(300))
        .unwrap();
    rig.receive(again, &[consumer]);
    Pool::release(&rig.pool, again, Holder::NONE);
    let err = rig.pool.loan(&[16], DType::U8).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ResourceExhausted);
    assert!(
        !rig.backend.query_event(rig.event(slot, 0)).unwrap(),
        "the refusal waited for the release"
    );
    assert_eq!(rig.retirer.pending_len(), 1, "the slot waits, polled once");
    rig.backend.synchronize_stream(consumer).unwrap();
    assert_eq!(rig.pool.loan(&[16], DType::U8).unwrap(), slot);
    assert_eq!(rig.retirer.outstanding(), 0);
    Pool::release(&rig.pool, slot, Holder::NONE);
}

/// A device pool on a retirer with no worker (a pool used outside a session) whose last
/// count is a slot's: the slot's last release returns it, which frees the pool and, with
/// the pool's count of it, the retirer. The retirer must not be touched after that (Miri
/// reported its use after the free as undefined behaviour; natively it wrote freed memory).
#[test]
fn the_last_release_on_a_retirer_without_a_worker_frees_the_pool_and_the_retirer() {
    let backend: Arc<dyn DeviceBackend> = SoftwareDevice::new();
    let retirer = Retirer::new();
    let spec = PoolSpec {
        release_capacity: 1,
        shared_memory: false,
        ..super::tests::spec(MemoryKind::CudaDevice, 1)
    };
    let pool = Pool::materialize(spec, Some((&backend, &retirer))).unwrap();
    let weak_retirer = Arc::downgrade(&retirer);
    drop(retirer);
    let stream = backend.create_stream().unwrap();
    let slot = pool.loan(&[16], DType::U8).unwrap();
    let writer = OrderingDomain::partition(stream);
    pool.set_writer(slot, writer);
    pool.commit(slot, writer, false).unwrap();
    // A consumer's release stream: the last release hands the slot to the retirer.
    let consumer = backend.create_stream().unwrap();
    pool.register_release(slot, OrderingDomain::partition(consumer))
        .unwrap();
    let holder = pool.enter_domain(slot, consumer);
    let weak_pool = Arc::downgrade(&pool);
    // The slot's handle, as a tensor holds it: the count its loan took.
    // SAFETY: the loan took one strong count of the pool, which this handle carries.
    let handle = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(Arc::as_ptr(&pool)) });
    drop(pool);
    assert!(
        weak_pool.upgrade().is_some(),
        "the slot's count keeps the pool"
    );
    Pool::release(&handle, slot, holder);
    assert!(
        weak_pool.upgrade().is_none(),
        "the last release freed the pool"
    );
    assert!(weak_retirer.upgrade().is_none(), "and the retirer");
    for s in [stream, consumer] {
        backend.synchronize_stream(s).unwrap();
        backend.destroy_stream(s).unwrap();
    }
}
