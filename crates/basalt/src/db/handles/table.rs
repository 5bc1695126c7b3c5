//! Every public method of the `Table` handle, which writes and reads Arrow
//! record batches; each one whose work belongs to another room (a scan,
//! an estimate, an index) calls it in a line. Each table is its own tree;
//! all share the WAL, MANIFEST, block cache and write-buffer budget.
//! Creating, listing and dropping tables is `ddl.rs` (`Db`'s methods for
//! them are in `db/mod.rs`).

use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{RecordBatch, UInt32Array};
use arrow_schema::SchemaRef;

use crate::codec::internal::SeqNo;
use crate::codec::key::{self, KeyValue};
use crate::db::read::point::Value;
use crate::db::read::row_view::RowRef;
use arrow_array::ArrayRef;
use arrow_schema::FieldRef;

use crate::catalog::HistoryWindow;
use crate::codec::key::OwnedKeyValue;
use crate::db::handles::stats::TableBytes;
use crate::db::index::options::{IndexInfo, IndexOptions};
use crate::db::index::query::{IndexPredicate, LookupOptions};
use crate::db::read::estimates::{ColumnEstimate, OwnedKeyValueRange, TableEstimate};
use crate::db::read::history::HistoryInfo;
use crate::db::read::key_history::HistoryOptions;
use crate::db::read::scan::{KeyValueRange, KeyedRows, ScanOptions, TableScan};
use crate::db::read::snapshot::Snapshot;
use crate::db::state::handles::Table;
use crate::db::{read::snapshot::ReadOptions, state::inner::DbInner, state::versions::SuperVersion};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::options::WriteOptions;
use crate::row;
use crate::row::decode::{ColumnBuilder, builders_for};
use crate::row::evolve::ColumnChange;
use crate::row::layout::TableLayout;
use crate::wal::batch::WriteBatch;

/// Options of a table. Reserved: every table uses the database's SST and
/// compaction settings today.
#[derive(Debug, Clone, Default)]
pub struct TableOptions {}

impl WriteBatch {
    /// Adds an upsert of every row of `batch` into `table`: rows whose key
    /// exists replace it; when the batch holds a key twice, the later row
    /// wins. A batch whose schema does not match, or that holds a null in
    /// a column the schema makes non-nullable (every key column), is
    /// [`Error::SchemaMismatch`] naming the column; rows whose encoded key
    /// or row exceed `key_bytes_max` or `value_bytes_max`, or a `table` of
    /// another database than the batch's earlier rows, are
    /// [`Error::InvalidArgument`]. Either way the write batch is unchanged.
    pub fn put_table(&mut self, table: &Table, batch: &RecordBatch) -> Result<()> {
        // One layout checks and encodes: the table's columns may change
        // meanwhile (the write path then refuses the rows).
        let layout = table.layout();
        layout.check_batch(batch)?;
        self.add_table_rows(table, &layout, batch, false)
    }

    /// Encodes and appends rows of `table` (checked against `layout`),
    /// refusing a table of another database and rows over the limits.
    fn add_table_rows(
        &mut self,
        table: &Table,
        layout: &TableLayout,
        batch: &RecordBatch,
        delete: bool,
    ) -> Result<()> {
        if self.database().is_some_and(|db| db != table.inner.id) {
            return Err(Error::InvalidArgument(format!(
                "table {} belongs to another database than the rows already in this write batch",
                table.name()
            )));
        }
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.len().saturating_add(batch.num_rows()) > u32::MAX as usize {
            return Err(Error::InvalidArgument("a write batch holds at most 2^32 - 1 rows".into()));
        }
        let rows = row::encode_rows(layout, batch, delete)?;
        let opts = &table.inner.opts;
        for (key, row) in &rows.rows {
            if key.len() > opts.key_bytes_max {
                return Err(Error::InvalidArgument(format!(
                    "a row's primary key encodes to {} bytes, over key_bytes_max ({})",
                    key.len(),
                    opts.key_bytes_max
                )));
            }
            if row.len() > opts.value_bytes_max {
                return Err(Error::InvalidArgument(format!(
                    "a row encodes to {} bytes, over value_bytes_max ({})",
                    row.len(),
                    opts.value_bytes_max
                )));
            }
        }
        let ipc = row::batch_to_ipc(batch)?;
        let bound = self.bind_database(table.inner.id);
        debug_assert!(bound, "checked above");
        self.put_rows(table.shared.id, &ipc, rows, delete);
        Ok(())
    }

    /// Adds a delete of the rows of `table` whose keys are in `keys` (a
    /// batch of exactly the key columns).
    pub fn delete_table(&mut self, table: &Table, keys: &RecordBatch) -> Result<()> {
        let layout = table.layout();
        layout.check_key_batch(keys)?;
        self.add_table_rows(table, &layout, keys, true)
    }

    /// Adds a delete of every row of `table` whose primary key lies in
    /// `range` (bounds are key prefixes, as [`ScanOptions::range`]'s): one
    /// entry however many rows the range holds. See [`Table::delete_range`].
    pub fn delete_table_range(&mut self, table: &Table, range: &KeyValueRange<'_>) -> Result<()> {
        let keys = crate::db::read::scan::encode_range(table, range)?;
        // Past every key starting with a prefix that has no successor
        // (empty, or all 0xff bytes): no key is left in the range.
        if let Bound::Excluded(prefix) = &range.0
            && prefix.len() < table.layout().primary_key().len()
            && key::prefix_successor(&table.encode_key_values(prefix, false)?).is_none()
        {
            return Ok(());
        }
        if !self.bind_database(table.inner.id) {
            return Err(Error::InvalidArgument(format!(
                "table {} belongs to another database than the rows already in this write batch",
                table.name()
            )));
        }
        let (start, end) = crate::range_del::bytes_range(&keys);
        self.delete_range_raw(table.shared.id, &start, end.as_deref());
        Ok(())
    }
}

impl Table {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The table's schema.
    pub fn schema(&self) -> SchemaRef {
        self.layout().schema().clone()
    }

    /// Names of the primary key columns, in key order.
    pub fn primary_key(&self) -> Vec<String> {
        let layout = self.layout();
        let schema = layout.schema();
        layout.primary_key().iter().map(|&i| schema.field(i).name().clone()).collect()
    }

    pub(crate) fn tree(&self) -> TreeId {
        self.shared.id
    }

    /// The table's current layout.
    pub(crate) fn layout(&self) -> Arc<TableLayout> {
        let sv = self.inner.versions.load();
        self.layout_in(&sv).clone()
    }

    /// The table's layout in `sv`, whose files and memtables its reads
    /// decode with it (a keyspace's table face has the handle's).
    pub(crate) fn layout_in<'a>(&'a self, sv: &'a SuperVersion) -> &'a Arc<TableLayout> {
        sv.version.catalog.table_layout_ref(self.shared.id).unwrap_or(&self.shared.layout)
    }

    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.inner
    }

    /// Upserts every row of `batch` atomically (see
    /// [`WriteBatch::put_table`]).
    pub fn write(&self, batch: &RecordBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Upserts every row of `batch` with explicit write options.
    pub fn write_opt(&self, batch: &RecordBatch, opts: &WriteOptions) -> Result<()> {
        let mut wb = WriteBatch::new();
        wb.put_table(self, batch)?;
        self.inner.write(wb, opts.sync)
    }

    /// Loads `batches` by writing their rows straight into SSTs, past the
    /// WAL and the memtable, and installs the files in one MANIFEST edit:
    /// after a crash the load is either all there or not at all. Rows are
    /// upserts, as in [`Table::write`]: a loaded row replaces the row with
    /// its key, and of two rows with one key the later is kept.
    ///
    /// Batches may come in any order. Batches in primary-key order (each
    /// one's smallest key above every earlier one's largest; rows within a
    /// batch may be in any order) stream through, one at a time, as one
    /// sorted run, which goes to the deepest level with nothing of the
    /// table in its range above it. Batches out of order are held until
    /// `Options::memtable_bytes_max` of them are in memory, sorted together
    /// and written as a further run; a load of several runs goes to L0 and
    /// is compacted into the levels before this returns (as the write
    /// path's compactions would be), so sorted input loads fastest.
    /// Other writes to the database wait while the files are written;
    /// reads go on. The memtables are flushed first. Refused for a table
    /// with secondary indexes (load first, then create them) and for a
    /// keyspace's table face. A batch that does not match the schema, or
    /// with rows over the size limits, is an error that leaves the table
    /// as it was.
    ///
    /// The batches are pulled while the load owns the database's write
    /// path: a source that writes to this database (or flushes, runs DDL or
    /// closes it) waits forever. A panic in the source fails the load,
    /// which installs nothing, and is raised again.
    pub fn bulk_load(
        &self,
        batches: impl IntoIterator<Item = RecordBatch>,
    ) -> Result<crate::db::jobs::ingest::BulkLoad> {
        self.inner.bulk_load(self.shared.id, &self.layout(), &mut batches.into_iter().map(Ok))
    }

    /// [`Table::bulk_load`] from a source that may fail, such as an Arrow
    /// `RecordBatchReader`: the source's first error ends the load, which
    /// then installs nothing and returns that error.
    pub fn bulk_load_from<E: Into<Error>>(
        &self,
        batches: impl IntoIterator<Item = std::result::Result<RecordBatch, E>>,
    ) -> Result<crate::db::jobs::ingest::BulkLoad> {
        let mut batches = batches.into_iter().map(|b| b.map_err(Into::into));
        self.inner.bulk_load(self.shared.id, &self.layout(), &mut batches)
    }

    /// Writes `batches` as finished SST files of this table into `dir` (any
    /// directory, created if missing), for [`Table::ingest_files`] here or
    /// in another database holding this table (a shard of one store, a
    /// copy): the files are sorted and built exactly as
    /// [`Table::bulk_load`] builds its files, with every block, filter,
    /// zone map and model. Nothing in the database changes, so a read-only
    /// handle writes them too.
    ///
    /// The rows get seqno `seqno` (one more for each further sorted run,
    /// when batches come out of key order beyond the memory budget, as in
    /// `bulk_load`); the ingest refuses them unless they lie above every
    /// seqno the ingesting database has used ([`Db::last_seqno`]).
    /// `cut_at` (key tuples or prefixes, strictly ascending): no file holds
    /// keys on both sides of a cut point, and each file says which range
    /// holds it ([`ExternalSst::range`]). Rows are upserts as in
    /// `bulk_load`: of two rows with one key the later batch's stays. On an
    /// error the files written so far are deleted.
    ///
    /// [`Db::last_seqno`]: crate::Db::last_seqno
    /// [`ExternalSst::range`]: crate::ExternalSst::range
    pub fn write_sst_files<E: Into<Error>>(
        &self,
        dir: impl AsRef<std::path::Path>,
        seqno: u64,
        cut_at: &[Vec<KeyValue<'_>>],
        batches: impl IntoIterator<Item = std::result::Result<RecordBatch, E>>,
    ) -> Result<Vec<crate::ExternalSst>> {
        let cuts = cut_at.iter().map(|t| self.encode_key_values(t, false)).collect::<Result<Vec<_>>>()?;
        let mut batches = batches.into_iter().map(|b| b.map_err(Into::into));
        self.inner.write_sst_files((self.shared.id, &self.layout()), dir.as_ref(), seqno, &cuts, &mut batches)
    }

    /// Installs in one MANIFEST edit the rows in `range` (bounds as
    /// [`ScanOptions::range`]'s) of SST files [`Table::write_sst_files`]
    /// made for this table: a file wholly in the range is hard-linked into
    /// the database (copied where links are impossible; the caller's file
    /// stays), one that straddles the range's edge is rewritten with only
    /// its rows in the range, one outside is skipped. Rows replace rows
    /// with their key, as writes do; where the files overlap, the higher
    /// seqno wins. Files that overlap none of one another go to the deepest
    /// level free in their range (the bottom one in a table without rows
    /// there, so compaction never rewrites them); otherwise they go to L0,
    /// and are compacted there and then when they overlap one another or L0
    /// holds [`Options::l0_compaction_trigger`] files (a scan merging
    /// overlapping runs reads row by row).
    ///
    /// Refused, changing nothing: a file another database's table or
    /// anything other than `write_sst_files` made, rows of a schema
    /// version the table never had, two overlapping files of one seqno, a
    /// table with secondary indexes or a history window (as `bulk_load`),
    /// and files whose seqnos do not all lie above every seqno this
    /// database has used (`Error::Conflict`: it was written after they
    /// were made). A damaged file is `Error::Corruption` naming it. The
    /// memtables are flushed first, and other writes wait meanwhile.
    ///
    /// [`ScanOptions::range`]: crate::ScanOptions::range
    /// [`Options::l0_compaction_trigger`]: crate::Options::l0_compaction_trigger
    pub fn ingest_files(
        &self,
        paths: &[impl AsRef<std::path::Path>],
        range: KeyValueRange<'_>,
    ) -> Result<crate::db::jobs::ingest::BulkLoad> {
        let range = crate::db::read::scan::encode_range(self, &range)?;
        let paths: Vec<std::path::PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.inner.ingest_files((self.shared.id, &self.layout()), &paths, &range)
    }

    /// Deletes the rows whose keys are in `keys` (the key columns only).
    pub fn delete(&self, keys: &RecordBatch) -> Result<()> {
        let mut wb = WriteBatch::new();
        wb.delete_table(self, keys)?;
        self.inner.write(wb, false)
    }

    /// Deletes every row whose primary key lies in `range` (bounds are key
    /// prefixes, as [`ScanOptions::range`]'s): one write (one WAL entry,
    /// one range tombstone) however many rows the range holds, visible to
    /// every read at once; compaction drops the rows later, whole files at
    /// a time where the range covers them. On a table with secondary
    /// indexes the commit also reads every row of the range, to delete its
    /// index entries in the same write: the cost of a row-by-row delete's
    /// index upkeep, without the row tombstones (`docs/range-deletes.md`).
    pub fn delete_range(&self, range: KeyValueRange<'_>) -> Result<()> {
        self.delete_range_opt(range, &WriteOptions::default())
    }

    /// [`Table::delete_range`] with explicit write options.
    pub fn delete_range_opt(&self, range: KeyValueRange<'_>, opts: &WriteOptions) -> Result<()> {
        let mut wb = WriteBatch::new();
        wb.delete_table_range(self, &range)?;
        self.inner.write(wb, opts.sync)
    }

    /// Compacts every SST of the table and of its indexes down the levels
    /// (memtables are flushed first): afterwards its rows and each index's
    /// entries sit in one sorted run, without overwritten versions or
    /// deletes no snapshot needs, and a read seeks one run per tree.
    pub fn compact(&self) -> Result<()> {
        let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
        self.inner.compact_range(self.shared.id, &all)?;
        let indexes: Vec<TreeId> = {
            let sv = self.inner.versions.load();
            sv.version.catalog.indexes_of(self.shared.id).map(|(id, _, _)| id).collect()
        };
        for index in indexes {
            match self.inner.compact_range(index, &all) {
                // Dropped since the list was taken: nothing left to compact.
                Err(Error::InvalidArgument(_)) if !self.index_exists(index) => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Whether tree `index` is still one of this table's indexes.
    fn index_exists(&self, index: TreeId) -> bool {
        self.inner.versions.load().version.catalog.indexes_of(self.shared.id).any(|(id, _, _)| id == index)
    }

    /// The row with primary key `key` (one value per key column, in key
    /// order), as a one-row batch.
    pub fn get(&self, key: &[KeyValue<'_>]) -> Result<Option<RecordBatch>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// `f` of a view of the row with primary key `key` (one value per key
    /// column, in key order), read where it lies — a memtable entry, the
    /// row cache, a cached block — without building Arrow arrays; `None`
    /// when the key has no row. The cheapest way to read one row: the
    /// view's typed accessors read only the columns asked for.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use basalt::arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    /// # use basalt::arrow_schema::{DataType, Field, Schema};
    /// # use basalt::{Db, KeyValue, Options, TableOptions};
    /// # let dir = tempfile::tempdir()?;
    /// # let db = Db::open(dir.path(), Options::default())?;
    /// let schema = Arc::new(Schema::new(vec![
    ///     Field::new("id", DataType::Int64, false),
    ///     Field::new("name", DataType::Utf8, true),
    /// ]));
    /// let users = db.create_table("users", schema.clone(), &["id"], TableOptions::default())?;
    /// users.write(&RecordBatch::try_new(schema, vec![
    ///     Arc::new(Int64Array::from(vec![1])) as ArrayRef,
    ///     Arc::new(StringArray::from(vec!["ada"])),
    /// ])?)?;
    /// let name = users.get_with(&[KeyValue::I64(1)], |row| row.str(1).map(|s| s.map(str::to_owned)))?;
    /// assert_eq!(name.transpose()?.flatten().as_deref(), Some("ada"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_with<R>(&self, key: &[KeyValue<'_>], f: impl FnOnce(RowRef<'_>) -> R) -> Result<Option<R>> {
        self.get_with_opt(key, &ReadOptions::default(), f)
    }

    /// [`Table::get_with`] with explicit read options.
    pub fn get_with_opt<R>(
        &self,
        key: &[KeyValue<'_>],
        opts: &ReadOptions<'_>,
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Result<Option<R>> {
        let user_key = self.encode_key_values(key, true)?;
        let (seqno, sv) = self.inner.read_guard(self.inner.snapshot_seqno(opts.snapshot, self.shared.id)?);
        self.view_at(&user_key, seqno, &sv, f)
    }

    /// [`Table::get`] with explicit read options.
    pub fn get_opt(&self, key: &[KeyValue<'_>], opts: &ReadOptions<'_>) -> Result<Option<RecordBatch>> {
        let user_key = self.encode_key_values(key, true)?;
        let (seqno, sv) = self.inner.read_view(self.inner.snapshot_seqno(opts.snapshot, self.shared.id)?);
        self.row_at(&user_key, seqno, &sv)
    }

    /// The rows whose keys are in `keys` (a batch of the key columns), in the
    /// order asked; keys not present are left out (a key asked twice gives
    /// its row twice). The rows are read in key order — neighbours share
    /// blocks — into one set of column builders.
    pub fn get_many(&self, keys: &RecordBatch) -> Result<RecordBatch> {
        // One load of the state: the keys are encoded and the rows built
        // with the layout of the version read.
        let (seqno, sv) = self.inner.read_view(None);
        let layout = self.layout_in(&sv);
        layout.check_key_batch(keys)?;
        let encoded = row::encode_rows(layout, keys, true)?;
        let mut order: Vec<u32> = (0..encoded.rows.len() as u32).collect();
        order.sort_by(|&a, &b| encoded.rows[a as usize].0.cmp(&encoded.rows[b as usize].0));
        let mut builders = builders_for(layout);
        // Where each asked key's row lands among the rows read, if found.
        let mut position = vec![None; order.len()];
        let mut found = 0u32;
        for &k in &order {
            if self.push_row_at(&encoded.rows[k as usize].0, seqno, &sv, &mut builders)? {
                position[k as usize] = Some(found);
                found += 1;
            }
        }
        let arrays = builders.into_iter().map(ColumnBuilder::into_array).collect::<Result<Vec<_>>>()?;
        let take = UInt32Array::from_iter_values(position.into_iter().flatten());
        let arrays = arrays
            .iter()
            .map(|a| arrow_select::take::take(a, &take, None))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::InvalidArgument(format!("ordering rows: {e}")))?;
        RecordBatch::try_new(layout.schema().clone(), arrays)
            .map_err(|e| Error::InvalidArgument(format!("rows: {e}")))
    }

    /// Encodes the values of the first key columns (all of them when
    /// `whole`, as a point read needs; a prefix for a range bound), each
    /// checked against its column's type: a value of another type would
    /// encode to bytes that sort among other keys, a silently wrong range.
    pub(crate) fn encode_key_values(&self, key: &[KeyValue<'_>], whole: bool) -> Result<Vec<u8>> {
        let layout = &self.shared.layout;
        let pk = layout.primary_key();
        if key.len() > pk.len() || (whole && key.len() < pk.len()) {
            return Err(Error::InvalidArgument(format!(
                "the key has {} columns, {} given",
                pk.len(),
                key.len()
            )));
        }
        for (v, &i) in key.iter().zip(pk) {
            let field = layout.schema().field(i);
            if !row::layout::key_value_fits(v, field.data_type()) {
                return Err(Error::SchemaMismatch(format!(
                    "key column {} has type {}, got {v:?}",
                    field.name(),
                    field.data_type()
                )));
            }
        }
        if layout.raw_key() {
            return Ok(match key.first() {
                Some(KeyValue::Bytes(b)) => b.to_vec(),
                Some(KeyValue::Str(s)) => s.as_bytes().to_vec(),
                None => Vec::new(),
                Some(_) => unreachable!("checked above"),
            });
        }
        Ok(key::encode(key))
    }

    /// The newest visible version of `user_key` as a one-row batch.
    pub(crate) fn row_at(
        &self,
        user_key: &[u8],
        seqno: SeqNo,
        sv: &SuperVersion,
    ) -> Result<Option<RecordBatch>> {
        let row = self.with_row_at(user_key, seqno, sv, |layout, value| match value {
            // A block's columns are built once and kept with it in the
            // block cache; slicing them is cheaper for one row than
            // appending the row's values to builders (measured:
            // docs/BENCHMARKS-history.md, issue 37), which pays off for many.
            Value::TableRow(block, i) => block
                .arrays(layout)
                .map_err(|e| block.corruption(e))
                .map(|arrays| arrays.iter().map(|a| a.slice(i, 1)).collect::<Vec<_>>()),
            value => {
                let mut builders = builders_for(layout);
                value
                    .push_row(layout, user_key, &mut builders)
                    .and_then(|()| builders.into_iter().map(ColumnBuilder::into_array).collect())
            }
        })?;
        let Some(columns) = row.transpose()? else { return Ok(None) };
        RecordBatch::try_new(self.layout_in(sv).schema().clone(), columns)
            .map_err(|e| Error::InvalidArgument(format!("table row: {e}")))
            .map(Some)
    }

    /// `f` of a view of the newest visible version of `user_key`, if the
    /// key has a row.
    pub(crate) fn view_at<R>(
        &self,
        user_key: &[u8],
        seqno: SeqNo,
        sv: &SuperVersion,
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Result<Option<R>> {
        self.with_row_at(user_key, seqno, sv, |layout, value| value.view(layout, user_key, f))?.transpose()
    }

    /// Refuses reads of a closed database or a dropped table.
    pub(crate) fn check_readable(&self, sv: &SuperVersion) -> Result<()> {
        self.inner.check_open()?;
        if sv.version.tree(self.shared.id).is_none() {
            return Err(Error::InvalidArgument(format!("table {} was dropped", self.shared.name)));
        }
        Ok(())
    }

    /// Appends the newest visible version of `user_key` to `builders` (one
    /// per schema column); false when the key has no row.
    pub(crate) fn push_row_at(
        &self,
        user_key: &[u8],
        seqno: SeqNo,
        sv: &SuperVersion,
        builders: &mut [ColumnBuilder],
    ) -> Result<bool> {
        let pushed = self
            .with_row_at(user_key, seqno, sv, |layout, value| value.push_row(layout, user_key, builders))?;
        pushed.transpose().map(|p| p.is_some())
    }

    /// `f` of the table's layout in `sv` and the newest visible version of
    /// `user_key` at `seqno`, if the key has a row: the one way a table
    /// reads a row by key, through the point-read path every tree shares
    /// (`read/point.rs`).
    fn with_row_at<R>(
        &self,
        user_key: &[u8],
        seqno: SeqNo,
        sv: &SuperVersion,
        f: impl FnOnce(&Arc<TableLayout>, Value<'_>) -> R,
    ) -> Result<Option<R>> {
        self.check_readable(sv)?;
        let layout = self.layout_in(sv);
        let (mut f, mut out) = (Some(f), None);
        self.inner.lookup(sv, seqno, self.shared.id, user_key, Some(layout), &mut |value| {
            out = f.take().map(|f| f(layout, value));
        })?;
        Ok(out)
    }

    /// Scans the table: an iterator of record batches in key order.
    pub fn scan(&self, opts: ScanOptions<'_>) -> Result<TableScan> {
        self.open_scan(opts, &|table, filter, seqno, sv| {
            let plan = table.plan_index(filter, seqno, sv)?;
            Ok(plan.map(|p| Box::new(p) as Box<dyn KeyedRows>))
        })
    }

    /// Splits `range` into at most `parts` consecutive, disjoint key ranges
    /// whose union is `range`, cut at the smallest keys of SSTs that lie
    /// inside it so that each part holds a similar number of SST bytes.
    /// One range (the given one) when no SST starts inside it.
    pub fn split_range(&self, range: &KeyValueRange<'_>, parts: usize) -> Result<Vec<OwnedKeyValueRange>> {
        self.split_range_by_files(range, parts)
    }

    /// Up to `n - 1` primary keys, ascending, that cut the table into `n`
    /// key ranges holding similar numbers of SST bytes, from the SSTs'
    /// boundaries and sizes alone (no data block is read): range `i` is
    /// `[points[i - 1], points[i])`, the first unbounded below and the last
    /// above. Fewer points when the table has fewer SSTs to cut at (none
    /// for a table held in one SST or only in memtables). What a
    /// sharded store or a parallel reader splits a table with.
    pub fn split_points(&self, n: usize) -> Result<Vec<Vec<OwnedKeyValue>>> {
        self.split_points_by_files(n)
    }

    /// Rows and bytes as the table's SSTs and memtables record them.
    pub fn estimate(&self) -> Result<TableEstimate> {
        self.estimate_at(None)
    }

    /// [`Table::estimate`] as of a snapshot (which decides
    /// [`TableEstimate::exact_rows`]).
    pub fn estimate_opt(&self, snapshot: Option<&Snapshot>) -> Result<TableEstimate> {
        self.estimate_at(snapshot)
    }

    /// Bytes on disk of the table's rows and of each of its indexes,
    /// from the current version's file list (no file is read). Memtables
    /// are not counted: after [`Db::flush`](crate::Db::flush) the figures
    /// cover every write. Unlike [`Table::estimate`], indexes are counted,
    /// each apart.
    pub fn bytes_on_disk(&self) -> Result<TableBytes> {
        self.tree_bytes_on_disk()
    }

    /// How many rows the table holds in `range` (key tuples, as a scan
    /// takes them), exactly, as of `snapshot` (`None`: now). An SST whose
    /// keys no other source holds counts from its properties without a
    /// block read; between such files, a stretch of a block that no other
    /// source overlaps counts by a binary search; rows are merged one by
    /// one only where memtables and SSTs hold the same keys.
    pub fn count_rows(&self, range: &KeyValueRange<'_>, snapshot: Option<&Snapshot>) -> Result<u64> {
        self.count_rows_at(range, snapshot)
    }

    /// The primary key of the `n`-th row counting back from the end of
    /// `range` (1: the last row), as of `snapshot` (`None`: now); `None`
    /// when the range holds fewer than `n` rows. Reads the range's last `n`
    /// rows backwards (only the found key is decoded): with it, a reader
    /// reads a range's rows from the end in chunks, each a forward
    /// [`Table::scan`] from the key found to where the last chunk began,
    /// as `ORDER BY key DESC LIMIT k` does over SQL.
    pub fn nth_last_key(
        &self,
        range: &KeyValueRange<'_>,
        n: u64,
        snapshot: Option<&Snapshot>,
    ) -> Result<Option<Vec<OwnedKeyValue>>> {
        self.nth_last_key_at(range, n, snapshot)
    }

    /// What the SSTs' zone maps record of each column, in schema order:
    /// bounds and null counts for a query planner, read from metadata (each
    /// file's zones are folded once per open reader). Every column is
    /// unknown while a memtable holds any of the table's rows, whose values
    /// nothing summarizes.
    pub fn column_estimates(&self) -> Result<Vec<ColumnEstimate>> {
        self.fold_column_estimates()
    }

    /// The versions of the row with primary key `key` that the table's
    /// history window keeps, newest first, within `opts`, as one batch:
    /// `_seqno` (`UInt64`), `_commit_time` (millisecond timestamp, UTC),
    /// `_deleted`, then the table's columns (a delete holds its key and
    /// nulls). Refused ([`Error::HistoryUnavailable`]) when the table keeps
    /// no history ([`Table::set_history`]).
    pub fn history(&self, key: &[KeyValue<'_>], opts: HistoryOptions) -> Result<RecordBatch> {
        let user_key = self.encode_key_values(key, true)?;
        self.inner.row_history(self.shared.id, &self.shared.name, &user_key, &opts)
    }

    /// The table's committed changes after seqno `since`, in commit order,
    /// at most `limit` rows, as one batch: `_op` (`"upsert"` or
    /// `"delete"`), `_seqno`, `_commit_time`, then the table's columns in
    /// its current schema (a delete holds its key and nulls). Resume from
    /// the last `_seqno` read. Read from the WAL, which a history window
    /// keeps for its duration; refused ([`Error::HistoryUnavailable`],
    /// naming the oldest `since` available) for changes no longer kept,
    /// or when the table keeps no history.
    pub fn changes(&self, since: u64, limit: usize) -> Result<RecordBatch> {
        self.inner.row_changes(self.shared.id, &self.shared.name, since, limit)
    }

    /// Keeps `window` of history from now on, for the table and its
    /// indexes (see [`HistoryWindow`]): compaction keeps the versions in
    /// it, reads as of a point in it ([`Db::snapshot_at`](crate::Db::snapshot_at))
    /// see exactly what was committed then, and [`Table::history`] and
    /// [`Table::changes`] read it. `HistoryWindow::default()` turns it off.
    pub fn set_history(&self, window: HistoryWindow) -> Result<()> {
        self.inner.set_history(self.shared.id, &self.shared.name, window)
    }

    /// The table's history window and the oldest point it holds.
    pub fn history_info(&self) -> Option<HistoryInfo> {
        self.inner.history_info(self.shared.id)
    }

    /// Sets how long each row version lives after its commit (`None`: for
    /// ever), kept in the MANIFEST: from the moment a row is `ttl` old
    /// (since its last write), no read sees it — gets, scans, SQL, index
    /// lookups, counts — and compaction drops it, with its index entries.
    /// Rows written before the TTL was set count as written when it was.
    /// A shorter TTL expires more at once; a longer one does not bring
    /// back what had expired (`docs/ttl.md`). Refused with a history
    /// window.
    pub fn set_ttl(&self, ttl: Option<std::time::Duration>) -> Result<()> {
        self.inner.set_ttl(self.shared.id, &self.shared.name, ttl)
    }

    /// The table's time to live, if set.
    pub fn ttl(&self) -> Option<std::time::Duration> {
        self.inner.ttl_of(self.shared.id)
    }

    /// Creates an index `name` on `columns` (in key order) of any type a
    /// primary key may have, nullable ones included (nulls sort first).
    /// Rows already in the table are indexed before it returns; writes
    /// may go on meanwhile and are indexed too. Fails with a clear error,
    /// and creates nothing, on an unknown or unsupported column, a name
    /// in use, or (for a unique index) rows that already violate it
    /// ([`Error::UniqueViolation`]). A crash before it returns leaves no
    /// index behind.
    #[expect(clippy::needless_pass_by_value, reason = "built inline by the caller, as ScanOptions are")]
    pub fn create_index(&self, name: &str, columns: &[&str], opts: IndexOptions) -> Result<()> {
        crate::db::index::build::create(self, name, columns, &opts)
    }

    /// Drops index `name` and its entries.
    pub fn drop_index(&self, name: &str) -> Result<()> {
        self.drop_index_tree(name)
    }

    /// The table's indexes (those being created are not listed), in
    /// creation order.
    pub fn indexes(&self) -> Vec<IndexInfo> {
        self.index_infos()
    }

    /// The rows whose indexed values satisfy `predicate`, in index order
    /// (by primary key among equal values), as one record batch.
    pub fn lookup(
        &self,
        index: &str,
        predicate: IndexPredicate<'_>,
        opts: LookupOptions<'_>,
    ) -> Result<RecordBatch> {
        self.lookup_rows(index, predicate, opts)
    }

    /// `f` of a view of each row whose indexed values satisfy `predicate`,
    /// in index order (reversed with `opts.reverse`), up to `opts.limit`;
    /// the rows viewed. No Arrow array is built: the cheapest way to read
    /// a few rows through an index. When `opts.projection` names only
    /// columns the index holds (indexed, primary-key and included columns;
    /// not floats of the key), the index alone is read and the view's
    /// other columns are not read (asking for one is an error). The first
    /// error `f` returns ends the lookup and is returned. An answer of 64
    /// rows or more is fetched in primary-key order into one buffer (at
    /// most 4 GiB) before `f` sees its first row.
    #[expect(clippy::needless_pass_by_value, reason = "built inline by the caller, as for Table::lookup")]
    pub fn lookup_with<E: From<Error>>(
        &self,
        index: &str,
        predicate: IndexPredicate<'_>,
        opts: LookupOptions<'_>,
        mut f: impl FnMut(RowRef<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<usize, E> {
        self.lookup_views(index, &predicate, &opts, &mut f)
    }

    /// How many rows' indexed values satisfy `predicate`, read from the
    /// index alone.
    pub fn count(&self, index: &str, predicate: IndexPredicate<'_>) -> Result<u64> {
        self.count_entries_at(index, predicate, None)
    }

    /// [`Table::count`] as of a snapshot.
    pub fn count_opt(
        &self,
        index: &str,
        predicate: IndexPredicate<'_>,
        snapshot: Option<&Snapshot>,
    ) -> Result<u64> {
        self.count_entries_at(index, predicate, snapshot)
    }

    /// Adds a column at the end of the table's schema. Rows written before
    /// read `default` there (a one-value array of the column's type), or
    /// null without one; a column that is not nullable needs a default. No
    /// file is rewritten: the change is one MANIFEST record, after a flush
    /// of the memtables if they hold rows of this table.
    pub fn add_column(&self, field: impl Into<FieldRef>, default: Option<ArrayRef>) -> Result<()> {
        self.alter(&[ColumnChange::Add { field: field.into(), default }])
    }

    /// Drops a column. Key columns cannot be dropped (a row's key is its
    /// identity), nor columns an index holds (drop the index first). Its
    /// values stay in the files until compaction rewrites them, and are
    /// never read again; a column added later under the same name is a
    /// new, empty column.
    pub fn drop_column(&self, name: &str) -> Result<()> {
        self.alter(&[ColumnChange::Drop { name: name.to_string() }])
    }

    /// Renames a column (key and indexed columns too); nothing stored
    /// changes.
    pub fn rename_column(&self, from: &str, to: &str) -> Result<()> {
        self.alter(&[ColumnChange::Rename { from: from.to_string(), to: to.to_string() }])
    }

    /// The value rows written before column `name` was added read there
    /// (as `ALTER TABLE … ADD COLUMN … DEFAULT` gave it), if it has one.
    pub fn column_default(&self, name: &str) -> Option<ArrayRef> {
        let layout = self.layout();
        let c = layout.schema().index_of(name).ok()?;
        layout.defaults()[c].clone()
    }

    /// The schema and, per column, the value rows written before it was
    /// added read there ([`Table::column_default`]), from one load of the
    /// table's state: the two are always of the same schema version.
    pub fn schema_with_defaults(&self) -> (SchemaRef, Vec<Option<ArrayRef>>) {
        let layout = self.layout();
        (layout.schema().clone(), layout.defaults().to_vec())
    }

    /// Applies `changes`, in order, to the table's columns (see
    /// [`Table::add_column`], [`Table::drop_column`],
    /// [`Table::rename_column`]) as one change: all of them or, when one
    /// is refused, none (the table is as it was). Changing a column's type, or the primary
    /// key, is not a change Basalt makes in place: files hold values in
    /// their type's encoding and rows under their key, so either means a
    /// new table and a copy.
    pub fn alter(&self, changes: &[ColumnChange]) -> Result<()> {
        self.inner().alter_table(self.tree(), self.name(), changes)
    }
}
