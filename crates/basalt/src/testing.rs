//! Test support (feature `testing`): [`MemFs`], an in-memory file system
//! that simulates process and machine crashes, and the faults it can inject
//! into any file-system call. The engine's own tests, the crash tester and
//! the fuzz targets run on it; applications need none of it.

pub use crate::io::{CrashMode, Fault, FaultError, MemFs, OpKind};

/// Memory a memtable charges for one entry besides its key and value: what
/// a test needs to predict when a memtable fills.
pub const MEMTABLE_ENTRY_OVERHEAD_BYTES: usize = crate::memtable::ENTRY_OVERHEAD_BYTES;

/// Makes every later write of `db` skip index upkeep (`true`) or do it
/// again (`false`): rows change and their index entries do not, the bug a
/// check of index consistency must catch. For testing such checks only.
pub fn skip_index_upkeep(db: &crate::Db, skip: bool) {
    db.inner().indexes.skip_upkeep.store(skip, std::sync::atomic::Ordering::Relaxed);
}
