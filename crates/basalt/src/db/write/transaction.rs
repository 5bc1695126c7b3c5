//! Optimistic transactions under snapshot isolation: reads at the
//! transaction's snapshot (its own writes first), writes gathered into one
//! write batch, and a commit that the group-commit leader refuses with
//! [`Error::Conflict`] when another commit wrote one of its keys since the
//! snapshot (`write/commit.rs`, `check_conflicts`). Nothing is locked while a
//! transaction runs; a commit costs its write batch plus one lookup per
//! key it tracks, and only in the memtables and SSTs written since its
//! snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;

use crate::codec::internal::Kind;
use crate::codec::key::KeyValue;
use crate::db::read::overlay::{TableOverlay, schema_changed};
use crate::db::read::point::Value;
use crate::db::state::write_path::ConflictCheck;
use crate::db::{
    read::snapshot::Snapshot, state::handles::Keyspace, state::handles::Table, state::inner::DbInner,
};
use crate::error::{Error, Result};
use crate::ids::{DEFAULT_TREE, TreeId};
use crate::options::WriteOptions;
use crate::row::decode::{ColumnBuilder, builders_for};
use crate::wal::batch::WriteBatch;

/// A key of a tree, as the transaction's own writes and tracked reads
/// keep it.
type OwnKey = (TreeId, Vec<u8>);

/// A read-modify-write unit of work: reads see the database as of the
/// transaction's start (its snapshot) with its own writes on top; its
/// writes (key-value entries in any keyspace, table rows with their index
/// upkeep) become visible together, atomically and in one WAL record, at
/// [`Transaction::commit`] — or not at all. Dropping it without a commit
/// rolls it back (nothing was written).
///
/// **Isolation: snapshot isolation, first committer wins.** A commit is
/// refused with [`Error::Conflict`], and nothing of it written, when a key
/// the transaction *wrote* or *read for update* (`get_for_update`,
/// `get_table_for_update`) was written by another commit after the
/// transaction's snapshot. Unique indexes are checked at commit against
/// every row committed before it. Plain `get`s are not checked: two
/// transactions that each read what the other writes, and write
/// different keys, both commit (write skew). Reading such keys with
/// `get_for_update` makes them conflict instead:
///
/// ```
/// use basalt::{Db, Error, Options};
/// # fn main() -> basalt::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default())?;
/// db.put(b"alice", b"10")?;
/// db.put(b"bob", b"0")?;
/// let balance = |v: Option<basalt::Bytes>| -> i64 {
///     v.and_then(|b| std::str::from_utf8(&b).ok()?.parse().ok()).unwrap_or(0)
/// };
///
/// // Move 7 from alice to bob, unless alice lacks it.
/// let mut tx = db.transaction();
/// let alice = balance(tx.get_for_update(b"alice")?);
/// let bob = balance(tx.get_for_update(b"bob")?);
/// assert!(alice >= 7);
///
/// // Meanwhile another writer changes alice's balance...
/// db.put(b"alice", b"3")?;
///
/// tx.put(b"alice", (alice - 7).to_string())?;
/// tx.put(b"bob", (bob + 7).to_string())?;
/// // ...so this commit loses, and nothing of it is written: run it again.
/// assert!(matches!(tx.commit(), Err(Error::Conflict(_))));
/// assert_eq!(db.get(b"bob")?.as_deref(), Some(&b"0"[..]));
/// # Ok(())
/// # }
/// ```
///
/// A transaction holds its writes in memory until it commits: past the
/// database's `batch_bytes_max` a write is refused with
/// [`Error::InvalidArgument`] and the transaction keeps what it had.
/// Tables and keyspaces created or dropped while it runs are seen at
/// commit: a write to one dropped since is refused then.
pub struct Transaction {
    inner: Arc<DbInner>,
    /// Pins the versions the transaction reads.
    snapshot: Snapshot,
    /// Every write so far, in order: what the commit logs.
    batch: WriteBatch,
    /// The newest own write of each key (`None`: deleted): what reads see
    /// before the snapshot. A table's rows are kept as row bytes.
    own: BTreeMap<OwnKey, Option<Bytes>>,
    /// Keys read for update: checked at commit as written keys are.
    read_for_update: BTreeSet<OwnKey>,
    /// Bytes of `read_for_update`'s keys, counted against the size limit.
    tracked_bytes: usize,
    /// The schema version each written table's rows were encoded under:
    /// a table whose columns change meanwhile cannot take them.
    schema_versions: BTreeMap<TreeId, u32>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("snapshot", &self.snapshot.seqno())
            .field("writes", &self.batch.len())
            .field("read_for_update", &self.read_for_update.len())
            .finish_non_exhaustive()
    }
}

impl Transaction {
    pub(crate) fn new(inner: Arc<DbInner>) -> Transaction {
        let snapshot = Snapshot::new(inner.clone());
        Transaction {
            inner,
            snapshot,
            batch: WriteBatch::new(),
            own: BTreeMap::new(),
            read_for_update: BTreeSet::new(),
            tracked_bytes: 0,
            schema_versions: BTreeMap::new(),
        }
    }

    /// The transaction's own writes to `table` as they are now: a scan
    /// given them and the transaction's snapshot
    /// (`ScanOptions::default().snapshot(Some(tx.snapshot())).overlay(Some(tx.overlay(&table)))`)
    /// reads the table as the transaction sees it — its rows in place of
    /// the snapshot's, its deletes hiding them. Later writes of the
    /// transaction are not in it. An overlay made for a table of another
    /// database, or used on one, is refused by the scan.
    pub fn overlay(&self, table: &Table) -> TableOverlay {
        let tree = table.shared.id;
        let db = Arc::ptr_eq(&self.inner, &table.inner).then_some(self.inner.id);
        let rows: Vec<(Vec<u8>, Option<Bytes>)> = self
            .own
            .range((tree, Vec::new())..)
            .take_while(|((t, _), _)| *t == tree)
            .map(|((_, key), row)| (key.clone(), row.clone()))
            .collect();
        TableOverlay {
            db,
            tree,
            schema_version: self.schema_versions.get(&tree).copied(),
            rows: Arc::new(rows),
        }
    }

    /// The snapshot the transaction reads at. Scans through it
    /// ([`ReadOptions::snapshot`](crate::ReadOptions), [`Snapshot::iter`])
    /// see the database as the transaction does, without its own writes.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Number of writes so far (key-value entries and table rows).
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// True when the transaction wrote nothing yet.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    // ---------------------------------------------------------- key-value

    /// The value of `key` in the default keyspace: the transaction's own
    /// write, or the snapshot's value.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.read(DEFAULT_TREE, key.as_ref())
    }

    /// [`Transaction::get`], and the commit fails if another commit writes
    /// `key` after this transaction's snapshot.
    pub fn get_for_update(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.track(DEFAULT_TREE, key.as_ref())?;
        self.read(DEFAULT_TREE, key.as_ref())
    }

    /// Sets `key` to `value` in the default keyspace.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut part = WriteBatch::new();
        part.put(key.as_ref(), value.as_ref());
        self.write(part)
    }

    /// Deletes `key` from the default keyspace.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut part = WriteBatch::new();
        part.delete(key.as_ref());
        self.write(part)
    }

    /// [`Transaction::get`] in `keyspace`.
    pub fn get_keyspace(&self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.check_same_db(&keyspace.inner)?;
        self.read(keyspace.shared.id, key.as_ref())
    }

    /// [`Transaction::get_for_update`] in `keyspace`.
    pub fn get_keyspace_for_update(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Bytes>> {
        self.check_same_db(&keyspace.inner)?;
        self.track(keyspace.shared.id, key.as_ref())?;
        self.read(keyspace.shared.id, key.as_ref())
    }

    /// [`Transaction::put`] in `keyspace`.
    pub fn put_keyspace(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut part = WriteBatch::new();
        part.put_keyspace(keyspace, key.as_ref(), value.as_ref())?;
        self.write(part)
    }

    /// [`Transaction::delete`] in `keyspace`.
    pub fn delete_keyspace(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        let mut part = WriteBatch::new();
        part.delete_keyspace(keyspace, key.as_ref())?;
        self.write(part)
    }

    // -------------------------------------------------------------- tables

    /// The row of `table` with primary key `key` (one value per key column)
    /// as a one-row batch: the transaction's own write, or the snapshot's.
    pub fn get_table(&self, table: &Table, key: &[KeyValue<'_>]) -> Result<Option<RecordBatch>> {
        self.check_same_db(&table.inner)?;
        let user_key = table.encode_key_values(key, true)?;
        self.read_row(table, &user_key)
    }

    /// [`Transaction::get_table`], and the commit fails if another commit
    /// writes that row after this transaction's snapshot.
    pub fn get_table_for_update(
        &mut self,
        table: &Table,
        key: &[KeyValue<'_>],
    ) -> Result<Option<RecordBatch>> {
        self.check_same_db(&table.inner)?;
        let user_key = table.encode_key_values(key, true)?;
        self.track(table.shared.id, &user_key)?;
        self.read_row(table, &user_key)
    }

    /// Upserts every row of `batch` into `table` (as
    /// [`WriteBatch::put_table`]); its indexes are kept at commit.
    pub fn put_table(&mut self, table: &Table, batch: &RecordBatch) -> Result<()> {
        let mut part = WriteBatch::new();
        part.put_table(table, batch)?;
        self.write(part)
    }

    /// Deletes the rows of `table` whose keys are in `keys` (a batch of the
    /// key columns).
    pub fn delete_table(&mut self, table: &Table, keys: &RecordBatch) -> Result<()> {
        let mut part = WriteBatch::new();
        part.delete_table(table, keys)?;
        self.write(part)
    }

    /// Adds every write of `batch` (key-value entries in any keyspace,
    /// table rows) to the transaction, all or none: a batch over a limit
    /// (`key_bytes_max`, `value_bytes_max`, the transaction's size past
    /// `batch_bytes_max`), of another database, or a database that takes
    /// no writes (read-only, closed, stopped by an I/O error) is refused
    /// and the transaction keeps what it had.
    pub fn write(&mut self, batch: WriteBatch) -> Result<()> {
        self.inner.check_writable()?;
        if batch.database().is_some_and(|db| db != self.inner.id) {
            return Err(Error::InvalidArgument("the keyspace or table belongs to another database".into()));
        }
        if batch.has_merges() {
            return Err(Error::InvalidArgument(
                "a transaction cannot hold a merge operand: write it with Db::write or merge".into(),
            ));
        }
        if batch.has_range_deletes() {
            // The transaction's reads merge its own writes key by key; a
            // range delete among them would be read as one key's delete.
            return Err(Error::InvalidArgument(
                "a transaction cannot hold a range delete: write it with Db::write or delete_range".into(),
            ));
        }
        self.inner.check_batch_limits(&batch)?;
        self.check_size(batch.encoded_len())?;
        let own = own_writes_in_order(&batch);
        let mut versions = self.schema_versions.clone();
        for (tree, _, rows) in batch.table_writes() {
            if let Some(v) = rows.schema_version
                && *versions.entry(tree).or_insert(v) != v
            {
                let catalog = self.inner.versions.load().version.catalog.clone();
                return Err(schema_changed(catalog.tree(tree).map_or("?", |t| t.name.as_str())));
            }
        }
        if !self.batch.append(batch) {
            return Err(Error::InvalidArgument("a transaction holds at most 2^32 - 1 writes".into()));
        }
        // In batch order: a key written twice keeps its later write.
        self.own.extend(own);
        self.schema_versions = versions;
        Ok(())
    }

    // -------------------------------------------------------------- ending

    /// Commits every write atomically, in one WAL record (see
    /// [`Transaction`] for when it is refused with [`Error::Conflict`]).
    /// A transaction that wrote nothing is still refused when a key it
    /// read for update was written since its snapshot (its reads are
    /// checked as RocksDB's optimistic transactions check them); one that
    /// neither wrote nor read for update commits at once.
    pub fn commit(self) -> Result<()> {
        self.commit_opt(&WriteOptions::default())
    }

    /// [`Transaction::commit`] with write options (`sync`: durable before
    /// it returns).
    pub fn commit_opt(self, opts: &WriteOptions) -> Result<()> {
        if self.batch.is_empty() && self.read_for_update.is_empty() {
            return self.inner.check_open();
        }
        let mut keys: BTreeSet<OwnKey> = self.read_for_update;
        keys.extend(self.own.into_keys());
        let check = ConflictCheck { snapshot: self.snapshot.seqno(), keys: keys.into_iter().collect() };
        let result = self.inner.write_checked(self.batch, opts.sync, Some(check));
        // The snapshot is released only once the check has run.
        drop(self.snapshot);
        result
    }

    /// Ends the transaction without writing anything (as dropping it does).
    pub fn rollback(self) {}

    // ------------------------------------------------------------- helpers

    fn check_same_db(&self, other: &Arc<DbInner>) -> Result<()> {
        if Arc::ptr_eq(&self.inner, other) {
            Ok(())
        } else {
            Err(Error::InvalidArgument("the keyspace or table belongs to another database".into()))
        }
    }

    /// The size limit: what the transaction holds (writes and tracked
    /// keys) must stay within `batch_bytes_max`, the size of one commit.
    fn check_size(&self, more: usize) -> Result<()> {
        let max = self.inner.opts.batch_bytes_max;
        let held = self.batch.encoded_len() + self.tracked_bytes;
        if held.saturating_add(more) > max {
            return Err(Error::InvalidArgument(format!(
                "the transaction would hold {} bytes, over batch_bytes_max ({max}): commit in parts",
                held.saturating_add(more)
            )));
        }
        Ok(())
    }

    fn track(&mut self, tree: TreeId, key: &[u8]) -> Result<()> {
        if self.read_for_update.contains(&(tree, key.to_vec())) {
            return Ok(());
        }
        self.check_size(key.len())?;
        self.tracked_bytes += key.len();
        self.read_for_update.insert((tree, key.to_vec()));
        Ok(())
    }

    fn read(&self, tree: TreeId, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner.check_open()?;
        if let Some(own) = self.own.get(&(tree, key.to_vec())) {
            return Ok(own.clone());
        }
        self.inner.get(tree, key, Some(self.snapshot.seqno()))
    }

    fn read_row(&self, table: &Table, user_key: &[u8]) -> Result<Option<RecordBatch>> {
        let (seqno, sv) = self.inner.read_view(Some(self.snapshot.seqno()));
        table.check_readable(&sv)?;
        let Some(own) = self.own.get(&(table.shared.id, user_key.to_vec())) else {
            return table.row_at(user_key, seqno, &sv);
        };
        // Checked for an own delete too, as overlays and the commit check
        // it: the commit of this write would be refused.
        let layout = table.layout_in(&sv);
        if self.schema_versions.get(&table.shared.id).is_some_and(|&v| v != layout.version()) {
            return Err(schema_changed(&table.shared.name));
        }
        let Some(row) = own else { return Ok(None) };
        let mut builders = builders_for(layout);
        Value::Borrowed(row).push_row(layout, user_key, &mut builders)?;
        let columns = builders.into_iter().map(ColumnBuilder::into_array).collect::<Result<Vec<_>>>()?;
        RecordBatch::try_new(layout.schema().clone(), columns)
            .map_err(|e| Error::InvalidArgument(format!("table row: {e}")))
            .map(Some)
    }
}

/// Every write of `batch` as reads of the transaction see it, in the
/// order the commit applies them (`insert_entries` in `write/commit.rs`): key
/// entries and table rows interleaved as they were added, so a later
/// write of a key replaces an earlier one whichever face wrote each.
fn own_writes_in_order(batch: &WriteBatch) -> Vec<(OwnKey, Option<Bytes>)> {
    let mut table_rows = batch.encoded_rows().iter();
    let mut own = Vec::with_capacity(batch.len());
    for e in batch.entries() {
        let live = e.kind != Kind::Delete;
        if e.arrow_rows == 0 {
            own.push(((e.tree, e.key.to_vec()), live.then(|| Bytes::copy_from_slice(e.value))));
        } else if let Some(rows) = table_rows.next() {
            own.extend(rows.rows.iter().map(|(k, v)| ((e.tree, k.to_vec()), live.then(|| v.clone()))));
        }
    }
    own
}
