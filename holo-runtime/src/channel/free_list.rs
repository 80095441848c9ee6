//! A pool's free list of slot indices.
//!
//! Any thread can return a slot (a consumer dropping the last handle on its own partition
//! thread, the retirement worker, a thread a tensor escaped to), but only one thread
//! borrows: the partition thread of the operator that owns the pool. So the list has two
//! parts:
//!
//! - a lock-free queue (`crossbeam_queue::ArrayQueue`) that every thread can push to, and
//! - a private stack of the **owner thread**, used with plain loads and stores. A slot
//!   released on the owner thread (producer and consumer in one partition) goes there and
//!   is borrowed from there first: an in-partition hop takes no compare-and-swap at all.
//!
//! The partition thread claims ownership of its operators' pools when it starts and gives
//! it back (moving its private slots to the shared queue) before it exits, so once the
//! session joined its threads every free slot is in the shared queue again.

use super::sync::{self, AtomicUsize, Ordering, SlotCell};

/// Any thread pushes and pops (crossbeam's `ArrayQueue`, or its loom model: see
/// [`sync`](super::sync)).
type SharedQueue = sync::ArrayQueue<u32>;

/// The calling thread's identity: the address of its `TOKEN`, one instruction. Never 0.
/// Distinct among live threads; a later thread may get a dead one's address, so whoever
/// records a token (a free list's owner, the thread that runs an operator's callbacks)
/// clears it before that thread exits.
#[inline]
pub(crate) fn token() -> usize {
    sync::TOKEN.with(|t| std::ptr::from_ref(t) as usize)
}

const NO_OWNER: usize = 0;

pub(crate) struct FreeList {
    shared: SharedQueue,
    /// The token of the thread that owns `local`, or `NO_OWNER`. Written only by that
    /// thread (claim and give back), so a thread reads its own token here exactly while it
    /// is the owner.
    owner: AtomicUsize,
    /// The owner's private stack: room for every slot, touched only by the owner.
    local: Box<[SlotCell]>,
    /// Entries in `local`: written only by the owner; read by anyone for `len`.
    local_len: AtomicUsize,
}

// SAFETY: `local` is read and written only by the thread whose token is in `owner` (see
// `is_owner`); a thread puts its token there and takes it out itself, and gives the
// entries back to the shared queue before it takes it out, so a later thread with the
// same token address (a reused thread-local block) is ordered after the old owner's exit
// by the thread's creation. Everything else is atomic.
unsafe impl Sync for FreeList {}
// SAFETY: as above; the list owns only `u32`s.
unsafe impl Send for FreeList {}

impl FreeList {
    /// A list holding every slot `0..count`, with no owner.
    pub(crate) fn full(count: u32) -> Result<FreeList, crate::cold::ColdAllocError> {
        let n = count.max(1) as usize;
        // An ArrayQueue slot: a stamp and the index.
        crate::cold::probe(n, size_of::<(AtomicUsize, u32)>())?;
        let shared = SharedQueue::new(n);
        for i in 0..count {
            let _ = shared.push(i);
        }
        Ok(FreeList {
            shared,
            owner: AtomicUsize::new(NO_OWNER),
            local: crate::cold::boxed_slice(count as usize, |_| SlotCell::new(0))?,
            local_len: AtomicUsize::new(0),
        })
    }

    /// A list with room for one slot and none free (a pass-through tensor's pool).
    pub(crate) fn empty() -> FreeList {
        FreeList {
            shared: SharedQueue::new(1),
            owner: AtomicUsize::new(NO_OWNER),
            local: Box::new([]),
            local_len: AtomicUsize::new(0),
        }
    }

    #[inline]
    fn is_owner(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == token()
    }

    /// Takes a free slot: the owner's private ones first.
    #[inline]
    pub(crate) fn pop(&self) -> Option<u32> {
        if self.is_owner() {
            let n = self.local_len.load(Ordering::Relaxed);
            if n > 0 {
                // SAFETY: only the owner touches `local` (the type's contract), and
                // `n - 1 < local.len()` holds an entry the owner pushed.
                let slot = unsafe { self.local[n - 1].get() };
                self.local_len.store(n - 1, Ordering::Relaxed);
                return Some(slot);
            }
        }
        self.shared.pop()
    }

    /// Returns a free slot to the owner's private stack, if the calling thread is the
    /// owner; `false` (nothing done) otherwise.
    #[inline]
    pub(crate) fn push_owned(&self, slot: u32) -> bool {
        if !self.is_owner() {
            return false;
        }
        let n = self.local_len.load(Ordering::Relaxed);
        if n >= self.local.len() {
            return false;
        }
        // SAFETY: owner only; `n` is in bounds and vacant.
        unsafe { self.local[n].set(slot) };
        self.local_len.store(n + 1, Ordering::Relaxed);
        true
    }

    /// Returns a free slot to the shared queue (any thread). Every slot is in the list at
    /// most once, so it always has room.
    #[inline]
    pub(crate) fn push_shared(&self, slot: u32) {
        let _ = self.shared.push(slot);
    }

    /// Returns a free slot: privately on the owner thread, else to the shared queue.
    #[cfg(test)]
    fn push(&self, slot: u32) {
        if !self.push_owned(slot) {
            self.push_shared(slot);
        }
    }

    /// Free slots in both parts (exact once the owner is quiet).
    pub(crate) fn len(&self) -> usize {
        self.shared.len() + self.local_len.load(Ordering::Relaxed)
    }

    /// Makes the calling thread the owner, unless another thread is. A successful claim
    /// acquires what the previous owner's [`give_back`](Self::give_back) released (its
    /// private stack's last writes): without it a new owner could read a stale
    /// `local_len` and borrow a slot already given back (found by the loom model
    /// `loom_ownership_passes_from_thread_to_thread_without_a_race`).
    pub(crate) fn claim(&self) {
        let _ =
            self.owner
                .compare_exchange(NO_OWNER, token(), Ordering::Acquire, Ordering::Relaxed);
    }

    /// The owner gives its private slots back to the shared queue and stops being the
    /// owner. A no-op on any other thread.
    pub(crate) fn give_back(&self) {
        if !self.is_owner() {
            return;
        }
        let n = self.local_len.load(Ordering::Relaxed);
        for i in 0..n {
            // SAFETY: owner only; `i < n` holds an entry.
            let _ = self.shared.push(unsafe { self.local[i].get() });
        }
        self.local_len.store(0, Ordering::Relaxed);
        self.owner.store(NO_OWNER, Ordering::Release);
    }
}

#[cfg(all(test, not(holo_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_owners_private_stack_is_last_in_first_out() {
        // Found by cargo-mutants: reading `local[n]` or `local[n + 1]` instead of the top
        // entry `local[n - 1]` survived the other tests.
        let f = FreeList::full(4).unwrap();
        f.claim();
        let taken: Vec<u32> = (0..4).map(|_| f.pop().unwrap()).collect();
        assert_eq!(f.pop(), None);
        for &s in &taken {
            f.push(s);
        }
        let again: Vec<u32> = (0..4).map(|_| f.pop().unwrap()).collect();
        let mut reversed = taken.clone();
        reversed.reverse();
        assert_eq!(
            again, reversed,
            "the owner's returns come back in reverse order"
        );
        for &s in &again {
            f.push(s);
        }
        f.give_back();
        let mut all: Vec<u32> = std::iter::from_fn(|| f.pop()).collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2, 3], "every slot once");
    }

    #[test]
    fn the_owner_reuses_its_own_returns_and_gives_them_back() {
        let f = FreeList::full(3).unwrap();
        f.claim();
        let a = f.pop().unwrap();
        let b = f.pop().unwrap();
        assert_eq!(f.len(), 1);
        f.push(a);
        assert_eq!(
            f.local_len.load(Ordering::Relaxed),
            1,
            "an owner's return stays private"
        );
        assert_eq!(f.pop(), Some(a), "the owner borrows its private slot first");
        f.push(a);
        f.push(b);
        assert_eq!(f.len(), 3);
        // Another thread returns and borrows through the shared queue only.
        std::thread::scope(|s| {
            s.spawn(|| {
                let c = f.pop().unwrap();
                assert_ne!(c, a);
                assert_ne!(c, b);
                assert_eq!(f.pop(), None, "a non-owner never sees the private slots");
                f.push(c);
            });
        });
        assert_eq!(f.len(), 3);
        f.give_back();
        assert_eq!(f.local_len.load(Ordering::Relaxed), 0);
        assert_eq!(f.shared.len(), 3, "given back: every slot is shared again");
        // No owner now: another thread sees them all.
        std::thread::scope(|s| {
            s.spawn(|| {
                let all: Vec<u32> = std::iter::from_fn(|| f.pop()).collect();
                assert_eq!(all.len(), 3);
                for x in all {
                    f.push(x);
                }
            });
        });
    }

    #[test]
    fn only_one_thread_owns_and_give_back_elsewhere_is_a_no_op() {
        let f = FreeList::full(2).unwrap();
        f.claim();
        std::thread::scope(|s| {
            s.spawn(|| {
                f.claim();
                f.give_back();
            });
        });
        assert!(f.is_owner(), "the first claim holds");
        f.give_back();
        assert!(!f.is_owner());
    }
}

/// loom models: every interleaving of the owner thread and the other threads (up to
/// loom's preemption bound) keeps each slot in the list exactly once.
///
/// ```text
/// RUSTFLAGS="--cfg holo_loom" CARGO_TARGET_DIR=target/loom cargo test -p holo-runtime --lib loom
/// ```
#[cfg(all(test, holo_loom))]
mod loom_models {
    use std::sync::Arc;

    use super::FreeList;

    /// `loom::model(f)` (unbounded: these models are small), printing how many
    /// interleavings it explored.
    fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
        crate::channel::sync::model::run(name, None, f);
    }

    /// Takes every free slot (on the calling thread) and checks each is there once.
    fn drain_all(f: &FreeList, count: u32) {
        let mut seen: Vec<u32> = std::iter::from_fn(|| f.pop()).collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            (0..count).collect::<Vec<_>>(),
            "a slot lost or listed twice"
        );
    }

    #[test]
    fn loom_owner_and_another_thread_return_and_borrow_concurrently() {
        // The owner borrows two slots and returns one privately while another thread
        // borrows from the shared queue and returns what it took; then the owner gives its
        // private slots back. No slot may be lost, duplicated or seen by both.
        model(
            "owner_and_another_thread_return_and_borrow_concurrently",
            || {
                let f = Arc::new(FreeList::full(3).unwrap());
                f.claim();
                let a = f.pop().unwrap();
                let other = {
                    let f = Arc::clone(&f);
                    loom::thread::spawn(move || {
                        let taken = f.pop();
                        if let Some(s) = taken {
                            f.push(s);
                        }
                        taken
                    })
                };
                let b = f.pop();
                f.push(a);
                if let Some(b) = b {
                    f.push(b);
                }
                let taken = other.join().unwrap();
                assert_ne!(
                    taken,
                    Some(a),
                    "the other thread saw the owner's borrowed slot"
                );
                f.give_back();
                drain_all(&f, 3);
            },
        );
    }

    #[test]
    fn loom_a_slot_returned_by_another_thread_reaches_the_owner_once() {
        // The owner holds every slot but one; another thread returns one of them (a
        // consumer dropping the last handle) while the owner borrows and returns.
        model(
            "a_slot_returned_by_another_thread_reaches_the_owner_once",
            || {
                let f = Arc::new(FreeList::full(2).unwrap());
                f.claim();
                let a = f.pop().unwrap();
                let b = f.pop().unwrap();
                let other = {
                    let f = Arc::clone(&f);
                    loom::thread::spawn(move || f.push(b))
                };
                let got = f.pop();
                if let Some(s) = got {
                    assert_eq!(s, b, "the owner borrowed a slot that was never returned");
                    f.push(s);
                }
                f.push(a);
                other.join().unwrap();
                f.give_back();
                drain_all(&f, 2);
            },
        );
    }

    #[test]
    fn loom_an_owner_that_unwinds_gives_its_private_slots_back() {
        // The owner thread parks a slot on its private stack and unwinds (an operator
        // panicked); its guard — as the session's `Adopted` does — gives the private
        // slots back while another thread borrows and returns, claiming the list itself
        // once it is free. No slot may stay stranded on the dead owner's stack, and the
        // next owner's claim must see the stack the unwinding owner emptied.
        model("an_owner_that_unwinds_gives_its_private_slots_back", || {
            struct GiveBack<'a>(&'a FreeList);
            impl Drop for GiveBack<'_> {
                fn drop(&mut self) {
                    self.0.give_back();
                }
            }
            let f = Arc::new(FreeList::full(3).unwrap());
            let owner = {
                let f = Arc::clone(&f);
                loom::thread::spawn(move || {
                    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        f.claim();
                        let _guard = GiveBack(&f);
                        let a = f.pop().unwrap();
                        f.push(a);
                        // No panic hook (no message per interleaving): unwinding only.
                        std::panic::resume_unwind(Box::new("an operator panicked"));
                    }));
                    assert!(unwound.is_err());
                })
            };
            // Meanwhile this thread takes its turn: it claims the list (if the owner gave
            // it back already), uses it, and gives it back.
            f.claim();
            if let Some(s) = f.pop() {
                f.push(s);
            }
            f.give_back();
            owner.join().unwrap();
            assert!(!f.is_owner());
            drain_all(&f, 3);
        });
    }

    #[test]
    fn loom_ownership_passes_from_thread_to_thread_without_a_race() {
        // Two threads each claim, use the private stack if they own the list, and give it
        // back. Ownership may pass from one to the other (after a give_back); loom checks
        // that no two threads ever touch the private stack without ordering (a claim
        // acquires what the last owner's give_back released), and every slot survives.
        model(
            "ownership_passes_from_thread_to_thread_without_a_race",
            || {
                let f = Arc::new(FreeList::full(2).unwrap());
                let turn = |f: &FreeList| {
                    f.claim();
                    let owner = f.is_owner();
                    if owner {
                        let s = f.pop().unwrap();
                        f.push(s);
                    }
                    // A no-op on a thread that is not the owner.
                    f.give_back();
                    owner
                };
                let other = {
                    let f = Arc::clone(&f);
                    loom::thread::spawn(move || turn(&f))
                };
                let mine = turn(&f);
                let theirs = other.join().unwrap();
                assert!(mine || theirs, "nobody could claim a list with no owner");
                drain_all(&f, 2);
            },
        );
    }
}
