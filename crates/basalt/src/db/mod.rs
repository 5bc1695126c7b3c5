//! The database: orchestrates the write path (group commit into the WAL and
//! memtable), background flushes, recovery and reads. It owns no format code.

mod handles;
mod index;
mod jobs;
mod read;
pub(crate) mod state;
mod write;

use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::ranked::{Rank, RankedMutex};
use bytes::Bytes;

pub use handles::stats::{GetLatency, LevelStats, Stats, TableBytes, TreeBytes};
pub use handles::table::TableOptions;
pub use index::options::{IndexInfo, IndexOptions};
pub use index::query::{IndexPredicate, LookupOptions};
#[cfg(feature = "inspect")]
pub use index::verify::IndexCheck;
pub use jobs::ingest::BulkLoad;
pub use jobs::ingest::files::ExternalSst;
pub use read::changes::{CHANGE_OP, CHANGE_RANGE_END, CHANGE_RANGE_START, Change};
pub use read::estimates::{ColumnEstimate, OwnedKeyValueRange, TableEstimate};
pub use read::history::HistoryInfo;
pub use read::iter::{DbIterator, Direction};
pub use read::key_history::{
    HISTORY_COMMIT_TIME, HISTORY_DELETED, HISTORY_SEQNO, HistoryOptions, KeyVersion,
};
pub use read::overlay::TableOverlay;
pub use read::row_view::{Row, RowRef};
pub use read::scan::{KeyValueRange, ScanOptions, ScanPlan, TableScan};
pub use read::snapshot::{AsOf, ReadOptions, Snapshot};
pub use state::handles::Keyspace;
pub use state::handles::Table;
pub use write::transaction::Transaction;

use arrow_schema::SchemaRef;

use crate::catalog::{DEFAULT_KEYSPACE, Namespace, TreeKindRecord};
use crate::error::Result;
use crate::ids::DEFAULT_TREE;
use crate::options::{Options, WriteOptions};
use crate::wal::batch::WriteBatch;
use handles::ddl::table_record;
use read::iter;
use state::inner::DbInner;

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
        let inner = Arc::new(jobs::open::open(path.as_ref(), options, false)?);
        let db = Db { inner: inner.clone(), threads: RankedMutex::new(Rank::Threads, Vec::new()) };
        // On a failed spawn, dropping `db` stops the threads already started.
        db.threads.lock().push(jobs::flush::spawn(inner.clone())?);
        db.threads.lock().push(jobs::compact::spawn(inner)?);
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
        let inner = Arc::new(jobs::open::open(path.as_ref(), options, true)?);
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

    /// Adds `operand` to `key` of the key-value store (the default
    /// keyspace's merge operator folds it; see [`Keyspace::merge`]).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.merge(key, operand);
        self.write(batch)
    }

    /// Deletes every key of the key-value store in `range`: one write
    /// however many keys the range holds (see [`Keyspace::delete_range`]).
    pub fn delete_range<K: AsRef<[u8]>>(&self, range: impl std::ops::RangeBounds<K>) -> Result<()> {
        self.delete_range_opt(range, &WriteOptions::default())
    }

    /// [`Db::delete_range`] with explicit write options.
    pub fn delete_range_opt<K: AsRef<[u8]>>(
        &self,
        range: impl std::ops::RangeBounds<K>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(range);
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
        self.inner.get(DEFAULT_TREE, key.as_ref(), self.inner.snapshot_seqno(opts.snapshot, DEFAULT_TREE)?)
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

    /// A read-only view of the database as of a past point: just after
    /// the commit of a seqno, or the last commit at or before a time.
    /// Every read through it (gets, scans with filters and projections,
    /// index lookups, counts) answers as of that point, for each table or
    /// keyspace whose history window ([`Table::set_history`]) holds it;
    /// a read of a tree whose window does not is refused with
    /// [`Error::HistoryUnavailable`](crate::Error::HistoryUnavailable),
    /// naming the oldest point it still holds. Refused here for a seqno
    /// not committed yet, or a time older than every commit time kept.
    pub fn snapshot_at(&self, point: AsOf) -> Result<Snapshot> {
        Snapshot::at(self.inner.clone(), point)
    }

    /// Starts an optimistic transaction reading at a snapshot taken now
    /// (see [`Transaction`] for its isolation and an example).
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.inner.clone())
    }

    /// The last sequence number a write of this database was given (0 for
    /// a new one): files [`Table::write_sst_files`] writes for this
    /// database's [`Table::ingest_files`] take a seqno above it.
    pub fn last_seqno(&self) -> u64 {
        self.inner.writer.last_seqno()
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
    /// snapshots, iterators, scans) get [`Error::Closed`](crate::Error::Closed) from every call,
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
                inner.writer.sync_wal().map_err(|e| inner.set_bg_error(e)).and_then(|()| {
                    // What expired stays hidden across the reopen, even
                    // with the wall clock set back meanwhile.
                    let floors = inner.grown_expiry_floors(&inner.versions.load().version.catalog);
                    if floors.is_empty() {
                        return Ok(());
                    }
                    inner
                        .install_edit(crate::version::VersionEdit { tree_ttls: floors, ..Default::default() })
                })
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
        let logged = inner.versions.release_directory(&inner.install_parts());
        synced.and(logged)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shut_down(false);
    }
}

/// The catalog: tables and keyspaces by name (`handles/ddl.rs` has the
/// work).
impl Db {
    /// Creates a table with `schema` and a primary key of the named columns.
    /// As SQL's `PRIMARY KEY` implies `NOT NULL`, the key columns are
    /// stored non-nullable whatever their fields say (pyarrow and most
    /// schema builders make every field nullable unless told otherwise):
    /// [`Table::schema`] shows them so, and a write with a null in one is
    /// refused naming the column. The schema and key are checked before
    /// anything is written.
    #[expect(clippy::needless_pass_by_value, reason = "a SchemaRef is an Arc; Arrow APIs take it by value")]
    pub fn create_table(
        &self,
        name: &str,
        schema: SchemaRef,
        primary_key: &[&str],
        _options: TableOptions,
    ) -> Result<Table> {
        let kind = table_record(&schema, primary_key)?;
        self.inner.create_tree(Namespace::Tables, name, kind)?;
        self.table(name)
    }

    /// The table called `name` (`"default"` is the default keyspace seen
    /// as a table of two binary columns, `key` and `value`).
    pub fn table(&self, name: &str) -> Result<Table> {
        let shared = self.inner.open_tree(Namespace::Tables, name)?;
        Ok(Table { inner: self.inner.clone(), shared })
    }

    /// Names of every table, `"default"` (the default keyspace's table
    /// face) first.
    pub fn tables(&self) -> Vec<String> {
        let catalog = self.inner.versions.load().version.catalog.clone();
        std::iter::once(DEFAULT_KEYSPACE.to_string()).chain(catalog.names(Namespace::Tables)).collect()
    }

    /// Drops a table and its data. Fails with [`Error::Busy`](crate::Error::Busy) while any
    /// handle to it (or a scan over it) is alive, and refuses `"default"`.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.inner.drop_tree(Namespace::Tables, name)
    }

    /// Creates a key-value keyspace: a tree of its own, with its own
    /// keys, that shares the WAL, caches and write buffer (RocksDB's
    /// column families, fjall's partitions). Writes to several keyspaces
    /// commit atomically in one [`WriteBatch`](crate::WriteBatch).
    pub fn create_keyspace(&self, name: &str) -> Result<Keyspace> {
        self.inner.create_tree(Namespace::Keyspaces, name, TreeKindRecord::Keyspace)?;
        self.keyspace(name)
    }

    /// The keyspace called `name`; `"default"` is the one the `Db`'s own
    /// key-value methods use.
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        let shared = self.inner.open_tree(Namespace::Keyspaces, name)?;
        Ok(Keyspace::new(self.inner.clone(), shared))
    }

    /// Names of every keyspace, `"default"` first.
    pub fn keyspaces(&self) -> Vec<String> {
        self.inner.versions.load().version.catalog.names(Namespace::Keyspaces)
    }

    /// Drops a keyspace and its data. Fails with [`Error::Busy`](crate::Error::Busy) while a
    /// handle to it (or an iterator over it) is alive, and refuses
    /// `"default"`.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.inner.drop_tree(Namespace::Keyspaces, name)
    }
}
