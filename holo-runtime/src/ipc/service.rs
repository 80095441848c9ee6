//! holo's iceoryx2 service type: `ipc_threadsafe` with per-sample state that does not
//! allocate per frame.
//!
//! iceoryx2 0.10 keeps each loaned sample's state (`ChunkMutSharedState`, reached from
//! `Publisher::loan_uninit` and so from `send_copy`) behind the service's
//! `ArcThreadSafetyPolicy`. `ipc_threadsafe` uses `MutexProtected`, an `Arc` made per
//! loan: one heap allocation per descriptor sent. [`Service`] is `ipc_threadsafe` with
//! every other part unchanged (the same storages, connections, events and monitoring, so
//! its nodes and services are `ipc_threadsafe`'s: `Node::<ipc_threadsafe::Service>::list`
//! sees them) and [`Recycled`] as the policy: the same recursive, process-local iceoryx2
//! mutex around the value, in a block that goes back to a free list of its layout when its
//! last clone drops, and comes from there at the next `new`. After the first frames
//! nothing on the sending path allocates (`tests/tests/ipc_import_no_alloc.rs` counts the
//! exporting side too; the benches print allocations per frame).

use core::alloc::Layout;
use core::fmt::{self, Debug};
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering, fence};
use std::sync::Mutex as StdMutex;

use iceoryx2_bb_elementary_traits::testing::abandonable::Abandonable;
use iceoryx2_bb_elementary_traits::zero_copy_send::ZeroCopySend;
use iceoryx2_bb_posix::mutex::{
    Handle as _, Mutex, MutexBuilder, MutexCreationError, MutexGuard, MutexHandle, MutexType,
};
use iceoryx2_cal::arc_sync_policy::{ArcSyncPolicy, ArcSyncPolicyCreationError, LockGuard};
use iceoryx2_cal::shm_allocator::bump_allocator::BumpAllocator;
use iceoryx2_cal::shm_allocator::pool_allocator::PoolAllocator;
use iceoryx2_cal::{
    bag, dynamic_storage, event, hash, monitoring, reactor, resizable_shared_memory, serialize,
    shared_memory, static_storage, zero_copy_connection,
};

/// `ipc_threadsafe` with [`Recycled`] per-sample state (module docs).
#[derive(Debug, Clone)]
pub(crate) struct Service {}

impl iceoryx2::service::Service for Service {
    type StaticStorage = static_storage::recommended::Ipc;
    type ConfigSerializer = serialize::recommended::Recommended;
    type PersistentDynamicStorage<T: Debug + Send + Sync + ZeroCopySend + 'static> =
        dynamic_storage::recommended::PersistentIpc<T>;
    type Bag = bag::recommended::Recommended;
    type DynamicStorage<T: Debug + Send + Sync + ZeroCopySend + 'static> =
        dynamic_storage::recommended::Ipc<T>;
    type ServiceNameHasher = hash::recommended::Recommended;
    type SharedMemory = shared_memory::recommended::Ipc<PoolAllocator>;
    type ResizableSharedMemory = resizable_shared_memory::recommended::Ipc<PoolAllocator>;
    type Connection = zero_copy_connection::recommended::Ipc;
    type Event = event::recommended::Ipc;
    type Monitoring = monitoring::recommended::Ipc;
    type Reactor = reactor::recommended::Ipc;
    type ArcThreadSafetyPolicy<T: Send + Debug + Abandonable> = Recycled<T>;
    type BlackboardMgmt<KeyType: Send + Sync + Debug + ZeroCopySend + 'static> =
        dynamic_storage::recommended::Ipc<KeyType>;
    type BlackboardPayload = shared_memory::recommended::Ipc<BumpAllocator>;
    type UniqueId = iceoryx2::unique_id_generator::unique_system_id::UniqueSystemId;
}

impl iceoryx2::service::internal::ServiceInternal<Service> for Service {}

/// Freed blocks kept per layout: more than any pool's loans in flight, few enough to bound
/// what a burst leaves behind.
const FREE_PER_LAYOUT: usize = 256;

/// The free blocks, by layout. A handful of layouts ever appear (one per state type);
/// each list's capacity is reserved when its layout first appears, so pushing and popping
/// never allocates.
static FREE: StdMutex<Vec<(Layout, Vec<usize>)>> = StdMutex::new(Vec::new());

/// A block of `layout` from the free list, or from the allocator when it has none.
fn take_block(layout: Layout) -> Option<NonNull<u8>> {
    if let Ok(mut free) = FREE.lock()
        && let Some((_, blocks)) = free.iter_mut().find(|(l, _)| *l == layout)
        && let Some(addr) = blocks.pop()
    {
        return NonNull::new(addr as *mut u8);
    }
    // SAFETY: `layout` is a block's: its size is not zero (it holds a counter).
    NonNull::new(unsafe { std::alloc::alloc(layout) })
}

/// Gives a block back: to its layout's free list, or to the allocator when that is full.
///
/// # Safety
/// `block` came from [`take_block`] with `layout`, and nothing uses it any more.
unsafe fn give_block(block: NonNull<u8>, layout: Layout) {
    if let Ok(mut free) = FREE.lock() {
        let at = if let Some(at) = free.iter().position(|(l, _)| *l == layout) {
            at
        } else {
            free.push((layout, Vec::with_capacity(FREE_PER_LAYOUT)));
            free.len() - 1
        };
        let blocks = &mut free[at].1;
        if blocks.len() < FREE_PER_LAYOUT {
            blocks.push(block.as_ptr() as usize);
            return;
        }
    }
    // SAFETY: the caller's contract: allocated with `layout`, unused.
    unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
}

/// The free blocks of `layout` (the tests' check that a block goes back and is taken again).
#[cfg(test)]
fn free_blocks(layout: Layout) -> usize {
    FREE.lock().map_or(0, |free| {
        free.iter()
            .find(|(l, _)| *l == layout)
            .map_or(0, |(_, b)| b.len())
    })
}

struct Block<T: Debug> {
    clones: AtomicUsize,
    mutex: MutexHandle<T>,
}

/// An `Arc<Mutex<T>>` whose memory is recycled: iceoryx2's recursive, process-local mutex
/// (the one `MutexProtected` uses) in a block that goes back to a per-layout free list.
pub(crate) struct Recycled<T: Send + Debug + Abandonable> {
    block: NonNull<Block<T>>,
}

// SAFETY: the value is only reached through the mutex (as `MutexProtected`, which is Send
// and Sync for the same bounds); the clone count is atomic.
unsafe impl<T: Send + Debug + Abandonable> Send for Recycled<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Debug + Abandonable> Sync for Recycled<T> {}

impl<T: Send + Debug + Abandonable> Recycled<T> {
    fn block(&self) -> &Block<T> {
        // SAFETY: the block lives while a clone does, and this is one.
        unsafe { self.block.as_ref() }
    }
}

impl<T: Send + Debug + Abandonable> Debug for Recycled<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recycled")
            .field("value", &core::any::type_name::<T>())
            .field("clones", &self.block().clones.load(Ordering::Relaxed))
            .finish()
    }
}

impl<T: Send + Debug + Abandonable> Clone for Recycled<T> {
    fn clone(&self) -> Self {
        self.block().clones.fetch_add(1, Ordering::Relaxed);
        Self { block: self.block }
    }
}

impl<T: Send + Debug + Abandonable> Drop for Recycled<T> {
    fn drop(&mut self) {
        if self.block().clones.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        // SAFETY: the last clone: nothing else reaches the block. Dropping the handle
        // destroys the mutex and drops the value; the memory goes back to the free list.
        unsafe {
            core::ptr::drop_in_place(self.block.as_ptr());
            give_block(self.block.cast(), Layout::new::<Block<T>>());
        }
    }
}

impl<T: Send + Debug + Abandonable> Abandonable for Recycled<T> {
    unsafe fn abandon_in_place(mut this: NonNull<Self>) {
        // As `MutexProtected`: the last clone abandons the value in place (its block is
        // never given back); another clone just drops.
        // SAFETY: the caller's contract: `this` is valid and not used after.
        let this = unsafe { this.as_mut() };
        if this.block().clones.load(Ordering::Acquire) == 1 {
            let handle = &this.block().mutex;
            // SAFETY: the handle was initialized by `new`.
            if let Ok(mut guard) = unsafe { Mutex::from_handle(handle) }.lock() {
                // SAFETY: the value is abandoned and never used again.
                unsafe { T::abandon_in_place(NonNull::from_mut(&mut *guard)) };
            }
        } else {
            // SAFETY: `this` is not used after.
            unsafe { core::ptr::drop_in_place(this) };
        }
    }
}

/// A locked [`Recycled`] value.
pub(crate) struct Guard<'parent, T: Send + Debug> {
    guard: MutexGuard<'parent, T>,
}

impl<T: Send + Debug> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<'parent, T: Send + Debug + Abandonable> LockGuard<'parent, T> for Guard<'parent, T> {}

impl<T: Send + Debug + Abandonable> ArcSyncPolicy<T> for Recycled<T> {
    type LockGuard<'parent>
        = Guard<'parent, T>
    where
        Self: 'parent,
        T: 'parent;

    fn new(value: T) -> Result<Self, ArcSyncPolicyCreationError> {
        let layout = Layout::new::<Block<T>>();
        let block = take_block(layout)
            .ok_or(ArcSyncPolicyCreationError::InsufficientResources)?
            .cast::<Block<T>>();
        // SAFETY: `block` is unused memory of `Block<T>`'s layout; the handle is written
        // before the mutex is created in place, and never moves after.
        unsafe {
            block.as_ptr().write(Block {
                clones: AtomicUsize::new(1),
                mutex: MutexHandle::new(),
            });
        }
        let this = Self { block };
        let created = MutexBuilder::new()
            .is_interprocess_capable(false)
            .mutex_type(MutexType::Recursive)
            .create(value, &this.block().mutex)
            .map(drop);
        match created {
            Ok(()) => Ok(this),
            // `this` drops: the handle (uninitialized, nothing to destroy) and the block go.
            Err(
                MutexCreationError::InsufficientMemory | MutexCreationError::InsufficientResources,
            ) => Err(ArcSyncPolicyCreationError::InsufficientResources),
            Err(_) => Err(ArcSyncPolicyCreationError::InternalFailure),
        }
    }

    fn lock(&self) -> Guard<'_, T> {
        // SAFETY: the handle was initialized by `new` (a `Recycled` exists only then).
        match unsafe { Mutex::from_handle(&self.block().mutex) }.lock() {
            Ok(guard) => Guard { guard },
            // A recursive, process-local mutex fails to lock only on a broken invariant
            // (as in `MutexProtected`, which panics here too); no input reaches it.
            Err(e) => panic!("iceoryx2 per-sample mutex failed to lock: {e:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Padded to a size no iceoryx2 state has, so that no other test's block shares its
    /// layout's free list (the reuse check below reads that list's top).
    #[derive(Debug)]
    struct Counted(std::sync::Arc<AtomicUsize>, u64, [u8; 1237]);
    impl Abandonable for Counted {
        unsafe fn abandon_in_place(_: NonNull<Self>) {}
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "iceoryx2's shared memory: Miri runs no sysconf(_SC_...) of it, nor its mappings"
    )]
    fn the_value_drops_with_the_last_clone_and_its_block_is_reused() {
        let layout = Layout::new::<Block<Counted>>();
        let dropped = std::sync::Arc::new(AtomicUsize::new(0));
        let a = Recycled::new(Counted(dropped.clone(), 7, [0; 1237])).unwrap();
        let first = a.block.as_ptr() as usize;
        let b = a.clone();
        assert_eq!(b.lock().1, 7);
        {
            // Recursive: the same thread locks twice.
            let _outer = a.lock();
            assert_eq!(b.lock().1, 7);
        }
        let free = free_blocks(layout);
        drop(a);
        assert_eq!(
            dropped.load(Ordering::Relaxed),
            0,
            "a clone still holds the value"
        );
        assert_eq!(
            free_blocks(layout),
            free,
            "the block goes back with the last clone"
        );
        drop(b);
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
        assert_eq!(
            free_blocks(layout),
            free + 1,
            "the block is on its free list"
        );
        let c = Recycled::new(Counted(dropped.clone(), 8, [0; 1237])).unwrap();
        assert_eq!(free_blocks(layout), free, "the next value takes it");
        assert_eq!(c.block.as_ptr() as usize, first);
        assert_eq!((c.lock().1, c.lock().2.len()), (8, 1237));
        drop(c);
        assert_eq!(dropped.load(Ordering::Relaxed), 2);
    }
}
