//! The `Keyspace` handle: the key-value API on one named keyspace. `Db`'s
//! own key-value methods are the default keyspace's.

use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;

use crate::catalog::HistoryWindow;
use crate::db::read::changes::Change;
use crate::db::read::history::HistoryInfo;
use crate::db::read::iter::{self, DbIterator, Direction};
use crate::db::read::key_history::{HistoryOptions, KeyVersion};
use crate::db::state::handles::Keyspace;
use crate::db::state::open_trees::TreeShared;
use crate::db::{read::snapshot::ReadOptions, state::inner::DbInner};
use crate::error::{Error, Result};
use crate::options::WriteOptions;
use crate::wal::batch::WriteBatch;

impl Keyspace {
    pub(crate) fn new(inner: Arc<DbInner>, shared: Arc<TreeShared>) -> Self {
        Keyspace { inner, shared }
    }

    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(self.shared.id, key.as_ref(), None)
    }

    /// The value of `key` as of the snapshot in `opts` (or now).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, opts: &ReadOptions<'_>) -> Result<Option<Bytes>> {
        self.inner.get(
            self.shared.id,
            key.as_ref(),
            self.inner.snapshot_seqno(opts.snapshot, self.shared.id)?,
        )
    }

    /// `f` of the value of `key`, borrowed where it lies (see `Db::get_with`).
    pub fn get_with<R>(&self, key: impl AsRef<[u8]>, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.inner.get_with(self.shared.id, key.as_ref(), None, None, |v| f(v.as_slice()))
    }

    /// The versions of `key` the keyspace's history window keeps, newest
    /// first, within `opts` (see [`HistoryWindow`](crate::HistoryWindow)).
    /// Refused ([`Error::HistoryUnavailable`]) when it keeps no history.
    pub fn history(&self, key: impl AsRef<[u8]>, opts: HistoryOptions) -> Result<Vec<KeyVersion>> {
        self.inner.key_history(self.shared.id, &self.shared.name, key.as_ref(), &opts)
    }

    /// The keyspace's committed changes after seqno `since`, in commit
    /// order, at most `limit` (see [`Table::changes`](crate::Table::changes)).
    pub fn changes(&self, since: u64, limit: usize) -> Result<Vec<Change>> {
        self.inner.key_changes(self.shared.id, &self.shared.name, since, limit)
    }

    /// Keeps `window` of history from now on (see
    /// [`HistoryWindow`](crate::HistoryWindow)); `HistoryWindow::default()`
    /// turns it off.
    pub fn set_history(&self, window: HistoryWindow) -> Result<()> {
        self.inner.set_history(self.shared.id, &self.shared.name, window)
    }

    /// The keyspace's history window and the oldest point it holds.
    pub fn history_info(&self) -> Option<HistoryInfo> {
        self.inner.history_info(self.shared.id)
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_opt(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_keyspace(self, key, value)?;
        self.inner.write(batch, opts.sync)
    }

    /// Deletes `key` (deleting a missing key is not an error).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Deletes `key` with explicit write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_keyspace(self, key)?;
        self.inner.write(batch, opts.sync)
    }

    /// Binds the keyspace to the merge operator named `name` (a builtin —
    /// `add_i64`, `add_u64`, `min_i64`, `max_i64`, `min_u64`, `max_u64`,
    /// `append` — or one of `Options::merge_operators`), so that it takes
    /// [`Keyspace::merge`]; kept in the MANIFEST. Binding it again to the
    /// same operator does nothing; to another is refused.
    pub fn set_merge_operator(&self, name: &str) -> Result<()> {
        self.inner.set_merge_operator(self.shared.id, &self.shared.name, name)
    }

    /// Sets how long each version lives after its commit (`None`: for
    /// ever), kept in the MANIFEST: from the moment a version is `ttl` old,
    /// no read sees it (gets, iterators, snapshots alike), and compaction
    /// drops it, whole files at once where every entry expired. Entries
    /// written before the TTL was set count as written when it was. A
    /// shorter TTL expires more at once; a longer one does not bring back
    /// what had expired (`docs/ttl.md`). Refused for a keyspace with a
    /// merge operator or a history window.
    pub fn set_ttl(&self, ttl: Option<std::time::Duration>) -> Result<()> {
        self.inner.set_ttl(self.shared.id, &self.shared.name, ttl)
    }

    /// The keyspace's time to live, if set.
    pub fn ttl(&self) -> Option<std::time::Duration> {
        self.inner.ttl_of(self.shared.id)
    }

    /// The merge operator the keyspace is bound to, by name.
    pub fn merge_operator(&self) -> Option<String> {
        let sv = self.inner.versions.load();
        sv.version.catalog.merge_operator(self.shared.id).map(ToString::to_string)
    }

    /// Adds `operand` to `key`: the keyspace's merge operator folds it onto
    /// the key's value when the key is read (and compaction folds it
    /// ahead of reads). No read, so no conflict with other writers: the
    /// counter of many threads. Refused for a keyspace bound to no
    /// operator, and for an operand the operator can never fold (an
    /// integer operator's operand is 8 bytes, little-endian).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.merge_opt(key, operand, &WriteOptions::default())
    }

    /// [`Keyspace::merge`] with explicit write options.
    pub fn merge_opt(
        &self,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.merge_keyspace(self, key, operand)?;
        self.inner.write(batch, opts.sync)
    }

    /// Deletes every key in `range`: one write (one WAL entry, one range
    /// tombstone) however many keys it holds, visible to reads at once;
    /// compaction then drops the keys, whole files at a time where the
    /// range covers them (`docs/range-deletes.md`).
    pub fn delete_range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Result<()> {
        self.delete_range_opt(range, &WriteOptions::default())
    }

    /// [`Keyspace::delete_range`] with explicit write options.
    pub fn delete_range_opt<K: AsRef<[u8]>>(
        &self,
        range: impl RangeBounds<K>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_keyspace(self, range)?;
        self.inner.write(batch, opts.sync)
    }

    /// Iterates over the keys in `range` in ascending order.
    pub fn iter<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> DbIterator {
        self.iter_opt(range, Direction::Forward, &ReadOptions::default())
    }

    /// Iterates over the keys in `range` in descending order.
    pub fn iter_rev<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> DbIterator {
        self.iter_opt(range, Direction::Reverse, &ReadOptions::default())
    }

    /// Iterates over `range` in `direction` with explicit read options.
    pub fn iter_opt<K: AsRef<[u8]>>(
        &self,
        range: impl RangeBounds<K>,
        direction: Direction,
        opts: &ReadOptions<'_>,
    ) -> DbIterator {
        iter::new(&self.inner, self.shared.id, iter::owned_range(&range), direction, opts.snapshot)
            .holding(self.shared.clone())
    }

    /// Iterates over the keys that start with `prefix`, ascending.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let range = iter::prefix_range(prefix.as_ref());
        iter::new(&self.inner, self.shared.id, range, Direction::Forward, None).holding(self.shared.clone())
    }

    /// Compacts the keyspace's SSTs overlapping `range` down the levels
    /// (see `Db::compact_range`).
    pub fn compact_range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Result<()> {
        self.inner.compact_range(self.shared.id, &iter::owned_range(&range))
    }
}

impl WriteBatch {
    /// Sets `key` to `value` in `keyspace`. A keyspace of another database
    /// than the batch's earlier keyspace or table writes is
    /// [`Error::InvalidArgument`], and the batch is unchanged.
    pub fn put_keyspace(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.bind_keyspace(keyspace)?;
        self.put_raw(keyspace.shared.id, key.as_ref(), value.as_ref());
        Ok(())
    }

    /// Deletes `key` from `keyspace` (see [`WriteBatch::put_keyspace`]).
    pub fn delete_keyspace(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        self.bind_keyspace(keyspace)?;
        self.delete_raw(keyspace.shared.id, key.as_ref());
        Ok(())
    }

    /// Adds a merge operand for `key` of `keyspace` (see
    /// [`Keyspace::merge`]).
    pub fn merge_keyspace(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.bind_keyspace(keyspace)?;
        self.merge_raw(keyspace.shared.id, key.as_ref(), operand.as_ref());
        Ok(())
    }

    /// Deletes every key of `range` from `keyspace` (see
    /// [`Keyspace::delete_range`]); an empty range adds nothing.
    pub fn delete_range_keyspace<K: AsRef<[u8]>>(
        &mut self,
        keyspace: &Keyspace,
        range: impl RangeBounds<K>,
    ) -> Result<()> {
        self.bind_keyspace(keyspace)?;
        let (start, end) = crate::range_del::bytes_range(&range);
        self.delete_range_raw(keyspace.shared.id, &start, end.as_deref());
        Ok(())
    }

    /// Binds the batch to the keyspace's database: tree ids mean nothing
    /// in another one.
    fn bind_keyspace(&mut self, keyspace: &Keyspace) -> Result<()> {
        if self.bind_database(keyspace.inner.id) {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "keyspace {} belongs to another database than the writes already in this batch",
                keyspace.name()
            )))
        }
    }
}
