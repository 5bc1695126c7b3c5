//! Table scans: record batches over a key range, with projection and a
//! filter. A run of rows that one SST block alone holds — no other source
//! has a key in its range, it has no tombstone, no second version of a key
//! and nothing newer than the read — is handed out as Arrow arrays that
//! point into the block's bytes (zero copy, no per-row work); everything
//! else is merged row by row from the memtables and SSTs.

use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::SchemaRef;
use bytes::Bytes;

use super::{Snapshot, SuperVersion, Table};
use crate::codec::internal::{Kind, SeqNo, unpack_trailer};
use crate::codec::key::{KeyValue, prefix_successor};
use crate::error::{Error, Result};
use crate::memtable::MemCursor;
use crate::row::filter::Filter;
use crate::row::layout::{ColumnBuilder, ColumnSource, TableLayout, builders_for, decode_row};
use crate::row::zone;
use crate::sst::SstIter;
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
        }
    }
}

enum Source {
    Mem(MemCursor),
    Sst(SstIter),
}

impl Source {
    fn key(&self) -> Option<(&[u8], u64)> {
        match self {
            Source::Mem(c) => c.key().map(|k| (k.user_key.as_ref(), k.trailer)),
            Source::Sst(c) => c.valid().then(|| (c.user_key(), c.trailer())),
        }
    }

    fn step(&mut self) -> Result<()> {
        match self {
            Source::Mem(c) => {
                c.step();
                Ok(())
            }
            Source::Sst(c) => c.next(),
        }
    }
}

/// The newest visible version of a key, where it lives.
enum Found {
    Bytes(Bytes),
    /// Row `.1` of a block of source `.2` (whose file errors name).
    Block(Arc<Block>, usize, usize),
}

/// An iterator of record batches over a table.
pub struct TableScan {
    table: Table,
    _pin: Arc<SuperVersion>,
    layout: Arc<TableLayout>,
    sources: Vec<Source>,
    seqno: SeqNo,
    upper: Bound<Vec<u8>>,
    projection: Option<Vec<usize>>,
    out_schema: SchemaRef,
    filter: Option<Filter>,
    batch_rows: usize,
    builders: Vec<ColumnBuilder>,
    ready: std::collections::VecDeque<RecordBatch>,
    done: bool,
    zero_copy_rows: u64,
    merged_rows: u64,
    /// The last key handed out without copying: older versions of it in the
    /// next block must be skipped, not merged.
    last_zero_copy_key: Option<Vec<u8>>,
    /// Blocks the zone maps ruled out.
    blocks_skipped: u64,
}

impl std::fmt::Debug for TableScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableScan").field("table", &self.table.name()).finish_non_exhaustive()
    }
}

impl Table {
    /// Scans the table: an iterator of record batches in key order.
    pub fn scan(&self, opts: ScanOptions<'_>) -> Result<TableScan> {
        self.inner().check_open()?;
        let layout = self.layout().clone();
        let (lower, upper) = encode_range(self, &opts.range)?;
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
        let (seqno, sv) = self.inner().read_view(opts.snapshot.map(Snapshot::seqno));
        let sources = open_sources(self, &sv, &lower)?;
        Ok(TableScan {
            table: self.clone(),
            _pin: sv,
            builders: builders_for(&layout),
            layout,
            sources,
            seqno,
            upper,
            projection,
            out_schema,
            filter: opts.filter,
            batch_rows: if opts.batch_size == 0 { BATCH_ROWS_DEFAULT } else { opts.batch_size },
            ready: std::collections::VecDeque::new(),
            done: false,
            zero_copy_rows: 0,
            merged_rows: 0,
            last_zero_copy_key: None,
            blocks_skipped: 0,
        })
    }
}

/// A merged batch is cut once one of its columns holds this many bytes, so
/// that a `Utf8` or `Binary` column's i32 offsets never overflow: one more
/// row adds at most a value (under 1 GiB, the largest write batch), and
/// 512 MiB + 1 GiB stays below 2 GiB.
const BATCH_COLUMN_BYTES_MAX: usize = 512 << 20;

/// Encodes the key-value bounds into user-key bounds.
fn encode_range(table: &Table, (lo, hi): &KeyValueRange<'_>) -> Result<super::iter::KeyRange> {
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

fn open_sources(table: &Table, sv: &SuperVersion, lower: &Bound<Vec<u8>>) -> Result<Vec<Source>> {
    let tree = table.tree();
    let start: Option<&[u8]> = match lower {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    };
    let mut sources = Vec::new();
    for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
        sources.push(Source::Mem(MemCursor::new(mem.clone(), tree, true, start.map(|k| (k, u64::MAX)))));
    }
    let tv = sv
        .version
        .tree(tree)
        .ok_or_else(|| Error::InvalidArgument(format!("table {} was dropped", table.name())))?;
    let inner = table.inner();
    for (_, file) in tv.all_files() {
        if start.is_some_and(|k| file.largest.user_key.as_ref() < k) {
            continue;
        }
        let mut c = SstIter::new(inner.sst_readers.get(tree, file, &inner.block_cache)?);
        match start {
            Some(k) => c.seek(k, u64::MAX)?,
            None => c.seek_to_first()?,
        }
        sources.push(Source::Sst(c));
    }
    let mut sources = sources;
    if let Bound::Excluded(k) = lower {
        // Skip every version of the excluded start key.
        for s in &mut sources {
            while s.key().is_some_and(|(key, _)| key == k.as_slice()) {
                s.step()?;
            }
        }
    }
    Ok(sources)
}

impl TableScan {
    /// Rows handed out without copying so far, and rows merged row by row.
    pub fn rows_by_path(&self) -> (u64, u64) {
        (self.zero_copy_rows, self.merged_rows)
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

    /// Index of the source holding the smallest key, and that key's second
    /// smallest competitor among the others.
    fn smallest(&self) -> Option<(usize, Option<Vec<u8>>)> {
        let mut best: Option<usize> = None;
        for (i, s) in self.sources.iter().enumerate() {
            if let Some((k, t)) = s.key() {
                let better = best.is_none_or(|b| {
                    let (bk, bt) = self.sources[b].key().unwrap_or((&[], 0));
                    crate::codec::internal::compare(k, t, bk, bt).is_lt()
                });
                if better {
                    best = Some(i);
                }
            }
        }
        let best = best?;
        let next_other = self
            .sources
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != best)
            .filter_map(|(_, s)| s.key().map(|(k, _)| k))
            .min()
            .map(<[u8]>::to_vec);
        Some((best, next_other))
    }

    /// Tries to hand out the rest of the current block of source `i` without
    /// copying. Returns the number of rows emitted (0: not possible).
    fn try_zero_copy(&mut self, i: usize, next_other: Option<&[u8]>) -> Result<usize> {
        let Source::Sst(cursor) = &self.sources[i] else { return Ok(0) };
        let Some((block, start)) = cursor.current() else { return Ok(0) };
        let block = block.clone();
        let n = block.len();
        // Rows of this block before the next other source's key and the
        // scan's upper bound.
        let mut end = start;
        while end < n {
            let k = block.key(end);
            if next_other.is_some_and(|o| k >= o) || self.past_upper(k) {
                break;
            }
            let (seqno, kind) = unpack_trailer(block.trailer(end)).unwrap_or((u64::MAX, Kind::Delete));
            if kind != Kind::Put || seqno > self.seqno || (end > start && block.key(end - 1) == k) {
                break;
            }
            end += 1;
        }
        // A key whose older version sits in the next row is not exclusive.
        if end < n && end > start && block.key(end) == block.key(end - 1) {
            end -= 1;
        }
        if end == start || (end < n && end - start < 16) {
            return Ok(0);
        }
        // The rows are this block's alone: its zone map may rule them out.
        if let (Some(filter), Some(b)) = (&self.filter, cursor.block_index())
            && cursor.reader().zones(b).is_some_and(|z| {
                let floats = cursor.reader().float_zones_in_total_order();
                !zone::may_match(&self.layout, z, n, filter, floats)
            })
        {
            self.last_zero_copy_key = Some(block.key(end - 1).to_vec());
            self.blocks_skipped += 1;
            if let Source::Sst(cursor) = &mut self.sources[i] {
                for _ in start..end {
                    cursor.next()?;
                }
            }
            return Ok(end - start);
        }
        let arrays = block.arrays(&self.layout).map_err(|e| self.corrupt(i, &block, &e))?;
        let slice: Vec<ArrayRef> = arrays.iter().map(|a| a.slice(start, end - start)).collect();
        self.flush_builders()?;
        let batch = RecordBatch::try_new(self.layout.schema().clone(), slice)
            .map_err(|e| self.corrupt(i, &block, &e.to_string()))?;
        self.emit(batch)?;
        self.last_zero_copy_key = Some(block.key(end - 1).to_vec());
        if let Source::Sst(cursor) = &mut self.sources[i] {
            for _ in start..end {
                cursor.next()?;
            }
        }
        Ok(end - start)
    }

    /// A damaged `block` of source `i` (only SST cursors hand out blocks).
    fn corrupt(&self, i: usize, block: &Block, what: &str) -> Error {
        let path = match &self.sources[i] {
            Source::Sst(c) => c.reader().path().to_path_buf(),
            Source::Mem(_) => std::path::PathBuf::from("memtable"),
        };
        Error::corruption(path, block.file_offset(), format!("table block: {what}"))
    }

    /// Consumes every version of `key`; returns the newest visible one.
    fn take_versions(&mut self, key: &[u8]) -> Result<Option<(u64, Found)>> {
        let mut best: Option<(u64, Found)> = None;
        for (source, s) in self.sources.iter_mut().enumerate() {
            while let Some((k, trailer)) = s.key() {
                if k != key {
                    break;
                }
                let seqno = trailer >> 8;
                if seqno <= self.seqno && best.as_ref().is_none_or(|(t, _)| (*t >> 8) < seqno) {
                    let found = match s {
                        Source::Mem(c) => Found::Bytes(c.value().cloned().unwrap_or_default()),
                        Source::Sst(c) => match c.current() {
                            Some((b, i)) => Found::Block(b.clone(), i, source),
                            None => Found::Bytes(Bytes::new()),
                        },
                    };
                    best = Some((trailer, found));
                }
                s.step()?;
            }
        }
        Ok(best)
    }

    fn push_row(&mut self, key: &[u8], found: Found) -> Result<()> {
        match found {
            Found::Bytes(row) => decode_row(&self.layout, Some(&row), &mut self.builders)?,
            Found::Block(block, i, source) => {
                let arrays = block.arrays(&self.layout).map_err(|e| self.corrupt(source, &block, &e))?;
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
            .map_err(|e| Error::InvalidArgument(format!("scan batch: {e}")))?;
        self.emit(batch)
    }

    /// Filters, projects and queues a batch (split to the batch size).
    fn emit(&mut self, batch: RecordBatch) -> Result<()> {
        let batch = match &self.filter {
            None => batch,
            Some(f) => {
                let mask: BooleanArray = f.evaluate(&batch)?;
                arrow_select::filter::filter_record_batch(&batch, &mask)
                    .map_err(|e| Error::InvalidArgument(format!("filter: {e}")))?
            }
        };
        let batch = match &self.projection {
            None => batch,
            Some(p) => batch.project(p).map_err(|e| Error::InvalidArgument(format!("projection: {e}")))?,
        };
        let mut at = 0;
        while at < batch.num_rows() {
            let len = self.batch_rows.min(batch.num_rows() - at);
            self.ready.push_back(batch.slice(at, len));
            at += len;
        }
        Ok(())
    }

    fn advance(&mut self) -> Result<()> {
        while self.ready.is_empty() {
            let Some((i, next_other)) = self.smallest() else {
                self.flush_builders()?;
                self.done = true;
                return Ok(());
            };
            let key = self.sources[i].key().map(|(k, _)| k.to_vec()).unwrap_or_default();
            if self.past_upper(&key) {
                self.flush_builders()?;
                self.done = true;
                return Ok(());
            }
            if self.last_zero_copy_key.as_deref() == Some(key.as_slice()) {
                self.take_versions(&key)?;
                continue;
            }
            let emitted = self.try_zero_copy(i, next_other.as_deref())?;
            if emitted > 0 {
                self.zero_copy_rows += emitted as u64;
                continue;
            }
            if let Some((trailer, found)) = self.take_versions(&key)?
                && matches!(unpack_trailer(trailer), Some((_, Kind::Put)))
            {
                self.push_row(&key, found)?;
            }
        }
        Ok(())
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
