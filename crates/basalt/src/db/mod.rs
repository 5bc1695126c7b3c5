//! The database: orchestrates the write path (group commit into the WAL and
//! memtable), background flushes, recovery and reads. It owns no format code.

mod alter;
mod checkpoint;
mod cleanup;
mod compact;
mod counters;
mod cursor;
mod ddl;
mod flush;
mod index;
mod ingest;
mod iter;
mod jobs;
mod keyspace;
mod lifecycle;
mod open;
mod partition;
mod read;
pub(crate) mod row_cache;
mod scan;
mod snapshot;
mod sst_readers;
mod stats;
mod table;
mod transaction;
mod write;
mod write_buffer;

use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::ranked::{Rank, RankedMutex};
use bytes::Bytes;

#[cfg(feature = "inspect")]
pub use index::IndexCheck;
pub use index::{IndexInfo, IndexOptions, IndexPredicate, LookupOptions};
pub use ingest::BulkLoad;
pub use iter::{DbIterator, Direction};
pub use keyspace::Keyspace;
pub use partition::{ColumnEstimate, OwnedKeyValueRange, TableEstimate};
pub use scan::{KeyValueRange, ScanOptions, ScanPlan, TableScan};
pub use snapshot::{ReadOptions, Snapshot};
pub use stats::{GetLatency, LevelStats, Stats};
pub use table::{Table, TableOptions};
pub use transaction::{TableOverlay, Transaction};

use crate::codec::internal::SeqNo;
use crate::error::{Error, Result};
use crate::ids::DEFAULT_TREE;
use crate::io::Fs;
use crate::memtable::Memtable;
use crate::options::{Options, WriteOptions};
use crate::version::{EditFailure, Version, VersionEdit, VersionSet};
use crate::wal::batch::WriteBatch;
use cleanup::FileCleanup;
use counters::Counters;
use jobs::Jobs;
use sst_readers::SstReaders;
use write::WritePath;

/// What readers need, swapped as one unit: the active memtable, the
/// immutable ones waiting for flush (newest first) and the current version.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    pub imms: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
}

impl SuperVersion {
    /// The memtables (active first, then the immutable ones) holding
    /// entries of `tree`.
    pub(crate) fn memtables_holding(&self, tree: crate::ids::TreeId) -> impl Iterator<Item = &Arc<Memtable>> {
        std::iter::once(&self.mem).chain(&self.imms).filter(move |m| m.holds_tree(tree))
    }
}

/// The current super version. Readers load it without a lock or a
/// reference-count update (arc-swap's thread-local debts), where a
/// `RwLock<Arc<_>>` made every lookup write two shared cache lines that
/// parallel readers bounced between cores; writers replace it one at a time.
pub(crate) struct SuperVersionCell {
    current: arc_swap::ArcSwap<SuperVersion>,
    writer: RankedMutex<()>,
}

impl SuperVersionCell {
    pub(crate) fn new(sv: SuperVersion) -> Self {
        SuperVersionCell {
            current: arc_swap::ArcSwap::from_pointee(sv),
            writer: RankedMutex::new(Rank::SuperVersion, ()),
        }
    }

    /// The current super version, for a short read (a lookup).
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<SuperVersion>> {
        self.current.load()
    }

    /// The current super version, owned (iterators keep it).
    pub(crate) fn load_full(&self) -> Arc<SuperVersion> {
        self.current.load_full()
    }

    /// Bytes held by the memtables of one super version that was current
    /// while they were read: `(active, active and immutable, immutables)`.
    /// Summing the sizes of a super version loaded earlier would add an
    /// immutable memtable a flush has meanwhile released to the active
    /// one's newer size, a total no moment had (the write-buffer test saw
    /// 27 KB "over" the budget that way). A super version is never stored
    /// twice, so finding the same one before and after the reads proves it
    /// was current in between; only the active memtable grows, and only
    /// while it is current.
    pub(crate) fn memtable_bytes(&self) -> MemtableBytes {
        loop {
            let sv = self.current.load_full();
            let active = sv.mem.approximate_bytes();
            let total = active + sv.imms.iter().map(|m| m.approximate_bytes()).sum::<usize>();
            if Arc::ptr_eq(&sv, &self.current.load()) {
                return MemtableBytes { active, total, immutables: sv.imms.len() };
            }
        }
    }

    /// Replaces the super version with `f(current)`; replacements never
    /// interleave, so none is lost.
    pub(crate) fn replace(&self, f: impl FnOnce(&SuperVersion) -> SuperVersion) {
        let _writer = self.writer.lock();
        let next = f(&self.current.load());
        self.current.store(Arc::new(next));
    }
}

/// Memtable memory of one super version ([`SuperVersionCell::memtable_bytes`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemtableBytes {
    pub active: usize,
    pub total: usize,
    pub immutables: usize,
}

/// Everything shared between the handle, iterators, snapshots and the
/// background threads, in parts that each own their state.
///
/// Lock order: a thread holding one of these may take only those below it.
/// Every lock here is a `RankedMutex` of its place in this order
/// (`ranked.rs`, `Rank`): debug builds, every test included, panic on a
/// lock taken out of order, naming both.
/// 1. `jobs.compaction` (a whole compaction, which installs its result);
/// 2. `files.collecting` (a whole collection of obsolete files);
/// 3. the exclusive writer right (`with_exclusive_writer`: no group commit
///    runs; DDL, memtable switches, close) — a right, not a held mutex,
///    so it waits for the write queue and never holds it. One exception:
///    a bulk load takes the compaction lock while it owns this right, to
///    install its files (safe because no holder of the compaction lock
///    waits for the writer right; the other way round, a group leader
///    stalled on L0 owns the right while it waits for a compaction);
/// 4. `open_trees` (DDL checks and registers handles);
/// 5. `versions` (the MANIFEST and the current version);
/// 6. `files.in_use`, then the index builds' state (`indexes`: builds,
///    then ready);
/// 7. `writer.wal` (the group-commit leader appends with the queue
///    released; a memtable switch under the exclusive right);
/// 8. `jobs.state` (last: every part reports errors and wakes the jobs);
/// 9. leaves, under which nothing is taken: `writer.queue` (held only to
///    join, lead or leave the queue), `snapshots`, the super version's
///    replace lock, the background threads' handles, the directory lock,
///    the caches' locks (internal to the caches).
///
/// Reads take none of these: they load the super version and a seqno
/// (`read.rs`), and the caches lock internally.
pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub opts: Options,
    /// The file system, guarded: it refuses every change once the
    /// database let its directory go (`lifecycle`).
    pub fs: Arc<dyn Fs>,
    /// Unique among the databases this process opened.
    pub id: u64,
    /// Open, closed, released: every call through a handle that outlived
    /// the `Db` gets `Error::Closed`, and nothing is written after the
    /// directory lock is given up.
    pub lifecycle: lifecycle::Lifecycle,
    /// Opened by `Db::open_read_only`: nothing is written, no thread runs.
    pub read_only: bool,
    /// The catalog and SSTs of every tree, and the MANIFEST that logs them.
    pub versions: RankedMutex<VersionSet>,
    /// What reads see: memtables and the current version.
    pub state: SuperVersionCell,
    pub writer: WritePath,
    pub jobs: Jobs,
    pub files: FileCleanup,
    /// Open SST readers and the block cache they read through.
    pub sst_readers: Arc<SstReaders>,
    /// Open blob files, for values kept apart from their keys.
    pub blob_files: Arc<crate::blob::BlobFiles>,
    /// With `Options::row_cache_bytes` above zero.
    pub row_cache: Option<crate::db::row_cache::RowCache>,
    /// Live snapshots: seqno → number of handles.
    pub snapshots: RankedMutex<std::collections::BTreeMap<SeqNo, usize>>,
    pub counters: Counters,
    /// Live table and keyspace handles by tree, to refuse dropping a tree
    /// in use.
    pub open_trees:
        RankedMutex<std::collections::HashMap<crate::ids::TreeId, std::sync::Weak<ddl::TreeShared>>>,
    /// Index builds under way and when each index became usable.
    pub indexes: index::IndexState,
}

/// An open database. `Send + Sync`: share it between threads by reference or
/// in an `Arc`.
///
/// Key-value writes, atomic batches, snapshots, keyspaces and a checkpoint:
///
/// ```
/// use basalt::{Db, Options, WriteBatch};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path().join("db"), Options::default())?;
/// db.put(b"user:1", b"ada")?;
///
/// let mut batch = WriteBatch::new(); // applied all or nothing
/// batch.put(b"user:2", b"grace");
/// batch.delete(b"user:1");
/// db.write(batch)?;
///
/// let before = db.snapshot(); // reads pinned to this moment
/// db.put(b"user:3", b"linus")?;
/// assert_eq!(db.get(b"user:2")?.as_deref(), Some(&b"grace"[..]));
/// assert_eq!(before.get(b"user:3")?, None);
///
/// let mut users = Vec::new();
/// for entry in db.prefix(b"user:") {
///     let (key, _value) = entry?;
///     users.push(key);
/// }
/// assert_eq!(users, [&b"user:2"[..], &b"user:3"[..]]);
///
/// // A keyspace: keys of its own, atomic with the others in one batch.
/// let sessions = db.create_keyspace("sessions")?;
/// let mut batch = WriteBatch::new();
/// batch.put(b"user:4", b"barbara");
/// batch.put_keyspace(&sessions, b"s:9", b"user:4")?;
/// db.write(batch)?;
/// assert_eq!(sessions.get(b"s:9")?.as_deref(), Some(&b"user:4"[..]));
///
/// // A consistent copy that opens as a database of its own.
/// db.checkpoint(dir.path().join("copy"))?;
/// drop(sessions);
/// db.close()?;
/// let copy = Db::open(dir.path().join("copy"), Options::default())?;
/// assert_eq!(copy.get(b"user:4")?.as_deref(), Some(&b"barbara"[..]));
/// # Ok(())
/// # }
/// ```
pub struct Db {
    inner: Arc<DbInner>,
    threads: RankedMutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.inner.dir).finish_non_exhaustive()
    }
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database at `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = Arc::new(open::open(path.as_ref(), options, false)?);
        let db = Db { inner: inner.clone(), threads: RankedMutex::new(Rank::Threads, Vec::new()) };
        // On a failed spawn, dropping `db` stops the threads already started.
        db.threads.lock().push(flush::spawn(inner.clone())?);
        db.threads.lock().push(compact::spawn(inner)?);
        Ok(db)
    }

    /// Opens the existing database at `path` for reading only: nothing in
    /// the directory is written, created or deleted (no lock, no new
    /// MANIFEST, no WAL replayed into SSTs: the WALs are read into memory),
    /// and no background thread runs. Any number of processes may open one
    /// database so, as long as no process writes it (a checkpoint of a
    /// database being written is such a database: [`Db::checkpoint`]);
    /// files a writer deletes under a reader are not guarded against.
    /// Every write, DDL statement, flush, compaction or checkpoint returns
    /// [`Error::ReadOnly`](crate::Error::ReadOnly). `options` apply to
    /// reading (caches, maps); `create_if_missing` is ignored.
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = Arc::new(open::open(path.as_ref(), options, true)?);
        Ok(Db { inner, threads: RankedMutex::new(Rank::Threads, Vec::new()) })
    }

    /// Writes a consistent, openable copy of the database into `dir`
    /// (which must not exist) as of this call: every write acknowledged
    /// before it is in the copy. Memtables are flushed first; SSTs and blob
    /// files are hard-linked where the file system allows (no extra space
    /// for them), copied elsewhere; the copy gets its own MANIFEST and an
    /// empty WAL, and `CURRENT` is written last, so a checkpoint cut short
    /// by a crash is refused by [`Db::open`] rather than opened half made.
    /// Open it with [`Db::open`] or, from any number of processes,
    /// [`Db::open_read_only`], while this database goes on being written.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        self.inner.checkpoint(dir.as_ref())
    }

    /// Whether the database was opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The shared state, for the crate's own modules (`inspect`).
    #[cfg_attr(not(feature = "inspect"), expect(dead_code, reason = "read by the inspect module"))]
    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.inner
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_opt(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write_opt(batch, opts)
    }

    /// Deletes `key` (deleting a missing key is not an error).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Deletes `key` with explicit write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write_opt(batch, opts)
    }

    /// Applies every write of `batch` atomically.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies `batch` atomically with explicit write options.
    pub fn write_opt(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.inner.write(batch, opts.sync)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(DEFAULT_TREE, key.as_ref(), None)
    }

    /// `f` of the value of `key`, borrowed where it lies (a block of a
    /// memory-mapped file, a memtable) instead of copied out; `None` if
    /// the key has no value. What [`Db::get`] does without the copy, for a
    /// caller that only looks at the value or copies what it needs.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = basalt::Db::open(dir.path(), basalt::Options::default())?;
    /// db.put("k", "value")?;
    /// assert_eq!(db.get_with("k", |v| v.len())?, Some(5));
    /// assert_eq!(db.get_with("missing", |v| v.len())?, None);
    /// # Ok::<(), basalt::Error>(())
    /// ```
    pub fn get_with<R>(&self, key: impl AsRef<[u8]>, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.inner.get_with(DEFAULT_TREE, key.as_ref(), None, None, |v| f(v.as_slice()))
    }

    /// The value of `key` with explicit read options (for example a snapshot).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, opts: &ReadOptions<'_>) -> Result<Option<Bytes>> {
        self.inner.get(DEFAULT_TREE, key.as_ref(), self.inner.snapshot_seqno(opts.snapshot)?)
    }

    /// Values of several keys, in the order asked.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: impl IntoIterator<Item = K>) -> Vec<Result<Option<Bytes>>> {
        keys.into_iter().map(|k| self.get(k)).collect()
    }

    /// Iterates over the keys in `range` in ascending order. Use
    /// [`Db::iter_all`] for the whole store.
    pub fn iter<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> DbIterator {
        self.iter_opt(range, Direction::Forward, &ReadOptions::default())
    }

    /// Iterates over the keys in `range` in descending order.
    pub fn iter_rev<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> DbIterator {
        self.iter_opt(range, Direction::Reverse, &ReadOptions::default())
    }

    /// Iterates over every key in ascending order.
    pub fn iter_all(&self) -> DbIterator {
        self.iter::<&[u8]>(..)
    }

    /// Iterates over `range` in `direction` with explicit read options.
    pub fn iter_opt<K: AsRef<[u8]>>(
        &self,
        range: impl RangeBounds<K>,
        direction: Direction,
        opts: &ReadOptions<'_>,
    ) -> DbIterator {
        iter::new(&self.inner, DEFAULT_TREE, iter::owned_range(&range), direction, opts.snapshot)
    }

    /// Iterates over the keys that start with `prefix`, ascending.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let range = iter::prefix_range(prefix.as_ref());
        iter::new(&self.inner, DEFAULT_TREE, range, Direction::Forward, None)
    }

    /// A consistent, read-only view of the database as of now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone())
    }

    /// Starts an optimistic transaction reading at a snapshot taken now
    /// (see [`Transaction`] for its isolation and an example).
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.inner.clone())
    }

    /// Writes the active memtable to an SST and waits until every memtable
    /// is flushed.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_all()
    }

    /// Compacts every SST overlapping `range` down the levels (memtables are
    /// flushed first): afterwards the range's data sits in the deepest
    /// level, without overwritten versions or tombstones no snapshot needs.
    pub fn compact_range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Result<()> {
        self.inner.compact_range(DEFAULT_TREE, &iter::owned_range(&range))
    }

    /// Blocks until background work is done: no memtable waits for flush
    /// and no level needs compaction. For benchmarks and bulk loads that
    /// want to measure a settled tree.
    pub fn wait_for_background_work(&self) -> Result<()> {
        self.inner.wait_for_background_work()
    }

    /// Makes every write so far durable (fsync of the WAL).
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.sync_wal()
    }

    /// Counters and the shape of the tree.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Syncs the WAL, stops the background threads and releases the
    /// directory, reporting any error (dropping a `Db` does the same but
    /// cannot report, and does not sync). Handles that outlive it (tables,
    /// snapshots, iterators, scans) get [`Error::Closed`] from every call,
    /// as does this `Db`: it takes `&self` so that a database shared in an
    /// `Arc` (by a SQL session, or a Python handle) can be closed while
    /// other owners remain. A second call does nothing.
    pub fn close(&self) -> Result<()> {
        let synced = self.shut_down(true);
        let bg_error = self.inner.jobs.error();
        synced?;
        bg_error.map_or(Ok(()), Err)
    }

    /// Marks the database closed once no group commit runs (so none starts
    /// after it), syncing the WAL first if asked, stops the background
    /// threads, logs the file numbers handed out, then releases the
    /// directory (`lifecycle.rs`).
    fn shut_down(&self, sync: bool) -> Result<()> {
        let inner = &self.inner;
        let synced = inner.with_exclusive_writer(|| {
            let writable = !inner.jobs.failed();
            let synced = if sync && writable && !inner.read_only && !inner.is_closed() {
                inner.writer.sync_wal().map_err(|e| inner.set_bg_error(e))
            } else {
                Ok(())
            };
            inner.lifecycle.close();
            synced
        });
        inner.jobs.stop();
        for handle in self.threads.lock().drain(..) {
            // A panic in a background thread is a bug; it already stopped
            // making progress, and there is nothing left to clean up.
            let _ = handle.join();
        }
        let mut versions = inner.versions.lock();
        if inner.lifecycle.is_released() {
            return synced;
        }
        // A compaction or index build running on a caller's thread may
        // hold file numbers it has not created yet: the next owner of the
        // directory must start above them. Without a writable MANIFEST
        // (an earlier failure, a read-only open) there is nothing to log.
        let writable = !inner.jobs.failed();
        let logged = if writable && !inner.read_only {
            versions.log_file_numbers().map_err(|e| inner.set_bg_error(e.into()))
        } else {
            Ok(())
        };
        inner.lifecycle.release();
        drop(versions);
        synced.and(logged)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shut_down(false);
    }
}

impl DbInner {
    /// Whether the `Db` was closed or dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.lifecycle.is_closed()
    }

    /// [`Error::Closed`] once the `Db` was closed or dropped.
    pub(crate) fn check_open(&self) -> Result<()> {
        self.lifecycle.check_open()
    }

    /// Logs `edit` to the MANIFEST and applies it. A failed MANIFEST write
    /// leaves the file's durable contents unknown (a failed fsync may have
    /// kept the edit's bytes, which recovery would replay), so, as after a
    /// failed WAL sync, writes stop: nothing acknowledged later can be
    /// lost to an edit the caller was told failed. An edit refused before
    /// anything was written (it does not apply to the current version)
    /// only fails its caller. Once the directory is released, every edit
    /// is refused: the MANIFEST may be another handle's by then.
    pub(crate) fn log_and_apply(&self, versions: &mut VersionSet, edit: VersionEdit) -> Result<Arc<Version>> {
        if self.read_only {
            // Nothing a read-only open does logs an edit; a path that
            // would must not reach the MANIFEST (or rewrite CURRENT).
            return Err(Error::ReadOnly(format!("{} was opened read-only", self.dir.display())));
        }
        if self.lifecycle.is_released() {
            return Err(Error::Closed("the database is closed: its MANIFEST is no longer written".into()));
        }
        match versions.log_and_apply(edit) {
            Ok(version) => Ok(version),
            Err(EditFailure::Refused(e)) => Err(e),
            Err(EditFailure::Unwritten(e)) => Err(self.set_bg_error(e)),
        }
    }
}
