//! Table scans: record batches over a key range, with projection and a
//! filter. A run of rows that one SST block alone holds — no other source
//! has a key in its range, it has no tombstone, no second version of a key
//! and nothing newer than the read — is handed out as Arrow arrays that
//! point into the block's bytes (zero copy, no per-row work); everything
//! else is merged row by row from the memtables and SSTs.

use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;
use bytes::Bytes;

use crate::codec::internal::{Kind, SeqNo, pack_trailer, unpack_trailer};
use crate::codec::key::{KeyValue, prefix_successor};
use crate::db::read::cursor::{KeyRange, TreeCursor, in_range, span_of};
use crate::db::{read::snapshot::Snapshot, state::handles::Table, state::versions::SuperVersion};
use crate::error::{Error, Result};
use crate::range_del::TombstoneSet;
use crate::row::decode::{ColumnBuilder, builders_for, decode_row};
use crate::row::filter::Filter;
use crate::row::layout::{ColumnSource, TableLayout};
use crate::row::zone;
use crate::sst::Blocks;
use crate::sst::block::Block;

/// Rows per output batch unless the scan asks otherwise.
const BATCH_ROWS_DEFAULT: usize = 8192;

/// A key range as tuples of key values.
pub type KeyValueRange<'a> = (Bound<Vec<KeyValue<'a>>>, Bound<Vec<KeyValue<'a>>>);

crate::options::option_struct! {
/// What a scan reads.
#[derive(Debug, Clone)]
pub struct ScanOptions<'a> {
    /// Key range, as tuples of key values in key order. A tuple may be a
    /// prefix of the key: `Included(prefix)` as the upper bound includes
    /// every key starting with it, `Excluded(prefix)` as the lower bound
    /// skips them all.
    pub range: KeyValueRange<'a>,
    /// Columns to return, by name, in this order (`None`: all).
    pub projection: Option<Vec<String>>,
    /// Rows must satisfy every predicate.
    pub filter: Option<Filter>,
    /// Largest number of rows per batch (0: 8192).
    pub batch_size: usize,
    /// Read as of this snapshot (`None`: now).
    pub snapshot: Option<&'a Snapshot>,
    /// A transaction's own writes to the table, read over the snapshot:
    /// its rows replace and its deletes hide the snapshot's rows of their
    /// keys ([`Transaction::overlay`](crate::Transaction::overlay); pass
    /// the transaction's snapshot with it).
    pub overlay: Option<crate::db::read::overlay::TableOverlay>,
}
}

impl Default for ScanOptions<'_> {
    fn default() -> Self {
        ScanOptions {
            range: (Bound::Unbounded, Bound::Unbounded),
            projection: None,
            filter: None,
            batch_size: 0,
            snapshot: None,
            overlay: None,
        }
    }
}

/// How a scan reads its rows, as [`TableScan::plan`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScanPlan {
    /// Every row of the key range, in key order.
    KeyRange,
    /// The rows named by the entries of an index that the filter's
    /// predicates on its leading columns select, fetched in key order.
    Index {
        /// The index.
        index: String,
        /// Entries it selected: the rows fetched (the filter then applies).
        entries: u64,
    },
}

/// The newest visible version of a key, where it lives.
enum Found {
    Bytes(Bytes),
    /// Row `.1` of a block whose Arrow arrays were checked.
    Block(Arc<Block>, usize),
    /// A key-value entry whose value the SST at `.1` keeps in a blob file
    /// (pointer `.0`): read once the entry is known to be the newest.
    Blob(Bytes, std::path::PathBuf),
}

/// The older schema version the file of `cursor`'s source `i` was written
/// under, if it is not `layout`'s (the table's current one).
fn older_version_of<'l>(
    layout: &'l TableLayout,
    cursor: &TreeCursor,
    i: usize,
) -> Result<Option<&'l crate::row::evolve::OlderVersion>> {
    let Some(sst) = cursor.sources()[i].sst() else { return Ok(None) };
    let reader = sst.reader();
    layout.older_version(reader.schema_version()).map_err(|e| Error::corruption(reader.path(), 0, e.reason()))
}

/// An iterator of record batches over a table.
pub struct TableScan {
    /// Range tombstones the scan sees over its range (`None`: none, and
    /// the zero-copy path may hand out whole blocks).
    tombstones: Option<Arc<TombstoneSet>>,
    table: Table,
    /// Keeps the memtables and SSTs read alive; its version resolves blob pointers.
    pinned: Arc<SuperVersion>,
    layout: Arc<TableLayout>,
    cursor: TreeCursor,
    seqno: SeqNo,
    upper: Bound<Vec<u8>>,
    /// The columns the scan reads (those it returns and those its filter
    /// tests), as schema indexes in schema order: the other columns'
    /// bytes are never touched on the zero-copy path.
    needed: Vec<usize>,
    /// The schema of `needed`, the batches the filter sees.
    work_schema: SchemaRef,
    /// Where the returned columns lie among `needed`, when they differ.
    output_in_work: Option<Vec<usize>>,
    out_schema: SchemaRef,
    filter: Option<Filter>,
    batch_rows: usize,
    builders: Vec<ColumnBuilder>,
    ready: std::collections::VecDeque<RecordBatch>,
    done: bool,
    zero_copy_rows: u64,
    merged_rows: u64,
    /// The last key handed out without copying (when `has_zero_copy_key`):
    /// older versions of it in the next block must be skipped, not merged.
    last_zero_copy_key: Vec<u8>,
    has_zero_copy_key: bool,
    /// The current key and the next other source's key, kept between
    /// steps so that a step allocates nothing.
    key: Vec<u8>,
    next_other: Vec<u8>,
    /// Blocks the zone maps ruled out.
    blocks_skipped: u64,
    plan: ScanPlan,
    /// With an index plan: the rows it names and the next key to fetch.
    by_index: Option<(Box<dyn KeyedRows>, usize)>,
    /// A transaction's own rows in the scan's range, in key order (`None`:
    /// a deleted key), and the next one to merge.
    own: Option<(crate::db::read::overlay::OwnRows, std::ops::Range<usize>)>,
}

impl std::fmt::Debug for TableScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableScan").field("table", &self.table.name()).finish_non_exhaustive()
    }
}

/// Rows a scan reads by primary key instead of by range: what an index
/// plan (`index/plan.rs`) hands a scan. Defined here, where it is read, so
/// that scans need nothing of the index room; `Table::scan` joins the two.
pub(crate) trait KeyedRows: Send {
    /// The index whose entries named the rows.
    fn index(&self) -> &str;
    /// The rows' primary keys, ascending.
    fn keys(&self) -> &[Bytes];
    /// Keeps only the keys `keep` accepts.
    fn retain(&mut self, keep: &mut dyn FnMut(&[u8]) -> bool);
    /// Appends the row of `key` (one of [`KeyedRows::keys`]) to `builders`;
    /// false when it has none (it expired since its entry was read).
    fn fetch(&self, table: &Table, key: &[u8], builders: &mut [ColumnBuilder]) -> Result<bool>;
}

/// How a scan finds rows by primary key for a filter at a seqno in a
/// super version: an index's plan, if one reads fewer rows than the scan.
pub(crate) type PlanByKey<'a> =
    &'a dyn Fn(&Table, &Filter, SeqNo, &Arc<SuperVersion>) -> Result<Option<Box<dyn KeyedRows>>>;

impl Table {
    /// [`Table::scan`]'s work; `plan_by_key` may choose an index.
    pub(crate) fn open_scan(&self, opts: ScanOptions<'_>, plan_by_key: PlanByKey<'_>) -> Result<TableScan> {
        self.inner().check_open()?;
        // The layout of the version read: files and memtables decode with it.
        let (seqno, sv) = self.inner().read_view(self.inner().snapshot_seqno(opts.snapshot, self.tree())?);
        let layout = self.layout_in(&sv).clone();
        let range = encode_range(self, &opts.range)?;
        let projection = match &opts.projection {
            None => None,
            Some(names) => Some(
                names
                    .iter()
                    .map(|n| {
                        layout
                            .schema()
                            .index_of(n)
                            .map_err(|_| Error::InvalidArgument(format!("no column {n}")))
                    })
                    .collect::<Result<Vec<_>>>()?,
            ),
        };
        let out_schema = match &projection {
            None => layout.schema().clone(),
            Some(p) => {
                Arc::new(layout.schema().project(p).map_err(|e| Error::InvalidArgument(e.to_string()))?)
            }
        };
        if let Some(f) = &opts.filter {
            f.check(layout.schema())?;
        }
        let (needed, work_schema, output_in_work) =
            work_columns(&layout, projection.as_deref(), opts.filter.as_ref())?;
        let cursor = open_cursor(self, &sv, &range)?;
        let expired = self.inner().expired_through(&sv.version.catalog, self.tree());
        let tombstones = sv.range_tombstones(self.tree(), span_of(&range), seqno, expired);
        let own = match &opts.overlay {
            Some(overlay) => overlay.rows_in(self, &layout, &range)?,
            None => None,
        };
        let by_index = match &opts.filter {
            // An index holds no entries of a transaction's own writes.
            Some(_) if own.is_some() => None,
            Some(f) => plan_by_key(self, f, seqno, &sv)?.map(|mut p| {
                p.retain(&mut |k| in_range(&range, k));
                (p, 0)
            }),
            None => None,
        };
        let plan = match &by_index {
            Some((p, _)) => ScanPlan::Index { index: p.index().to_string(), entries: p.keys().len() as u64 },
            None => ScanPlan::KeyRange,
        };
        Ok(TableScan {
            tombstones,
            table: self.clone(),
            pinned: sv,
            builders: builders_for(&layout),
            layout,
            cursor,
            seqno,
            upper: range.1,
            needed,
            work_schema,
            output_in_work,
            out_schema,
            filter: opts.filter,
            batch_rows: if opts.batch_size == 0 { BATCH_ROWS_DEFAULT } else { opts.batch_size },
            ready: std::collections::VecDeque::new(),
            done: false,
            zero_copy_rows: 0,
            merged_rows: 0,
            last_zero_copy_key: Vec::new(),
            has_zero_copy_key: false,
            key: Vec::new(),
            next_other: Vec::new(),
            blocks_skipped: 0,
            own,
            plan,
            by_index,
        })
    }
}

/// A merged batch is cut once one of its columns holds this many bytes, so
/// that a `Utf8` or `Binary` column's i32 offsets never overflow: one more
/// row adds at most a value (under 1 GiB, the largest write batch), and
/// 512 MiB + 1 GiB stays below 2 GiB.
const BATCH_COLUMN_BYTES_MAX: usize = 512 << 20;

/// Encodes the key-value bounds into user-key bounds.
pub(crate) fn encode_range(table: &Table, (lo, hi): &KeyValueRange<'_>) -> Result<KeyRange> {
    let full = table.layout().primary_key().len();
    let enc = |t: &[KeyValue<'_>]| table.encode_key_values(t, false);
    let successor = |k: Vec<u8>| prefix_successor(&k).map_or(Bound::Unbounded, Bound::Excluded);
    let lower = match lo {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(t) => Bound::Included(enc(t)?),
        Bound::Excluded(t) if t.len() == full => Bound::Excluded(enc(t)?),
        Bound::Excluded(t) => match successor(enc(t)?) {
            Bound::Excluded(s) => Bound::Included(s),
            _ => Bound::Excluded(vec![0xff; 1 << 12]),
        },
    };
    let upper = match hi {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(t) if t.len() == full => Bound::Included(enc(t)?),
        Bound::Included(t) => successor(enc(t)?),
        Bound::Excluded(t) => Bound::Excluded(enc(t)?),
    };
    Ok((lower, upper))
}

/// The columns a scan reads — its projection's and its filter's, in schema
/// order — their schema, and where the projection's columns lie among them
/// (`None` when they are the same list).
fn work_columns(
    layout: &TableLayout,
    projection: Option<&[usize]>,
    filter: Option<&Filter>,
) -> Result<(Vec<usize>, SchemaRef, Option<Vec<usize>>)> {
    let schema = layout.schema();
    let all: Vec<usize> = (0..schema.fields().len()).collect();
    let output = projection.unwrap_or(&all);
    let mut needed = output.to_vec();
    for p in filter.map_or(&[][..], |f| f.predicates.as_slice()) {
        needed.push(
            schema
                .index_of(&p.column)
                .map_err(|_| Error::InvalidArgument(format!("no column {}", p.column)))?,
        );
    }
    needed.sort_unstable();
    needed.dedup();
    let work_schema = Arc::new(schema.project(&needed).map_err(|e| Error::InvalidArgument(e.to_string()))?);
    let output_in_work = (needed.as_slice() != output)
        .then(|| output.iter().map(|c| needed.binary_search(c).unwrap_or_default()).collect());
    Ok((needed, work_schema, output_in_work))
}

fn open_cursor(table: &Table, sv: &SuperVersion, range: &KeyRange) -> Result<TreeCursor> {
    let tree = table.tree();
    let files = sv
        .version
        .tree(tree)
        .ok_or_else(|| Error::InvalidArgument(format!("table {} was dropped", table.name())))?;
    let mut cursor =
        TreeCursor::open(&table.inner().sst_readers, sv, tree, files, (range, true), Blocks::Scanned, None)?;
    if cursor.asks_compaction() {
        table.inner().wake_compaction();
    }
    if let Bound::Excluded(k) = &range.0 {
        cursor.skip_key(k)?;
    }
    Ok(cursor)
}

impl TableScan {
    /// Rows handed out without copying so far, and rows merged row by row.
    pub fn rows_by_path(&self) -> (u64, u64) {
        (self.zero_copy_rows, self.merged_rows)
    }

    /// The table layout the scan reads with (its super version's); the
    /// index check (`inspect`) compares it with its own.
    #[cfg_attr(not(feature = "inspect"), allow(dead_code))]
    pub(crate) fn layout(&self) -> &Arc<TableLayout> {
        &self.layout
    }

    /// Blocks skipped because their zone maps ruled out the filter.
    pub fn blocks_skipped(&self) -> u64 {
        self.blocks_skipped
    }

    fn past_upper(&self, key: &[u8]) -> bool {
        match &self.upper {
            Bound::Included(k) => key > k.as_slice(),
            Bound::Excluded(k) => key >= k.as_slice(),
            Bound::Unbounded => false,
        }
    }

    /// Tries to hand out the rest of the current block of source `i` without
    /// copying. Returns the number of rows it took (0: not possible).
    fn try_zero_copy(&mut self, i: usize, next_other: Option<&[u8]>) -> Result<usize> {
        let Some(cursor) = self.cursor.sources()[i].sst() else { return Ok(0) };
        let Some((block, start)) = cursor.current() else { return Ok(0) };
        let block = block.clone();
        let newest = cursor.plain_rows();
        let n = block.len();
        // Rows of this block before the next other source's key and the
        // scan's upper bound. Keys ascend within a block, so when the last
        // one qualifies they all do, and otherwise a binary search finds
        // the first that does not.
        let below = |k: &[u8]| next_other.is_none_or(|o| k < o) && !self.past_upper(k);
        let limit = if below(block.key(n - 1)) { n } else { block.first_failing(start..n - 1, below) };
        // Every row is a put of its own key, none newer than the read.
        let plain = newest.is_some_and(|newest| newest <= self.seqno);
        let mut end = if plain {
            limit
        } else {
            let mut end = start;
            while end < limit {
                let k = block.key(end);
                let (seqno, kind) = unpack_trailer(block.trailer(end)).unwrap_or((u64::MAX, Kind::Delete));
                if kind != Kind::Put || seqno > self.seqno || (end > start && block.key(end - 1) == k) {
                    break;
                }
                end += 1;
            }
            end
        };
        // A key whose older version sits in the next row is not exclusive.
        if end < n && end > start && block.key(end) == block.key(end - 1) {
            end -= 1;
        }
        // Past the rows no other source holds: rows whose keys the other
        // sources hold only in older versions (a table whose rows were
        // all written again sits in two runs until a compaction merges
        // them). Those versions are passed over; the rows still come from
        // this block, without a merge step each.
        let exclusive = end;
        // Never past the transaction's next own key: it replaces or hides
        // the sources' row of that key.
        let own_next =
            self.own.as_ref().and_then(|(rows, at)| rows.get(at.start).filter(|_| at.start < at.end));
        let before_own = |k: &[u8]| own_next.is_none_or(|(o, _)| k < o.as_slice());
        if plain && end == limit {
            while end < n && !self.past_upper(block.key(end)) && before_own(block.key(end)) {
                let version = block.trailer(end) >> 8;
                if !self.cursor.pass_older_besides(i, block.key(end), version)? {
                    break;
                }
                end += 1;
            }
        }
        if end == start {
            return Ok(0);
        }
        if end < n && end - start < 16 {
            if end == exclusive {
                return Ok(0);
            }
            // Other sources were moved: the rows are taken, but so few are
            // copied into the batch being merged rather than handed out
            // as a batch of their own.
            let layout = self.layout.clone();
            let older = older_version_of(&layout, &self.cursor, i)?;
            for r in start..end {
                let found = match older {
                    None => Found::Block(block.clone(), r),
                    Some(older) => {
                        Found::Bytes(crate::db::read::point::older_row_of(&layout, older, &block, r)?)
                    }
                };
                self.push_row(block.key(r), found)?;
            }
        } else {
            self.emit_block_rows(i, &block, start..end)?;
            self.zero_copy_rows += (end - start) as u64;
        }
        self.last_zero_copy_key.clear();
        self.last_zero_copy_key.extend_from_slice(block.key(end - 1));
        self.has_zero_copy_key = true;
        self.cursor.skip_in_block(i, end - start)?;
        Ok(end - start)
    }

    /// Hands out `rows` of `block`, the current block of source `i`, as
    /// Arrow arrays over the block's bytes, unless the block's zone map
    /// rules the filter out.
    fn emit_block_rows(&mut self, i: usize, block: &Block, rows: std::ops::Range<usize>) -> Result<()> {
        let older = older_version_of(&self.layout, &self.cursor, i)?;
        let Some(cursor) = self.cursor.sources()[i].sst() else { return Ok(()) };
        // The rows are this block's alone: its zone map may rule them out,
        // once the block and its zones are known to have the stored
        // columns of the version they are read through.
        let ruled_out = match (&self.filter, cursor.block_index()) {
            (Some(filter), Some(b)) => match cursor.reader().zones(b) {
                None => false,
                Some(z) => {
                    let file_layout = older.map_or(&*self.layout, |o| &*o.layout);
                    block.check_buffers(file_layout).map_err(|e| block.corruption(e))?;
                    if z.len() != file_layout.stored().len() {
                        let what = format!(
                            "zones of {} columns, the table layout stores {}",
                            z.len(),
                            file_layout.stored().len()
                        );
                        return Err(block.corruption(what));
                    }
                    let floats = cursor.reader().float_zones_in_total_order();
                    !zone::may_match(&self.layout, older, z, block.len(), filter, floats)
                }
            },
            _ => false,
        };
        if ruled_out {
            self.blocks_skipped += 1;
            return Ok(());
        }
        let mut columns = Vec::with_capacity(self.needed.len());
        match older {
            None => {
                for &c in &self.needed {
                    let column = block.column(&self.layout, c).map_err(|e| block.corruption(e))?;
                    columns.push(column.slice(rows.start, rows.len()));
                }
            }
            Some(older) => {
                // A file of an older schema version: its block read into
                // the current one.
                let arrays = block.arrays(&older.layout).map_err(|e| block.corruption(e))?;
                let current = older.map().adapt(&self.layout, arrays, block.len())?;
                columns.extend(self.needed.iter().map(|&c| current[c].slice(rows.start, rows.len())));
            }
        }
        self.flush_builders()?;
        // The row count is given: an empty projection has no column
        // to take it from.
        let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
        let batch = RecordBatch::try_new_with_options(self.work_schema.clone(), columns, &options)
            .map_err(|e| block.corruption(e))?;
        self.emit(batch)
    }

    /// Consumes every version of `key`; returns the newest visible one.
    fn take_versions(&mut self, key: &[u8]) -> Result<Option<(u64, Found)>> {
        let layout = &self.layout;
        let newest = self.cursor.take_versions(key, self.seqno, |_, s| match (s.mem_value(), s.sst()) {
            (Some(row), _) => Ok(Found::Bytes(row.clone())),
            (None, Some(c)) => match c.current() {
                Some((block, i))
                    if unpack_trailer(block.trailer(i)).is_some_and(|(_, k)| k == Kind::Blob) =>
                {
                    Ok(Found::Blob(block.value_bytes(i), c.reader().path().to_path_buf()))
                }
                // Checked here, where the block's file is known; a row of
                // an older schema version's file is read into this one.
                Some((block, i)) => match layout.older_version(c.reader().schema_version()) {
                    Err(e) => Err(block.corruption(e.reason())),
                    Ok(Some(older)) => {
                        crate::db::read::point::older_row_of(layout, older, block, i).map(Found::Bytes)
                    }
                    Ok(None) => block
                        .arrays(layout)
                        .map(|_| Found::Block(block.clone(), i))
                        .map_err(|e| block.corruption(e)),
                },
                // A table scan's cursors read blocks whole
                // (`Blocks::Scanned`): every valid one is on a held block.
                None => Err(Error::internal("a scan's source lost its block")),
            },
            (None, None) => Ok(Found::Bytes(Bytes::new())),
        })?;
        let Some((trailer, found)) = newest else { return Ok(None) };
        if matches!(unpack_trailer(trailer), Some((_, Kind::Merge))) {
            // A merge keyspace's table face: the operands folded, by the
            // point path (the versions were passed over above).
            let folded = self.table.inner().fold_merges(&self.pinned, self.seqno, self.table.tree(), key)?;
            return Ok(folded.map(|v| (pack_trailer(trailer >> 8, Kind::Put), Found::Bytes(v))));
        }
        match found? {
            // Only keyspaces keep values in blob files: the value is the
            // face's whole stored row.
            Found::Blob(pointer, sst) => {
                let blobs = &self.table.inner().blob_files;
                let value = crate::db::read::point::read_blob(blobs, &self.pinned.version, &pointer, &sst)?;
                Ok(Some((pack_trailer(trailer >> 8, Kind::Put), Found::Bytes(value))))
            }
            found => Ok(Some((trailer, found))),
        }
    }

    fn push_row(&mut self, key: &[u8], found: Found) -> Result<()> {
        match found {
            Found::Bytes(row) => decode_row(&self.layout, Some(&row), &mut self.builders)?,
            Found::Blob(..) => {
                return Err(Error::internal("a scan met an unread blob pointer"));
            }
            Found::Block(block, i) => {
                let arrays = block.arrays(&self.layout).map_err(|e| block.corruption(e))?;
                for &c in self.layout.stored() {
                    self.builders[c].push_from_array(&arrays[c], i)?;
                }
            }
        }
        for c in self.layout.columns() {
            if c.source == ColumnSource::Key {
                self.builders[c.index].push(key);
            }
        }
        self.merged_rows += 1;
        let full = self.builders.first().is_some_and(|b| b.len() >= self.batch_rows)
            || self.builders.iter().any(|b| b.bytes() >= BATCH_COLUMN_BYTES_MAX);
        if full {
            self.flush_builders()?;
        }
        Ok(())
    }

    fn flush_builders(&mut self) -> Result<()> {
        if self.builders.first().is_none_or(ColumnBuilder::is_empty) {
            return Ok(());
        }
        let arrays = self.builders.iter_mut().map(ColumnBuilder::finish).collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new(self.layout.schema().clone(), arrays)
            .and_then(|b| b.project(&self.needed))
            .map_err(|e| Error::InvalidArgument(format!("scan batch: {e}")))?;
        self.emit(batch)
    }

    /// Filters, projects and queues a batch of the columns the scan needs
    /// (split to the batch size).
    fn emit(&mut self, batch: RecordBatch) -> Result<()> {
        self.table.inner().counters.record_table_rows(batch.num_rows() as u64);
        // The mask is computed on every column the scan needs; only the
        // columns the caller asked for are then copied through it (a
        // filter's own columns are not: `count(b) … WHERE a BETWEEN …`
        // copied `a` for nothing).
        let mask = self.filter.as_ref().map(|f| f.evaluate(&batch)).transpose()?;
        let batch = match &self.output_in_work {
            None => batch,
            Some(p) => batch.project(p).map_err(|e| Error::InvalidArgument(format!("projection: {e}")))?,
        };
        let batch = match mask {
            None => batch,
            // Every row or none kept (a block inside or outside a range on
            // a column that follows the key): no copy.
            Some(mask) => match mask.true_count() {
                n if n == batch.num_rows() => batch,
                0 => batch.slice(0, 0),
                _ => arrow_select::filter::filter_record_batch(&batch, &mask)
                    .map_err(|e| Error::InvalidArgument(format!("filter: {e}")))?,
            },
        };
        let mut at = 0;
        while at < batch.num_rows() {
            let len = self.batch_rows.min(batch.num_rows() - at);
            self.ready.push_back(batch.slice(at, len));
            at += len;
        }
        Ok(())
    }

    /// How this scan reads: the key range, or an index it chose for its
    /// filter.
    pub fn plan(&self) -> &ScanPlan {
        &self.plan
    }

    /// Fetches the next batch of rows an index plan names.
    fn advance_by_index(&mut self) -> Result<()> {
        while self.ready.is_empty() {
            let Some((plan, next)) = &mut self.by_index else { return Ok(()) };
            let keys = plan.keys();
            if *next >= keys.len() {
                self.done = true;
                return Ok(());
            }
            let end = (*next + self.batch_rows).min(keys.len());
            for key in &keys[*next..end] {
                self.merged_rows += u64::from(plan.fetch(&self.table, key, &mut self.builders)?);
            }
            *next = end;
            self.flush_builders()?;
        }
        Ok(())
    }

    fn advance(&mut self) -> Result<()> {
        if self.by_index.is_some() {
            return self.advance_by_index();
        }
        while self.ready.is_empty() {
            let next = self.cursor.next_source();
            if self.merge_own(next)? {
                continue;
            }
            let Some(i) = next else {
                self.flush_builders()?;
                self.done = true;
                return Ok(());
            };
            // The zero-copy path stops before the next key another source,
            // or the transaction's own writes, holds.
            let own =
                self.own.as_ref().and_then(|(rows, at)| rows.get(at.start).filter(|_| at.start < at.end));
            let other = match (self.cursor.smallest_key_besides(i), own.map(|(k, _)| k.as_slice())) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let has_other = match other {
                Some(k) => {
                    self.next_other.clear();
                    self.next_other.extend_from_slice(k);
                    true
                }
                None => false,
            };
            let mut key = std::mem::take(&mut self.key);
            key.clear();
            key.extend_from_slice(self.cursor.sources()[i].key().map_or(&[][..], |(k, _)| k));
            let stepped = self.step_key(i, &key, has_other);
            self.key = key;
            if stepped? {
                self.flush_builders()?;
                self.done = true;
                return Ok(());
            }
        }
        Ok(())
    }

    /// Merges the transaction's next own row when it comes before (or at)
    /// the key of source `next`: its row replaces the sources' versions of
    /// that key, its delete hides them. `true` when it took one.
    fn merge_own(&mut self, next: Option<usize>) -> Result<bool> {
        let Some((rows, at)) = &mut self.own else { return Ok(false) };
        let Some((key, row)) = rows.get(at.start).filter(|_| at.start < at.end) else { return Ok(false) };
        let source_key = next.and_then(|i| self.cursor.sources()[i].key().map(|(k, _)| k));
        if source_key.is_some_and(|k| k < key.as_slice()) {
            return Ok(false);
        }
        let shared = source_key == Some(key.as_slice());
        let (key, row) = (key.clone(), row.clone());
        at.start += 1;
        if self.past_upper(&key) {
            return Ok(false);
        }
        if shared {
            self.take_versions(&key)?;
        }
        if let Some(row) = row {
            self.push_row(&key, Found::Bytes(row))?;
        }
        Ok(true)
    }

    /// Reads the rows from source `i`'s current key `key` on; `true` when
    /// the key is past the scan's range (the scan is over).
    fn step_key(&mut self, i: usize, key: &[u8], has_other: bool) -> Result<bool> {
        if self.past_upper(key) {
            return Ok(true);
        }
        if self.has_zero_copy_key && self.last_zero_copy_key == key {
            self.take_versions(key)?;
            return Ok(false);
        }
        // With range tombstones over the range every key is checked
        // against them, one at a time.
        if self.tombstones.is_none() {
            let next_other = std::mem::take(&mut self.next_other);
            let emitted = self.try_zero_copy(i, has_other.then_some(next_other.as_slice()));
            self.next_other = next_other;
            if emitted? > 0 {
                return Ok(false);
            }
        }
        if let Some((trailer, found)) = self.take_versions(key)?
            && matches!(unpack_trailer(trailer), Some((_, Kind::Put)))
            && self
                .tombstones
                .as_ref()
                .is_none_or(|set| set.covering(key, self.seqno).is_none_or(|t| t <= trailer >> 8))
        {
            self.push_row(key, found)?;
        }
        Ok(false)
    }

    /// The schema of the batches this scan returns.
    pub fn schema(&self) -> SchemaRef {
        self.out_schema.clone()
    }
}

impl Iterator for TableScan {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let more = !self.done || !self.ready.is_empty();
        if more && let Err(e) = self.table.inner().check_open() {
            self.done = true;
            self.ready.clear();
            return Some(Err(e));
        }
        if let Some(b) = self.ready.pop_front() {
            return Some(Ok(b));
        }
        if self.done {
            return None;
        }
        if let Err(e) = self.advance() {
            self.done = true;
            return Some(Err(e));
        }
        self.ready.pop_front().map(Ok)
    }
}
