//! Whether the database is open, and when it lets its directory go.
//!
//! A database is open, then closed (by `Db::close` or drop: no new call
//! starts, every later call through a handle gets [`Error::Closed`]),
//! then released (the directory lock is given up; another handle may own
//! the directory from then on). Between the two, the close waits for the
//! write path and the background threads. Work a caller runs on its own
//! thread (a compaction, an index build, a bulk load, a checkpoint) is not
//! waited for — it may be blocked anywhere, even in the file system — so
//! it is stopped instead: it checks [`Lifecycle::check_open`] between
//! steps, every MANIFEST edit is refused once released (`DbInner::
//! log_and_apply`), and the file system refuses every change behind the
//! guard ([`crate::io::GuardedFs`]). Such work fails with `Closed` and
//! changes nothing in the directory after the lock is released.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::ranked::{Rank, RankedMutex};

use crate::error::{Error, Result};
use crate::io::{DirectoryRelease, FileLock};

/// The lifecycle of one open database.
pub(crate) struct Lifecycle {
    closed: AtomicBool,
    /// Marked by [`Lifecycle::release`]; the database's file system is
    /// guarded by it.
    released: DirectoryRelease,
    /// The directory lock (none for a read-only open).
    lock: RankedMutex<Option<Box<dyn FileLock>>>,
}

impl Lifecycle {
    pub(crate) fn new(released: DirectoryRelease, lock: Option<Box<dyn FileLock>>) -> Lifecycle {
        Lifecycle { closed: AtomicBool::new(false), released, lock: RankedMutex::new(Rank::DirLock, lock) }
    }

    /// Whether the `Db` was closed or dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// [`Error::Closed`] once the `Db` was closed or dropped.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() { Err(Error::Closed("the database is closed".into())) } else { Ok(()) }
    }

    /// No call starts from now on. The caller owns the write path, so no
    /// group commit is under way.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the directory was let go: nothing may be written there.
    pub(crate) fn is_released(&self) -> bool {
        self.released.is_marked()
    }

    /// Marks the release (the guarded file system changes nothing from then on), then gives up the directory lock. The caller
    /// holds the versions lock, so no MANIFEST edit is half logged, and
    /// the set logged every file number it handed out.
    pub(crate) fn release(&self) {
        debug_assert!(self.is_closed(), "released before it was closed");
        self.released.mark();
        self.lock.lock().take();
    }
}
