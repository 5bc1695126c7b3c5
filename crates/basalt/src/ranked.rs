//! Mutexes with a rank: the database's lock order, enforced rather than
//! only written. Every lock of the shared database state is a
//! [`RankedMutex`]; in debug builds (every test) a thread taking a lock
//! whose rank is not above every rank it holds panics, naming both — a
//! lock-order inversion, which could deadlock, fails the first test that
//! reaches it instead of hanging a user one day. Release builds keep only
//! the rank field: no check, no thread-local.

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

/// The lock order, first taken first: a thread holding a lock takes only
/// locks of a higher rank. Leaves (taken last, nothing taken under them)
/// rank highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// One manual or background compaction at a time.
    Compaction,
    /// The flush thread's job, from taking memtables to collecting.
    Flush,
    /// One collection of obsolete files at a time.
    Collecting,
    // (The exclusive writer right — DDL, the memtable switch, close —
    // comes here: a right the write queue grants, not a mutex.)
    /// The registry of open table and keyspace handles.
    OpenTrees,
    /// The version set (MANIFEST, CURRENT, file numbers).
    Versions,
    /// Files in use by running jobs (kept from collection).
    InUse,
    /// Indexes being built, and the seqno each became ready at.
    IndexBuilds,
    IndexReady,
    /// The WAL.
    Wal,
    /// The background jobs' state.
    Jobs,
    /// Leaves.
    WriteQueue,
    /// Commit times.
    Clock,
    /// Where the change feed finds seqnos in WAL files.
    FeedIndex,
    Snapshots,
    /// The super version's replace lock.
    SuperVersion,
    Threads,
    DirLock,
}

#[cfg(debug_assertions)]
thread_local! {
    /// The ranks this thread holds, in the order taken.
    static HELD: std::cell::RefCell<Vec<Rank>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(debug_assertions)]
fn taking(rank: Rank) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if let Some(&top) = held.iter().max() {
            assert!(rank > top, "lock order: taking {rank:?} while holding {top:?} (held: {held:?})");
        }
        held.push(rank);
    });
}

#[cfg(debug_assertions)]
fn released(rank: Rank) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if let Some(i) = held.iter().rposition(|&r| r == rank) {
            held.remove(i);
        }
    });
}

#[cfg(not(debug_assertions))]
fn taking(_: Rank) {}

#[cfg(not(debug_assertions))]
fn released(_: Rank) {}

/// A mutex of one rank (see [`Rank`]).
#[derive(Debug)]
pub(crate) struct RankedMutex<T> {
    rank: Rank,
    inner: Mutex<T>,
}

impl<T> RankedMutex<T> {
    pub(crate) const fn new(rank: Rank, value: T) -> RankedMutex<T> {
        RankedMutex { rank, inner: Mutex::new(value) }
    }

    /// Takes the lock; in debug builds, checks the order first.
    pub(crate) fn lock(&self) -> RankedGuard<'_, T> {
        taking(self.rank);
        RankedGuard { rank: self.rank, guard: self.inner.lock() }
    }

    /// Takes the lock if it comes within `timeout`.
    pub(crate) fn try_lock_for(&self, timeout: Duration) -> Option<RankedGuard<'_, T>> {
        taking(self.rank);
        let Some(guard) = self.inner.try_lock_for(timeout) else {
            released(self.rank);
            return None;
        };
        Some(RankedGuard { rank: self.rank, guard })
    }
}

/// A held [`RankedMutex`].
pub(crate) struct RankedGuard<'a, T> {
    rank: Rank,
    guard: MutexGuard<'a, T>,
}

impl<T> RankedGuard<'_, T> {
    /// Runs `f` with the lock released (and its rank not held), then takes
    /// it again.
    pub(crate) fn unlocked<R>(&mut self, f: impl FnOnce() -> R) -> R {
        released(self.rank);
        let out = MutexGuard::unlocked(&mut self.guard, f);
        taking(self.rank);
        out
    }

    /// Waits on `cv`, the lock released while waiting (the thread takes
    /// nothing else meanwhile: its rank stays held).
    pub(crate) fn wait(&mut self, cv: &Condvar) {
        cv.wait(&mut self.guard);
    }

    /// [`RankedGuard::wait`] for at most `timeout`.
    pub(crate) fn wait_for(&mut self, cv: &Condvar, timeout: Duration) {
        cv.wait_for(&mut self.guard, timeout);
    }
}

impl<T> Deref for RankedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for RankedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for RankedGuard<'_, T> {
    fn drop(&mut self) {
        released(self.rank);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_taken_in_rank_order_pass_and_an_inversion_panics() {
        let versions = RankedMutex::new(Rank::Versions, 1);
        let wal = RankedMutex::new(Rank::Wal, 2);
        {
            let _v = versions.lock();
            let mut w = wal.lock();
            w.unlocked(|| {});
        }
        // Each alone, in any order, is fine.
        drop(wal.lock());
        drop(versions.lock());
        let inverted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _w = wal.lock();
            let _v = versions.lock();
        }));
        #[cfg(debug_assertions)]
        assert!(inverted.is_err(), "taking Versions under Wal panics in debug builds");
        #[cfg(not(debug_assertions))]
        assert!(inverted.is_ok());
        // The panic released what it held: the order is clean again.
        drop(versions.lock());
        drop(wal.lock());
    }
}
